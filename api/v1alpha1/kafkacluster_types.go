package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KafkaCluster condition types (see also ConditionReady).
const (
	// ConditionConnected is True when the operator reached the bootstrap servers and read the
	// cluster's metadata.
	ConditionConnected = "Connected"
	// ConditionShareGroupsEnabled is True when the finalized share.version is at least 1
	// (KIP-932).
	ConditionShareGroupsEnabled = "ShareGroupsEnabled"
	// ConditionShareStateReplicated tells whether the __share_group_state topic exists with the
	// replication the cluster can hold.
	ConditionShareStateReplicated = "ShareStateReplicated"
)

// FeaturePolicy says whether the operator may change the cluster's finalized features.
// +kubebuilder:validation:Enum=Observe;Finalize
type FeaturePolicy string

const (
	// FeaturePolicyObserve never changes cluster features; it only reports them.
	FeaturePolicyObserve FeaturePolicy = "Observe"
	// FeaturePolicyFinalize raises share.version to targetShareVersion with UpdateFeatures
	// (upgrade type "upgrade"); it never downgrades.
	FeaturePolicyFinalize FeaturePolicy = "Finalize"
)

// ShareStatePolicy says whether the operator may change the __share_group_state topic.
// +kubebuilder:validation:Enum=Observe;Manage
type ShareStatePolicy string

const (
	// ShareStatePolicyObserve only reports the topic's replication.
	ShareStatePolicyObserve ShareStatePolicy = "Observe"
	// ShareStatePolicyManage raises the topic's replication factor to min(3, brokers) and keeps
	// its min.insync.replicas at min(2, RF).
	ShareStatePolicyManage ShareStatePolicy = "Manage"
)

// SASLMechanism is a Kafka SASL mechanism name.
// +kubebuilder:validation:Enum=PLAIN;SCRAM-SHA-256;SCRAM-SHA-512
type SASLMechanism string

// SASL mechanisms the operator speaks.
const (
	SASLMechanismPlain       SASLMechanism = "PLAIN"
	SASLMechanismScramSHA256 SASLMechanism = "SCRAM-SHA-256"
	SASLMechanismScramSHA512 SASLMechanism = "SCRAM-SHA-512"
)

// KafkaClusterTLS configures TLS to the brokers.
type KafkaClusterTLS struct {
	// caSecretRef selects a PEM CA bundle used to verify the brokers. Absent: the system roots.
	// +optional
	CASecretRef *SecretKeyReference `json:"caSecretRef,omitempty"`
	// clientCertSecretRef names a kubernetes.io/tls Secret (tls.crt, tls.key) presented to the
	// brokers for mutual TLS.
	// +optional
	// +kubebuilder:validation:MinLength=1
	ClientCertSecretName string `json:"clientCertSecretName,omitempty"`
	// serverName overrides the name checked against the brokers' certificates.
	// +optional
	ServerName string `json:"serverName,omitempty"`
}

// KafkaClusterSASL configures SASL authentication.
type KafkaClusterSASL struct {
	// mechanism is the SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	// +required
	Mechanism SASLMechanism `json:"mechanism"`
	// secretName names a Secret in the same namespace holding the keys "username" and
	// "password".
	// +required
	// +kubebuilder:validation:MinLength=1
	SecretName string `json:"secretName"`
}

// ShareStateTopicSpec says how the operator treats the __share_group_state topic.
type ShareStateTopicSpec struct {
	// policy is Observe (default: report only) or Manage (raise RF to min(3, brokers), keep
	// min.insync.replicas at min(2, RF)).
	// +optional
	// +kubebuilder:default=Observe
	Policy ShareStatePolicy `json:"policy,omitempty"`
}

// KafkaClusterSpec is one Kafka cluster the operator talks to.
// +kubebuilder:validation:XValidation:rule="self.featurePolicy != 'Finalize' || has(self.targetShareVersion)",message="targetShareVersion is required when featurePolicy is Finalize"
type KafkaClusterSpec struct {
	// bootstrapServers lists host:port pairs of brokers to bootstrap from.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Pattern=`^[^\s:]+:[0-9]{1,5}$`
	// +listType=atomic
	BootstrapServers []string `json:"bootstrapServers"`
	// tls enables TLS to the brokers. Absent: plaintext.
	// +optional
	TLS *KafkaClusterTLS `json:"tls,omitempty"`
	// sasl enables SASL authentication. Absent: none.
	// +optional
	SASL *KafkaClusterSASL `json:"sasl,omitempty"`
	// featurePolicy is Observe (default: never change features) or Finalize (raise
	// share.version to targetShareVersion with UpdateFeatures, upgrade type "upgrade").
	// +optional
	// +kubebuilder:default=Observe
	FeaturePolicy FeaturePolicy `json:"featurePolicy,omitempty"`
	// targetShareVersion is the share.version level Finalize raises the cluster to: 1 enables
	// share groups (KIP-932), 2 adds broker-native dead-letter queues (KIP-1191).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2
	TargetShareVersion *int32 `json:"targetShareVersion,omitempty"`
	// shareStateTopic says how the __share_group_state topic is treated.
	// +optional
	// +kubebuilder:default={policy: Observe}
	ShareStateTopic ShareStateTopicSpec `json:"shareStateTopic,omitempty"`
}

// BrokerStatus describes one broker of the cluster.
type BrokerStatus struct {
	// id is the broker's node.id.
	ID int32 `json:"id"`
	// host is the advertised host.
	Host string `json:"host"`
	// port is the advertised port.
	Port int32 `json:"port"`
	// rack is the broker.rack, if set.
	// +optional
	Rack string `json:"rack,omitempty"`
}

// FeatureLevel is a finalized feature level as the brokers report it in ApiVersions
// FinalizedFeatures.
type FeatureLevel struct {
	// name is the feature name, for example "share.version".
	Name string `json:"name"`
	// level is the finalized max version level.
	Level int32 `json:"level"`
}

// FeatureRange is the range of levels a feature's brokers support (ApiVersions
// SupportedFeatures), intersected over all brokers.
type FeatureRange struct {
	// name is the feature name.
	Name string `json:"name"`
	// minLevel is the lowest level every broker supports.
	MinLevel int32 `json:"minLevel"`
	// maxLevel is the highest level every broker supports.
	MaxLevel int32 `json:"maxLevel"`
}

// Bound is a broker's default and its min/max bound for one share-group setting, as read with
// DescribeConfigs on a BROKER resource. A nil field means the broker does not report it (for
// example the KIP-1240 min/max configs on brokers before 4.3): it is absent, not invented.
type Bound struct {
	// min is the lowest value a group config may take (group.share.min.*).
	// +optional
	Min *int64 `json:"min,omitempty"`
	// default is the value groups get without an override (group.share.*).
	// +optional
	Default *int64 `json:"default,omitempty"`
	// max is the highest value a group config may take (group.share.max.*).
	// +optional
	Max *int64 `json:"max,omitempty"`
}

// ShareBounds are the broker-side defaults and bounds of share-group configs (KIP-932,
// KIP-1240). Durations are in milliseconds, as Kafka stores them.
type ShareBounds struct {
	// deliveryCountLimit: group.share.{min.,max.,}delivery.count.limit.
	// +optional
	DeliveryCountLimit Bound `json:"deliveryCountLimit,omitempty"`
	// recordLockDurationMs: group.share.{min.,max.,}record.lock.duration.ms.
	// +optional
	RecordLockDurationMs Bound `json:"recordLockDurationMs,omitempty"`
	// partitionMaxRecordLocks: group.share.{min.,max.,}partition.max.record.locks.
	// +optional
	PartitionMaxRecordLocks Bound `json:"partitionMaxRecordLocks,omitempty"`
	// sessionTimeoutMs: group.share.{min.,max.,}session.timeout.ms.
	// +optional
	SessionTimeoutMs Bound `json:"sessionTimeoutMs,omitempty"`
	// heartbeatIntervalMs: group.share.{min.,max.,}heartbeat.interval.ms.
	// +optional
	HeartbeatIntervalMs Bound `json:"heartbeatIntervalMs,omitempty"`
	// maxGroupSize: group.share.max.size (members per share group).
	// +optional
	MaxGroupSize *int64 `json:"maxGroupSize,omitempty"`
}

// PartitionAssignment is one partition's replicas.
type PartitionAssignment struct {
	// partition is the partition index.
	Partition int32 `json:"partition"`
	// replicas are the broker ids holding the partition, preferred leader first.
	// +listType=atomic
	Replicas []int32 `json:"replicas"`
	// isr are the in-sync replicas.
	// +optional
	// +listType=atomic
	ISR []int32 `json:"isr,omitempty"`
}

// ShareStateTopicStatus reports the __share_group_state topic and the brokers' static
// settings for it.
type ShareStateTopicStatus struct {
	// exists is true when the topic has been created.
	Exists bool `json:"exists"`
	// partitions is the topic's partition count.
	// +optional
	Partitions int32 `json:"partitions,omitempty"`
	// replicationFactor is the smallest replica count over the topic's partitions.
	// +optional
	ReplicationFactor int32 `json:"replicationFactor,omitempty"`
	// minInSyncReplicas is the topic's min.insync.replicas.
	// +optional
	MinInSyncReplicas *int32 `json:"minInSyncReplicas,omitempty"`
	// underReplicatedPartitions counts partitions whose ISR is smaller than their replicas.
	// +optional
	UnderReplicatedPartitions int32 `json:"underReplicatedPartitions,omitempty"`
	// assignments lists each partition's replicas and ISR, sorted by partition.
	// +optional
	// +listType=atomic
	Assignments []PartitionAssignment `json:"assignments,omitempty"`
	// targetReplicationFactor is min(3, brokers), the replication the cluster can hold.
	// +optional
	TargetReplicationFactor int32 `json:"targetReplicationFactor,omitempty"`
	// missingBrokers lists broker ids that hold replicas but are not in the cluster.
	// +optional
	// +listType=atomic
	MissingBrokers []int32 `json:"missingBrokers,omitempty"`
	// configuredReplicationFactor is the brokers' share.coordinator.state.topic.replication.factor.
	// +optional
	ConfiguredReplicationFactor *int32 `json:"configuredReplicationFactor,omitempty"`
	// configuredMinISR is the brokers' share.coordinator.state.topic.min.isr.
	// +optional
	ConfiguredMinISR *int32 `json:"configuredMinISR,omitempty"`
}

// KafkaClusterStatus is what the operator last observed of the cluster.
type KafkaClusterStatus struct {
	// observedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready, Connected, ShareGroupsEnabled, ShareStateReplicated.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// clusterID is the Kafka cluster id.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
	// controllerID is the node id the brokers report as controller (-1 when unknown).
	// +optional
	ControllerID *int32 `json:"controllerID,omitempty"`
	// brokerCount is the number of live brokers in the metadata.
	// +optional
	BrokerCount int32 `json:"brokerCount,omitempty"`
	// brokers lists the live brokers, sorted by id.
	// +optional
	// +listType=atomic
	Brokers []BrokerStatus `json:"brokers,omitempty"`
	// finalizedFeatures lists every finalized feature and its level, sorted by name.
	// +optional
	// +listType=atomic
	FinalizedFeatures []FeatureLevel `json:"finalizedFeatures,omitempty"`
	// supportedFeatures lists the level range every broker supports, sorted by name.
	// +optional
	// +listType=atomic
	SupportedFeatures []FeatureRange `json:"supportedFeatures,omitempty"`
	// shareVersion is the finalized share.version (0 when not finalized).
	// +optional
	ShareVersion int32 `json:"shareVersion"`
	// shareBounds are the brokers' share-group defaults and bounds.
	// +optional
	ShareBounds *ShareBounds `json:"shareBounds,omitempty"`
	// shareStateTopic reports __share_group_state.
	// +optional
	ShareStateTopic *ShareStateTopicStatus `json:"shareStateTopic,omitempty"`
	// brokerNativeDLQ is true when share.version >= 2 (KIP-1191).
	// +optional
	BrokerNativeDLQ bool `json:"brokerNativeDLQ"`
	// deadLetterTopicPrefix is the brokers' errors.deadletterqueue.topic.name.prefix, when reported.
	// +optional
	DeadLetterTopicPrefix *string `json:"deadLetterTopicPrefix,omitempty"`
}

// KafkaCluster is one Kafka cluster the operator talks to.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kqc,categories=kafkaqueues
// +kubebuilder:printcolumn:name="Brokers",type=integer,JSONPath=`.status.brokerCount`
// +kubebuilder:printcolumn:name="ShareVersion",type=integer,JSONPath=`.status.shareVersion`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type KafkaCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired connection and policies.
	// +required
	Spec KafkaClusterSpec `json:"spec"`
	// status is what was last observed.
	// +optional
	Status KafkaClusterStatus `json:"status,omitempty"`
}

// KafkaClusterList is a list of KafkaCluster.
//
// +kubebuilder:object:root=true
type KafkaClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KafkaCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&KafkaCluster{}, &KafkaClusterList{})
}
