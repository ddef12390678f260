package verify

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/twmb/franz-go/pkg/kgo"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// Issue 30, case 3: status.depth said nothing of the oldest record (or dated another
// partition's) while records waited; Check reads the depth itself and finds both: a status
// whose oldestRecordTime is absent, or later than the oldest waiting record, is false; the
// right one holds.
func TestCheckCatchesAWrongOldestRecordTime(t *testing.T) {
	// Not parallel: it stops its manager and writes statuses by hand (see docs/testing.md).
	s := startSuite(t)
	ns := s.namespace(t)
	stopManager := s.startManager(t, ns)
	ctx := ctxFor(t)
	local := cluster(ns, "local", s.kafka.BootstrapServers())
	names := []string{"dated", "undated", "other-partition"}
	qs := map[string]*kqv1.ShareQueue{}
	objs := []client.Object{local}
	for _, n := range names {
		qs[n] = queue(ns, n, "local", kqv1.DeliverySpec{AutoOffsetReset: ptr.To("earliest")})
		qs[n].Spec.Topic.Partitions = 3
		objs = append(objs, qs[n])
	}
	s.create(t, objs...)
	for _, o := range objs {
		s.waitTrue(t, o, kqv1.ConditionReady)
	}
	stopManager()

	// Every topic: its oldest record an hour old in partition 2, a fresh one in 0 and 1.
	now := time.Now().Truncate(time.Second)
	old, fresh := now.Add(-time.Hour), now.Add(-time.Minute)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.kafka.BootstrapServers()...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.UnknownTopicRetries(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for _, q := range qs {
		for p, ts := range []time.Time{fresh, fresh, old} {
			recs = append(recs, &kgo.Record{Topic: q.Status.TopicName, Partition: int32(p), Timestamp: ts, Value: []byte("waiting")})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for n, oldest := range map[string]*metav1.Time{"dated": ptr.To(metav1.NewTime(old)), "undated": nil, "other-partition": ptr.To(metav1.NewTime(fresh))} {
		q := qs[n]
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(q), q); err != nil {
			t.Fatal(err)
		}
		q.Status.Depth = &kqv1.QueueDepthStatus{ObservedAt: metav1.NewTime(now), Backlog: ptr.To[int64](3), OldestRecordTime: oldest}
		if err := s.k8s.Status().Update(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := Check(ctx, s.k8s, Options{Namespace: ns, SkipJoin: true})
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[string]int{"dated": 0, "undated": 1, "other-partition": 1} {
		if got := find(rep, KindShareQueue, n, "status.depth.oldestRecordTime"); len(got) != want {
			t.Errorf("%s: %d findings on status.depth.oldestRecordTime (%v), want %d", n, len(got), got, want)
		}
	}
	if len(rep.Findings) != 2 {
		t.Errorf("findings %v, want only the two oldestRecordTime ones", rep.Findings)
	}
}

// Issue 30, case 2: an OffsetReset said Complete while the group held no state at its targets.
// Check compares what a Complete reset read back with the group's start offsets now: the
// reset the operator made holds; a status whose read-back the group does not have is false.
func TestCheckComparesACompleteOffsetReset(t *testing.T) {
	// Not parallel: it stops its manager and writes a status by hand (see docs/testing.md).
	s := startSuite(t)
	ns := s.namespace(t)
	stopManager := s.startManager(t, ns)
	ctx := ctxFor(t)
	local := cluster(ns, "local", s.kafka.BootstrapServers())
	q := queue(ns, "purged", "local", kqv1.DeliverySpec{AutoOffsetReset: ptr.To("earliest")})
	q.Spec.Topic.Partitions = 2
	s.create(t, local, q)
	s.waitTrue(t, local, kqv1.ConditionReady)
	s.waitTrue(t, q, kqv1.ConditionReady)
	if err := rig.ProduceSpread(ctx, s.kafka.BootstrapServers(), q.Status.TopicName, 6); err != nil {
		t.Fatal(err)
	}
	or := &kqv1.OffsetReset{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "purge"}, Spec: kqv1.OffsetResetSpec{
		QueueRef: kqv1.QueueReference{Name: "purged"}, ToLatest: ptr.To(true)}}
	s.create(t, or)
	s.waitComplete(t, or)
	rep, err := Check(ctx, s.k8s, Options{Namespace: ns, SkipJoin: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) > 0 || rep.ClaimsByKind[KindOffsetReset] != 1 {
		t.Fatalf("the operator's reset: findings %v, OffsetReset claims %d; want none and 1", rep.Findings, rep.ClaimsByKind[KindOffsetReset])
	}
	stopManager()
	// The status claims a read-back the group does not have.
	for i := range or.Status.Partitions {
		or.Status.Partitions[i].After = ptr.To[int64](1_000_000)
	}
	if err := s.k8s.Status().Update(ctx, or); err != nil {
		t.Fatal(err)
	}
	if rep, err = Check(ctx, s.k8s, Options{Namespace: ns, SkipJoin: true}); err != nil {
		t.Fatal(err)
	}
	if got := find(rep, KindOffsetReset, "purge", "status.partitions[].after"); len(got) != 1 || !strings.Contains(got[0].Observed, "p0: starts at") {
		t.Errorf("findings %v, want the reset's read-back false (p0 starts before 1000000)", rep.Findings)
	}
}

// A breaker's finding on issue 30: after a queue's topic was deleted outside the operator and
// the queue made it again (TopicDeleted), Check called the queue's earlier Complete
// OffsetReset false, for ever: the new topic's group holds no state at the old read-back. The
// reset records the topic id it was resolved on; one resolved on another id than the queue's
// claims nothing.
func TestCheckSkipsAResetOfATopicMadeAgain(t *testing.T) {
	t.Parallel()
	s := startSuite(t)
	ns := s.namespace(t)
	s.startManager(t, ns)
	ctx := ctxFor(t)
	local := cluster(ns, "local", s.kafka.BootstrapServers())
	q := queue(ns, "remade", "local", kqv1.DeliverySpec{AutoOffsetReset: ptr.To("earliest")})
	s.create(t, local, q)
	s.waitTrue(t, q, kqv1.ConditionReady)
	if err := rig.ProduceSpread(ctx, s.kafka.BootstrapServers(), q.Status.TopicName, 4); err != nil {
		t.Fatal(err)
	}
	or := &kqv1.OffsetReset{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "purge"}, Spec: kqv1.OffsetResetSpec{
		QueueRef: kqv1.QueueReference{Name: "remade"}, ToLatest: ptr.To(true)}}
	s.create(t, or)
	s.waitComplete(t, or)
	if or.Status.TopicID == "" || or.Status.TopicID != q.Status.TopicID {
		t.Fatalf("the reset recorded topic id %q, want the queue's %q", or.Status.TopicID, q.Status.TopicID)
	}
	rep, err := Check(ctx, s.k8s, Options{Namespace: ns, SkipJoin: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) > 0 || rep.ClaimsByKind[KindOffsetReset] != 1 {
		t.Fatalf("before the topic is made again: findings %v, OffsetReset claims %d; want none and 1", rep.Findings, rep.ClaimsByKind[KindOffsetReset])
	}

	old := q.Status.TopicID
	if _, err := s.admin.DeleteTopics(ctx, q.Status.TopicName); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, 90*time.Second, func() string {
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(q), q); err != nil {
			return err.Error()
		}
		if q.Status.TopicID == old || q.Status.TopicID == "" {
			return fmt.Sprintf("queue's status.topicId %q, want the new topic's", q.Status.TopicID)
		}
		return ""
	})
	s.waitTrue(t, q, kqv1.ConditionReady)
	rig.Eventually(t, 60*time.Second, func() string {
		rep, err := Check(ctx, s.k8s, Options{Namespace: ns, SkipJoin: true})
		if err != nil {
			return err.Error()
		}
		if len(rep.Findings) > 0 || rep.ClaimsByKind[KindOffsetReset] != 0 {
			return fmt.Sprintf("after the topic was made again: findings %v, OffsetReset claims %d; want none and 0 (the reset was on the old topic)", rep.Findings, rep.ClaimsByKind[KindOffsetReset])
		}
		return ""
	})

	// A second breaker finding: a topic made again by hand, while the queue (paused here)
	// still holds the old id. The newest reset was resolved on the queue's id; Kafka's topic
	// is another now, so the reset claims nothing there either.
	or2 := &kqv1.OffsetReset{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "purge-again"}, Spec: kqv1.OffsetResetSpec{
		QueueRef: kqv1.QueueReference{Name: "remade"}, ToLatest: ptr.To(true)}}
	s.create(t, or2)
	s.waitComplete(t, or2)
	if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(q), q); err != nil {
		t.Fatal(err)
	}
	base := q.DeepCopy()
	q.Annotations = map[string]string{kqv1.ReconcileAnnotation: kqv1.ReconcilePaused}
	if err := s.k8s.Patch(ctx, q, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.admin.DeleteTopics(ctx, q.Status.TopicName); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, 60*time.Second, func() string {
		out, err := s.admin.CreateTopics(ctx, []kafka.NewTopic{{Name: q.Status.TopicName, Partitions: 1, ReplicationFactor: 1}})
		if err != nil {
			return err.Error()
		}
		if e := out[q.Status.TopicName].Err; e != nil {
			return e.Error() // TOPIC_ALREADY_EXISTS while the deletion completes
		}
		return ""
	})
	rig.Eventually(t, 60*time.Second, func() string {
		rep, err := Check(ctx, s.k8s, Options{Namespace: ns, SkipJoin: true})
		if err != nil {
			return err.Error()
		}
		if f := find(rep, KindOffsetReset, "purge-again", "status.partitions[].after"); len(f) > 0 || rep.ClaimsByKind[KindOffsetReset] != 0 {
			return fmt.Sprintf("after the topic was made again by hand: reset findings %v, OffsetReset claims %d; want none and 0", f, rep.ClaimsByKind[KindOffsetReset])
		}
		return ""
	})
}

// waitComplete waits until or is Complete and reads it into or.
func (s *suite) waitComplete(t *testing.T, or *kqv1.OffsetReset) {
	t.Helper()
	rig.Eventually(t, 90*time.Second, func() string {
		if err := s.k8s.Get(ctxFor(t), client.ObjectKeyFromObject(or), or); err != nil {
			return err.Error()
		}
		if or.Status.Phase != kqv1.OffsetResetComplete {
			return fmt.Sprintf("phase %q, want Complete", or.Status.Phase)
		}
		return ""
	})
}
