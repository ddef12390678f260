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
	// Do: set the annotation to Active, Paused, ObserveOnly or Plan, or remove it.
	ReasonInvalidReconcileMode = "InvalidReconcileMode"
	// ReasonObserveOnly: reconcile mode ObserveOnly; status is kept, nothing is written.
	ReasonObserveOnly = "ObserveOnly"

	// ReasonConnected: the operator reached the brokers.
	ReasonConnected = "Connected"
	// ReasonConnectionFailed: the bootstrap servers could not be reached or refused the
	// client (network, TLS, SASL).
	// Do: check that spec.bootstrapServers are reachable from the operator's Pod, and the TLS and
	// SASL settings (the message carries the broker's or the network's error); the operator
	// retries with backoff and recovers by itself.
	ReasonConnectionFailed = "ConnectionFailed"
	// ReasonSecretNotFound: a Secret the KafkaCluster references is missing or lacks a key.
	// Do: create the Secret, or add the key, in the KafkaCluster's namespace (the message names
	// both and the spec field that chose them); it is checked again every 30 s.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonSecretInvalid: a referenced Secret exists but its content is unusable (not PEM,
	// key pair mismatch).
	// Do: put a PEM certificate (and a matching key) or a non-empty value in the key the message
	// names.
	ReasonSecretInvalid = "SecretInvalid"
	// ReasonShareGroupsEnabled: share.version >= 1 is finalized.
	ReasonShareGroupsEnabled = "ShareGroupsEnabled"
	// ReasonShareGroupsDisabled: share.version is 0; share groups do not work until it is
	// finalized at 1 or more.
	// Do: finalize share.version at 1 or more: set spec.featurePolicy Finalize with
	// targetShareVersion, or run kafka-features.sh upgrade --feature share.version=1
	// (docs/operating.md).
	ReasonShareGroupsDisabled = "ShareGroupsDisabled"
	// ReasonFeatureFinalized: the operator raised a feature level (featurePolicy Finalize).
	ReasonFeatureFinalized = "FeatureFinalized"
	// ReasonFeatureUnsupported: targetShareVersion is above what every broker supports.
	// Do: lower spec.targetShareVersion to what every broker supports (status lists it), or
	// upgrade the brokers first.
	ReasonFeatureUnsupported = "FeatureUnsupported"
	// ReasonFeatureUpdateFailed: UpdateFeatures was refused.
	// Do: read the broker's error in the message (often an authorization the operator lacks: ALTER
	// on the cluster); fix it and the operator tries again.
	ReasonFeatureUpdateFailed = "FeatureUpdateFailed"
	// ReasonShareStateReplicated: __share_group_state has the replication the cluster can hold.
	ReasonShareStateReplicated = "Replicated"
	// ReasonShareStateNotCreated: __share_group_state does not exist yet; it is created on
	// first share-group use.
	// Do: nothing: the brokers create __share_group_state on first share-group use.
	ReasonShareStateNotCreated = "NotCreated"
	// ReasonShareStateUnderReplicated: the topic's RF or ISR is below target.
	// Do: bring the missing brokers back, or raise the topic's replication with a reassignment
	// (docs/operating.md, small clusters).
	ReasonShareStateUnderReplicated = "UnderReplicated"
	// ReasonShareStateUncreatable: the brokers' share.coordinator.state.topic.replication.factor
	// exceeds the broker count, so the topic cannot be created.
	// Do: lower share.coordinator.state.topic.replication.factor (and min.insync.replicas) on the
	// brokers to at most the broker count, or add brokers; queues on the cluster are not Ready
	// until then.
	ReasonShareStateUncreatable = "ReplicationFactorExceedsBrokers"
	// ReasonShareStateReassigning: partition reassignments raising the RF are in progress.
	// Do: wait for the reassignment to finish.
	ReasonShareStateReassigning = "Reassigning"
	// ReasonShareStateBrokerMissing: replicas sit on brokers that are no longer in the
	// cluster; the operator never shrinks replication on its own.
	// Do: bring the brokers back, or reassign the replicas to live brokers yourself.
	ReasonShareStateBrokerMissing = "BrokerMissing"

	// ReasonQueueNotFound: the ShareQueue a DeadLetterRoute names (spec.queueRef.name) does
	// not exist.
	// Do: create the ShareQueue spec.queueRef.name names, in the same namespace, or fix the name.
	ReasonQueueNotFound = "QueueNotFound"
	// ReasonQueueNotReady: the ShareQueue a DeadLetterRoute names has not yet been checked
	// for ownership of its topic and group (a wait).
	// Do: wait; if it stays, read the queue's own conditions.
	ReasonQueueNotReady = "QueueNotReady"
	// ReasonModeUnsupported: DeadLetterRoute spec.mode BrokerNative on a cluster below
	// share.version 2 (KIP-1191).
	// Do: finalize share.version 2 (Kafka 4.4+), or use mode Republisher or Auto.
	ReasonModeUnsupported = "ModeUnsupported"
	// ReasonTopicNamePrefixRequired: in BrokerNative mode the dead-letter topic's name must
	// start with the brokers' errors.deadletterqueue.topic.name.prefix (default "dlq.").
	// Do: name the dead-letter topic with the brokers' prefix (default "dlq."), or leave
	// spec.topicName empty for the default name.
	ReasonTopicNamePrefixRequired = "TopicNamePrefixRequired"
	// ReasonBrokerNative: the brokers write the group's dead records (KIP-1191).
	ReasonBrokerNative = "BrokerNative"
	// ReasonDeliveryLimitNotReserved: Republisher mode, but the group's
	// share.delivery.count.limit is not maxDeliveryAttempts + 1 (typically the brokers'
	// maximum leaves no room for the reserved attempt); the sidecar is not injected.
	// Do: lower the queue's maxDeliveryAttempts by one, or raise the brokers'
	// group.share.max.delivery.count.limit.
	ReasonDeliveryLimitNotReserved = "DeliveryLimitNotReserved"
	// ReasonRenewAcknowledgeDisabled: Republisher mode, but the brokers report the group's
	// share.renew.acknowledge.enable (KIP-1222, Kafka 4.3+; the ShareQueue's
	// spec.delivery.renewAcknowledge) as false: the sidecar renews the brokers' acquisition
	// lock while the application holds a record, and the brokers would refuse every renew
	// (INVALID_RECORD_STATE, measured on Kafka 4.4). The sidecar is not injected.
	// Do: set the ShareQueue's spec.delivery.renewAcknowledge to true (or remove it).
	ReasonRenewAcknowledgeDisabled = "RenewAcknowledgeDisabled"
	// ReasonRepublisher: the republisher sidecar, injected into Pods labelled
	// kafkaqueues.io/queue=<queue>, writes the group's dead records.
	ReasonRepublisher = "Republisher"

	// ReasonClusterNotFound: the referenced KafkaCluster does not exist.
	// Do: create the KafkaCluster spec.clusterRef.name names, in the same namespace, or fix the
	// name.
	ReasonClusterNotFound = "ClusterNotFound"
	// ReasonClusterNotReady: the referenced KafkaCluster is not connected yet.
	// Do: read the KafkaCluster's conditions; the queue goes on by itself once it is Ready.
	ReasonClusterNotReady = "ClusterNotReady"
	// ReasonTopicNotFound: adoptionPolicy Adopt and the topic does not exist (waiting).
	// Do: create the topic, or set adoptionPolicy AdoptOrCreate so the operator creates it.
	ReasonTopicNotFound = "TopicNotFound"
	// ReasonTopicExists: adoptionPolicy Create and the topic already exists.
	// Do: choose another topic name, or set adoptionPolicy AdoptOrCreate (or Adopt) to take the
	// existing topic over.
	ReasonTopicExists = "TopicExists"
	// ReasonTopicIDChanged: the topic was deleted and recreated outside the operator; its id
	// no longer matches status.topicId.
	// Do: check who recreated the topic; to adopt the new one, recreate the ShareQueue (its
	// status.topicId is pinned).
	ReasonTopicIDChanged = "TopicIDChanged"
	// ReasonPartitionCountMismatch: the topic has more partitions than declared.
	// Do: set spec.topic.partitions to at least the topic's partition count: Kafka cannot remove
	// partitions.
	ReasonPartitionCountMismatch = "PartitionCountMismatch"
	// ReasonReplicationFactorMismatch: the topic's RF differs from the declared one; the
	// operator does not reassign replicas of queue topics.
	// Do: set spec.topic.replicationFactor to the topic's, or reassign the replicas with Kafka's
	// tools.
	ReasonReplicationFactorMismatch = "ReplicationFactorMismatch"
	// ReasonKafkaRejected: the broker refused a change (message carries its error).
	// Do: read the broker's error in the message and change the value it names.
	ReasonKafkaRejected = "KafkaRejected"
	// ReasonKafkaUnavailable: a Kafka request failed for a transient reason; retrying.
	// Do: nothing, usually: the operator retries; if it stays, check the brokers.
	ReasonKafkaUnavailable = "KafkaUnavailable"
	// ReasonDriftDetected: live configs differ from the spec and driftPolicy is Report.
	// Do: change the spec to the live value, or set driftPolicy Enforce to write the spec back.
	ReasonDriftDetected = "DriftDetected"

	// ReasonValid: every declared value can be applied as written.
	ReasonValid = "Valid"
	// ReasonOutOfBrokerBounds: a value lies outside the brokers' KIP-1240 min/max bounds and
	// boundsPolicy is Reject; it was not written.
	// Do: change the value to one inside the bound the message names, set boundsPolicy Clamp, or
	// widen the brokers' group.share.min/max.* setting.
	ReasonOutOfBrokerBounds = "OutOfBrokerBounds"
	// ReasonClampedToBrokerBounds: boundsPolicy Clamp wrote a value clamped to a bound.
	// Do: nothing, or change the value to one inside the bound so that what you declared is what
	// applies.
	ReasonClampedToBrokerBounds = "ClampedToBrokerBounds"
	// ReasonUnsupportedByCluster: a field maps to a group config the brokers do not report
	// (for example share.delivery.count.limit before Kafka 4.3).
	// Do: remove the field, or upgrade the brokers to the release that has the config (the message
	// names it).
	ReasonUnsupportedByCluster = "UnsupportedByCluster"
	// ReasonConflict: another resource already owns the topic or the group on this cluster.
	// Do: use another topic or group (spec.topic.name, spec.groupId), or delete the owner the
	// message names; the oldest claimant owns.
	ReasonConflict = "Conflict"
	// ReasonGroupTypeConflict: the group id names a group of another type on this cluster — a
	// classic or consumer (KIP-848) consumer group, or a streams group (KIP-1071) — so it
	// cannot be a share group (KIP-932); the message names the group and its type. Nothing is
	// written to that group and deletion never deletes or alters it.
	// Do: set spec.groupId to an id no other group type uses, or delete that group with Kafka's
	// tools.
	ReasonGroupTypeConflict = "GroupTypeConflict"
	// ReasonNoConflict: this resource owns its topic and group.
	ReasonNoConflict = "NoConflict"
	// ReasonDeletionProtected: deletionProtection holds the Kafka resources and the finalizer.
	// Do: set spec.deletionProtection to false to let the deletion go on.
	ReasonDeletionProtected = "DeletionProtected"
	// ReasonTopicUnderReplicated: some partitions have fewer in-sync replicas than replicas,
	// or the topic's replication factor exceeds the live brokers.
	// Do: bring the missing brokers back, or reassign the partitions.
	ReasonTopicUnderReplicated = "TopicUnderReplicated"
	// ReasonNoDrift: live configs match the spec.
	ReasonNoDrift = "NoDrift"
	// ReasonDriftCorrected: live configs had drifted and were written back (Enforce).
	ReasonDriftCorrected = "DriftCorrected"
	// ReasonConnectionNotPublished: the ShareQueue's spec.connectionConfigMap could not be
	// written: a ConfigMap of that name exists that this queue does not own, or the write
	// failed (the message says which). Do: choose another spec.connectionConfigMap.name, or
	// delete that ConfigMap if it is a leftover; the queue writes its own at the next pass.
	ReasonConnectionNotPublished = "ConnectionNotPublished"
	// ReasonDeleting: the resource is being deleted.
	ReasonDeleting = "Deleting"
)

// Event reasons that name no condition. Each has one meaning.
const (
	// EventTopicDeleted (Warning): a queue's pinned topic was deleted outside the operator; it
	// is created again and its records are gone.
	// Do: find who deletes topics outside the operator; the records of the old topic are gone.
	EventTopicDeleted = "TopicDeleted"
	// EventDeadLetterTopicDeleted (Warning): a route's dead-letter topic was deleted outside
	// the operator; records dead-lettered meanwhile are lost. The route recreates it.
	// Do: find who deletes the dead-letter topic; records dead-lettered while it was gone are
	// lost.
	EventDeadLetterTopicDeleted = "DeadLetterTopicDeleted"
	// EventTopicDeletedByPolicy (Normal): the operator deleted a queue's topic because the
	// ShareQueue was deleted with deletionPolicy Delete.
	EventTopicDeletedByPolicy = "TopicDeletedByPolicy"

	// ReasonMembersPresent: an OffsetReset found members in the share group; Kafka alters
	// share-group offsets only for an empty group (AlterShareGroupOffsets, KIP-932). The
	// message names the member count.
	// Do: stop the queue's consumers (or wait: whenMembersPresent Wait applies the reset once the
	// group is empty).
	ReasonMembersPresent = "MembersPresent"
	// ReasonOffsetsApplying: an OffsetReset's targets are resolved and recorded in status and
	// are being applied.
	ReasonOffsetsApplying = "Applying"
	// ReasonOffsetsReset: an OffsetReset's recorded targets were applied and read back.
	ReasonOffsetsReset = "OffsetsReset"
	// ReasonReadBackMismatch: an OffsetReset's applies were answered without error, yet the
	// group's start offsets read back were not its targets, and no member could have moved
	// them.
	// Do: create another OffsetReset; if it happens again, check the share coordinator's broker
	// logs.
	ReasonReadBackMismatch = "ReadBackMismatch"
)
