package controllers

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// The ShareQueue status step: pure functions of what the reconcile observed, planned and
// applied. They set conditions and status fields on the status they are given and return
// the Ready verdict plus the side effects (events, metrics) for the controller to perform;
// no client, context or clock (meta.SetStatusCondition stamps LastTransitionTime).

// stallingReasons need a change from the user; other False reasons are waits.
var stallingReasons = map[string]bool{
	kqv1.ReasonOutOfBrokerBounds: true, kqv1.ReasonUnsupportedByCluster: true, kqv1.ReasonKafkaRejected: true,
	kqv1.ReasonTopicExists: true, kqv1.ReasonTopicIDChanged: true, kqv1.ReasonPartitionCountMismatch: true,
	kqv1.ReasonReplicationFactorMismatch: true, kqv1.ReasonConflict: true, kqv1.ReasonDeletionProtected: true,
	kqv1.ReasonGroupTypeConflict: true,
}

// queueReport is what the status step decided besides the status itself.
type queueReport struct {
	Ready   condInput
	Stalled bool
	// DriftDetected is the message of a new DriftDetected Warning event ("" for none).
	DriftDetected string
	// DriftCorrected is the message of a DriftCorrected Normal event ("" for none);
	// CorrectedTopic and CorrectedGroup say which kinds of drift were written back.
	DriftCorrected                 string
	CorrectedTopic, CorrectedGroup bool
	// Rejections are the group configs newly refused as out of the brokers' bounds.
	Rejections []string
}

// queueStatus writes the plan's and the apply's outcome into st (one full pass at generation
// gen in reconcile mode mode) and decides Ready.
func queueStatus(st *kqv1.ShareQueueStatus, gen int64, mode string, plan *queuePlan, res applyResult, group *kqv1.QueueGroupStatus) queueReport {
	var rep queueReport
	active := mode == kqv1.ReconcileActive
	switch {
	case res.topicCreated:
		st.TopicID, st.TopicCreated, st.TopicCreationStarted = res.topicID, true, nil
	case plan.AdoptCreated && active:
		st.TopicID, st.TopicCreated, st.TopicCreationStarted = res.topicID, true, nil
	case !plan.Blocked && st.TopicID == "" && res.topicID != "" && active:
		st.TopicID = res.topicID // adopted and pinned: a topic recreated outside the operator is detected, not adopted
	}
	if res.createNotMade && res.intentFresh {
		// This reconcile recorded the intent and its CreateTopics certainly made no topic
		// (refused, or withdrawn unsent): the intent claims nothing, so a topic someone else
		// creates is reported TopicExists, never adopted. An intent from an earlier
		// reconcile stays: that CreateTopics may have created the topic although its answer
		// was lost (a timeout while the controller was still creating it), and the next
		// observe adopts it as this queue's own (AdoptCreated) instead of reporting
		// TopicExists.
		st.TopicCreationStarted = nil
	}
	if active && !plan.Blocked && res.topicErr == nil && res.transient == nil {
		st.ManagedTopicConfigs = plan.ManagedTopicConfigs
	}
	st.Partitions, st.ReplicationFactor = res.partitions, res.rf
	st.Group = group

	topicCond, groupCond, validCond := plan.TopicReady, plan.GroupConfig, plan.ConfigValid
	effective := plan.Effective
	if !active {
		effective = plan.EffectiveNow
	}
	// In Plan and ObserveOnly the writes were only validated (ValidateOnly): a refusal is
	// reported exactly as in Active, worded as what the brokers would do.
	refused, checked := "the brokers refused", ""
	if !active {
		refused, checked = "the brokers would refuse", " (checked with ValidateOnly; nothing was written)"
	}
	if res.topicErr != nil {
		topicCond = condInput{metav1.ConditionFalse, kqv1.ReasonKafkaRejected, refused + " spec.topic (name, partitions, replicationFactor, config)" + checked + ": " + res.topicErr.Error()}
		if plan.CreateTopic != nil {
			st.Partitions = 0
		}
	}
	if res.groupErr != nil {
		groupCond = condInput{metav1.ConditionFalse, kqv1.ReasonKafkaRejected, refused + " spec.delivery (" + changesOf(plan.GroupConfigs, "group "+plan.GroupID) + ")" + checked + ": " + res.groupErr.Error()}
		if kafka.IsInvalidConfig(res.groupErr) {
			validCond = groupCond
		}
		effective = plan.EffectiveNow
	}
	if res.transient != nil {
		if plan.CreateTopic != nil && res.topicID == "" {
			topicCond = condInput{metav1.ConditionUnknown, kqv1.ReasonKafkaUnavailable, res.transient.Error()}
		}
		if len(plan.GroupConfigs) > 0 {
			groupCond = condInput{metav1.ConditionUnknown, kqv1.ReasonKafkaUnavailable, res.transient.Error()}
			effective = plan.EffectiveNow
		}
	}
	st.Effective = &effective
	st.Capacity = capacityOf(st.Partitions, effective.MaxInFlightPerPartition, plan.Bounds)

	prevReady := findCondition(st.Conditions, kqv1.ConditionReady)
	applied := res.topicErr == nil && res.groupErr == nil && res.transient == nil
	rep.DriftDetected, rep.DriftCorrected = driftStatus(&st.Conditions, gen, mode, plan, applied)
	if rep.DriftCorrected != "" {
		rep.CorrectedTopic = len(plan.TopicConfigs) > 0 || plan.GrowPartitionsTo > 0 || plan.CreateTopic != nil
		rep.CorrectedGroup = len(plan.GroupConfigs) > 0
	}
	if active && (prevReady == nil || prevReady.Reason != kqv1.ReasonOutOfBrokerBounds || prevReady.ObservedGeneration != gen) {
		rep.Rejections = plan.Rejected
	}

	if !active {
		topicCond, groupCond = unappliedConditions(mode, plan, topicCond, groupCond)
	}
	setCondition(&st.Conditions, kqv1.ConditionTopicReady, topicCond, gen)
	setCondition(&st.Conditions, kqv1.ConditionGroupConfigured, groupCond, gen)
	setCondition(&st.Conditions, kqv1.ConditionConfigValid, validCond, gen)
	rep.Ready = queueReady(topicCond, groupCond, validCond, plan.ShareState, mode, st)
	rep.Stalled = stallingReasons[rep.Ready.Reason]
	return rep
}

// unappliedConditions turns the plan's TopicReady and GroupConfigured verdicts, which describe
// the queue once its writes are made, into what Kafka holds now when the mode (Plan,
// ObserveOnly) makes none: a True verdict with a pending write on the topic (create, grow,
// configs) or the group becomes False with reason Planned or ObserveOnly, naming the
// writes. A refusal or any other False verdict is kept. Pure.
func unappliedConditions(mode string, plan *queuePlan, topic, group condInput) (condInput, condInput) {
	reason := kqv1.ReasonPlanned
	if mode == kqv1.ReconcileObserveOnly {
		reason = kqv1.ReasonObserveOnly
	}
	var topicChanges, groupChanges []string
	for _, c := range plan.Changes() {
		if strings.HasPrefix(c, "group "+plan.GroupID+":") {
			groupChanges = append(groupChanges, c)
		} else {
			topicChanges = append(topicChanges, c)
		}
	}
	why := fmt.Sprintf(" (annotation %s=%s: computed in status.plannedChanges, not applied)", kqv1.ReconcileAnnotation, mode)
	if topic.Status == metav1.ConditionTrue && len(topicChanges) > 0 {
		msg := "topic " + plan.TopicName + " differs from the spec"
		if plan.CreateTopic != nil {
			msg = "topic " + plan.TopicName + " does not exist"
		}
		topic = condInput{metav1.ConditionFalse, reason, msg + why + ": " + strings.Join(topicChanges, "; ")}
	}
	if group.Status == metav1.ConditionTrue && len(groupChanges) > 0 {
		group = condInput{metav1.ConditionFalse, reason, "share group " + plan.GroupID + " configs differ from the spec" + why + ": " + strings.Join(groupChanges, "; ")}
	}
	return topic, group
}

// driftStatus sets DriftDetected. Report leaves drift and says so (a Warning when the message
// is new); Enforce corrects it: a non-empty plan, applied without error, on a queue that was
// already Ready at this generation is drift, not a spec change. It returns the messages of
// the DriftDetected and DriftCorrected events to record ("" for none).
func driftStatus(conds *[]metav1.Condition, gen int64, mode string, plan *queuePlan, applied bool) (detected, corrected string) {
	prevReady := findCondition(*conds, kqv1.ConditionReady)
	wasSettled := prevReady != nil && prevReady.Status == metav1.ConditionTrue && prevReady.ObservedGeneration == gen
	prevDrift := findCondition(*conds, kqv1.ConditionDriftDetected)
	switch {
	case len(plan.Drift) > 0:
		msg := "driftPolicy Report, not corrected: " + strings.Join(plan.Drift, "; ")
		if prevDrift == nil || prevDrift.Message != msg {
			detected = msg
		}
		setCondition(conds, kqv1.ConditionDriftDetected, condInput{metav1.ConditionTrue, kqv1.ReasonDriftDetected, msg}, gen)
	case mode == kqv1.ReconcileActive && wasSettled && !plan.Empty() && applied:
		corrected = "corrected drift: " + strings.Join(plan.Changes(), "; ")
		setCondition(conds, kqv1.ConditionDriftDetected, condInput{metav1.ConditionFalse, kqv1.ReasonDriftCorrected, corrected}, gen)
	case prevDrift == nil || prevDrift.Reason == kqv1.ReasonDriftDetected:
		setCondition(conds, kqv1.ConditionDriftDetected, condInput{metav1.ConditionFalse, kqv1.ReasonNoDrift, "live configs match the spec"}, gen)
	}
	return detected, corrected
}

// queueReady is Ready's precedence: the topic first, then share groups being off, then
// brokers that cannot hold share-group state (sharePrecondition), then ConfigValid, then
// GroupConfigured. In Plan and ObserveOnly, pending changes make Ready
// False with reason Planned or ObserveOnly; its message adds the brokers' refusals of them.
func queueReady(topic, group, valid, shareState condInput, mode string, st *kqv1.ShareQueueStatus) condInput {
	if mode != kqv1.ReconcileActive && len(st.PlannedChanges) > 0 {
		reason := kqv1.ReasonPlanned
		if mode == kqv1.ReconcileObserveOnly {
			reason = kqv1.ReasonObserveOnly
		}
		msg := fmt.Sprintf("annotation kafkaqueues.io/reconcile=%s: %d change(s) computed in status.plannedChanges, none applied", mode, len(st.PlannedChanges))
		// The brokers' verdict on them (ValidateOnly) is in TopicReady / GroupConfigured.
		for _, c := range []condInput{topic, group} {
			if c.Reason == kqv1.ReasonKafkaRejected {
				msg += "; " + c.Message
			}
		}
		return condInput{metav1.ConditionFalse, reason, msg}
	}
	switch {
	case topic.Status != metav1.ConditionTrue:
		return condInput{metav1.ConditionFalse, topic.Reason, topic.Message}
	case group.Reason == kqv1.ReasonShareGroupsDisabled:
		return condInput{metav1.ConditionFalse, group.Reason, group.Message}
	case shareState.Status == metav1.ConditionFalse:
		return condInput{metav1.ConditionFalse, shareState.Reason, shareState.Message}
	case valid.Status != metav1.ConditionTrue:
		return condInput{metav1.ConditionFalse, valid.Reason, valid.Message}
	case group.Status != metav1.ConditionTrue:
		return condInput{metav1.ConditionFalse, group.Reason, group.Message}
	}
	return condInput{metav1.ConditionTrue, kqv1.ReasonReady, fmt.Sprintf("topic %s (%d partitions) and share group %s are configured", st.TopicName, st.Partitions, st.GroupID)}
}

// queueWaited reports a queue held back by something outside it (cluster missing or not
// connected, Kafka unavailable): TopicReady says why (Unknown when Kafka could not be read),
// and GroupConfigured and ConfigValid, when last evaluated at another generation, become
// Unknown instead of repeating that generation's verdict. It returns Ready.
func queueWaited(conds *[]metav1.Condition, gen int64, reason, msg string) condInput {
	in := condInput{metav1.ConditionFalse, reason, msg}
	if reason == kqv1.ReasonKafkaUnavailable {
		in.Status = metav1.ConditionUnknown
	}
	setCondition(conds, kqv1.ConditionTopicReady, in, gen)
	markNotEvaluated(conds, gen, reason, msg, kqv1.ConditionGroupConfigured, kqv1.ConditionConfigValid)
	return condInput{metav1.ConditionFalse, reason, msg}
}

// conflictStatus sets Conflict: True with reason and msg (another resource owns the topic or
// group, or the group id is another type's; the topic and group conditions say so, and
// nothing is planned) or False when msg is empty.
func conflictStatus(st *kqv1.ShareQueueStatus, reason, msg string, gen int64) {
	if msg == "" {
		setCondition(&st.Conditions, kqv1.ConditionConflict, condInput{metav1.ConditionFalse, kqv1.ReasonNoConflict,
			fmt.Sprintf("this ShareQueue owns topic %s and group %s", st.TopicName, st.GroupID)}, gen)
		return
	}
	in := condInput{metav1.ConditionTrue, reason, msg}
	setCondition(&st.Conditions, kqv1.ConditionConflict, in, gen)
	in.Status = metav1.ConditionFalse
	setCondition(&st.Conditions, kqv1.ConditionTopicReady, in, gen)
	setCondition(&st.Conditions, kqv1.ConditionGroupConfigured, in, gen)
	st.PlannedChanges = nil
}
