package controllers

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// The DeadLetterRoute status step: pure functions of what the reconcile planned and applied
// (no client, context or clock).

// routeWaitingReasons are False RouteActive reasons that are waits, not something the user
// must change: Republisher mode waits for the queue's reconciler to reserve the last attempt.
var routeWaitingReasons = map[string]bool{
	kqv1.ReasonDeliveryLimitNotReserved: true,
}

// routeStatus sets TopicReady and RouteActive from the plan and the apply's errors (topicErr
// and groupErr refused by the brokers, transient retriable), and returns Ready and whether
// the route is stalled: a False TopicReady or RouteActive needs the user, except the waits
// in routeWaitingReasons. In Plan and ObserveOnly, pending changes are reported, not made.
func routeStatus(st *kqv1.DeadLetterRouteStatus, gen int64, mode string, plan *routePlan, groupID string, topicErr, groupErr, transient error) (condInput, bool) {
	topicCond, routeCond := plan.TopicReady, plan.RouteActive
	if !plan.Blocked && !plan.Empty() && mode != kqv1.ReconcileActive {
		reason := kqv1.ReasonPlanned
		if mode == kqv1.ReconcileObserveOnly {
			reason = kqv1.ReasonObserveOnly
		}
		routeCond = condInput{metav1.ConditionFalse, reason, fmt.Sprintf("reconcile mode %s (annotation %s on the route or its queue): not applied: %s", mode, kqv1.ReconcileAnnotation, strings.Join(plan.Changes(), "; "))}
		if topicCond.Status == metav1.ConditionTrue && (plan.CreateTopic != nil || plan.GrowPartitionsTo > 0 || len(plan.TopicConfigs) > 0) {
			// The plan's TopicReady describes the topic once written; none is.
			msg := "dead-letter topic " + plan.TopicName + " differs from the spec"
			if plan.CreateTopic != nil {
				msg = "dead-letter topic " + plan.TopicName + " does not exist"
			}
			topicCond = condInput{metav1.ConditionFalse, reason, msg + " (not applied in reconcile mode " + mode + ")"}
		}
	}
	if topicErr != nil {
		topicCond = condInput{metav1.ConditionFalse, kqv1.ReasonKafkaRejected, "the brokers refused spec.topic: " + topicErr.Error()}
		routeCond = condInput{metav1.ConditionFalse, kqv1.ReasonKafkaRejected, "no dead-letter topic: " + topicErr.Error()}
	}
	if groupErr != nil {
		routeCond = condInput{metav1.ConditionFalse, kqv1.ReasonKafkaRejected, fmt.Sprintf("the brokers refused the dead-letter configs of group %s: %v", groupID, groupErr)}
	}
	if transient != nil {
		routeCond = condInput{metav1.ConditionUnknown, kqv1.ReasonKafkaUnavailable, "applying: " + transient.Error()}
	}
	setCondition(&st.Conditions, kqv1.ConditionTopicReady, topicCond, gen)
	setCondition(&st.Conditions, kqv1.ConditionRouteActive, routeCond, gen)
	switch {
	case topicCond.Status != metav1.ConditionTrue && !suspendedReasons[topicCond.Reason]:
		return condInput{metav1.ConditionFalse, topicCond.Reason, topicCond.Message}, topicCond.Status == metav1.ConditionFalse && !routeWaitingReasons[topicCond.Reason]
	case routeCond.Status != metav1.ConditionTrue:
		return condInput{metav1.ConditionFalse, routeCond.Reason, routeCond.Message}, routeCond.Status == metav1.ConditionFalse && !routeWaitingReasons[routeCond.Reason] && !suspendedReasons[routeCond.Reason]
	}
	return condInput{metav1.ConditionTrue, kqv1.ReasonReady, routeCond.Message}, false
}

// routeWaited reports a route waiting on its queue, its cluster or Kafka: TopicReady was not
// evaluated (Unknown), RouteActive and Ready say why (Unknown when Kafka could not be read).
func routeWaited(conds *[]metav1.Condition, gen int64, reason, msg string) condInput {
	in := condInput{metav1.ConditionFalse, reason, msg}
	if reason == kqv1.ReasonKafkaUnavailable {
		in.Status = metav1.ConditionUnknown
	}
	setCondition(conds, kqv1.ConditionTopicReady, condInput{metav1.ConditionUnknown, reason, "not evaluated: " + msg}, gen)
	setCondition(conds, kqv1.ConditionRouteActive, in, gen)
	return in
}

// routeConflictStatus sets Conflict: True with msg (another route owns the queue; this one
// acts for nothing, so it clears its mode, topic, group and cluster) or False when msg is
// empty.
func routeConflictStatus(st *kqv1.DeadLetterRouteStatus, reason, msg string, gen int64) {
	if msg == "" {
		setCondition(&st.Conditions, kqv1.ConditionConflict, condInput{metav1.ConditionFalse, kqv1.ReasonNoConflict,
			fmt.Sprintf("this is the only DeadLetterRoute of ShareQueue %s", st.QueueName)}, gen)
		return
	}
	setCondition(&st.Conditions, kqv1.ConditionConflict, condInput{metav1.ConditionTrue, reason, msg}, gen)
	setCondition(&st.Conditions, kqv1.ConditionRouteActive, condInput{metav1.ConditionFalse, reason, msg}, gen)
	st.EffectiveMode, st.TopicName, st.GroupID, st.ClusterName = "", "", "", ""
}
