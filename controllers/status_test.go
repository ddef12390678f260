package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// Table tests of the status steps: pure functions, no apiserver, no broker.

var (
	condTrue   = condInput{metav1.ConditionTrue, kqv1.ReasonReady, "ok"}
	condValid  = condInput{metav1.ConditionTrue, kqv1.ReasonValid, "valid"}
	topicTaken = condInput{metav1.ConditionFalse, kqv1.ReasonTopicExists, "topic exists"}
	shareOff   = condInput{metav1.ConditionFalse, kqv1.ReasonShareGroupsDisabled, "share.version 0"}
	outOfBound = condInput{metav1.ConditionFalse, kqv1.ReasonOutOfBrokerBounds, "too long"}
	groupUnkn  = condInput{metav1.ConditionUnknown, kqv1.ReasonKafkaUnavailable, "group configs could not be read"}
	stateOK    = condInput{metav1.ConditionTrue, kqv1.ReasonReady, "the brokers can hold share-group state"}
	stateNone  = condInput{metav1.ConditionFalse, kqv1.ReasonShareStateUncreatable, "set share.coordinator.state.topic.replication.factor=1"}
)

func TestQueueReadyPrecedence(t *testing.T) {
	cases := []struct {
		name               string
		topic, group, cv   condInput
		state              condInput
		mode               string
		planned            []string
		wantStatus         metav1.ConditionStatus
		wantReason         string
		wantStalled        bool
		wantMessageContain string
	}{
		{"everything in place", condTrue, condTrue, condValid, stateOK, kqv1.ReconcileActive, nil, metav1.ConditionTrue, kqv1.ReasonReady, false, "topic orders (3 partitions) and share group orders are configured"},
		{"the topic comes first", topicTaken, shareOff, outOfBound, stateOK, kqv1.ReconcileActive, nil, metav1.ConditionFalse, kqv1.ReasonTopicExists, true, "topic exists"},
		{"share groups off before ConfigValid", condTrue, shareOff, outOfBound, stateOK, kqv1.ReconcileActive, nil, metav1.ConditionFalse, kqv1.ReasonShareGroupsDisabled, false, "share.version 0"},
		{"ConfigValid before GroupConfigured", condTrue, groupUnkn, outOfBound, stateOK, kqv1.ReconcileActive, nil, metav1.ConditionFalse, kqv1.ReasonOutOfBrokerBounds, true, "too long"},
		// Regression (issue 30, case 1): a queue on brokers that cannot create
		// __share_group_state was Ready while its consumers received nothing.
		{"share state that cannot exist before ConfigValid", condTrue, condTrue, outOfBound, stateNone, kqv1.ReconcileActive, nil, metav1.ConditionFalse, kqv1.ReasonShareStateUncreatable, false, "replication.factor=1"},
		{"share groups off before share state", condTrue, shareOff, condValid, stateNone, kqv1.ReconcileActive, nil, metav1.ConditionFalse, kqv1.ReasonShareGroupsDisabled, false, "share.version 0"},
		{"GroupConfigured last", condTrue, groupUnkn, condValid, stateOK, kqv1.ReconcileActive, nil, metav1.ConditionFalse, kqv1.ReasonKafkaUnavailable, false, "could not be read"},
		{"Plan with changes", topicTaken, condTrue, condValid, stateOK, kqv1.ReconcilePlan, []string{"create topic"}, metav1.ConditionFalse, kqv1.ReasonPlanned, false, "reconcile=Plan: 1 change(s) computed"},
		{"ObserveOnly with changes", condTrue, condTrue, condValid, stateOK, kqv1.ReconcileObserveOnly, []string{"a", "b"}, metav1.ConditionFalse, kqv1.ReasonObserveOnly, false, "2 change(s)"},
		{"Plan without changes is judged as Active", condTrue, condTrue, outOfBound, stateOK, kqv1.ReconcilePlan, nil, metav1.ConditionFalse, kqv1.ReasonOutOfBrokerBounds, true, "too long"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &kqv1.ShareQueueStatus{TopicName: "orders", GroupID: "orders", Partitions: 3, PlannedChanges: c.planned}
			got := queueReady(c.topic, c.group, c.cv, c.state, c.mode, st)
			if got.Status != c.wantStatus || got.Reason != c.wantReason || !strings.Contains(got.Message, c.wantMessageContain) {
				t.Errorf("Ready %+v, want %s/%s containing %q", got, c.wantStatus, c.wantReason, c.wantMessageContain)
			}
			if stallingReasons[got.Reason] != c.wantStalled {
				t.Errorf("stalled %v, want %v", stallingReasons[got.Reason], c.wantStalled)
			}
		})
	}
}

func TestSharePrecondition(t *testing.T) {
	uncreatable := metav1.Condition{Type: kqv1.ConditionShareStateReplicated, Status: metav1.ConditionFalse, Reason: kqv1.ReasonShareStateUncreatable,
		Message: "__share_group_state does not exist and cannot be created: set share.coordinator.state.topic.replication.factor=1"}
	notYet := metav1.Condition{Type: kqv1.ConditionShareStateReplicated, Status: metav1.ConditionTrue, Reason: kqv1.ReasonShareStateNotCreated}
	underReplicated := metav1.Condition{Type: kqv1.ConditionShareStateReplicated, Status: metav1.ConditionFalse, Reason: "UnderReplicated"}
	cases := []struct {
		name       string
		conds      []metav1.Condition
		wantStatus metav1.ConditionStatus
		wantMsg    string
	}{
		{"no verdict yet", nil, metav1.ConditionTrue, ""},
		{"created on first use", []metav1.Condition{notYet}, metav1.ConditionTrue, ""},
		// Under-replicated state still serves share groups: the KafkaCluster reports it.
		{"under-replicated", []metav1.Condition{underReplicated}, metav1.ConditionTrue, ""},
		{"cannot be created", []metav1.Condition{uncreatable}, metav1.ConditionFalse, "receive nothing: the KafkaCluster reports __share_group_state does not exist and cannot be created: set share.coordinator.state.topic.replication.factor=1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := sharePrecondition(kqv1.KafkaClusterStatus{Conditions: c.conds})
			if got.Status != c.wantStatus || !strings.Contains(got.Message, c.wantMsg) {
				t.Errorf("sharePrecondition %+v, want %s containing %q", got, c.wantStatus, c.wantMsg)
			}
		})
	}
}

func TestQueueDriftStatus(t *testing.T) {
	const gen = 2
	readyAt := func(g int64) metav1.Condition {
		return metav1.Condition{Type: kqv1.ConditionReady, Status: metav1.ConditionTrue, Reason: kqv1.ReasonReady, ObservedGeneration: g}
	}
	drift := func(reason, msg string) metav1.Condition {
		return metav1.Condition{Type: kqv1.ConditionDriftDetected, Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: gen}
	}
	withWrite := &queuePlan{TopicName: "orders", GroupID: "orders", GroupConfigs: []kafka.AlterConfig{{Name: "share.delivery.count.limit", Op: kafka.OpSet, Value: "4"}}}
	reported := &queuePlan{Drift: []string{"group orders: share.delivery.count.limit is 7, spec wants 4"}}
	empty := &queuePlan{}
	reportMsg := "driftPolicy Report, not corrected: group orders: share.delivery.count.limit is 7, spec wants 4"
	cases := []struct {
		name          string
		prev          []metav1.Condition
		mode          string
		plan          *queuePlan
		applied       bool
		wantReason    string
		wantDetected  bool
		wantCorrected bool
	}{
		{"Report: detected, with a Warning", nil, kqv1.ReconcileActive, reported, true, kqv1.ReasonDriftDetected, true, false},
		{"Report: the same drift again, no second Warning", []metav1.Condition{{Type: kqv1.ConditionDriftDetected, Status: metav1.ConditionTrue, Reason: kqv1.ReasonDriftDetected, Message: reportMsg}}, kqv1.ReconcileActive, reported, true, kqv1.ReasonDriftDetected, false, false},
		{"Enforce on a queue Ready at this generation: corrected", []metav1.Condition{readyAt(gen)}, kqv1.ReconcileActive, withWrite, true, kqv1.ReasonDriftCorrected, false, true},
		{"a spec change (Ready at an older generation) is not drift", []metav1.Condition{readyAt(gen - 1)}, kqv1.ReconcileActive, withWrite, true, kqv1.ReasonNoDrift, false, false},
		{"a write that failed corrected nothing", []metav1.Condition{readyAt(gen)}, kqv1.ReconcileActive, withWrite, false, kqv1.ReasonNoDrift, false, false},
		{"Plan corrects nothing", []metav1.Condition{readyAt(gen)}, kqv1.ReconcilePlan, withWrite, true, kqv1.ReasonNoDrift, false, false},
		{"an earlier correction stays reported", []metav1.Condition{readyAt(gen), drift(kqv1.ReasonDriftCorrected, "corrected drift: x")}, kqv1.ReconcileActive, empty, true, kqv1.ReasonDriftCorrected, false, false},
		{"detected drift that went away", []metav1.Condition{{Type: kqv1.ConditionDriftDetected, Status: metav1.ConditionTrue, Reason: kqv1.ReasonDriftDetected}}, kqv1.ReconcileActive, empty, true, kqv1.ReasonNoDrift, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conds := append([]metav1.Condition(nil), c.prev...)
			detected, corrected := driftStatus(&conds, gen, c.mode, c.plan, c.applied)
			got := findCondition(conds, kqv1.ConditionDriftDetected)
			if got == nil || got.Reason != c.wantReason {
				t.Fatalf("DriftDetected %+v, want reason %s", got, c.wantReason)
			}
			if (detected != "") != c.wantDetected || (corrected != "") != c.wantCorrected {
				t.Errorf("events: detected %q corrected %q", detected, corrected)
			}
			if c.wantCorrected && corrected != "corrected drift: group orders: set share.delivery.count.limit=4" {
				t.Errorf("corrected message %q", corrected)
			}
		})
	}
}

func TestQueueStatusAfterApply(t *testing.T) {
	now := &kqv1.EffectiveValue{Config: "share.delivery.count.limit", Value: "5", Source: kqv1.SourceBrokerDefault}
	after := &kqv1.EffectiveValue{Config: "share.delivery.count.limit", Value: "4", Source: kqv1.SourceGroupOverride}
	plan := func() *queuePlan {
		return &queuePlan{TopicName: "orders", GroupID: "orders", Partitions: 3,
			GroupConfigs: []kafka.AlterConfig{{Name: "share.delivery.count.limit", Op: kafka.OpSet, Value: "4"}},
			TopicReady:   condTrue, GroupConfig: condTrue, ConfigValid: condValid,
			Effective: kqv1.EffectiveDelivery{MaxDeliveryAttempts: after}, EffectiveNow: kqv1.EffectiveDelivery{MaxDeliveryAttempts: now},
			ManagedTopicConfigs: []string{"retention.ms"}}
	}
	invalid := &kafka.Error{Op: "IncrementalAlterConfigs", Err: kafka.ErrInvalidConfig}
	cases := []struct {
		name                  string
		mode                  string
		res                   applyResult
		wantReady, wantReason string
		wantStalled           bool
		wantEffective         string
		check                 func(t *testing.T, st *kqv1.ShareQueueStatus)
	}{
		{name: "applied: the new values are effective, the adopted topic is pinned", mode: kqv1.ReconcileActive, res: applyResult{topicID: "id1", partitions: 3},
			wantReady: "True", wantReason: kqv1.ReasonReady, wantEffective: "4",
			check: func(t *testing.T, st *kqv1.ShareQueueStatus) {
				if st.TopicID != "id1" || len(st.ManagedTopicConfigs) != 1 {
					t.Errorf("topicId %q managed %v", st.TopicID, st.ManagedTopicConfigs)
				}
			}},
		// Issue 19 case 3: in Plan no condition claims a write that was not made.
		{name: "Plan: the values in force are shown, nothing is pinned or claimed", mode: kqv1.ReconcilePlan, res: applyResult{topicID: "id1", partitions: 3},
			wantReady: "False", wantReason: kqv1.ReasonPlanned, wantEffective: "5",
			check: func(t *testing.T, st *kqv1.ShareQueueStatus) {
				if st.TopicID != "" || st.ManagedTopicConfigs != nil {
					t.Errorf("Plan pinned topicId %q or managed %v", st.TopicID, st.ManagedTopicConfigs)
				}
				if c := findCondition(st.Conditions, kqv1.ConditionGroupConfigured); c == nil || c.Status != metav1.ConditionFalse || c.Reason != kqv1.ReasonPlanned ||
					!strings.Contains(c.Message, "set share.delivery.count.limit=4") {
					t.Errorf("GroupConfigured %+v, want False/Planned naming the unwritten config", c)
				}
			}},
		{name: "the brokers refused an invalid group config: ConfigValid says so", mode: kqv1.ReconcileActive, res: applyResult{topicID: "id1", partitions: 3, groupErr: invalid},
			wantReady: "False", wantReason: kqv1.ReasonKafkaRejected, wantStalled: true, wantEffective: "5",
			check: func(t *testing.T, st *kqv1.ShareQueueStatus) {
				if c := findCondition(st.Conditions, kqv1.ConditionConfigValid); c == nil || c.Reason != kqv1.ReasonKafkaRejected {
					t.Errorf("ConfigValid %+v", c)
				}
			}},
		{name: "the brokers refused the topic", mode: kqv1.ReconcileActive, res: applyResult{topicID: "id1", partitions: 3, topicErr: errors.New("policy violation")},
			wantReady: "False", wantReason: kqv1.ReasonKafkaRejected, wantStalled: true, wantEffective: "4",
			check: func(t *testing.T, st *kqv1.ShareQueueStatus) {
				if st.ManagedTopicConfigs != nil {
					t.Errorf("a refused topic write recorded managed configs %v", st.ManagedTopicConfigs)
				}
			}},
		{name: "a retriable failure: GroupConfigured Unknown, a wait", mode: kqv1.ReconcileActive, res: applyResult{topicID: "id1", partitions: 3, transient: errors.New("coordinator loading")},
			wantReady: "False", wantReason: kqv1.ReasonKafkaUnavailable, wantEffective: "5",
			check: func(t *testing.T, st *kqv1.ShareQueueStatus) {
				if c := findCondition(st.Conditions, kqv1.ConditionGroupConfigured); c == nil || c.Status != metav1.ConditionUnknown {
					t.Errorf("GroupConfigured %+v", c)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &kqv1.ShareQueueStatus{TopicName: "orders", GroupID: "orders"}
			rep := queueStatus(st, 1, c.mode, plan(), c.res, nil)
			if string(rep.Ready.Status) != c.wantReady || rep.Ready.Reason != c.wantReason || rep.Stalled != c.wantStalled {
				t.Errorf("Ready %+v stalled %v, want %s/%s stalled %v", rep.Ready, rep.Stalled, c.wantReady, c.wantReason, c.wantStalled)
			}
			if e := st.Effective; e == nil || e.MaxDeliveryAttempts == nil || e.MaxDeliveryAttempts.Value != c.wantEffective {
				t.Errorf("effective %+v, want maxDeliveryAttempts %s", e, c.wantEffective)
			}
			for _, typ := range []string{kqv1.ConditionTopicReady, kqv1.ConditionGroupConfigured, kqv1.ConditionConfigValid, kqv1.ConditionDriftDetected} {
				if findCondition(st.Conditions, typ) == nil {
					t.Errorf("%s not set", typ)
				}
			}
			c.check(t, st)
		})
	}
}

// Conditions a wait keeps from being evaluated say Unknown rather than repeat an older
// generation's verdict; those already evaluated at this generation stay.
func TestWaitedMarksConditionsNotEvaluated(t *testing.T) {
	old := func(typ string, g int64) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: kqv1.ReasonReady, ObservedGeneration: g}
	}
	cases := []struct {
		name        string
		reason      string
		prevGen     int64
		wantTopic   metav1.ConditionStatus
		wantOthers  metav1.ConditionStatus
		wantReadyIs metav1.ConditionStatus
	}{
		{"cluster missing, conditions of an older generation", kqv1.ReasonClusterNotFound, 1, metav1.ConditionFalse, metav1.ConditionUnknown, metav1.ConditionFalse},
		{"Kafka unavailable: TopicReady Unknown", kqv1.ReasonKafkaUnavailable, 1, metav1.ConditionUnknown, metav1.ConditionUnknown, metav1.ConditionFalse},
		{"conditions of this generation stay", kqv1.ReasonClusterNotReady, 2, metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conds := []metav1.Condition{old(kqv1.ConditionGroupConfigured, c.prevGen), old(kqv1.ConditionConfigValid, c.prevGen)}
			ready := queueWaited(&conds, 2, c.reason, "why")
			if ready.Status != c.wantReadyIs || ready.Reason != c.reason {
				t.Errorf("Ready %+v", ready)
			}
			if got := findCondition(conds, kqv1.ConditionTopicReady); got.Status != c.wantTopic {
				t.Errorf("TopicReady %+v, want %s", got, c.wantTopic)
			}
			for _, typ := range []string{kqv1.ConditionGroupConfigured, kqv1.ConditionConfigValid} {
				if got := findCondition(conds, typ); got.Status != c.wantOthers || got.ObservedGeneration != 2 {
					t.Errorf("%s %+v, want %s at generation 2", typ, got, c.wantOthers)
				}
			}
		})
	}
	// A route's TopicReady is never evaluated while it waits; Ready follows RouteActive.
	var conds []metav1.Condition
	if ready := routeWaited(&conds, 1, kqv1.ReasonKafkaUnavailable, "why"); ready.Status != metav1.ConditionUnknown {
		t.Errorf("route Ready %+v, want Unknown", ready)
	}
	if c := findCondition(conds, kqv1.ConditionTopicReady); c.Status != metav1.ConditionUnknown || !strings.HasPrefix(c.Message, "not evaluated: ") {
		t.Errorf("route TopicReady %+v", c)
	}
}

func TestPausedStatus(t *testing.T) {
	ready := metav1.Condition{Type: kqv1.ConditionReady, Status: metav1.ConditionTrue, Reason: kqv1.ReasonReady, ObservedGeneration: 1}
	for _, c := range []struct {
		mode, annotation, wantReason, wantInMessage string
	}{
		{kqv1.ReconcilePaused, "paused", kqv1.ReasonPaused, "nothing is read or written"},
		{reconcileInvalid, "Pasued", kqv1.ReasonInvalidReconcileMode, `"Pasued" is not one of Active, Paused, ObserveOnly, Plan`},
	} {
		conds := []metav1.Condition{ready}
		pausedStatus(&conds, c.mode, c.annotation, 2)
		rec := findCondition(conds, kqv1.ConditionReconciling)
		if rec == nil || rec.Status != metav1.ConditionFalse || rec.Reason != c.wantReason || !strings.Contains(rec.Message, c.wantInMessage) {
			t.Errorf("%s: Reconciling %+v", c.mode, rec)
		}
		// Nothing was observed: no Ready claim (kstatus reads a False one as InProgress).
		if r := findCondition(conds, kqv1.ConditionReady); r != nil {
			t.Errorf("%s: Ready %+v kept; a paused object makes no claim about Kafka", c.mode, r)
		}
		if st := findCondition(conds, kqv1.ConditionStalled); st == nil || st.Status != metav1.ConditionFalse || st.Reason != c.wantReason {
			t.Errorf("%s: Stalled %+v, want False/%s", c.mode, st, c.wantReason)
		}
	}
}

func TestRouteStatus(t *testing.T) {
	active := condInput{metav1.ConditionTrue, kqv1.ReasonBrokerNative, "the brokers write"}
	notReserved := condInput{metav1.ConditionFalse, kqv1.ReasonDeliveryLimitNotReserved, "limit is 5"}
	unsupported := condInput{metav1.ConditionFalse, kqv1.ReasonModeUnsupported, "share.version 1"}
	write := &routePlan{TopicName: "dlq.orders", GroupConfigs: []kafka.AlterConfig{{Name: dlqTopicNameConfig, Op: kafka.OpSet, Value: "dlq.orders"}}, TopicReady: condTrue, RouteActive: active}
	cases := []struct {
		name                  string
		mode                  string
		plan                  *routePlan
		topicErr, transient   error
		wantStatus            metav1.ConditionStatus
		wantReason            string
		wantStalled           bool
		wantRouteActiveReason string
	}{
		{"in place", kqv1.ReconcileActive, &routePlan{TopicReady: condTrue, RouteActive: active}, nil, nil, metav1.ConditionTrue, kqv1.ReasonReady, false, kqv1.ReasonBrokerNative},
		// Regression: a Republisher route waiting for the queue to reserve the last attempt
		// was Stalled, which Argo CD shows as Degraded during every normal start.
		{"the reserved attempt is a wait, not a stall", kqv1.ReconcileActive, &routePlan{TopicReady: condTrue, RouteActive: notReserved}, nil, nil, metav1.ConditionFalse, kqv1.ReasonDeliveryLimitNotReserved, false, kqv1.ReasonDeliveryLimitNotReserved},
		{"an unsupported mode needs the user", kqv1.ReconcileActive, &routePlan{Blocked: true, TopicReady: condInput{metav1.ConditionUnknown, kqv1.ReasonModeUnsupported, "n/a"}, RouteActive: unsupported}, nil, nil, metav1.ConditionFalse, kqv1.ReasonModeUnsupported, false, kqv1.ReasonModeUnsupported},
		// Plan holds changes back on purpose: not stalled (Argo CD would show Degraded).
		{"Plan reports the changes", kqv1.ReconcilePlan, write, nil, nil, metav1.ConditionFalse, kqv1.ReasonPlanned, false, kqv1.ReasonPlanned},
		{"the brokers refused the topic", kqv1.ReconcileActive, write, errors.New("policy"), nil, metav1.ConditionFalse, kqv1.ReasonKafkaRejected, true, kqv1.ReasonKafkaRejected},
		{"a retriable failure is a wait", kqv1.ReconcileActive, write, nil, errors.New("timeout"), metav1.ConditionFalse, kqv1.ReasonKafkaUnavailable, false, kqv1.ReasonKafkaUnavailable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &kqv1.DeadLetterRouteStatus{}
			ready, stalled := routeStatus(st, 1, c.mode, c.plan, "orders", c.topicErr, nil, c.transient)
			if ready.Status != c.wantStatus || ready.Reason != c.wantReason || stalled != c.wantStalled {
				t.Errorf("Ready %+v stalled %v, want %s/%s stalled %v", ready, stalled, c.wantStatus, c.wantReason, c.wantStalled)
			}
			if ra := findCondition(st.Conditions, kqv1.ConditionRouteActive); ra == nil || ra.Reason != c.wantRouteActiveReason {
				t.Errorf("RouteActive %+v, want reason %s", ra, c.wantRouteActiveReason)
			}
		})
	}
}

// The shared summarize step, with a fake client and recorder: Ready, Reconciling and Stalled
// from the outcome, one Warning per new failure reason, the requeue, one status patch.
func TestSummarize(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = kqv1.AddToScheme(scheme)
	route := func(prevReason string) *kqv1.DeadLetterRoute {
		d := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "r", Generation: 1}}
		if prevReason != "" {
			d.Status.Conditions = []metav1.Condition{{Type: kqv1.ConditionReady, Status: metav1.ConditionFalse, Reason: prevReason, LastTransitionTime: metav1.Now()}}
		}
		return d
	}
	cause := errors.New("dial tcp: refused")
	cases := []struct {
		name        string
		prevReason  string
		outcome     func(s *scope) error
		wantReady   metav1.ConditionStatus
		wantReason  string
		wantStalled metav1.ConditionStatus
		wantWarning bool
		wantRequeue time.Duration
		wantErr     error
	}{
		// Regression: DeadLetterRoute sent no Warning when its Ready reason changed to a new
		// failure (only Conflict did).
		{"a new failure reason warns once", kqv1.ReasonQueueNotFound, func(s *scope) error {
			s.setReady(condInput{metav1.ConditionFalse, kqv1.ReasonModeUnsupported, "share.version 1"}, true)
			s.requeueAfter = time.Minute
			return nil
		}, metav1.ConditionFalse, kqv1.ReasonModeUnsupported, metav1.ConditionTrue, true, time.Minute, nil},
		{"the same reason again does not", kqv1.ReasonModeUnsupported, func(s *scope) error {
			s.setReady(condInput{metav1.ConditionFalse, kqv1.ReasonModeUnsupported, "share.version 1"}, true)
			return nil
		}, metav1.ConditionFalse, kqv1.ReasonModeUnsupported, metav1.ConditionTrue, false, 0, nil},
		{"a wait: Reconciling, the cause returned for backoff", "", func(s *scope) error {
			return &waitError{Reason: kqv1.ReasonClusterNotReady, Message: "not connected", Cause: cause}
		}, metav1.ConditionFalse, kqv1.ReasonClusterNotReady, metav1.ConditionFalse, true, 0, cause},
		{"a stall with a re-check", "", func(s *scope) error {
			return &stallError{Reason: kqv1.ReasonConflict, Message: "owned by another", After: 30 * time.Second}
		}, metav1.ConditionFalse, kqv1.ReasonConflict, metav1.ConditionTrue, true, 30 * time.Second, nil},
		{"Planned is not a failure", "", func(s *scope) error {
			s.setReady(condInput{metav1.ConditionFalse, kqv1.ReasonPlanned, "1 change"}, false)
			return nil
			// Held back on purpose: no Ready (kstatus reads False as InProgress); Reconciling
			// and Stalled False carry the reason.
		}, "", kqv1.ReasonPlanned, metav1.ConditionFalse, false, 0, nil},
		{"an action's own Warning is not repeated", "", func(s *scope) error {
			s.warned[kqv1.ReasonKafkaRejected] = true
			s.setReady(condInput{metav1.ConditionFalse, kqv1.ReasonKafkaRejected, "refused"}, true)
			return nil
		}, metav1.ConditionFalse, kqv1.ReasonKafkaRejected, metav1.ConditionTrue, false, 0, nil},
		{"ready", "", func(s *scope) error {
			s.setReady(condInput{metav1.ConditionTrue, kqv1.ReasonReady, "ok"}, false)
			s.resyncAfter(10 * time.Minute)
			return nil
		}, metav1.ConditionTrue, kqv1.ReasonReady, metav1.ConditionFalse, false, 10 * time.Minute, nil},
	}
	// Only the periodic resync is queued behind new work (handler.LowPriority); a timed
	// re-check of something that is waiting keeps its priority.
	lowPriority := map[string]bool{"ready": true}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obj := route(c.prevReason)
			cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(obj.DeepCopy()).WithStatusSubresource(&kqv1.DeadLetterRoute{}).Build()
			if err := cl.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
				t.Fatal(err)
			}
			rec := events.NewFakeRecorder(10)
			s := newScope(obj, &obj.Status.Conditions, func(a, b client.Object) bool {
				return equality.Semantic.DeepEqual(a.(*kqv1.DeadLetterRoute).Status, b.(*kqv1.DeadLetterRoute).Status)
			})
			onWait := func(w *waitError) condInput { return routeWaited(&obj.Status.Conditions, 1, w.Reason, w.Message) }
			res, err := s.summarize(context.Background(), cl, rec, onWait, s.run(context.Background(), step{"outcome", func(context.Context) error { return c.outcome(s) }}))
			if !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
				t.Errorf("error %v, want %v", err, c.wantErr)
			}
			if res.RequeueAfter != c.wantRequeue {
				t.Errorf("requeue after %s, want %s", res.RequeueAfter, c.wantRequeue)
			}
			if low := res.Priority != nil && *res.Priority == handler.LowPriority; low != lowPriority[c.name] {
				t.Errorf("requeued at priority %v, want low priority %v", res.Priority, lowPriority[c.name])
			}
			var stored kqv1.DeadLetterRoute
			if err := cl.Get(context.Background(), client.ObjectKeyFromObject(obj), &stored); err != nil {
				t.Fatal(err)
			}
			if r := findCondition(stored.Status.Conditions, kqv1.ConditionReady); c.wantReady == "" {
				if rc := findCondition(stored.Status.Conditions, kqv1.ConditionReconciling); r != nil || rc == nil || rc.Status != metav1.ConditionFalse || rc.Reason != c.wantReason {
					t.Errorf("stored Ready %+v Reconciling %+v, want no Ready and Reconciling False/%s", r, rc, c.wantReason)
				}
			} else if r == nil || r.Status != c.wantReady || r.Reason != c.wantReason {
				t.Errorf("stored Ready %+v, want %s/%s", r, c.wantReady, c.wantReason)
			}
			if st := findCondition(stored.Status.Conditions, kqv1.ConditionStalled); st == nil || st.Status != c.wantStalled {
				t.Errorf("stored Stalled %+v, want %s", st, c.wantStalled)
			}
			warned := false
			for len(rec.Events) > 0 {
				if e := <-rec.Events; strings.HasPrefix(e, "Warning "+c.wantReason) {
					warned = true
				}
			}
			if warned != c.wantWarning {
				t.Errorf("Warning %s recorded: %v, want %v", c.wantReason, warned, c.wantWarning)
			}
		})
	}
}

// Plan and ObserveOnly: a refusal from the brokers' ValidateOnly check is reported as Active
// reports a real one (KafkaRejected with the broker's message), worded as what the brokers
// would do; Ready stays Planned (not stalled, no Warning) and repeats it.
func TestQueueStatusPlanReportsValidateOnlyRefusals(t *testing.T) {
	plan := &queuePlan{TopicName: "orders", GroupID: "orders", CreateTopic: &kafka.NewTopic{Name: "orders", Partitions: 1, Configs: map[string]string{"cleanup.policy": "bogus"}},
		TopicReady: condTrue, GroupConfig: condTrue, ConfigValid: condValid}
	refusal := fmt.Errorf("CreateTopics topic orders: %w: Invalid value bogus for configuration cleanup.policy", kafka.ErrInvalidConfig)
	for _, mode := range []string{kqv1.ReconcilePlan, kqv1.ReconcileObserveOnly} {
		st := &kqv1.ShareQueueStatus{PlannedChanges: plan.Changes()}
		rep := queueStatus(st, 1, mode, plan, applyResult{partitions: 1, topicErr: refusal}, nil)
		tr := findCondition(st.Conditions, kqv1.ConditionTopicReady)
		if tr.Reason != kqv1.ReasonKafkaRejected || !strings.HasPrefix(tr.Message, "the brokers would refuse spec.topic") || !strings.Contains(tr.Message, "cleanup.policy") {
			t.Errorf("%s: TopicReady %+v", mode, tr)
		}
		if rep.Stalled || rep.Ready.Reason == kqv1.ReasonKafkaRejected || !strings.Contains(rep.Ready.Message, "Invalid value bogus") {
			t.Errorf("%s: Ready %+v stalled %v, want %s repeating the refusal", mode, rep.Ready, rep.Stalled, mode)
		}
		if st.TopicID != "" || len(st.ManagedTopicConfigs) != 0 {
			t.Errorf("%s: pinned or managed something: %+v", mode, st)
		}
	}
}

// A CreateTopics that certainly made no topic (TOPIC_ALREADY_EXISTS, another refusal, or a
// batched call withdrawn before any request carried it) drops the creation intent only when
// this reconcile recorded it: an intent from an earlier reconcile may stand for a
// CreateTopics that created the topic although its answer was lost (it timed out while the
// controller was still creating it), and dropping it would turn the queue's own topic into
// TopicExists on the next pass. A timeout after sending keeps even a fresh intent.
func TestQueueStatusCreationIntentAfterCreateTopics(t *testing.T) {
	started := metav1.NewTime(time.Unix(1000, 0))
	plan := &queuePlan{TopicName: "orders", GroupID: "orders", Partitions: 3,
		CreateTopic: &kafka.NewTopic{Name: "orders", Partitions: 3, ReplicationFactor: -1},
		TopicReady:  condTrue, GroupConfig: condTrue, ConfigValid: condValid}
	exists := &kafka.Error{Op: "CreateTopics", Err: kafka.ErrTopicAlreadyExists}
	notSent := &kafka.Error{Op: "CreateTopics", Err: fmt.Errorf("%w: %w", kafka.ErrNotSent, context.DeadlineExceeded)}
	timedOut := &kafka.Error{Op: "CreateTopics", Err: context.DeadlineExceeded}
	refused := &kafka.Error{Op: "CreateTopics", Err: kafka.ErrInvalidConfig}
	for _, c := range []struct {
		name       string
		createErr  error
		fresh      bool
		wantIntent bool
	}{
		{"TOPIC_ALREADY_EXISTS, intent recorded by this reconcile: someone else created the topic", exists, true, false},
		{"TOPIC_ALREADY_EXISTS, intent from an earlier reconcile whose answer was lost: kept", exists, false, true},
		{"withdrawn unsent, intent recorded by this reconcile: dropped", notSent, true, false},
		{"withdrawn unsent, intent from an earlier reconcile: kept", notSent, false, true},
		{"refused, intent recorded by this reconcile: dropped", refused, true, false},
		{"timed out after sending: the topic may exist, kept", timedOut, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &kqv1.ShareQueueStatus{TopicName: "orders", GroupID: "orders", TopicCreationStarted: started.DeepCopy()}
			res := createOutcome(writeOutcome{CreateErr: c.createErr}, applyResult{partitions: 3, intentFresh: c.fresh})
			queueStatus(st, 1, kqv1.ReconcileActive, plan, res, nil)
			if got := st.TopicCreationStarted != nil; got != c.wantIntent {
				t.Errorf("topicCreationStarted kept = %v, want %v", got, c.wantIntent)
			}
		})
	}
}

func TestTLSTrustHint(t *testing.T) {
	unknown := errors.New("dial tcp 127.0.0.1:9093: tls: failed to verify certificate: x509: certificate signed by unknown authority")
	withCA := &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "shop"},
		Spec: kqv1.KafkaClusterSpec{TLS: &kqv1.KafkaClusterTLS{CASecretRef: &kqv1.SecretKeyReference{Name: "alice", Key: "ca.crt"}}}}
	noCA := &kqv1.KafkaCluster{Spec: kqv1.KafkaClusterSpec{TLS: &kqv1.KafkaClusterTLS{}}}
	plain := &corev1.Secret{Data: map[string][]byte{"ca.crt": []byte("x")}}
	user := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"strimzi.io/cluster": "prod"}},
		Data: map[string][]byte{"ca.crt": []byte("x"), "user.crt": []byte("x"), "user.key": []byte("x")}}
	cases := []struct {
		name   string
		err    error
		kc     *kqv1.KafkaCluster
		secret *corev1.Secret
		want   []string
		none   bool
	}{
		{"another error", errors.New("connection refused"), withCA, user, nil, true},
		{"system roots", unknown, noCA, nil, []string{"system's roots", "set spec.tls.caSecretRef"}, false},
		{"a CA Secret", unknown, withCA, plain, []string{`not signed by the CA in Secret shop/alice key "ca.crt"`}, false},
		{"a Strimzi KafkaUser Secret", unknown, withCA, user, []string{"Strimzi KafkaUser", `Secret prod-cluster-ca-cert key "ca.crt"`, "namespace shop"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := tlsTrustHint(c.err, c.kc, c.secret)
			if c.none && got != "" {
				t.Errorf("hint %q, want none", got)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("hint %q lacks %q", got, w)
				}
			}
			if c.name == "a CA Secret" && strings.Contains(got, "Strimzi") {
				t.Errorf("hint %q names Strimzi for a plain CA Secret", got)
			}
		})
	}
}
