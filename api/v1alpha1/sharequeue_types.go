package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ShareQueue condition types (see also ConditionReady, ConditionReconciling, ConditionStalled).
const (
	// ConditionTopicReady is True when the topic exists with the declared partitions and configs.
	ConditionTopicReady = "TopicReady"
	// ConditionGroupConfigured is True when the share group's configs match the spec.
	ConditionGroupConfigured = "GroupConfigured"
	// ConditionConfigValid is False when a delivery value cannot be written as declared (for
	// example outside the brokers' KIP-1240 bounds, or unsupported by the cluster).
	ConditionConfigValid = "ConfigValid"
	// ConditionConflict is True when another resource already owns the topic or group.
	ConditionConflict = "Conflict"
	// ConditionDriftDetected is True when live Kafka configs differ from the spec and were
	// not corrected (driftPolicy Report).
	ConditionDriftDetected = "DriftDetected"
)

// BoundsPolicy says what happens to a delivery value outside the brokers' min/max bounds.
// +kubebuilder:validation:Enum=Reject;Clamp
type BoundsPolicy string

const (
	// BoundsPolicyReject writes nothing for an out-of-bounds value and sets ConfigValid=False
	// with reason OutOfBrokerBounds.
	BoundsPolicyReject BoundsPolicy = "Reject"
	// BoundsPolicyClamp writes the value clamped to the bound and says so in ConfigValid.
	BoundsPolicyClamp BoundsPolicy = "Clamp"
)

// DeletionPolicy says what deleting the resource does to Kafka.
// +kubebuilder:validation:Enum=Retain;Delete
type DeletionPolicy string

const (
	// DeletionPolicyRetain leaves the topic and group in Kafka.
	DeletionPolicyRetain DeletionPolicy = "Retain"
	// DeletionPolicyDelete deletes the topic and the share group.
	DeletionPolicyDelete DeletionPolicy = "Delete"
)

// AdoptionPolicy says whether an existing topic may be taken over.
// +kubebuilder:validation:Enum=AdoptOrCreate;Create;Adopt
type AdoptionPolicy string

const (
	// AdoptionPolicyAdoptOrCreate adopts an existing topic or creates a missing one.
	AdoptionPolicyAdoptOrCreate AdoptionPolicy = "AdoptOrCreate"
	// AdoptionPolicyCreate only creates; an existing topic is a conflict.
	AdoptionPolicyCreate AdoptionPolicy = "Create"
	// AdoptionPolicyAdopt only adopts; a missing topic is waited for.
	AdoptionPolicyAdopt AdoptionPolicy = "Adopt"
)

// DriftPolicy says what happens when Kafka's live configs differ from the spec.
// +kubebuilder:validation:Enum=Enforce;Report;Ignore
type DriftPolicy string

const (
	// DriftPolicyEnforce writes the spec's values back.
	DriftPolicyEnforce DriftPolicy = "Enforce"
	// DriftPolicyReport reports the difference and writes nothing.
	DriftPolicyReport DriftPolicy = "Report"
	// DriftPolicyIgnore neither reports nor corrects drift after creation.
	DriftPolicyIgnore DriftPolicy = "Ignore"
)

// QueueTopicSpec is the topic behind a queue.
// +kubebuilder:validation:XValidation:rule="has(self.name) == has(oldSelf.name) && (!has(self.name) || self.name == oldSelf.name)",message="topic.name is immutable"
type QueueTopicSpec struct {
	// name is the Kafka topic name. Default: the ShareQueue's metadata.name. Immutable.
	// Kafka allows up to 249 characters of [a-zA-Z0-9._-], not "." or "..".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=249
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9._-]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && self != '..'",message="topic.name must not be '.' or '..'"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('__')",message="topic.name must not start with '__' (reserved for Kafka's internal topics)"
	Name string `json:"name,omitempty"`
	// partitions is the partition count. Default 1, at most 10000 (the brokers refuse more
	// in one request). It can only grow (Kafka cannot remove partitions).
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="topic.partitions can only grow"
	Partitions int32 `json:"partitions,omitempty"`
	// replicationFactor is the number of replicas per partition. Absent: the brokers'
	// default.replication.factor. Changing it after creation is reported, not applied.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=32767
	ReplicationFactor *int32 `json:"replicationFactor,omitempty"`
	// config is a map of Kafka topic configs (for example retention.ms). Keys absent here
	// keep the broker's default.
	// +optional
	// +kubebuilder:validation:MaxProperties=100
	Config TopicConfigs `json:"config,omitempty"`
}

// DeliverySpec is how records are handed out. Every field is optional; an absent field means
// the broker's default applies. Each maps to one Kafka group config (KIP-932, KIP-1240).
// +kubebuilder:validation:XValidation:rule="!has(self.sessionTimeout) || !has(self.heartbeatInterval) || duration(self.sessionTimeout) > duration(self.heartbeatInterval)",message="delivery.sessionTimeout must be greater than delivery.heartbeatInterval"
type DeliverySpec struct {
	// lockDuration is how long a consumer holds a record before it is redelivered (the SQS
	// visibility timeout), as a Go duration ("30s"). Kafka config share.record.lock.duration.ms,
	// whole milliseconds, at least 1s; brokers bound it with
	// group.share.{min,max}.record.lock.duration.ms.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="delivery.lockDuration must be at least 1s"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('2147483647ms')",message="delivery.lockDuration must fit in an int32 of milliseconds"
	LockDuration *metav1.Duration `json:"lockDuration,omitempty"`
	// maxDeliveryAttempts is how many times a record is delivered before it is archived (the
	// SQS maxReceiveCount). Kafka config share.delivery.count.limit (Kafka 4.3+ as a group
	// config), at least 2; brokers bound it with group.share.{min,max}.delivery.count.limit.
	// +optional
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=2147483647
	MaxDeliveryAttempts *int32 `json:"maxDeliveryAttempts,omitempty"`
	// maxInFlightPerPartition is how many records of one partition may be locked at once.
	// Kafka config share.partition.max.record.locks (Kafka 4.3+ as a group config), at least
	// 100; brokers bound it with group.share.{min,max}.partition.max.record.locks.
	// +optional
	// +kubebuilder:validation:Minimum=100
	MaxInFlightPerPartition *int32 `json:"maxInFlightPerPartition,omitempty"`
	// autoOffsetReset is where a new group starts: latest, earliest or
	// by_duration:<ISO-8601 duration> (for example by_duration:PT1H). Kafka config
	// share.auto.offset.reset.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^(latest|earliest|by_duration:P([0-9]+D)?(T([0-9]+H)?([0-9]+M)?([0-9]+(\.[0-9]+)?S)?)?)$`
	// +kubebuilder:validation:XValidation:rule="self != 'by_duration:P' && !self.endsWith('T')",message="delivery.autoOffsetReset by_duration needs at least one duration component, e.g. by_duration:PT1H"
	AutoOffsetReset *string `json:"autoOffsetReset,omitempty"`
	// isolationLevel is read_committed or read_uncommitted. Kafka config share.isolation.level.
	// +optional
	// +kubebuilder:validation:Enum=read_committed;read_uncommitted
	IsolationLevel *string `json:"isolationLevel,omitempty"`
	// renewAcknowledge lets consumers renew a record's lock. Kafka config
	// share.renew.acknowledge.enable (Kafka 4.3+).
	// +optional
	RenewAcknowledge *bool `json:"renewAcknowledge,omitempty"`
	// sessionTimeout is how long a silent member stays in the group, as a Go duration. Kafka
	// config share.session.timeout.ms; brokers bound it with
	// group.share.{min,max}.session.timeout.ms.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1ms') && duration(self) <= duration('2147483647ms')",message="delivery.sessionTimeout must be between 1ms and 2147483647ms"
	SessionTimeout *metav1.Duration `json:"sessionTimeout,omitempty"`
	// heartbeatInterval is how often members heartbeat, as a Go duration. Kafka config
	// share.heartbeat.interval.ms; brokers bound it with
	// group.share.{min,max}.heartbeat.interval.ms.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1ms') && duration(self) <= duration('2147483647ms')",message="delivery.heartbeatInterval must be between 1ms and 2147483647ms"
	HeartbeatInterval *metav1.Duration `json:"heartbeatInterval,omitempty"`
}

// ShareQueueSpec is one Kafka topic plus one share group.
// +kubebuilder:validation:XValidation:rule="has(self.groupId) == has(oldSelf.groupId) && (!has(self.groupId) || self.groupId == oldSelf.groupId)",message="groupId is immutable"
type ShareQueueSpec struct {
	// clusterRef names the KafkaCluster (same namespace) holding the queue. Immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterRef is immutable"
	ClusterRef ClusterReference `json:"clusterRef"`
	// topic is the topic behind the queue.
	// +optional
	// +kubebuilder:default={partitions: 1}
	Topic QueueTopicSpec `json:"topic,omitempty"`
	// groupId is the share group id consumers join. Default: the ShareQueue's metadata.name.
	// Immutable.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^\S(.*\S)?$`
	GroupID string `json:"groupId,omitempty"`
	// delivery holds the share-group configs. Absent fields use the broker's defaults.
	// +optional
	Delivery DeliverySpec `json:"delivery,omitempty"`
	// boundsPolicy is Reject (default: an out-of-bounds value is not written) or Clamp (the
	// value is clamped to the brokers' bound, and ConfigValid says so).
	// +optional
	// +kubebuilder:default=Reject
	BoundsPolicy BoundsPolicy `json:"boundsPolicy,omitempty"`
	// deletionPolicy is Retain (default: deleting the ShareQueue leaves Kafka alone) or Delete
	// (the topic and the share group are deleted).
	// +optional
	// +kubebuilder:default=Retain
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
	// adoptionPolicy is AdoptOrCreate (default), Create (an existing topic is a conflict) or
	// Adopt (a missing topic is waited for).
	// +optional
	// +kubebuilder:default=AdoptOrCreate
	AdoptionPolicy AdoptionPolicy `json:"adoptionPolicy,omitempty"`
	// driftPolicy is Enforce (default: write the spec back over outside changes), Report or
	// Ignore.
	// +optional
	// +kubebuilder:default=Enforce
	DriftPolicy DriftPolicy `json:"driftPolicy,omitempty"`
	// driftIgnore lists topic or group config names (for example retention.ms or
	// share.isolation.level) whose live values are never compared or corrected.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	DriftIgnore []string `json:"driftIgnore,omitempty"`
	// deletionProtection, while true, keeps the topic and group in Kafka when the ShareQueue is
	// deleted with deletionPolicy Delete: the ShareQueue waits in Terminating until it is set
	// back to false. Default false.
	// +optional
	DeletionProtection bool `json:"deletionProtection,omitempty"`
	// connectionConfigMap, when set, has the operator publish what an application needs to
	// consume this queue into a ConfigMap of that name in the queue's namespace, for the
	// application's Pods to load with envFrom: KAFKA_BOOTSTRAP_SERVERS, KAFKA_TOPIC,
	// KAFKA_GROUP_ID, KAFKA_SECURITY_PROTOCOL and, as the KafkaCluster sets them,
	// KAFKA_SASL_MECHANISM and the names (never the values) of the Secrets holding the
	// credentials and certificates (docs/consuming.md). The ConfigMap is created and owned by
	// the queue (deleted with it); an existing ConfigMap of that name that the queue does not
	// own is never written: Ready is False naming it.
	// +optional
	ConnectionConfigMap *LocalObjectReference `json:"connectionConfigMap,omitempty"`
}

// LocalObjectReference names an object in the same namespace.
type LocalObjectReference struct {
	// name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// ValueSource says where an effective value comes from.
// +kubebuilder:validation:Enum=GroupOverride;BrokerDefault;Clamped;Unsupported
type ValueSource string

// Sources of effective values.
const (
	// SourceGroupOverride: the group config set from the spec.
	SourceGroupOverride ValueSource = "GroupOverride"
	// SourceBrokerDefault: no group config; the broker's default applies.
	SourceBrokerDefault ValueSource = "BrokerDefault"
	// SourceClamped: the declared value was clamped to a broker bound.
	SourceClamped ValueSource = "Clamped"
	// SourceUnsupported: the cluster does not know this setting.
	SourceUnsupported ValueSource = "Unsupported"
)

// EffectiveValue is one delivery setting as the broker will apply it.
type EffectiveValue struct {
	// config is the Kafka group config name.
	Config string `json:"config"`
	// value is the effective value: a Go duration for durations ("30s"), else Kafka's text.
	// +optional
	Value string `json:"value,omitempty"`
	// source says where the value comes from.
	Source ValueSource `json:"source"`
}

// EffectiveDelivery is the delivery settings as the brokers apply them: the group override,
// else the broker default, clamped to the brokers' bounds.
type EffectiveDelivery struct {
	// +optional
	LockDuration *EffectiveValue `json:"lockDuration,omitempty"`
	// maxDeliveryAttempts is the delivery attempts the application gets (SQS maxReceiveCount):
	// the group's share.delivery.count.limit (KIP-932; group override, else the broker
	// default group.share.delivery.count.limit, clamped to the brokers' bounds, KIP-1240)
	// minus reservedAttempts. config names share.delivery.count.limit; value is the count.
	// +optional
	MaxDeliveryAttempts *EffectiveValue `json:"maxDeliveryAttempts,omitempty"`
	// reservedAttempts is the delivery attempts of the group's share.delivery.count.limit kept
	// from the application (a count): with a DeadLetterRoute in Republisher mode the group's
	// limit is the application's attempts plus one, and the republisher sidecar dead-letters
	// a record that arrives on that last attempt (after its last application attempt died with
	// the sidecar) instead of handing it out. share.delivery.count.limit =
	// maxDeliveryAttempts.value + reservedAttempts. 0 when the limit has no room for the
	// reserve (the route then reports DeliveryLimitNotReserved); absent without a Republisher
	// route.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ReservedAttempts *int32 `json:"reservedAttempts,omitempty"`
	// +optional
	MaxInFlightPerPartition *EffectiveValue `json:"maxInFlightPerPartition,omitempty"`
	// +optional
	AutoOffsetReset *EffectiveValue `json:"autoOffsetReset,omitempty"`
	// +optional
	IsolationLevel *EffectiveValue `json:"isolationLevel,omitempty"`
	// +optional
	RenewAcknowledge *EffectiveValue `json:"renewAcknowledge,omitempty"`
	// +optional
	SessionTimeout *EffectiveValue `json:"sessionTimeout,omitempty"`
	// +optional
	HeartbeatInterval *EffectiveValue `json:"heartbeatInterval,omitempty"`
}

// QueueCapacity is the queue's in-flight ceiling.
type QueueCapacity struct {
	// maxInFlightRecords = partitions × effective share.partition.max.record.locks.
	MaxInFlightRecords int64 `json:"maxInFlightRecords"`
	// inFlightStateBytes = maxInFlightRecords × 32 bytes, the per-record state brokers keep.
	InFlightStateBytes int64 `json:"inFlightStateBytes"`
}

// QueueGroupStatus is the live share group.
type QueueGroupStatus struct {
	// state is the group state (Empty, Stable, Dead, ...); "NotCreated" before any consumer
	// joined.
	// +optional
	State string `json:"state,omitempty"`
	// members is the number of consumers in the group.
	// +optional
	Members int32 `json:"members"`
	// totalLag is deprecated and no longer written (it summed only the partitions the
	// brokers reported and kept its last value when the group could not be read): read
	// status.depth.backlog, or the kafkaqueues_queue_backlog_records metric.
	// +optional
	TotalLag *int64 `json:"totalLag,omitempty"`
}

// QueueDepthStatus is the queue's depth as the depth poller last wrote it (manager flags
// --depth-interval for the metrics, --depth-status-interval for this status: written when
// the figures changed and at least that long after the previous write, and at least every
// six status intervals).
type QueueDepthStatus struct {
	// observedAt is when these figures were read from Kafka. They are rewritten only when
	// they change, so on an idle queue observedAt can be old while the figures still hold;
	// the metric kafkaqueues_queue_depth_last_read_timestamp_seconds gives the latest read.
	ObservedAt metav1.Time `json:"observedAt"`
	// backlog is the records not yet acknowledged (visible and in flight: Kafka does not
	// report in-flight counts), summed over every partition of the topic; on partitions the
	// group holds no state for, what share.auto.offset.reset would deliver (0 for latest).
	// Absent when the queue could not be read (see error).
	// +optional
	Backlog *int64 `json:"backlog,omitempty"`
	// unreadPartitions lists the partitions left out of backlog because their leader or
	// the group's coordinator did not answer: backlog is then a partial sum.
	// +optional
	// +listType=atomic
	UnreadPartitions []int32 `json:"unreadPartitions,omitempty"`
	// oldestRecordTime is the timestamp of the oldest unacknowledged record (the first
	// timestamp of the record batch at a share-partition start offset; see
	// docs/autoscaling.md); absent with no backlog. Its age is the SQS
	// ApproximateAgeOfOldestMessage.
	// +optional
	OldestRecordTime *metav1.Time `json:"oldestRecordTime,omitempty"`
	// deadLetters is the record count (end − log start offset, summed over partitions) of
	// the dead-letter topic of the queue's DeadLetterRoute; absent without one.
	// +optional
	DeadLetters *int64 `json:"deadLetters,omitempty"`
	// error says why the queue could not be read at observedAt (topic missing, group
	// coordinator unavailable, ...); the figures are then absent rather than old.
	// +optional
	Error string `json:"error,omitempty"`
}

// QueueDeadLetterStatus is where a queue's dead records go, copied from its DeadLetterRoute.
type QueueDeadLetterStatus struct {
	// route is the DeadLetterRoute's name (same namespace).
	Route string `json:"route"`
	// topicName is the dead-letter topic, once the route has resolved it.
	// +optional
	TopicName string `json:"topicName,omitempty"`
	// mode is the route's effective mode: BrokerNative or Republisher.
	// +optional
	Mode DeadLetterMode `json:"mode,omitempty"`
	// active mirrors the route's RouteActive condition.
	// +optional
	Active bool `json:"active,omitempty"`
}

// ShareQueueStatus is what the operator last observed of the queue.
type ShareQueueStatus struct {
	// observedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready, TopicReady, GroupConfigured, ConfigValid, Reconciling, Stalled,
	// Conflict.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// topicName is the Kafka topic.
	// +optional
	TopicName string `json:"topicName,omitempty"`
	// topicId is the Kafka topic id, pinned when the topic is first seen.
	// +optional
	TopicID string `json:"topicId,omitempty"`
	// groupId is the share group id.
	// +optional
	GroupID string `json:"groupId,omitempty"`
	// partitions is the live partition count.
	// +optional
	Partitions int32 `json:"partitions,omitempty"`
	// replicationFactor is the live replica count (smallest over partitions).
	// +optional
	ReplicationFactor int32 `json:"replicationFactor,omitempty"`
	// topicCreated is true when this resource created the topic (rather than adopting it).
	// +optional
	TopicCreated bool `json:"topicCreated,omitempty"`
	// topicCreationStarted is set just before the operator sends CreateTopics, so a topic it
	// created is recognised as its own even if the manager stopped before recording the id.
	// +optional
	TopicCreationStarted *metav1.Time `json:"topicCreationStarted,omitempty"`
	// managedTopicConfigs are the topic config names this resource has set. Only these are
	// removed when dropped from spec.topic.config; overrides set by others on an adopted
	// topic are left alone.
	// +optional
	// +listType=atomic
	ManagedTopicConfigs []string `json:"managedTopicConfigs,omitempty"`
	// effective are the delivery settings as the brokers apply them.
	// +optional
	Effective *EffectiveDelivery `json:"effective,omitempty"`
	// capacity is the in-flight ceiling.
	// +optional
	Capacity *QueueCapacity `json:"capacity,omitempty"`
	// group is the live share group.
	// +optional
	Group *QueueGroupStatus `json:"group,omitempty"`
	// deadLetter is the queue's DeadLetterRoute, when one names it.
	// +optional
	DeadLetter *QueueDeadLetterStatus `json:"deadLetter,omitempty"`
	// depth is the queue's backlog, oldest record and dead letters (SQS
	// ApproximateNumberOfMessages*, ApproximateAgeOfOldestMessage), written by the depth
	// poller at a bounded cadence; the kafkaqueues_queue_* metrics are fresher.
	// +optional
	Depth *QueueDepthStatus `json:"depth,omitempty"`
	// plannedChanges lists what the operator would change, in Plan mode.
	// +optional
	// +listType=atomic
	PlannedChanges []string `json:"plannedChanges,omitempty"`
}

// ShareQueue is one Kafka topic plus one share group: a queue.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sq,categories=kafkaqueues
// +kubebuilder:printcolumn:name="Topic",type=string,JSONPath=`.status.topicName`
// +kubebuilder:printcolumn:name="Partitions",type=integer,JSONPath=`.status.partitions`
// +kubebuilder:printcolumn:name="Lease",type=string,JSONPath=`.status.effective.lockDuration.value`
// +kubebuilder:printcolumn:name="MaxAttempts",type=string,JSONPath=`.status.effective.maxDeliveryAttempts.value`
// +kubebuilder:printcolumn:name="Reserved",type=integer,priority=1,JSONPath=`.status.effective.reservedAttempts`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Backlog",type=integer,priority=1,JSONPath=`.status.depth.backlog`
// +kubebuilder:printcolumn:name="Reconcile",type=string,JSONPath=`.metadata.annotations.kafkaqueues\.io/reconcile`,description="The kafkaqueues.io/reconcile annotation (Paused, ObserveOnly, Plan); empty is Active"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ShareQueue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired queue.
	// +required
	Spec ShareQueueSpec `json:"spec"`
	// status is what was last observed.
	// +optional
	Status ShareQueueStatus `json:"status,omitempty"`
}

// ShareQueueList is a list of ShareQueue.
//
// +kubebuilder:object:root=true
type ShareQueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ShareQueue `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ShareQueue{}, &ShareQueueList{})
}
