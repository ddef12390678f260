package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

func TestPlanResetSteps(t *testing.T) {
	recorded := kqv1.OffsetResetStatus{Partitions: []kqv1.PartitionOffsetReset{{Partition: 0, Target: 7}}}
	finished := func(typ string) kqv1.OffsetResetStatus {
		return kqv1.OffsetResetStatus{Partitions: recorded.Partitions,
			Conditions: []metav1.Condition{{Type: typ, Status: metav1.ConditionTrue, Reason: "X"}}}
	}
	cases := []struct {
		name    string
		st      kqv1.OffsetResetStatus
		policy  kqv1.MembersPolicy
		members int32
		want    resetStep
	}{
		{"new, empty group: resolve", kqv1.OffsetResetStatus{}, kqv1.MembersPolicyWait, 0, resetResolve},
		{"recorded targets, empty group: apply them, never resolve again", recorded, kqv1.MembersPolicyWait, 0, resetApply},
		{"members, Wait", kqv1.OffsetResetStatus{}, kqv1.MembersPolicyWait, 3, resetWaitMembers},
		{"members, Fail", kqv1.OffsetResetStatus{}, kqv1.MembersPolicyFail, 1, resetFailMembers},
		{"recorded targets and members, Wait: wait", recorded, kqv1.MembersPolicyWait, 2, resetWaitMembers},
		{"complete: never again, even with an empty group", finished(kqv1.ConditionComplete), kqv1.MembersPolicyWait, 0, resetDone},
		{"failed: never again", finished(kqv1.ConditionFailed), kqv1.MembersPolicyFail, 0, resetDone},
		{"complete with members: still done", finished(kqv1.ConditionComplete), kqv1.MembersPolicyFail, 4, resetDone},
	}
	for _, c := range cases {
		if got := planReset(&c.st, c.policy, c.members); got != c.want {
			t.Errorf("%s: step %d, want %d", c.name, got, c.want)
		}
	}
}

func TestResetQuery(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := metav1.NewTime(now.Add(-time.Hour))
	yes := true
	cases := []struct {
		spec   kqv1.OffsetResetSpec
		want   kafka.OffsetQuery
		wantTS time.Time
		target string
	}{
		{kqv1.OffsetResetSpec{ToEarliest: &yes}, kafka.OffsetQuery{Earliest: true}, time.Time{}, "--to-earliest"},
		{kqv1.OffsetResetSpec{ToLatest: &yes}, kafka.OffsetQuery{Latest: true}, time.Time{}, "--to-latest"},
		{kqv1.OffsetResetSpec{ToDatetime: &at}, kafka.OffsetQuery{At: at.Time}, at.Time, "--to-datetime 2026-12-01T11:00:00Z"},
		{kqv1.OffsetResetSpec{ByDuration: &metav1.Duration{Duration: 90 * time.Minute}}, kafka.OffsetQuery{At: now.Add(-90 * time.Minute)}, now.Add(-90 * time.Minute), "--by-duration 1h30m0s"},
	}
	for _, c := range cases {
		q, ts := resetQuery(c.spec, now)
		if q != c.want || !ts.Equal(c.wantTS) {
			t.Errorf("%s: query %+v at %v, want %+v at %v", c.target, q, ts, c.want, c.wantTS)
		}
		if got := c.spec.TargetString(); got != c.target {
			t.Errorf("target string %q, want %q", got, c.target)
		}
	}
}

func TestRecordTargetsAndAfter(t *testing.T) {
	var st kqv1.OffsetResetStatus
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	recordTargets(&st, map[int32]int64{1: 4}, map[int32]int64{2: 9, 0: 5, 1: 6}, now, time.Time{})
	if len(st.Partitions) != 3 || st.Partitions[0].Partition != 0 || st.Partitions[2].Partition != 2 {
		t.Fatalf("partitions %+v, want 0, 1, 2 in order", st.Partitions)
	}
	if st.Partitions[0].Before != nil || st.Partitions[1].Before == nil || *st.Partitions[1].Before != 4 {
		t.Errorf("before %+v: want absent where the group held no state, 4 on partition 1", st.Partitions)
	}
	if st.ResolvedAt == nil || !st.ResolvedAt.Time.Equal(now) || st.ResolvedTimestamp != nil {
		t.Errorf("resolvedAt %v resolvedTimestamp %v", st.ResolvedAt, st.ResolvedTimestamp)
	}
	if got, kept := resumeTargets(&st, nil); len(got) != 3 || got[0] != 5 || got[1] != 6 || got[2] != 9 || kept != nil {
		t.Errorf("targets to apply on a first apply %v (kept %v), want every recorded target", got, kept)
	}
	if got := describeTargets(&st); got != "p0 -→5, p1 4→6, p2 -→9" {
		t.Errorf("describeTargets %q", got)
	}
	n, off := recordAfter(&st, map[int32]int64{0: 5, 1: 4})
	if n != 1 || len(off) != 2 || !strings.Contains(off[0], "partition 1 at 4, target 6") || !strings.Contains(off[1], "partition 2 has no state") {
		t.Errorf("recordAfter: %d at target, off %v", n, off)
	}
	if st.Partitions[0].After == nil || *st.Partitions[0].After != 5 || st.Partitions[2].After != nil {
		t.Errorf("after %+v", st.Partitions)
	}
}

func TestMembersRecheckBacksOff(t *testing.T) {
	for _, c := range []struct{ waited, want time.Duration }{
		{0, 2 * time.Second}, {4 * time.Second, 2 * time.Second}, {20 * time.Second, 5 * time.Second},
		{2 * time.Minute, 30 * time.Second}, {time.Hour, time.Minute},
	} {
		if got := membersRecheck(c.waited); got != c.want {
			t.Errorf("after waiting %v: recheck in %v, want %v", c.waited, got, c.want)
		}
	}
	if m := membersMessage("g", 3, kqv1.MembersPolicyWait, false); !strings.Contains(m, "share group g has 3 member(s)") || !strings.Contains(m, "Wait") {
		t.Errorf("message %q", m)
	}
}

// Regression (issue 30, case 2): a purge read back with no partition at its target, no member
// in the group, was reported Complete; it applies again, then fails naming what it read.
func TestPlanReadBack(t *testing.T) {
	for _, tc := range []struct {
		name            string
		atTarget, total int
		members         int32
		known           bool
		attempts        int32
		want            readBackStep
	}{
		{"every target read back", 3, 3, 0, true, 1, readBackComplete},
		{"every target read back, members unknown", 3, 3, 0, false, 0, readBackComplete},
		{"members joined since: they may have moved them", 1, 3, 2, true, 1, readBackComplete},
		{"no member, nothing at target: apply again", 0, 3, 0, true, 1, readBackRetry},
		{"members unknown: apply again", 0, 3, 0, false, 1, readBackRetry},
		{"second attempt: again", 2, 3, 0, true, 2, readBackRetry},
		{"third attempt: failed", 0, 3, 0, true, 3, readBackFail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := planReadBack(tc.atTarget, tc.total, tc.members, tc.known, tc.attempts); got != tc.want {
				t.Errorf("planReadBack = %v, want %v", got, tc.want)
			}
		})
	}
}

// A resumed apply (issue 30: a manager stopped between the apply and Complete) never moves a
// purge back over records acknowledged since, nor replays a replay twice; a partition that
// does not show the reset is applied. Before any apply was sent, every target is applied
// (the start offset trails acknowledgements; a breaker's toEarliest on a group with no state
// was skipped when consumers had joined before the first apply). The read-back counts the
// same partitions as done.
func TestResumeTargetsNeverMoveBack(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	st := kqv1.OffsetResetStatus{Partitions: []kqv1.PartitionOffsetReset{
		{Partition: 0, Target: 10},               // purge, no state before
		{Partition: 1, Before: i(4), Target: 10}, // purge
		{Partition: 2, Before: i(20), Target: 5}, // replay
		{Partition: 3, Before: i(20), Target: 5}, // replay
		{Partition: 4, Before: i(7), Target: 7},  // at its start offset: shows nothing either way
	}}
	for _, c := range []struct {
		name     string
		sent     int32
		current  map[int32]int64
		apply    string
		kept     []string
		atTarget int
	}{
		{name: "sent, nothing moved", sent: 1, current: map[int32]int64{1: 4, 2: 20, 3: 20, 4: 7},
			apply: "map[0:10 1:10 2:5 3:5]", atTarget: 1},
		{name: "sent, took, then consumers acknowledged", sent: 1, current: map[int32]int64{0: 20, 1: 10, 2: 9, 3: 5, 4: 8},
			apply: "map[4:7]", kept: []string{"partition 0 at 20, past its target 10", "partition 2 at 9, past its target 5"}, atTarget: 4},
		// The breaker's replay: applied (25→0), consumers went past its old position (36).
		{name: "sent, a replay took and consumers passed its old position", sent: 1, current: map[int32]int64{0: 10, 1: 10, 2: 36, 3: 5, 4: 7},
			apply: "map[]", kept: []string{"partition 2 at 36, past its target 5"}, atTarget: 5},
		{name: "sent, never took, consumers acknowledged", sent: 1, current: map[int32]int64{0: 3, 1: 6, 2: 20, 3: 20, 4: 7},
			apply: "map[0:10 1:10 2:5 3:5]", atTarget: 1},
		{name: "sent, another reset moved a replay further back", sent: 2, current: map[int32]int64{0: 10, 1: 10, 2: 2, 3: 5, 4: 7},
			apply: "map[]", kept: []string{"partition 2 at 2, behind its target 5: moved back by another reset since the targets were recorded"}, atTarget: 4},
		// Recorded, never sent: every target, whatever the start offsets read (the
		// breaker's toEarliest: consumers created the group's state at 10 and took 5).
		{name: "never sent", current: map[int32]int64{0: 15, 1: 10, 2: 9, 3: 5, 4: 8},
			apply: "map[0:10 1:10 2:5 3:5 4:7]", atTarget: 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := *st.DeepCopy()
			st.ApplyAttempts = c.sent
			apply, kept := resumeTargets(&st, c.current)
			if fmt.Sprint(apply) != c.apply || fmt.Sprint(kept) != fmt.Sprint(c.kept) {
				t.Errorf("resumeTargets = %v, kept %q; want %s, kept %q", apply, kept, c.apply, c.kept)
			}
			if n, off := recordAfter(&st, c.current); n != c.atTarget {
				t.Errorf("recordAfter(current) = %d at target (off %v), want %d", n, off, c.atTarget)
			}
		})
	}
}
