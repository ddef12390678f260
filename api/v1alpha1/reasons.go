package v1alpha1

// Condition reasons. Each is CamelCase, as metav1.Condition requires; the message of a False
// condition names the field, the value and the bound or setting involved.
const (
	// ReasonReady: everything declared is in place.
	ReasonReady = "Ready"
	// ReasonProgressing: the operator is applying changes or waiting for them to land.
	ReasonProgressing = "Progressing"
	// ReasonPlanned: reconcile mode Plan computed status.plannedChanges and applied nothing.
	ReasonPlanned = "Planned"
	// ReasonPaused: reconcile mode Paused; nothing is read or written.
	ReasonPaused = "Paused"
	// ReasonInvalidReconcileMode: the kafkaqueues.io/reconcile annotation has an unknown value;
	// nothing is read or written until it is fixed.
	ReasonInvalidReconcileMode = "InvalidReconcileMode"
	// ReasonObserveOnly: reconcile mode ObserveOnly; status is kept, nothing is written.
	ReasonObserveOnly = "ObserveOnly"

	// ReasonConnected: the operator reached the brokers.
	ReasonConnected = "Connected"
	// ReasonConnectionFailed: the bootstrap servers could not be reached or refused the
	// client (network, TLS, SASL).
	ReasonConnectionFailed = "ConnectionFailed"
	// ReasonSecretNotFound: a Secret the KafkaCluster references is missing or lacks a key.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonSecretInvalid: a referenced Secret exists but its content is unusable (not PEM,
	// key pair mismatch).
	ReasonSecretInvalid = "SecretInvalid"
	// ReasonShareGroupsEnabled: share.version >= 1 is finalized.
	ReasonShareGroupsEnabled = "ShareGroupsEnabled"
	// ReasonShareGroupsDisabled: share.version is 0; share groups do not work until it is
	// finalized at 1 or more.
	ReasonShareGroupsDisabled = "ShareGroupsDisabled"
	// ReasonFeatureFinalized: the operator raised a feature level (featurePolicy Finalize).
	ReasonFeatureFinalized = "FeatureFinalized"
	// ReasonFeatureUnsupported: targetShareVersion is above what every broker supports.
	ReasonFeatureUnsupported = "FeatureUnsupported"
	// ReasonFeatureUpdateFailed: UpdateFeatures was refused.
	ReasonFeatureUpdateFailed = "FeatureUpdateFailed"
	// ReasonShareStateReplicated: __share_group_state has the replication the cluster can hold.
	ReasonShareStateReplicated = "Replicated"
	// ReasonShareStateNotCreated: __share_group_state does not exist yet; it is created on
	// first share-group use.
	ReasonShareStateNotCreated = "NotCreated"
	// ReasonShareStateUnderReplicated: the topic's RF or ISR is below target.
	ReasonShareStateUnderReplicated = "UnderReplicated"
	// ReasonShareStateUncreatable: the brokers' share.coordinator.state.topic.replication.factor
	// exceeds the broker count, so the topic cannot be created.
	ReasonShareStateUncreatable = "ReplicationFactorExceedsBrokers"
	// ReasonShareStateReassigning: partition reassignments raising the RF are in progress.
	ReasonShareStateReassigning = "Reassigning"
	// ReasonShareStateBrokerMissing: replicas sit on brokers that are no longer in the
	// cluster; the operator never shrinks replication on its own.
	ReasonShareStateBrokerMissing = "BrokerMissing"

	// ReasonQueueNotFound: the ShareQueue a DeadLetterRoute names (spec.queueRef.name) does
	// not exist.
	ReasonQueueNotFound = "QueueNotFound"
	// ReasonQueueNotReady: the ShareQueue a DeadLetterRoute names has not yet been checked
	// for ownership of its topic and group (a wait).
	ReasonQueueNotReady = "QueueNotReady"
	// ReasonModeUnsupported: DeadLetterRoute spec.mode BrokerNative on a cluster below
	// share.version 2 (KIP-1191).
	ReasonModeUnsupported = "ModeUnsupported"
	// ReasonTopicNamePrefixRequired: in BrokerNative mode the dead-letter topic's name must
	// start with the brokers' errors.deadletterqueue.topic.name.prefix (default "dlq.").
	ReasonTopicNamePrefixRequired = "TopicNamePrefixRequired"
	// ReasonBrokerNative: the brokers write the group's dead records (KIP-1191).
	ReasonBrokerNative = "BrokerNative"
	// ReasonDeliveryLimitNotReserved: Republisher mode, but the group's
	// share.delivery.count.limit is not maxDeliveryAttempts + 1 (typically the brokers'
	// maximum leaves no room for the reserved attempt); the sidecar is not injected.
	ReasonDeliveryLimitNotReserved = "DeliveryLimitNotReserved"
	// ReasonRenewAcknowledgeDisabled: Republisher mode, but the brokers report the group's
	// share.renew.acknowledge.enable (KIP-1222, Kafka 4.3+; the ShareQueue's
	// spec.delivery.renewAcknowledge) as false: the sidecar renews the brokers' acquisition
	// lock while the application holds a record, and the brokers would refuse every renew
	// (INVALID_RECORD_STATE, measured on Kafka 4.4). The sidecar is not injected.
	ReasonRenewAcknowledgeDisabled = "RenewAcknowledgeDisabled"
	// ReasonRepublisher: the republisher sidecar, injected into Pods annotated
	// kafkaqueues.io/queue=<queue>, writes the group's dead records.
	ReasonRepublisher = "Republisher"

	// ReasonClusterNotFound: the referenced KafkaCluster does not exist.
	ReasonClusterNotFound = "ClusterNotFound"
	// ReasonClusterNotReady: the referenced KafkaCluster is not connected yet.
	ReasonClusterNotReady = "ClusterNotReady"
	// ReasonTopicNotFound: adoptionPolicy Adopt and the topic does not exist (waiting).
	ReasonTopicNotFound = "TopicNotFound"
	// ReasonTopicExists: adoptionPolicy Create and the topic already exists.
	ReasonTopicExists = "TopicExists"
	// ReasonTopicIDChanged: the topic was deleted and recreated outside the operator; its id
	// no longer matches status.topicId.
	ReasonTopicIDChanged = "TopicIDChanged"
	// ReasonPartitionCountMismatch: the topic has more partitions than declared.
	ReasonPartitionCountMismatch = "PartitionCountMismatch"
	// ReasonReplicationFactorMismatch: the topic's RF differs from the declared one; the
	// operator does not reassign replicas of queue topics.
	ReasonReplicationFactorMismatch = "ReplicationFactorMismatch"
	// ReasonKafkaRejected: the broker refused a change (message carries its error).
	ReasonKafkaRejected = "KafkaRejected"
	// ReasonKafkaUnavailable: a Kafka request failed for a transient reason; retrying.
	ReasonKafkaUnavailable = "KafkaUnavailable"
	// ReasonDriftDetected: live configs differ from the spec and driftPolicy is Report.
	ReasonDriftDetected = "DriftDetected"

	// ReasonValid: every declared value can be applied as written.
	ReasonValid = "Valid"
	// ReasonOutOfBrokerBounds: a value lies outside the brokers' KIP-1240 min/max bounds and
	// boundsPolicy is Reject; it was not written.
	ReasonOutOfBrokerBounds = "OutOfBrokerBounds"
	// ReasonClampedToBrokerBounds: boundsPolicy Clamp wrote a value clamped to a bound.
	ReasonClampedToBrokerBounds = "ClampedToBrokerBounds"
	// ReasonUnsupportedByCluster: a field maps to a group config the brokers do not report
	// (for example share.delivery.count.limit before Kafka 4.3).
	ReasonUnsupportedByCluster = "UnsupportedByCluster"
	// ReasonConflict: another resource already owns the topic or the group on this cluster.
	ReasonConflict = "Conflict"
	// ReasonGroupTypeConflict: the group id names a group of another type on this cluster — a
	// classic or consumer (KIP-848) consumer group, or a streams group (KIP-1071) — so it
	// cannot be a share group (KIP-932); the message names the group and its type. Nothing is
	// written to that group and deletion never deletes or alters it.
	ReasonGroupTypeConflict = "GroupTypeConflict"
	// ReasonNoConflict: this resource owns its topic and group.
	ReasonNoConflict = "NoConflict"
	// ReasonDeletionProtected: deletionProtection holds the Kafka resources and the finalizer.
	ReasonDeletionProtected = "DeletionProtected"
	// ReasonTopicUnderReplicated: some partitions have fewer in-sync replicas than replicas,
	// or the topic's replication factor exceeds the live brokers.
	ReasonTopicUnderReplicated = "TopicUnderReplicated"
	// ReasonNoDrift: live configs match the spec.
	ReasonNoDrift = "NoDrift"
	// ReasonDriftCorrected: live configs had drifted and were written back (Enforce).
	ReasonDriftCorrected = "DriftCorrected"
	// ReasonDeleting: the resource is being deleted.
	ReasonDeleting = "Deleting"
)

// Event reasons that name no condition. Each has one meaning.
const (
	// EventTopicDeleted (Warning): a queue's pinned topic was deleted outside the operator; it
	// is created again and its records are gone.
	EventTopicDeleted = "TopicDeleted"
	// EventDeadLetterTopicDeleted (Warning): a route's dead-letter topic was deleted outside
	// the operator; records dead-lettered meanwhile are lost. The route recreates it.
	EventDeadLetterTopicDeleted = "DeadLetterTopicDeleted"
	// EventTopicDeletedByPolicy (Normal): the operator deleted a queue's topic because the
	// ShareQueue was deleted with deletionPolicy Delete.
	EventTopicDeletedByPolicy = "TopicDeletedByPolicy"

	// ReasonMembersPresent: an OffsetReset found members in the share group; Kafka alters
	// share-group offsets only for an empty group (AlterShareGroupOffsets, KIP-932). The
	// message names the member count.
	ReasonMembersPresent = "MembersPresent"
	// ReasonOffsetsApplying: an OffsetReset's targets are resolved and recorded in status and
	// are being applied.
	ReasonOffsetsApplying = "Applying"
	// ReasonOffsetsReset: an OffsetReset's recorded targets were applied and read back.
	ReasonOffsetsReset = "OffsetsReset"
	// ReasonReadBackMismatch: an OffsetReset's applies were answered without error, yet the
	// group's start offsets read back were not its targets, and no member could have moved
	// them.
	ReasonReadBackMismatch = "ReadBackMismatch"
)
