package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeadLetterRedrive condition types besides ConditionComplete and ConditionFailed
// (offsetreset_types.go).
const (
	// ConditionCancelled is True when spec.cancel stopped the redrive at a transaction
	// boundary before its bound.
	ConditionCancelled = "Cancelled"
	// ConditionRecordsRefused is True when records that had already been redriven
	// spec.maxRedrives times were left in the dead-letter topic (the loop guard).
	ConditionRecordsRefused = "RecordsRefused"
)

// DeadLetterRedrive reasons and events.
const (
	// ReasonRedriveWaiting: the redrive cannot start yet (route, queue or cluster not ready,
	// or another redrive of the same route is active); the message names what it waits for.
	// Do: read the message: it names the route, queue or cluster it waits for.
	ReasonRedriveWaiting = "Waiting"
	// ReasonRedriveRunning: records are being moved.
	ReasonRedriveRunning = "Running"
	// ReasonRedriveComplete: every record within the bound was handled.
	ReasonRedriveComplete = "Completed"
	// ReasonRedriveCancelled: spec.cancel stopped the redrive.
	ReasonRedriveCancelled = "CancelRequested"
	// ReasonRedriveFailed: the redrive stopped on an error it cannot retry.
	// Do: read the error in the message (an authorization, a topic gone), fix it, and create
	// another DeadLetterRedrive.
	ReasonRedriveFailed = "RedriveFailed"
	// ReasonRedriveLimitReached: records whose kqo.redrive.count header already reached
	// spec.maxRedrives were not moved.
	// Do: inspect those records: they were redriven spec.maxRedrives times already; raise
	// maxRedrives to move them again.
	ReasonRedriveLimitReached = "RedriveLimitReached"
	// ReasonNoRecordsRefused: no record reached spec.maxRedrives.
	ReasonNoRecordsRefused = "NoRecordsRefused"
	// ReasonRouteNotFound: the DeadLetterRoute spec.routeRef.name names does not exist.
	// Do: create the DeadLetterRoute spec.routeRef.name names, or fix the name.
	ReasonRouteNotFound = "RouteNotFound"
	// ReasonRedriveStarted (Event): the bound was recorded and moving began.
	ReasonRedriveStarted = "RedriveStarted"
)

// Record headers the redrive writes on every record it moves, in the kqo.* style of the
// republisher's provenance headers.
const (
	// HeaderRedriven names the DeadLetterRedrive (namespace/name) that moved the record.
	HeaderRedriven = "kqo.redriven"
	// HeaderRedriveCount is how many times the record has been redriven, as a decimal
	// integer; 1 after the first redrive. A record arriving with a count of
	// spec.maxRedrives or more is refused.
	HeaderRedriveCount = "kqo.redrive.count"
)

// DeadLetterRedrivePhase is where a redrive stands.
// +kubebuilder:validation:Enum=Pending;Running;Complete;Cancelled;Failed
type DeadLetterRedrivePhase string

const (
	// RedrivePending: not started (waiting for its route, queue, cluster or another redrive).
	RedrivePending DeadLetterRedrivePhase = "Pending"
	// RedriveRunning: the bound is recorded and records are being moved.
	RedriveRunning DeadLetterRedrivePhase = "Running"
	// RedriveComplete: every record within the bound was handled.
	RedriveComplete DeadLetterRedrivePhase = "Complete"
	// RedriveCancelled: stopped by spec.cancel.
	RedriveCancelled DeadLetterRedrivePhase = "Cancelled"
	// RedriveFailed: stopped by an error.
	RedriveFailed DeadLetterRedrivePhase = "Failed"
)

// Terminal reports whether p is Complete, Cancelled or Failed.
func (p DeadLetterRedrivePhase) Terminal() bool {
	return p == RedriveComplete || p == RedriveCancelled || p == RedriveFailed
}

// RedriveStart says where a redrive starts reading the dead-letter topic.
// +kubebuilder:validation:Enum=AfterPreviousRedrive;Earliest
type RedriveStart string

const (
	// RedriveStartAfterPrevious starts each partition where the last finished (Complete or
	// Cancelled) redrive of the same route and topic stopped reading, so records an earlier
	// redrive moved, filtered or refused are not read again (Kafka cannot delete single
	// records from the dead-letter topic); the log start offset when there is none.
	RedriveStartAfterPrevious RedriveStart = "AfterPreviousRedrive"
	// RedriveStartEarliest reads from the log start offset: records an earlier redrive moved
	// are moved again.
	RedriveStartEarliest RedriveStart = "Earliest"
)

// RouteReference names a DeadLetterRoute in the same namespace.
type RouteReference struct {
	// name is the DeadLetterRoute's metadata.name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// RedriveFilter selects which dead letters are moved, by the provenance headers they carry.
// A record must match every non-empty list; records that do not match stay in the
// dead-letter topic and are counted in status.filtered.
type RedriveFilter struct {
	// reasons keeps records whose kqo.reason header (written by the republisher sidecar:
	// rejected, released-on-last-attempt, lease-expired-on-last-attempt,
	// delivery-count-above-limit) is one of these. Records without that header (the
	// brokers' own dead letters, KIP-1191, which carry __dlq.errors.message instead) never
	// match a non-empty list.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	Reasons []string `json:"reasons,omitempty"`
	// sourcePartitions keeps records whose original partition — the kqo.source.partition
	// header (republisher) or __dlq.errors.partition (broker-native, KIP-1191) — is one of
	// these. When a record was dead-lettered more than once, the last such header counts.
	// +optional
	// +kubebuilder:validation:MaxItems=1000
	// +listType=set
	// +kubebuilder:validation:items:Minimum=0
	SourcePartitions []int32 `json:"sourcePartitions,omitempty"`
}

// DeadLetterRedriveSpec asks for the dead letters of one route to be moved back to its
// queue's topic (SQS StartMessageMoveTask). Every field but cancel is immutable.
// +kubebuilder:validation:XValidation:rule="self.routeRef == oldSelf.routeRef && has(self.rateLimit) == has(oldSelf.rateLimit) && (!has(self.rateLimit) || self.rateLimit == oldSelf.rateLimit) && has(self.maxRedrives) == has(oldSelf.maxRedrives) && (!has(self.maxRedrives) || self.maxRedrives == oldSelf.maxRedrives) && has(self.filter) == has(oldSelf.filter) && (!has(self.filter) || self.filter == oldSelf.filter) && has(self.startFrom) == has(oldSelf.startFrom) && (!has(self.startFrom) || self.startFrom == oldSelf.startFrom)",message="only spec.cancel can change after creation"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.cancel) || !oldSelf.cancel || (has(self.cancel) && self.cancel)",message="spec.cancel cannot be undone"
type DeadLetterRedriveSpec struct {
	// routeRef names the DeadLetterRoute (same namespace) whose dead-letter topic is read.
	// Records go back to the topic of that route's ShareQueue.
	// +required
	RouteRef RouteReference `json:"routeRef"`
	// rateLimit caps the records produced to the queue's topic, in records per second.
	// Absent: as fast as the brokers take them.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	RateLimit *int32 `json:"rateLimit,omitempty"`
	// filter selects the records moved by their provenance headers. Absent: every record.
	// +optional
	Filter *RedriveFilter `json:"filter,omitempty"`
	// maxRedrives is how many times one record may be redriven: a record whose
	// kqo.redrive.count header is already maxRedrives or more is not moved (counted in
	// status.refused), so a record that keeps failing cannot loop forever. Default 3.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxRedrives *int32 `json:"maxRedrives,omitempty"`
	// startFrom is AfterPreviousRedrive (default: start where the last finished redrive of
	// the route stopped) or Earliest (the log start offset).
	// +optional
	// +kubebuilder:default=AfterPreviousRedrive
	StartFrom RedriveStart `json:"startFrom,omitempty"`
	// cancel, set to true, stops the redrive at the next transaction boundary: records moved
	// so far stay moved, the rest stay in the dead-letter topic. It cannot be set back.
	// +optional
	Cancel bool `json:"cancel,omitempty"`
}

// PartitionBound is the part of one dead-letter partition a redrive reads: offsets
// [startOffset, endOffset), the records present when it started.
type PartitionBound struct {
	// partition is the dead-letter topic's partition.
	Partition int32 `json:"partition"`
	// startOffset is where the redrive started reading: the partition's log start offset
	// when it started, or where the previous redrive of the route stopped (spec.startFrom).
	StartOffset int64 `json:"startOffset"`
	// endOffset is the partition's end offset (high watermark) when the redrive started;
	// records at or beyond it (including records redriven by this redrive that died again)
	// are never moved by it.
	EndOffset int64 `json:"endOffset"`
	// nextOffset is the read position the redrive reached (committed with its last
	// transaction), written when it ends; the next redrive of the route starts here
	// (startFrom AfterPreviousRedrive).
	// +optional
	NextOffset *int64 `json:"nextOffset,omitempty"`
}

// DeadLetterRedriveStatus is the progress of a redrive.
type DeadLetterRedriveStatus struct {
	// observedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Complete, Cancelled, Failed, RecordsRefused.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// phase is Pending, Running, Complete, Cancelled or Failed.
	// +optional
	Phase DeadLetterRedrivePhase `json:"phase,omitempty"`
	// sourceTopic is the dead-letter topic read; targetTopic the queue's topic written.
	// +optional
	SourceTopic string `json:"sourceTopic,omitempty"`
	// +optional
	TargetTopic string `json:"targetTopic,omitempty"`
	// bound is, per dead-letter partition, the offsets present when the redrive started.
	// +optional
	// +listType=map
	// +listMapKey=partition
	Bound []PartitionBound `json:"bound,omitempty"`
	// total is the number of records within the bound (sum of endOffset - startOffset).
	// When the topic holds offsets without a record (transaction markers, compaction) total
	// is corrected to the records actually read once the redrive completes.
	// +optional
	Total int64 `json:"total"`
	// moved is the records produced to the queue's topic in committed transactions.
	// +optional
	Moved int64 `json:"moved"`
	// filtered is the records within the bound that spec.filter left in place.
	// +optional
	Filtered int64 `json:"filtered"`
	// refused is the records left in place because their kqo.redrive.count had reached
	// spec.maxRedrives.
	// +optional
	Refused int64 `json:"refused"`
	// recordsPerSecond is the average rate records were moved at since the redrive (or the
	// manager running it) last started, rounded down; once the redrive ended, the average
	// over the whole redrive: moved / (completionTime - startTime).
	// +optional
	RecordsPerSecond int64 `json:"recordsPerSecond,omitempty"`
	// startTime is when the bound was recorded; completionTime when the redrive reached
	// Complete, Cancelled or Failed.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// DeadLetterRedrive moves the dead letters of a DeadLetterRoute back to its queue's topic,
// once (SQS StartMessageMoveTask). Records are moved in Kafka transactions that also commit
// the redrive's read position, so a record is moved exactly once even when the manager
// crashes (for consumers reading with isolation level read_committed).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dlrr,categories=kafkaqueues
// +kubebuilder:printcolumn:name="Route",type=string,JSONPath=`.spec.routeRef.name`
// +kubebuilder:printcolumn:name="Moved",type=integer,JSONPath=`.status.moved`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.total`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DeadLetterRedrive struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the requested redrive.
	// +required
	Spec DeadLetterRedriveSpec `json:"spec"`
	// status is its progress.
	// +optional
	Status DeadLetterRedriveStatus `json:"status,omitempty"`
}

// DeadLetterRedriveList is a list of DeadLetterRedrive.
//
// +kubebuilder:object:root=true
type DeadLetterRedriveList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DeadLetterRedrive `json:"items"`
}

func init() {
	SchemeBuilder.Register(&DeadLetterRedrive{}, &DeadLetterRedriveList{})
}
