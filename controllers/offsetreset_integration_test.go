package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// resetQueue creates a Ready ShareQueue named name in ns whose group starts at the earliest
// offset (share.auto.offset.reset=earliest), so records produced before a consumer joins are
// delivered unless a reset moves the start; topic and group are unique to ns.
func (r *testRig) resetQueue(t *testing.T, ns, name string, partitions int32) *kqv1.ShareQueue {
	t.Helper()
	earliest := "earliest"
	sq := &kqv1.ShareQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: kqv1.ShareQueueSpec{
			ClusterRef: kqv1.ClusterReference{Name: "local"},
			Topic:      kqv1.QueueTopicSpec{Name: name + "-" + ns, Partitions: partitions},
			GroupID:    name + "-" + ns,
			Delivery:   kqv1.DeliverySpec{AutoOffsetReset: &earliest},
		},
	}
	if err := r.k8s.Create(ctxFor(t), sq); err != nil {
		t.Fatal(err)
	}
	return r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
}

// resetQueueIn is resetQueue in a new namespace with its own KafkaCluster local.
func (r *testRig) resetQueueIn(t *testing.T, name string, partitions int32) (string, *kqv1.ShareQueue) {
	t.Helper()
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	return ns, r.resetQueue(t, ns, name, partitions)
}

// produceAt writes n records valued prefix-0 … prefix-(n-1) round-robin over partitions,
// each with record timestamp ts (zero: now), and waits for every ack.
func (r *testRig) produceAt(t *testing.T, topic, prefix string, n int, partitions int32, ts time.Time) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.kafka.BootstrapServers()...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.UnknownTopicRetries(-1)) // a new topic can trail in a broker's metadata
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var vals []string
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("%s-%d", prefix, i)
		vals = append(vals, v)
		rec := &kgo.Record{Value: []byte(v), Partition: int32(i) % partitions}
		if !ts.IsZero() {
			rec.Timestamp = ts
		}
		recs = append(recs, rec)
	}
	if err := cl.ProduceSync(ctxFor(t), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return vals
}

// shareConsume joins group as a share consumer of topic, accepts every record it is given
// and returns how many times each value was delivered, once every value of want has been
// received (the test fails if they do not all come within a minute). Share fetches hand out
// each partition's records in offset order, so once the last wanted record of a partition
// arrived no earlier record of it can still come.
func (r *testRig) shareConsume(t *testing.T, group, topic string, want []string) map[string]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.kafka.BootstrapServers()...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]int{}
	missing := func() []string {
		var m []string
		for _, v := range want {
			if got[v] == 0 {
				m = append(m, v)
			}
		}
		return m
	}
	deadline := time.Now().Add(time.Minute)
	for len(missing()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("share consumer of group %s: %d record(s) never delivered, e.g. %v; received %v", group, len(missing()), missing()[0], got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(rec *kgo.Record) {
			got[string(rec.Value)]++
			rec.Ack(kgo.AckAccept)
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := cl.FlushAcks(ctx); err != nil {
		t.Fatalf("flushing acks: %v", err)
	}
	return got
}

// joinMember joins group as an idle share-group member (one short poll; franz-go keeps the
// membership alive by heartbeats until it is closed), waits until the group reports it, and
// returns the function that makes it leave (also run at cleanup).
func (r *testRig) joinMember(t *testing.T, group, topic string) (leave func()) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.kafka.BootstrapServers()...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	leave = func() { once.Do(cl.Close) }
	t.Cleanup(leave)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	cl.PollFetches(ctx)
	cancel()
	eventually(t, 30*time.Second, func() string {
		gs, err := r.admin.DescribeShareGroups(ctxFor(t), group)
		if err != nil {
			return err.Error()
		}
		if gs[group].Members != 1 {
			return fmt.Sprintf("group %s: %+v, want 1 member", group, gs[group])
		}
		return ""
	})
	return leave
}

// waitReset polls the OffsetReset until check returns "".
func (r *testRig) waitReset(t *testing.T, or *kqv1.OffsetReset, timeout time.Duration, check func(*kqv1.OffsetReset) string) *kqv1.OffsetReset {
	t.Helper()
	out := &kqv1.OffsetReset{}
	eventually(t, timeout, func() string {
		if err := r.k8s.Get(ctxFor(t), client.ObjectKeyFromObject(or), out); err != nil {
			return err.Error()
		}
		if msg := check(out); msg != "" {
			return fmt.Sprintf("OffsetReset %s: %s; status %+v", or.Name, msg, out.Status)
		}
		return ""
	})
	return out
}

// resetCondition returns "" when or's condition typ has status want and reason.
func resetCondition(or *kqv1.OffsetReset, typ string, want metav1.ConditionStatus, reason string) string {
	c := findCondition(or.Status.Conditions, typ)
	if c == nil || c.Status != want || c.Reason != reason || c.ObservedGeneration != or.Generation {
		return fmt.Sprintf("want %s=%s/%s", typ, want, reason)
	}
	return ""
}

// conditionWith is a waitReset check for condition typ with status and reason whose message
// contains each of parts.
func conditionWith(typ string, status metav1.ConditionStatus, reason string, parts ...string) func(*kqv1.OffsetReset) string {
	return func(or *kqv1.OffsetReset) string {
		if m := resetCondition(or, typ, status, reason); m != "" {
			return m
		}
		c := findCondition(or.Status.Conditions, typ)
		for _, p := range parts {
			if !strings.Contains(c.Message, p) {
				return fmt.Sprintf("%s message %q lacks %q", typ, c.Message, p)
			}
		}
		return ""
	}
}

// createReset creates or and returns it.
func (r *testRig) createReset(t *testing.T, or *kqv1.OffsetReset) *kqv1.OffsetReset {
	t.Helper()
	if err := r.k8s.Create(ctxFor(t), or); err != nil {
		t.Fatal(err)
	}
	return or
}

// complete is a waitReset check for Complete=True.
var complete = conditionWith(kqv1.ConditionComplete, metav1.ConditionTrue, kqv1.ReasonOffsetsReset)

func newReset(ns, queue string, mut func(*kqv1.OffsetResetSpec)) *kqv1.OffsetReset {
	or := &kqv1.OffsetReset{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: queue + "-reset-"},
		Spec: kqv1.OffsetResetSpec{QueueRef: kqv1.QueueReference{Name: queue}}}
	mut(&or.Spec)
	return or
}

var yes = func() *bool { b := true; return &b }()

// startOffsets reads the group's start offsets from outside the operator.
func (r *testRig) startOffsets(t *testing.T, group, topic string) map[int32]int64 {
	t.Helper()
	var got map[int32]int64
	eventually(t, 30*time.Second, func() string {
		var err error
		if got, err = r.admin.ShareStartOffsets(ctxFor(t), group, topic); err != nil {
			return err.Error()
		}
		return ""
	})
	return got
}

// endOffsets reads the topic's end offsets from outside the operator.
func (r *testRig) endOffsets(t *testing.T, topic string) map[int32]int64 {
	t.Helper()
	end, err := r.admin.ListPartitionOffsets(ctxFor(t), topic, kafka.OffsetQuery{Latest: true})
	if err != nil {
		t.Fatal(err)
	}
	return end
}

func assertTargets(t *testing.T, or *kqv1.OffsetReset, want map[int32]int64, wantBefore bool) {
	t.Helper()
	if len(or.Status.Partitions) != len(want) {
		t.Fatalf("status.partitions %+v, want %d partitions with targets %v", or.Status.Partitions, len(want), want)
	}
	for _, p := range or.Status.Partitions {
		if p.Target != want[p.Partition] || p.After == nil || *p.After != p.Target || (p.Before != nil) != wantBefore {
			t.Errorf("partition %+v: want target %d read back as after, before recorded %v", p, want[p.Partition], wantBefore)
		}
	}
}

func (r *testRig) hasEvent(t *testing.T, obj client.Object, typ, reason, note string) {
	t.Helper()
	eventually(t, 30*time.Second, func() string {
		var evs eventsv1.EventList
		if err := r.k8s.List(ctxFor(t), &evs, client.InNamespace(obj.GetNamespace())); err != nil {
			return err.Error()
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == obj.GetName() && e.Type == typ && e.Reason == reason && strings.Contains(e.Note, note) {
				return ""
			}
		}
		return fmt.Sprintf("no %s event %s on %s containing %q", typ, reason, obj.GetName(), note)
	})
}

// Purge (toLatest) of a group that never had a member: the records present are never
// delivered to a consumer that joins afterwards (its group starts at earliest, so without the
// purge it would get them), records produced after the purge are, each once.
func TestOffsetResetPurgeWithoutMembers(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns, sq := r.resetQueueIn(t, "purge", 3)
	topic, group := sq.Status.TopicName, sq.Status.GroupID
	old := r.produceAt(t, topic, "old", 30, 3, time.Time{})
	end := r.endOffsets(t, topic)

	or := r.createReset(t, newReset(ns, sq.Name, func(s *kqv1.OffsetResetSpec) { s.ToLatest = yes }))
	or = r.waitReset(t, or, 60*time.Second, complete)
	if or.Status.Phase != kqv1.OffsetResetComplete || or.Status.Target != "--to-latest" || or.Status.ResolvedAt == nil || or.Status.CompletionTime == nil ||
		or.Status.Topic != topic || or.Status.GroupID != group || or.Status.Members == nil || *or.Status.Members != 0 {
		t.Errorf("status %+v: want phase Complete, target --to-latest, resolvedAt, completionTime, topic %s, group %s, 0 members", or.Status, topic, group)
	}
	// The group never held state: no before; every partition's target is its end offset.
	assertTargets(t, or, end, false)
	if got := r.startOffsets(t, group, topic); fmt.Sprint(got) != fmt.Sprint(end) {
		t.Errorf("group start offsets %v, want the end offsets %v", got, end)
	}
	r.hasEvent(t, or, corev1.EventTypeNormal, kqv1.ReasonOffsetsReset, "--to-latest applied")

	fresh := r.produceAt(t, topic, "new", 12, 3, time.Time{})
	got := r.shareConsume(t, group, topic, fresh)
	for _, v := range old {
		if got[v] > 0 {
			t.Errorf("purged record %s was delivered %d time(s)", v, got[v])
		}
	}
	for _, v := range fresh {
		if got[v] != 1 {
			t.Errorf("record %s produced after the purge delivered %d times, want 1", v, got[v])
		}
	}
}

// A purge while a member is present waits (Wait, the default): the condition names the
// member count and nothing is resolved or applied; once the member leaves it completes, and
// the records produced meanwhile are purged too. Under Fail it ends Failed, nothing applied.
func TestOffsetResetWithMembersPresent(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns, sq := r.resetQueueIn(t, "busy", 2)
	topic, group := sq.Status.TopicName, sq.Status.GroupID
	leave := r.joinMember(t, group, topic)
	before := r.startOffsets(t, group, topic)

	failing := newReset(ns, sq.Name, func(s *kqv1.OffsetResetSpec) {
		s.ToEarliest, s.WhenMembersPresent = yes, kqv1.MembersPolicyFail
	})
	if err := r.k8s.Create(ctxFor(t), failing); err != nil {
		t.Fatal(err)
	}
	failing = r.waitReset(t, failing, 60*time.Second, conditionWith(kqv1.ConditionFailed, metav1.ConditionTrue, kqv1.ReasonMembersPresent, "has 1 member(s)", group))
	if failing.Status.Phase != kqv1.OffsetResetFailed || len(failing.Status.Partitions) != 0 || failing.Status.CompletionTime == nil {
		t.Errorf("failed reset status %+v: want phase Failed, no partitions resolved, a completion time", failing.Status)
	}
	r.hasEvent(t, failing, corev1.EventTypeWarning, kqv1.ReasonMembersPresent, "has 1 member(s)")

	waiting := r.createReset(t, newReset(ns, sq.Name, func(s *kqv1.OffsetResetSpec) { s.ToLatest = yes }))
	waiting = r.waitReset(t, waiting, 60*time.Second, conditionWith(kqv1.ConditionComplete, metav1.ConditionFalse, kqv1.ReasonMembersPresent, "has 1 member(s)"))
	if waiting.Status.Phase != kqv1.OffsetResetWaiting || len(waiting.Status.Partitions) != 0 || waiting.Status.Members == nil || *waiting.Status.Members != 1 {
		t.Errorf("waiting reset status %+v: want phase Waiting, 1 member, nothing resolved", waiting.Status)
	}
	if got := r.startOffsets(t, group, topic); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Errorf("start offsets moved from %v to %v while the resets waited or failed", before, got)
	}

	stale := r.produceAt(t, topic, "stale", 10, 2, time.Time{})
	leave()
	waiting = r.waitReset(t, waiting, 2*time.Minute, complete)
	assertTargets(t, waiting, r.endOffsets(t, topic), len(before) > 0)
	// The Failed reset stays Failed and applied nothing after the member left.
	if err := r.k8s.Get(ctxFor(t), client.ObjectKeyFromObject(failing), failing); err != nil {
		t.Fatal(err)
	}
	if failing.Status.Phase != kqv1.OffsetResetFailed || len(failing.Status.Partitions) != 0 {
		t.Errorf("the Failed reset changed after the member left: %+v", failing.Status)
	}
	fresh := r.produceAt(t, topic, "fresh", 6, 2, time.Time{})
	got := r.shareConsume(t, group, topic, fresh)
	for _, v := range stale {
		if got[v] > 0 {
			t.Errorf("record %s, produced while the purge waited, was delivered after it", v)
		}
	}
}

// toDatetime and byDuration re-deliver exactly the records at or after the time: two batches
// with record timestamps 10 and 5 minutes ago, all consumed, then a reset to 7.5 minutes
// ago delivers the second batch again, each record once, and none of the first.
func TestOffsetResetToTimestampRedeliversExactlyTheRecordsAfterIt(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns, sq := r.resetQueueIn(t, "replay", 3)
	topic, group := sq.Status.TopicName, sq.Status.GroupID
	now := time.Now()
	first := r.produceAt(t, topic, "first", 15, 3, now.Add(-10*time.Minute))
	second := r.produceAt(t, topic, "second", 15, 3, now.Add(-5*time.Minute))
	all := r.shareConsume(t, group, topic, append(append([]string{}, first...), second...))
	for v, n := range all {
		if n != 1 {
			t.Fatalf("first pass: %s delivered %d times", v, n)
		}
	}

	cases := []struct {
		name string
		set  func(*kqv1.OffsetResetSpec)
	}{
		{"toDatetime", func(s *kqv1.OffsetResetSpec) { s.ToDatetime = &metav1.Time{Time: now.Add(-450 * time.Second)} }},
		{"byDuration", func(s *kqv1.OffsetResetSpec) { s.ByDuration = &metav1.Duration{Duration: 450 * time.Second} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			or := r.createReset(t, newReset(ns, sq.Name, c.set))
			or = r.waitReset(t, or, 60*time.Second, complete)
			ts := or.Status.ResolvedTimestamp
			if ts == nil || ts.Time.Before(now.Add(-10*time.Minute)) || !ts.Time.Before(now.Add(-5*time.Minute)) {
				t.Errorf("resolvedTimestamp %v, want between the two batches", ts)
			}
			// Each partition holds 5 records of each batch: the second starts at offset 5.
			assertTargets(t, or, map[int32]int64{0: 5, 1: 5, 2: 5}, true)
			// before is the brokers' share-partition start offset, which Kafka 4.4 does not
			// move past records merely acknowledged (docs/kafka-findings.md): anything from 0 to
			// the end offset 10.
			for _, p := range or.Status.Partitions {
				if *p.Before < 0 || *p.Before > 10 {
					t.Errorf("partition %d: before %d, want within the log (0 to 10)", p.Partition, *p.Before)
				}
			}
			got := r.shareConsume(t, group, topic, second)
			var extra []string
			for v, n := range got {
				if strings.HasPrefix(v, "first-") || n != 1 {
					extra = append(extra, fmt.Sprintf("%s×%d", v, n))
				}
			}
			sort.Strings(extra)
			if len(got) != len(second) || len(extra) > 0 {
				t.Errorf("after the reset received %d distinct records (want the %d of the second batch, once each); unexpected: %v", len(got), len(second), extra)
			}
		})
	}
}

// Applied once, even across manager restarts: a finished reset is not applied again by a
// newly started reconciler (fresh Kafka clients, nothing in memory) although "latest" has
// moved since; and targets recorded in status before a manager stopped are applied as
// recorded, never resolved again.
func TestOffsetResetAppliedOnceAcrossRestarts(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns, sq := r.resetQueueIn(t, "once", 2)
	topic, group := sq.Status.TopicName, sq.Status.GroupID
	r.produceAt(t, topic, "a", 10, 2, time.Time{})

	done := r.createReset(t, newReset(ns, sq.Name, func(s *kqv1.OffsetResetSpec) { s.ToLatest = yes }))
	done = r.waitReset(t, done, 60*time.Second, complete)
	applied := r.startOffsets(t, group, topic)
	r.produceAt(t, topic, "b", 10, 2, time.Time{})

	// A restarted manager: a new reconciler with its own Kafka client pool.
	pool := kafka.NewPool()
	defer pool.Close()
	fresh := &OffsetResetReconciler{Client: r.k8s, APIReader: r.k8s, Pool: pool, KafkaTimeout: 10 * time.Second}
	if _, err := fresh.Reconcile(ctxFor(t), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(done)}); err != nil {
		t.Fatal(err)
	}
	var again kqv1.OffsetReset
	if err := r.k8s.Get(ctxFor(t), client.ObjectKeyFromObject(done), &again); err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != done.ResourceVersion {
		t.Errorf("a restarted reconciler rewrote a finished reset: %+v", again.Status)
	}
	if got := r.startOffsets(t, group, topic); fmt.Sprint(got) != fmt.Sprint(applied) {
		t.Errorf("start offsets %v after the restart, want %v as applied (end offsets now %v)", got, applied, r.endOffsets(t, topic))
	}

	// Targets recorded, not applied (the manager stopped in between): while a member holds the
	// reset back, its status gets recorded targets, as a stopped manager leaves them. Once the
	// member leaves, exactly those are applied, although "latest" has moved.
	leave := r.joinMember(t, group, topic)
	pending := r.createReset(t, newReset(ns, sq.Name, func(s *kqv1.OffsetResetSpec) { s.ToLatest = yes }))
	pending = r.waitReset(t, pending, 60*time.Second, conditionWith(kqv1.ConditionComplete, metav1.ConditionFalse, kqv1.ReasonMembersPresent))
	base := pending.DeepCopy()
	recorded := map[int32]int64{0: 2, 1: 3}
	recordTargets(&pending.Status, applied, recorded, time.Now(), time.Time{})
	pending.Status.Topic, pending.Status.GroupID, pending.Status.Phase = topic, group, kqv1.OffsetResetApplying
	if err := r.k8s.Status().Patch(ctxFor(t), pending, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	r.produceAt(t, topic, "c", 10, 2, time.Time{})
	leave()
	pending = r.waitReset(t, pending, 2*time.Minute, complete)
	assertTargets(t, pending, recorded, true)
	if got := r.startOffsets(t, group, topic); fmt.Sprint(got) != fmt.Sprint(recorded) {
		t.Errorf("start offsets %v, want the recorded %v (not the end offsets %v)", got, recorded, r.endOffsets(t, topic))
	}
}

// A reset whose queue is deleted after its targets were recorded (a manager stopped between
// recording and applying, the queue deleted meanwhile) fails, naming the queue and the
// targets, instead of waiting for a queue that will not come back with that topic.
func TestOffsetResetOfADeletedQueueFailsOnceTargetsAreRecorded(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns, sq := r.resetQueueIn(t, "gone", 2)
	topic, group := sq.Status.TopicName, sq.Status.GroupID
	r.produceAt(t, topic, "a", 6, 2, time.Time{})
	leave := r.joinMember(t, group, topic)
	defer leave()
	or := r.createReset(t, newReset(ns, sq.Name, func(s *kqv1.OffsetResetSpec) { s.ToLatest = yes }))
	or = r.waitReset(t, or, 60*time.Second, conditionWith(kqv1.ConditionComplete, metav1.ConditionFalse, kqv1.ReasonMembersPresent))
	base := or.DeepCopy()
	recordTargets(&or.Status, nil, map[int32]int64{0: 3, 1: 3}, time.Now(), time.Time{})
	or.Status.Topic, or.Status.GroupID, or.Status.Phase = topic, group, kqv1.OffsetResetApplying
	if err := r.k8s.Status().Patch(ctxFor(t), or, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if err := r.k8s.Delete(ctxFor(t), sq); err != nil {
		t.Fatal(err)
	}
	or = r.waitReset(t, or, 90*time.Second, conditionWith(kqv1.ConditionFailed, metav1.ConditionTrue, kqv1.ReasonQueueNotFound, "was deleted after the targets", topic, "p0 -→3"))
	if or.Status.Phase != kqv1.OffsetResetFailed || or.Status.CompletionTime == nil {
		t.Errorf("phase %s, completionTime %v; want Failed with a completion time", or.Status.Phase, or.Status.CompletionTime)
	}
}

// On a cluster formatted at release 4.1 (share.version 0) a reset is held back with
// Complete=False/ShareGroupsDisabled naming the level and how to finalize it, and nothing is
// resolved or sent; once share.version 1 is finalized it completes.
func TestOffsetResetWaitsForShareGroups(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	k, admin := startKafka(t, rig.KafkaOptions{ReleaseVersion: "4.1"})
	ns := r.newNamespace(t)
	kc := r.createCluster(t, ns, "local", k, nil, func(kc *kqv1.KafkaCluster) string {
		if kc.Status.ShareVersion != 0 {
			return fmt.Sprintf("shareVersion %d, want 0", kc.Status.ShareVersion)
		}
		return condIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionTrue, "")
	})
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old"},
		Spec: kqv1.ShareQueueSpec{ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Partitions: 2}}}
	if err := r.k8s.Create(ctxFor(t), sq); err != nil {
		t.Fatal(err)
	}
	or := r.createReset(t, newReset(ns, sq.Name, func(s *kqv1.OffsetResetSpec) { s.ToLatest = yes }))
	or = r.waitReset(t, or, 60*time.Second, conditionWith(kqv1.ConditionComplete, metav1.ConditionFalse, kqv1.ReasonShareGroupsDisabled, "share.version=0", "share.version >= 1"))
	if or.Status.Phase != kqv1.OffsetResetWaiting || len(or.Status.Partitions) != 0 {
		t.Errorf("status %+v: want phase Waiting, nothing resolved", or.Status)
	}
	if got, err := admin.ShareStartOffsets(ctxFor(t), "old", "old"); err == nil && len(got) > 0 {
		t.Errorf("group old has start offsets %v while share groups are off", got)
	}

	patch := client.MergeFrom(kc.DeepCopy())
	kc.Spec.FeaturePolicy = kqv1.FeaturePolicyFinalize
	kc.Spec.TargetShareVersion = ptr.To[int32](1)
	if err := r.k8s.Patch(ctxFor(t), kc, patch); err != nil {
		t.Fatal(err)
	}
	or = r.waitReset(t, or, 2*time.Minute, complete)
	if len(or.Status.Partitions) != 2 {
		t.Errorf("partitions %+v, want both", or.Status.Partitions)
	}
}
