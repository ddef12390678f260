package v1alpha1

// Condition types shared by the kinds of this API. Every condition is a metav1.Condition with
// observedGeneration set; Ready, Reconciling and Stalled follow kstatus conventions.
const (
	// ConditionReady summarises the resource: True when everything it declares is in place.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the operator is still working towards the spec.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when progress needs a change from the user (bad spec, bound,
	// permission).
	ConditionStalled = "Stalled"
)

// Annotations understood by the operator.
const (
	// ReconcileAnnotation selects how the operator treats a resource: Active (default),
	// Paused, ObserveOnly or Plan.
	ReconcileAnnotation = "kafkaqueues.io/reconcile"
	// QueueAnnotation on a Pod names the ShareQueue whose republisher sidecar it gets, for
	// names longer than a label value allows (63 characters): the Pod then carries the
	// QueueLabel with an empty value and the name in this annotation.
	QueueAnnotation = "kafkaqueues.io/queue"
)

// Labels understood or written by the operator.
const (
	// QueueLabel on a Pod names the ShareQueue whose republisher sidecar it gets. It is a label
	// (not only an annotation) because the webhook's objectSelector can match labels only: the
	// apiserver sends the webhook just the Pods that carry it. An empty value means the name is
	// in QueueAnnotation.
	QueueLabel = "kafkaqueues.io/queue"
	// RepublisherLabel is set to "injected" on every Pod the webhook gave a sidecar, so a
	// PodMonitor can select the sidecars' metrics port (kqo-metrics).
	RepublisherLabel = "kafkaqueues.io/republisher"
	// RepublisherInjected is RepublisherLabel's value.
	RepublisherInjected = "injected"
	// ConnectionLabel is on each ConfigMap a ShareQueue publishes (spec.connectionConfigMap);
	// its value is the queue's name. The manager caches only ConfigMaps that carry it.
	ConnectionLabel = "kafkaqueues.io/connection-of"
)

// Values of the kafkaqueues.io/reconcile annotation.
const (
	ReconcileActive      = "Active"
	ReconcilePaused      = "Paused"
	ReconcileObserveOnly = "ObserveOnly"
	ReconcilePlan        = "Plan"
)

// ClusterReference names a KafkaCluster in the same namespace.
type ClusterReference struct {
	// name is the KafkaCluster's metadata.name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// QueueReference names a ShareQueue in the same namespace.
type QueueReference struct {
	// name is the ShareQueue's metadata.name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SecretKeyReference selects one key of a Secret in the same namespace.
type SecretKeyReference struct {
	// name is the Secret's metadata.name.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// key is the key inside the Secret's data.
	// +required
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// TopicConfigs is a map of Kafka topic configs (for example "retention.ms": "604800000"),
// written with IncrementalAlterConfigs. Values are strings, as Kafka takes them.
type TopicConfigs map[string]string
