package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeadLetterRoute condition types (see also ConditionReady, ConditionTopicReady).
const (
	// ConditionRouteActive is True when dead records of the queue are being written to the
	// dead-letter topic.
	ConditionRouteActive = "RouteActive"
)

// DeadLetterMode says who writes dead records.
// +kubebuilder:validation:Enum=Auto;BrokerNative;Republisher
type DeadLetterMode string

const (
	// DeadLetterModeAuto picks BrokerNative when share.version >= 2, else Republisher.
	DeadLetterModeAuto DeadLetterMode = "Auto"
	// DeadLetterModeBrokerNative uses the broker's dead-letter queue (KIP-1191,
	// share.version 2): group configs errors.deadletterqueue.topic.name and
	// errors.deadletterqueue.copy.record.enable.
	DeadLetterModeBrokerNative DeadLetterMode = "BrokerNative"
	// DeadLetterModeRepublisher injects a sidecar that consumes the queue for the app and
	// produces dead records to the topic itself.
	DeadLetterModeRepublisher DeadLetterMode = "Republisher"
)

// DeadLetterTopicSpec is the topic dead records are written to.
// +kubebuilder:validation:XValidation:rule="has(self.name) == has(oldSelf.name) && (!has(self.name) || self.name == oldSelf.name)",message="topic.name is immutable"
type DeadLetterTopicSpec struct {
	// name is the Kafka topic name. Default, in every mode: the brokers'
	// errors.deadletterqueue.topic.name.prefix followed by the queue's topic ("dlq.orders" for
	// topic orders with the brokers' default prefix "dlq."). Immutable.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=249
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9._-]+$`
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('__')",message="topic.name must not start with '__' (reserved for internal topics)"
	Name string `json:"name,omitempty"`
	// partitions is the partition count. Default 1; can only grow.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="topic.partitions can only grow"
	Partitions int32 `json:"partitions,omitempty"`
	// replicationFactor is the replicas per partition. Absent: the brokers' default.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=32767
	ReplicationFactor *int32 `json:"replicationFactor,omitempty"`
	// config is a map of Kafka topic configs.
	// +optional
	// +kubebuilder:validation:MaxProperties=100
	Config TopicConfigs `json:"config,omitempty"`
}

// RepublisherSpec configures the injected republisher sidecar.
type RepublisherSpec struct {
	// image overrides the sidecar image. Default: the operator's own image.
	// +optional
	Image string `json:"image,omitempty"`
	// resources are the sidecar container's resource requests and limits.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// members is how many share-group members the sidecar runs, i.e. how many batches the
	// application can hold at once (republisher --members). A member fetches again only once
	// its whole batch is settled, so a slow record holds back its member; with more members
	// in total than the topic has partitions the brokers share each partition among several.
	// Default 4.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Members *int32 `json:"members,omitempty"`
	// maxRecords bounds one fetch and one receive (republisher --max-records, the consumer's
	// share max records). Smaller batches suit slow work. Default 100.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxRecords *int32 `json:"maxRecords,omitempty"`
}

// DeadLetterRouteSpec says where a queue's dead records go.
type DeadLetterRouteSpec struct {
	// queueRef names the ShareQueue (same namespace) whose dead records are routed. Immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="queueRef is immutable"
	QueueRef QueueReference `json:"queueRef"`
	// topic is the dead-letter topic.
	// +optional
	// +kubebuilder:default={partitions: 1}
	Topic DeadLetterTopicSpec `json:"topic,omitempty"`
	// mode is Auto (default), BrokerNative or Republisher.
	// +optional
	// +kubebuilder:default=Auto
	Mode DeadLetterMode `json:"mode,omitempty"`
	// copyRecord writes the whole record (key, value, headers) rather than only its metadata.
	// BrokerNative: errors.deadletterqueue.copy.record.enable. Default false.
	// +optional
	CopyRecord bool `json:"copyRecord,omitempty"`
	// republisher configures the sidecar in Republisher mode.
	// +optional
	Republisher *RepublisherSpec `json:"republisher,omitempty"`
}

// DeadLetterRouteStatus is what the operator last observed of the route.
type DeadLetterRouteStatus struct {
	// observedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready, TopicReady, RouteActive, Conflict.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// effectiveMode is the mode in use: BrokerNative or Republisher.
	// +optional
	EffectiveMode DeadLetterMode `json:"effectiveMode,omitempty"`
	// topicName is the resolved dead-letter topic.
	// +optional
	TopicName string `json:"topicName,omitempty"`
	// queueName is the source ShareQueue.
	// +optional
	QueueName string `json:"queueName,omitempty"`
	// groupID is the source queue's share group, and clusterName its KafkaCluster, as last
	// resolved: deletion cleans the group's dead-letter configs up with them even when the
	// ShareQueue is already gone.
	// +optional
	GroupID string `json:"groupID,omitempty"`
	// +optional
	ClusterName string `json:"clusterName,omitempty"`
}

// DeadLetterRoute says where a ShareQueue's dead records go.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dlr,categories=kafkaqueues
// +kubebuilder:printcolumn:name="Queue",type=string,JSONPath=`.spec.queueRef.name`
// +kubebuilder:printcolumn:name="Topic",type=string,JSONPath=`.status.topicName`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.status.effectiveMode`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Reconcile",type=string,JSONPath=`.metadata.annotations.kafkaqueues\.io/reconcile`,description="The kafkaqueues.io/reconcile annotation (Paused, ObserveOnly, Plan); empty is Active"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DeadLetterRoute struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired route.
	// +required
	Spec DeadLetterRouteSpec `json:"spec"`
	// status is what was last observed.
	// +optional
	Status DeadLetterRouteStatus `json:"status,omitempty"`
}

// DeadLetterRouteList is a list of DeadLetterRoute.
//
// +kubebuilder:object:root=true
type DeadLetterRouteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DeadLetterRoute `json:"items"`
}

func init() {
	SchemeBuilder.Register(&DeadLetterRoute{}, &DeadLetterRouteList{})
}
