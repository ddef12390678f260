package controllers

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// setCondition sets one condition with observedGeneration; LastTransitionTime moves only when
// the status flips (meta.SetStatusCondition).
func setCondition(conds *[]metav1.Condition, typ string, in condInput, generation int64) {
	msg := in.Message
	if len(msg) > 32768 {
		msg = msg[:32765] + "..."
	}
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: typ, Status: in.Status, Reason: in.Reason, Message: msg, ObservedGeneration: generation,
	})
}

// setKstatus sets Ready, Reconciling and Stalled together so GitOps tools read them the same
// way (kstatus): Ready=True with both others False; otherwise Stalled when the user must
// act, Reconciling when the operator is still working or waiting.
func setKstatus(conds *[]metav1.Condition, ready condInput, stalled bool, generation int64) {
	if !suspendedReasons[ready.Reason] {
		setCondition(conds, kqv1.ConditionReady, ready, generation)
	}
	switch {
	case ready.Status == metav1.ConditionTrue:
		setCondition(conds, kqv1.ConditionReconciling, condInput{metav1.ConditionFalse, kqv1.ReasonReady, "reconciled"}, generation)
		setCondition(conds, kqv1.ConditionStalled, condInput{metav1.ConditionFalse, kqv1.ReasonReady, "not stalled"}, generation)
	case suspendedReasons[ready.Reason]:
		heldBack(conds, ready, generation)
		return
	case stalled:
		setCondition(conds, kqv1.ConditionReconciling, condInput{metav1.ConditionFalse, ready.Reason, "waiting for a change to the spec or the cluster"}, generation)
		setCondition(conds, kqv1.ConditionStalled, condInput{metav1.ConditionTrue, ready.Reason, ready.Message}, generation)
	default:
		setCondition(conds, kqv1.ConditionReconciling, condInput{metav1.ConditionTrue, ready.Reason, ready.Message}, generation)
		setCondition(conds, kqv1.ConditionStalled, condInput{metav1.ConditionFalse, ready.Reason, "not stalled"}, generation)
	}
}

// heldBack reports an object whose reconcile mode holds changes back on purpose (Plan,
// ObserveOnly with pending changes; Paused; an invalid mode): the operator is not working
// towards the spec, so Reconciling=False and Stalled=False carry the mode's reason and
// message, and Ready is removed — kstatus (Flux, kpt) has no suspended status and reads a
// False Ready as InProgress, and a Ready from before the mode is no claim about Kafka now.
// kstatus then reads Current, the Argo CD health script Suspended, and `kubectl wait
// --for=condition=Reconciling=false` returns. Pure.
func heldBack(conds *[]metav1.Condition, why condInput, generation int64) {
	meta.RemoveStatusCondition(conds, kqv1.ConditionReady)
	setCondition(conds, kqv1.ConditionReconciling, condInput{metav1.ConditionFalse, why.Reason, why.Message}, generation)
	setCondition(conds, kqv1.ConditionStalled, condInput{metav1.ConditionFalse, why.Reason, "not stalled: changes are held back by annotation " + kqv1.ReconcileAnnotation}, generation)
}

// suspendedReasons are the Ready reasons of the reconcile modes that hold changes back on
// purpose (kafkaqueues.io/reconcile Plan, ObserveOnly): neither progressing nor stalled.
var suspendedReasons = map[string]bool{kqv1.ReasonPlanned: true, kqv1.ReasonObserveOnly: true}

// reconcileInvalid is the mode of an unrecognised kafkaqueues.io/reconcile value: nothing is
// read or written until it is fixed (a typo must not turn a pause into writes).
const reconcileInvalid = "Invalid"

// reconcileMode reads the kafkaqueues.io/reconcile annotation, case-insensitively: Active when
// absent, reconcileInvalid when unrecognised.
func reconcileMode(annotations map[string]string) string {
	v, ok := annotations[kqv1.ReconcileAnnotation]
	if !ok {
		return kqv1.ReconcileActive
	}
	for _, m := range []string{kqv1.ReconcileActive, kqv1.ReconcilePaused, kqv1.ReconcileObserveOnly, kqv1.ReconcilePlan} {
		if strings.EqualFold(strings.TrimSpace(v), m) {
			return m
		}
	}
	return reconcileInvalid
}

// emitEvent records an Event on obj when a recorder is configured.
func emitEvent(rec events.EventRecorder, obj runtime.Object, typ, reason, action, msg string) {
	if rec != nil {
		rec.Eventf(obj, nil, typ, reason, action, "%s", msg)
	}
}
