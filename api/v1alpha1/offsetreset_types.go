package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of the one-shot action kinds (OffsetReset, DeadLetterRedrive). Like a Job's:
// Complete or Failed becomes True once, and the object is never acted on again.
const (
	// ConditionComplete is True once the action finished. OffsetReset: the share group's start
	// offsets were altered to the recorded targets and read back (DescribeShareGroupOffsets);
	// while the reset waits or applies it is False with the reason (MembersPresent,
	// ShareGroupsDisabled, ...). DeadLetterRedrive: every record within the bound was read and
	// moved back to the queue's topic, filtered out, or refused.
	ConditionComplete = "Complete"
	// ConditionFailed is True when the action will not go on. OffsetReset: members present under
	// whenMembersPresent Fail, the brokers refusing the offsets. DeadLetterRedrive: its route,
	// queue or cluster is gone, the brokers refused the transaction. The message says why.
	// Terminal.
	ConditionFailed = "Failed"
)

// OffsetResetPhase is the one-word state shown by kubectl get.
// +kubebuilder:validation:Enum=Pending;Waiting;Applying;Complete;Failed
type OffsetResetPhase string

const (
	// OffsetResetPending: not acted on yet.
	OffsetResetPending OffsetResetPhase = "Pending"
	// OffsetResetWaiting: waiting for the group to be empty, the queue or the cluster.
	OffsetResetWaiting OffsetResetPhase = "Waiting"
	// OffsetResetApplying: targets resolved and recorded in status; being applied.
	OffsetResetApplying OffsetResetPhase = "Applying"
	// OffsetResetComplete: applied and read back. Terminal.
	OffsetResetComplete OffsetResetPhase = "Complete"
	// OffsetResetFailed: not applied. Terminal.
	OffsetResetFailed OffsetResetPhase = "Failed"
)

// MembersPolicy says what an OffsetReset does while the share group has members (Kafka
// alters share-group offsets only for an empty group: AlterShareGroupOffsets, KIP-932).
// +kubebuilder:validation:Enum=Wait;Fail
type MembersPolicy string

const (
	// MembersPolicyWait re-checks with backoff (2s up to 1m) until the group is empty.
	MembersPolicyWait MembersPolicy = "Wait"
	// MembersPolicyFail ends the reset as Failed (reason MembersPresent) without applying.
	MembersPolicyFail MembersPolicy = "Fail"
)

// OffsetResetSpec is one request to move a ShareQueue's share-group start offsets, named as
// Kafka's kafka-share-groups.sh --reset-offsets names its targets. Exactly one of toEarliest,
// toLatest, toDatetime, byDuration is set. Immutable: a second reset is a second object.
//
// +kubebuilder:validation:XValidation:rule="[has(self.toEarliest), has(self.toLatest), has(self.toDatetime), has(self.byDuration)].filter(x, x).size() == 1",message="exactly one of toEarliest, toLatest, toDatetime, byDuration must be set"
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: create another OffsetReset"
type OffsetResetSpec struct {
	// queueRef names the ShareQueue (same namespace) whose share group is reset, on the
	// queue's topic.
	// +required
	QueueRef QueueReference `json:"queueRef"`
	// toEarliest moves every partition's start offset to the log start offset (ListOffsets
	// earliest, -2): every retained record is delivered again. kafka-share-groups.sh
	// --to-earliest. Only true is allowed.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self",message="toEarliest may only be true; leave it out to pick another target"
	ToEarliest *bool `json:"toEarliest,omitempty"`
	// toLatest moves every partition's start offset to the log end offset (ListOffsets
	// latest, -1): every record present now is skipped, i.e. SQS PurgeQueue.
	// kafka-share-groups.sh --to-latest. Only true is allowed.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self",message="toLatest may only be true; leave it out to pick another target"
	ToLatest *bool `json:"toLatest,omitempty"`
	// toDatetime (RFC 3339, e.g. 2026-12-01T09:00:00Z) moves each partition's start offset
	// to its first record whose timestamp is at or after it (ListOffsets by timestamp); a
	// partition with none goes to its end offset. kafka-share-groups.sh --to-datetime.
	// Delivery then follows log order from that offset: every later record is delivered again,
	// including records whose timestamps are older than the time (a producer's clock or an
	// explicit timestamp can put them there).
	// +optional
	ToDatetime *metav1.Time `json:"toDatetime,omitempty"`
	// byDuration (Go duration, e.g. 1h30m) is toDatetime at (the time the reset is resolved)
	// minus this duration; resolved once, recorded in status.resolvedTimestamp.
	// kafka-share-groups.sh --by-duration. Above 0.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="byDuration must be above 0"
	ByDuration *metav1.Duration `json:"byDuration,omitempty"`
	// whenMembersPresent is Wait (default: re-check with backoff, condition Complete=False
	// reason MembersPresent naming the member count) or Fail (end as Failed, nothing applied).
	// +optional
	// +kubebuilder:default=Wait
	WhenMembersPresent MembersPolicy `json:"whenMembersPresent,omitempty"`
}

// TargetString is the requested target as kafka-share-groups.sh spells it, e.g.
// "--to-latest", "--to-datetime 2026-12-01T09:00:00Z", "--by-duration 1h0m0s".
func (s OffsetResetSpec) TargetString() string {
	switch {
	case s.ToEarliest != nil:
		return "--to-earliest"
	case s.ToLatest != nil:
		return "--to-latest"
	case s.ToDatetime != nil:
		return "--to-datetime " + s.ToDatetime.UTC().Format("2006-01-02T15:04:05Z07:00")
	case s.ByDuration != nil:
		return "--by-duration " + s.ByDuration.Duration.String()
	}
	return ""
}

// PartitionOffsetReset is one partition of a reset.
type PartitionOffsetReset struct {
	// partition is the partition index.
	// +required
	Partition int32 `json:"partition"`
	// before is the group's share-partition start offset when the target was resolved;
	// absent when the group held no state for the partition.
	// +optional
	Before *int64 `json:"before,omitempty"`
	// target is the absolute start offset resolved for the request and recorded before it
	// was applied; the only offset ever sent.
	// +required
	Target int64 `json:"target"`
	// after is the start offset read back after the reset was applied
	// (DescribeShareGroupOffsets).
	// +optional
	After *int64 `json:"after,omitempty"`
}

// OffsetResetStatus is what the reset did.
type OffsetResetStatus struct {
	// observedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Complete, Failed.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// phase is Pending, Waiting, Applying, Complete or Failed.
	// +optional
	Phase OffsetResetPhase `json:"phase,omitempty"`
	// target is the requested target as kafka-share-groups.sh spells it (--to-latest, ...).
	// +optional
	Target string `json:"target,omitempty"`
	// topic is the queue's Kafka topic the reset acts on, fixed when first read.
	// +optional
	Topic string `json:"topic,omitempty"`
	// topicId is the id of topic when the targets were resolved. A topic deleted and made
	// again under the name has another id, and the recorded offsets mean nothing there: they
	// are not applied to it.
	// +optional
	TopicID string `json:"topicId,omitempty"`
	// groupId is the queue's share group the reset acts on, fixed when first read.
	// +optional
	GroupID string `json:"groupId,omitempty"`
	// members is the member count of the group when last checked.
	// +optional
	Members *int32 `json:"members,omitempty"`
	// resolvedAt is when the target was resolved to per-partition offsets (recorded in
	// partitions before anything was applied).
	// +optional
	ResolvedAt *metav1.Time `json:"resolvedAt,omitempty"`
	// resolvedTimestamp is the record timestamp toDatetime or byDuration resolved to.
	// +optional
	ResolvedTimestamp *metav1.Time `json:"resolvedTimestamp,omitempty"`
	// partitions are the per-partition offsets: before, target, after.
	// +optional
	// +listType=map
	// +listMapKey=partition
	Partitions []PartitionOffsetReset `json:"partitions,omitempty"`
	// applyAttempts counts the applies sent to Kafka, each recorded before it is sent. A
	// manager that restarts with applyAttempts above 0 knows an apply may have taken and
	// leaves partitions that show it where they are. An apply whose read-back does not show
	// every target, with no member in the group that could have moved them, is sent again;
	// after 3 the reset fails naming what it read.
	// +optional
	ApplyAttempts int32 `json:"applyAttempts,omitempty"`
	// completionTime is when the reset completed or failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// Finished reports whether the reset reached a terminal condition (Complete or Failed True).
func (s *OffsetResetStatus) Finished() bool {
	for _, c := range s.Conditions {
		if (c.Type == ConditionComplete || c.Type == ConditionFailed) && c.Status == metav1.ConditionTrue {
			return true
		}
	}
	return false
}

// OffsetReset is a one-shot request to move a ShareQueue's share-group start offsets (to the
// earliest or latest offset, a time, or a duration ago), like a Job: it acts once, records
// per-partition offsets before, target and after, and is never applied again.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=osr,categories=kafkaqueues
// +kubebuilder:printcolumn:name="Queue",type=string,JSONPath=`.spec.queueRef.name`
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.status.target`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Complete")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type OffsetReset struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the request. Immutable.
	// +required
	Spec OffsetResetSpec `json:"spec"`
	// status is what was done.
	// +optional
	Status OffsetResetStatus `json:"status,omitempty"`
}

// OffsetResetList is a list of OffsetReset.
//
// +kubebuilder:object:root=true
type OffsetResetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OffsetReset `json:"items"`
}

func init() {
	SchemeBuilder.Register(&OffsetReset{}, &OffsetResetList{})
}
