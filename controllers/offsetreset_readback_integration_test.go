package controllers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// applyHooks are the tests' afterResetApply hooks, by the OffsetReset's namespace (each
// test has its own), so a hook touches only its own test's reset.
type applyHooks struct{ m sync.Map }

var resetApplyHooks = &applyHooks{}

func (h *applyHooks) run(ctx context.Context, or *kqv1.OffsetReset) {
	if f, ok := h.m.Load(or.Namespace); ok {
		f.(func(context.Context, *kqv1.OffsetReset))(ctx, or)
	}
}

func (h *applyHooks) set(t *testing.T, ns string, f func(context.Context, *kqv1.OffsetReset)) {
	h.m.Store(ns, f)
	t.Cleanup(func() { h.m.Delete(ns) })
}

// Issue 30 case 2: a purge reported Complete that never took effect. There the group's
// coordinator stopped just after the brokers answered the AlterShareGroupOffsets without
// error; DescribeShareGroupOffsets then listed no partition, the reset still ended Complete
// ("read back: 0 of 3 partition(s) at their target"), and a consumer received from offset 0.
// Here the same outcome is made deterministic on the real broker: between the first apply
// and its read-back, the group's offsets are deleted (DeleteShareGroupOffsets), so the
// read-back finds no state, as it did then. The reset must not be Complete on that read-back:
// with no member that could have moved them, it applies again, and Complete rests on the
// second read-back, every partition at its target. A consumer then gets only what follows.
func TestOffsetResetWhoseApplyDidNotTakeAppliesAgain(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns, sq := r.resetQueueIn(t, "lost", 3)
	topic, group := sq.Status.TopicName, sq.Status.GroupID
	old := r.produceAt(t, topic, "old", 30, 3, time.Time{})
	end := r.endOffsets(t, topic)

	kcl, err := kgo.NewClient(kgo.SeedBrokers(r.kafka.BootstrapServers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer kcl.Close()
	adm := kadm.NewClient(kcl)
	var calls atomic.Int32
	lost := make(chan error, 1)
	resetApplyHooks.set(t, ns, func(ctx context.Context, _ *kqv1.OffsetReset) {
		if calls.Add(1) != 1 {
			return
		}
		resp, err := adm.DeleteShareGroupOffsets(ctx, group, topic)
		if err == nil {
			err = resp.Error()
		}
		lost <- err
	})

	or := r.createReset(t, newReset(ns, sq.Name, func(s *kqv1.OffsetResetSpec) { s.ToLatest = yes }))
	or = r.waitReset(t, or, 90*time.Second, func(o *kqv1.OffsetReset) string {
		if o.Status.Finished() {
			return ""
		}
		return fmt.Sprintf("phase %s", o.Status.Phase)
	})
	select {
	case err := <-lost:
		if err != nil {
			t.Fatalf("deleting the group's offsets after the first apply: %v", err)
		}
	default:
		t.Fatal("the hook never ran: no apply was read back")
	}
	c := findCondition(or.Status.Conditions, kqv1.ConditionComplete)
	if or.Status.Phase != kqv1.OffsetResetComplete || c == nil || !strings.Contains(c.Message, "read back: 3 of 3 partition(s) at their target") {
		t.Fatalf("reset ended %s (%+v); want Complete on a read-back of every target after the apply that did not take", or.Status.Phase, c)
	}
	if or.Status.ApplyAttempts != 1 || calls.Load() != 2 {
		t.Errorf("applyAttempts %d, read-backs %d: want 1 apply that did not take, then a second apply read back", or.Status.ApplyAttempts, calls.Load())
	}
	assertTargets(t, or, end, false)
	if got := r.startOffsets(t, group, topic); fmt.Sprint(got) != fmt.Sprint(end) {
		t.Errorf("group start offsets %v, want the end offsets %v", got, end)
	}
	fresh := r.produceAt(t, topic, "new", 6, 3, time.Time{})
	got := r.shareConsume(t, group, topic, fresh)
	for _, v := range old {
		if got[v] > 0 {
			t.Errorf("purged record %s was delivered %d time(s)", v, got[v])
		}
	}
}

// When no apply takes (every read-back finds no state and no member is there to have moved
// it), the reset does not retry for ever nor claim Complete: after maxApplyAttempts it ends
// Failed/ReadBackMismatch, naming what it read.
func TestOffsetResetThatNeverTakesFails(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns, sq := r.resetQueueIn(t, "never", 2)
	topic, group := sq.Status.TopicName, sq.Status.GroupID
	r.produceAt(t, topic, "old", 10, 2, time.Time{})

	kcl, err := kgo.NewClient(kgo.SeedBrokers(r.kafka.BootstrapServers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer kcl.Close()
	adm := kadm.NewClient(kcl)
	var calls atomic.Int32
	resetApplyHooks.set(t, ns, func(ctx context.Context, _ *kqv1.OffsetReset) {
		calls.Add(1)
		resp, err := adm.DeleteShareGroupOffsets(ctx, group, topic)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Errorf("deleting the group's offsets after an apply: %v", err)
		}
	})
	or := r.createReset(t, newReset(ns, sq.Name, func(s *kqv1.OffsetResetSpec) { s.ToLatest = yes }))
	or = r.waitReset(t, or, 90*time.Second, func(o *kqv1.OffsetReset) string {
		if o.Status.Finished() {
			return ""
		}
		return fmt.Sprintf("phase %s", o.Status.Phase)
	})
	c := findCondition(or.Status.Conditions, kqv1.ConditionFailed)
	if or.Status.Phase != kqv1.OffsetResetFailed || c == nil || c.Status != "True" || c.Reason != kqv1.ReasonReadBackMismatch ||
		!strings.Contains(c.Message, "partition 0 has no state in the group") || !strings.Contains(c.Message, fmt.Sprintf("after %d applies", maxApplyAttempts)) {
		t.Fatalf("reset ended %s (%+v); want Failed/%s naming the partitions read back without state after %d applies", or.Status.Phase, c, kqv1.ReasonReadBackMismatch, maxApplyAttempts)
	}
	if got := calls.Load(); got != int32(maxApplyAttempts) {
		t.Errorf("%d applies read back, want %d", got, maxApplyAttempts)
	}
}
