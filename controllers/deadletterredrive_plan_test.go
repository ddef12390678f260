package controllers

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

func hdrs(kv ...string) []kafka.Header {
	var out []kafka.Header
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, kafka.Header{Key: kv[i], Value: []byte(kv[i+1])})
	}
	return out
}

func TestRedriveDecider(t *testing.T) {
	all := kqv1.DeadLetterRedriveSpec{}
	filtered := kqv1.DeadLetterRedriveSpec{MaxRedrives: ptr.To[int32](2), Filter: &kqv1.RedriveFilter{
		Reasons: []string{"rejected"}, SourcePartitions: []int32{0, 2}}}
	for _, tc := range []struct {
		name string
		spec kqv1.DeadLetterRedriveSpec
		h    []kafka.Header
		want kafka.RedriveDecision
	}{
		{"no headers, no filter: moved", all, nil, kafka.RedriveMove},
		{"count below the default 3: moved", all, hdrs("kqo.redrive.count", "2"), kafka.RedriveMove},
		{"count at the default 3: refused", all, hdrs("kqo.redrive.count", "3"), kafka.RedriveRefuse},
		{"count not a number: refused, never looped", all, hdrs("kqo.redrive.count", "x"), kafka.RedriveRefuse},
		{"the last count header counts", all, hdrs("kqo.redrive.count", "9", "kqo.redrive.count", "1"), kafka.RedriveMove},
		{"reason and partition match", filtered, hdrs("kqo.reason", "rejected", "kqo.source.partition", "2"), kafka.RedriveMove},
		{"broker-native partition header matches", filtered, hdrs("kqo.reason", "rejected", "__dlq.errors.partition", "0"), kafka.RedriveMove},
		{"reason differs: filtered", filtered, hdrs("kqo.reason", "lease-expired-on-last-attempt", "kqo.source.partition", "2"), kafka.RedriveFilter},
		{"no reason header: filtered", filtered, hdrs("kqo.source.partition", "2"), kafka.RedriveFilter},
		{"partition differs: filtered", filtered, hdrs("kqo.reason", "rejected", "kqo.source.partition", "1"), kafka.RedriveFilter},
		{"latest dead-lettering's partition counts", filtered, hdrs("kqo.reason", "rejected", "kqo.source.partition", "0", "kqo.source.partition", "1"), kafka.RedriveFilter},
		{"filtered before refused", filtered, hdrs("kqo.reason", "other", "kqo.redrive.count", "5"), kafka.RedriveFilter},
		{"selected but at maxRedrives 2: refused", filtered, hdrs("kqo.reason", "rejected", "kqo.source.partition", "0", "kqo.redrive.count", "2"), kafka.RedriveRefuse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := redriveDecider(tc.spec)(tc.h); got != tc.want {
				t.Errorf("decision %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRedriveRewriter(t *testing.T) {
	rw := redriveRewriter("ns", "again", kqv1.DeadLetterRedriveSpec{})
	in := hdrs("app", "1", "kqo.redriven", "ns/first", "kqo.reason", "rejected", "kqo.redrive.count", "1")
	got := rw(in)
	want := hdrs("app", "1", "kqo.reason", "rejected", "kqo.redriven", "ns/again", "kqo.redrive.count", "2")
	if len(got) != len(want) {
		t.Fatalf("headers %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Key != want[i].Key || string(got[i].Value) != string(want[i].Value) {
			t.Errorf("header %d = %s=%s, want %s=%s", i, got[i].Key, got[i].Value, want[i].Key, want[i].Value)
		}
	}
	if first := rw(hdrs("app", "1")); string(first[len(first)-1].Value) != "1" {
		t.Errorf("first redrive count %s, want 1", first[len(first)-1].Value)
	}
	if string(in[1].Value) != "ns/first" {
		t.Error("the rewriter changed its input")
	}
}

func TestPlanRedrive(t *testing.T) {
	ready := redriveObservation{RouteFound: true, QueueFound: true, ClusterFound: true, Cluster: "local", SourceTopic: "dlq.q", TargetTopic: "q"}
	without := func(f func(*redriveObservation)) redriveObservation { o := ready; f(&o); return o }
	running := kqv1.DeadLetterRedriveStatus{Phase: kqv1.RedriveRunning, Bound: []kqv1.PartitionBound{{Partition: 0, EndOffset: 5}}}
	for _, tc := range []struct {
		name   string
		spec   kqv1.DeadLetterRedriveSpec
		status kqv1.DeadLetterRedriveStatus
		obs    redriveObservation
		want   redriveAction
		reason string
		msg    string
	}{
		{"new, everything there: start", kqv1.DeadLetterRedriveSpec{}, kqv1.DeadLetterRedriveStatus{}, ready, redriveStart, "", ""},
		{"route missing", kqv1.DeadLetterRedriveSpec{}, kqv1.DeadLetterRedriveStatus{}, redriveObservation{}, redriveWait, kqv1.ReasonRouteNotFound, "spec.routeRef.name"},
		{"route without topic yet", kqv1.DeadLetterRedriveSpec{}, kqv1.DeadLetterRedriveStatus{}, redriveObservation{RouteFound: true}, redriveWait, kqv1.ReasonRedriveWaiting, "status.topicName"},
		// Regression (issue 30, case 7): the route's own verdict is named, and whether the
		// redrive can start.
		{"route in conflict", kqv1.DeadLetterRedriveSpec{}, kqv1.DeadLetterRedriveStatus{}, redriveObservation{RouteFound: true,
			RouteReady: &metav1.Condition{Type: kqv1.ConditionReady, Status: metav1.ConditionFalse, Reason: kqv1.ReasonConflict, Message: "topic dlq.q is owned by ShareQueue ns/other"}},
			redriveWait, kqv1.ReasonRedriveWaiting, "DeadLetterRoute r has no dead-letter topic: it is Ready=False/Conflict: topic dlq.q is owned by ShareQueue ns/other; this redrive starts by itself once the route is Ready, and never while that lasts"},
		{"queue missing", kqv1.DeadLetterRedriveSpec{}, kqv1.DeadLetterRedriveStatus{}, redriveObservation{RouteFound: true, SourceTopic: "dlq.q"}, redriveWait, kqv1.ReasonQueueNotFound, "ShareQueue"},
		{"another redrive first", kqv1.DeadLetterRedriveSpec{}, kqv1.DeadLetterRedriveStatus{}, func() redriveObservation { o := ready; o.Blocker = "older"; return o }(), redriveWait, kqv1.ReasonRedriveWaiting, "DeadLetterRedrive older"},
		{"bound recorded, nothing runs here: resume", kqv1.DeadLetterRedriveSpec{}, running, ready, redriveResume, "", ""},
		{"cluster missing before the start: wait", kqv1.DeadLetterRedriveSpec{}, kqv1.DeadLetterRedriveStatus{}, without(func(o *redriveObservation) { o.ClusterFound = false }), redriveWait, kqv1.ReasonClusterNotFound, "KafkaCluster ns/local"},
		// Regression: a started redrive nothing here runs (manager restarted) whose route, queue
		// or cluster was deleted was resumed without a cluster: the reconcile failed on every
		// retry and the redrive stayed Running for ever.
		{"started, route deleted: failed", kqv1.DeadLetterRedriveSpec{}, running, redriveObservation{}, redriveFail, kqv1.ReasonRouteNotFound, "DeadLetterRoute ns/r no longer exists"},
		{"started, queue deleted: failed", kqv1.DeadLetterRedriveSpec{}, running, redriveObservation{RouteFound: true, SourceTopic: "dlq.q"}, redriveFail, kqv1.ReasonQueueNotFound, "ShareQueue of DeadLetterRoute r no longer exists"},
		{"started, cluster deleted: failed", kqv1.DeadLetterRedriveSpec{}, running, without(func(o *redriveObservation) { o.ClusterFound = false }), redriveFail, kqv1.ReasonClusterNotFound, "KafkaCluster ns/local"},
		{"started, cluster deleted, but running here: nothing", kqv1.DeadLetterRedriveSpec{}, running, without(func(o *redriveObservation) { o.ClusterFound = false; o.Running = true }), redriveNothing, "", ""},
		{"cancel of a started redrive whose queue is gone: cancelled now", kqv1.DeadLetterRedriveSpec{Cancel: true}, running, redriveObservation{RouteFound: true}, redriveCancelNow, "", ""},
		{"running here: nothing", kqv1.DeadLetterRedriveSpec{}, running, func() redriveObservation { o := ready; o.Running = true; return o }(), redriveNothing, "", ""},
		{"cancel while running here: stop", kqv1.DeadLetterRedriveSpec{Cancel: true}, running, func() redriveObservation { o := ready; o.Running = true; return o }(), redriveStop, "", ""},
		{"cancel of a started redrive nothing here runs: resume, stopped, to record where it stood", kqv1.DeadLetterRedriveSpec{Cancel: true}, running, ready, redriveResume, "", ""},
		{"cancel before it started: cancelled now", kqv1.DeadLetterRedriveSpec{Cancel: true}, kqv1.DeadLetterRedriveStatus{Phase: kqv1.RedrivePending}, ready, redriveCancelNow, "", ""},
		{"complete: nothing", kqv1.DeadLetterRedriveSpec{}, kqv1.DeadLetterRedriveStatus{Phase: kqv1.RedriveComplete}, ready, redriveNothing, "", ""},
		{"cancelled, cancel still set: nothing", kqv1.DeadLetterRedriveSpec{Cancel: true}, kqv1.DeadLetterRedriveStatus{Phase: kqv1.RedriveCancelled}, ready, redriveNothing, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dr := &kqv1.DeadLetterRedrive{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"}, Spec: tc.spec, Status: tc.status}
			dr.Spec.RouteRef.Name = "r"
			got := planRedrive(dr, tc.obs)
			if got.Action != tc.want || got.Reason != tc.reason || !strings.Contains(got.Message, tc.msg) {
				t.Errorf("plan %+v, want action %v reason %q message containing %q", got, tc.want, tc.reason, tc.msg)
			}
		})
	}
}

func TestRedriveBlocker(t *testing.T) {
	t0 := metav1.NewTime(time.Unix(1000, 0))
	t1 := metav1.NewTime(time.Unix(2000, 0))
	mk := func(name string, ts metav1.Time, route string, phase kqv1.DeadLetterRedrivePhase) kqv1.DeadLetterRedrive {
		d := kqv1.DeadLetterRedrive{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), CreationTimestamp: ts}}
		d.Spec.RouteRef.Name = route
		d.Status.Phase = phase
		return d
	}
	me := mk("me", t1, "r", "")
	for _, tc := range []struct {
		name   string
		others []kqv1.DeadLetterRedrive
		want   string
	}{
		{"alone", []kqv1.DeadLetterRedrive{me}, ""},
		{"older pending one goes first", []kqv1.DeadLetterRedrive{me, mk("old", t0, "r", kqv1.RedrivePending)}, "old"},
		{"younger running one blocks", []kqv1.DeadLetterRedrive{me, mk("young", metav1.NewTime(time.Unix(3000, 0)), "r", kqv1.RedriveRunning)}, "young"},
		{"younger pending one waits for me", []kqv1.DeadLetterRedrive{me, mk("young", metav1.NewTime(time.Unix(3000, 0)), "r", kqv1.RedrivePending)}, ""},
		{"finished ones do not block", []kqv1.DeadLetterRedrive{me, mk("old", t0, "r", kqv1.RedriveComplete)}, ""},
		{"other routes do not block", []kqv1.DeadLetterRedrive{me, mk("old", t0, "s", kqv1.RedriveRunning)}, ""},
		{"same time: name decides", []kqv1.DeadLetterRedrive{me, mk("a", t1, "r", "")}, "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := redriveBlocker(&me, tc.others); got != tc.want {
				t.Errorf("blocker %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRedriveStartOffsets(t *testing.T) {
	off := func(v int64) *int64 { return &v }
	mk := func(name, route, topic string, phase kqv1.DeadLetterRedrivePhase, b ...kqv1.PartitionBound) kqv1.DeadLetterRedrive {
		d := kqv1.DeadLetterRedrive{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}}
		d.Spec.RouteRef.Name = route
		d.Status.Phase, d.Status.SourceTopic, d.Status.Bound = phase, topic, b
		return d
	}
	me := mk("me", "r", "", "")
	now := []kafka.RedriveBound{{Partition: 0, Start: 5, End: 100}, {Partition: 1, Start: 0, End: 50}}
	others := []kqv1.DeadLetterRedrive{
		mk("done", "r", "dlq", kqv1.RedriveComplete, kqv1.PartitionBound{Partition: 0, StartOffset: 0, EndOffset: 40, NextOffset: off(40)}, kqv1.PartitionBound{Partition: 1, EndOffset: 10}),
		mk("cancelled", "r", "dlq", kqv1.RedriveCancelled, kqv1.PartitionBound{Partition: 0, StartOffset: 40, EndOffset: 90, NextOffset: off(60)}),
		mk("cancelled-unknown", "r", "dlq", kqv1.RedriveCancelled, kqv1.PartitionBound{Partition: 1, EndOffset: 45}),
		mk("failed", "r", "dlq", kqv1.RedriveFailed, kqv1.PartitionBound{Partition: 0, EndOffset: 99, NextOffset: off(99)}),
		mk("running", "r", "dlq", kqv1.RedriveRunning, kqv1.PartitionBound{Partition: 1, EndOffset: 49, NextOffset: off(49)}),
		mk("other-route", "s", "dlq", kqv1.RedriveComplete, kqv1.PartitionBound{Partition: 1, EndOffset: 48, NextOffset: off(48)}),
		mk("other-topic", "r", "dlq-old", kqv1.RedriveComplete, kqv1.PartitionBound{Partition: 1, EndOffset: 47, NextOffset: off(47)}),
	}
	got := redriveStartOffsets(&me, "dlq", now, others)
	if got[0].Start != 60 || got[1].Start != 10 || got[0].End != 100 || got[1].End != 50 {
		t.Errorf("starts %+v, want partition 0 from 60 (the cancelled one stopped there), partition 1 from 10 (the complete one's end)", got)
	}
	if now[0].Start != 5 {
		t.Error("input changed")
	}
	earliest := me
	earliest.Spec.StartFrom = kqv1.RedriveStartEarliest
	if got := redriveStartOffsets(&earliest, "dlq", now, others); got[0].Start != 5 || got[1].Start != 0 {
		t.Errorf("startFrom Earliest: %+v, want the log start offsets", got)
	}
	capped := redriveStartOffsets(&me, "dlq", []kafka.RedriveBound{{Partition: 0, Start: 0, End: 30}}, others)
	if capped[0].Start != 30 {
		t.Errorf("start beyond the end offset: %+v, want capped at 30", capped)
	}
}
