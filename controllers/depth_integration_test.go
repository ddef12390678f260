package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// The rig's depth poller: testDepthInterval (metrics) and testDepthStatusInterval (status).
const (
	testDepthInterval       = 10 * time.Second
	testDepthStatusInterval = 20 * time.Second
)

// produceTo writes n records to topic, spread over its partitions.
func (r *testRig) produceTo(t *testing.T, topic string, n int) {
	t.Helper()
	if err := rig.ProduceSpread(ctxFor(t), r.kafka.BootstrapServers(), topic, n); err != nil {
		t.Fatal(err)
	}
}

// makeUnreadable deletes the queue's topic after switching the queue to ObserveOnly, so the
// operator does not recreate it: the queue's depth can then not be read.
func (r *testRig) makeUnreadable(t *testing.T, sq *kqv1.ShareQueue) {
	t.Helper()
	ctx := ctxFor(t)
	var cur kqv1.ShareQueue
	if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), &cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Annotations = map[string]string{kqv1.ReconcileAnnotation: string(kqv1.ReconcileObserveOnly)}
	if err := r.k8s.Patch(ctx, &cur, patch); err != nil {
		t.Fatal(err)
	}
	if res, err := r.admin.DeleteTopics(ctx, sq.Status.TopicName); err != nil || res[sq.Status.TopicName] != nil {
		t.Fatalf("deleting the topic: %v %v", err, res)
	}
}

// metricSum sums the series of name whose labels include want.
func metricSum(name string, want map[string]string) float64 {
	mfs, _ := metrics.Registry.Gather()
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelsMatch(m, want) {
				total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return total
}

// newDepthQueue creates a ShareQueue of 3 partitions with the given autoOffsetReset and
// waits until it is Ready.
func (r *testRig) newDepthQueue(t *testing.T, ns, name, reset string) *kqv1.ShareQueue {
	t.Helper()
	// The topic and group default to the queue's name, and the package shares one broker and
	// claims topic: names of their own keep a queue named like another test's (shop/orders,
	// say) from holding that test's topic or group.
	unique := fmt.Sprintf("%s-%s-%d", name, ns, time.Now().UnixNano())
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Name: unique, Partitions: 3},
		GroupID:  unique,
		Delivery: kqv1.DeliverySpec{AutoOffsetReset: ptr.To(reset)}}}
	if err := r.k8s.Create(ctxFor(t), sq); err != nil {
		t.Fatal(err)
	}
	return r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
}

func queueSeries(sq *kqv1.ShareQueue) map[string]string {
	return map[string]string{"namespace": sq.Namespace, "name": sq.Name}
}

// consumeAndAccept acquires and accepts n records of the queue with a share consumer.
func (r *testRig) consumeAndAccept(t *testing.T, ctx context.Context, sq *kqv1.ShareQueue, n int) {
	t.Helper()
	m, err := kafka.NewShareMember(kafka.Config{BootstrapServers: r.kafka.BootstrapServers()}, sq.Status.GroupID, sq.Status.TopicName, 500, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	acked := 0
	for acked < n && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		recs, _ := m.Poll(pctx, n-acked)
		cancel()
		for _, rec := range recs {
			if err := m.Acknowledge(ctx, rec, kafka.AckAccept); err != nil {
				t.Fatal(err)
			}
			acked++
		}
	}
	if acked != n {
		t.Fatalf("accepted %d of %d records", acked, n)
	}
}

// Issue 17: 5,000 records produced to a queue whose group had never been assigned the
// partitions showed no lag at all for minutes. The backlog metric counts them within 30 s
// (one --depth-interval plus a read), as share.auto.offset.reset says: all of them for
// earliest, none for latest; it falls as a share consumer accepts records; the oldest
// record's age follows; status.depth carries the same figures.
func TestDepthMetricsFollowTheBacklog(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	early := r.newDepthQueue(t, ns, "early", "earliest")
	late := r.newDepthQueue(t, ns, "late", "latest")
	r.produceTo(t, early.Status.TopicName, 5000)
	r.produceTo(t, late.Status.TopicName, 5000)
	produced := time.Now()

	expect := func(sq *kqv1.ShareQueue, want float64, within time.Duration) {
		t.Helper()
		eventually(t, within, func() string {
			v, ok := metricValue("kafkaqueues_queue_backlog_records", queueSeries(sq))
			old, _ := metricValue("kafkaqueues_queue_lag_records", queueSeries(sq))
			unread, _ := metricValue("kafkaqueues_queue_depth_unread_partitions", queueSeries(sq))
			if !ok || v != want || old != want || unread != 0 {
				return fmt.Sprintf("%s: backlog %v (present %v), lag_records %v, unread %v; want %v", sq.Name, v, ok, old, unread, want)
			}
			return ""
		})
	}
	expect(early, 5000, 30*time.Second)
	expect(late, 0, 30*time.Second)
	if age, ok := metricValue("kafkaqueues_queue_oldest_record_age_seconds", queueSeries(early)); !ok || age <= 0 || age > time.Since(produced).Seconds()+5 {
		t.Errorf("oldest record age %v (present %v), want between 0 and %v", age, ok, time.Since(produced).Seconds()+5)
	}
	if age, _ := metricValue("kafkaqueues_queue_oldest_record_age_seconds", queueSeries(late)); age != 0 {
		t.Errorf("oldest record age of a queue without backlog %v, want 0", age)
	}
	// The topic's retention beside the age (the broker default, 7 days: the queue sets none).
	if ret, ok := metricValue("kafkaqueues_queue_topic_retention_seconds", queueSeries(early)); !ok || ret != 7*24*3600 {
		t.Errorf("topic retention %v (present %v), want the broker default 604800", ret, ok)
	}
	// ... and the queue's own once it sets one.
	var cur kqv1.ShareQueue
	if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(late), &cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Topic.Config = map[string]string{"retention.ms": "3600000"}
	if err := r.k8s.Patch(ctx, &cur, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		if ret, ok := metricValue("kafkaqueues_queue_topic_retention_seconds", queueSeries(late)); !ok || ret != 3600 {
			return fmt.Sprintf("topic retention %v (present %v) after spec.topic.config retention.ms=3600000, want 3600", ret, ok)
		}
		return ""
	})

	// A share consumer accepts 2,000: the backlog falls to 3,000, then to 0 when it has all.
	r.consumeAndAccept(t, ctx, early, 2000)
	expect(early, 3000, 30*time.Second)
	r.consumeAndAccept(t, ctx, early, 3000)
	expect(early, 0, 30*time.Second)
	if age, _ := metricValue("kafkaqueues_queue_oldest_record_age_seconds", queueSeries(early)); age != 0 {
		t.Errorf("oldest record age of a drained queue %v, want 0", age)
	}

	// status.depth says the same, at its slower cadence.
	eventually(t, 2*testDepthStatusInterval+testDepthInterval, func() string {
		var cur kqv1.ShareQueue
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(late), &cur); err != nil {
			return err.Error()
		}
		d := cur.Status.Depth
		if d == nil || d.Backlog == nil || *d.Backlog != 0 || d.Error != "" || d.ObservedAt.IsZero() {
			return fmt.Sprintf("late status.depth %+v", d)
		}
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(early), &cur); err != nil {
			return err.Error()
		}
		if d = cur.Status.Depth; d == nil || d.Backlog == nil || *d.Backlog != 0 || d.OldestRecordTime != nil {
			return fmt.Sprintf("early status.depth %+v", d)
		}
		return ""
	})
}

// A queue whose topic cannot be read loses its depth series within one interval instead of
// keeping the last value (issue 17: an autoscaler acting on it acted on old news); its
// last-read timestamp stays, and status.depth says why instead of carrying figures.
func TestDepthSeriesGoAbsentWhenTheQueueCannotBeRead(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	sq := r.newDepthQueue(t, ns, "unreadable", "earliest")
	r.produceTo(t, sq.Status.TopicName, 100)
	eventually(t, 30*time.Second, func() string {
		if v, _ := metricValue("kafkaqueues_queue_backlog_records", queueSeries(sq)); v != 100 {
			return fmt.Sprintf("backlog %v, want 100", v)
		}
		return ""
	})
	r.makeUnreadable(t, sq)
	deleted := time.Now()
	eventually(t, 30*time.Second, func() string {
		if name, v, ok := exportedDepthSeries(sq); ok {
			return fmt.Sprintf("%s still exported (%v) for a queue whose topic is gone", name, v)
		}
		return ""
	})
	last, ok := metricValue("kafkaqueues_queue_depth_last_read_timestamp_seconds", queueSeries(sq))
	if !ok || last > float64(deleted.Unix())+1 {
		t.Errorf("last read %v (present %v), want the last read before the topic went (%d)", last, ok, deleted.Unix())
	}
	eventually(t, 2*testDepthStatusInterval+testDepthInterval, func() string {
		var got kqv1.ShareQueue
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), &got); err != nil {
			return err.Error()
		}
		if d := got.Status.Depth; d == nil || d.Error == "" || d.Backlog != nil {
			return fmt.Sprintf("status.depth %+v, want an error and no backlog", d)
		}
		return ""
	})
}

// The poller reads many queues with one DescribeShareGroupOffsets per group coordinator
// (one broker: one) per round, and one or two ListOffsets and at most one Fetch per leader,
// not one of each per queue.
func TestDepthPollBatchesRequestsAcrossQueues(t *testing.T) {
	// Not parallel: it reads the process-wide kafkaqueues_kafka_broker_requests_total, which parallel tests would add to.
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	const n = 30
	for i := 0; i < n; i++ {
		sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("many-%d", i)}, Spec: kqv1.ShareQueueSpec{
			ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Partitions: 1},
			Delivery: kqv1.DeliverySpec{AutoOffsetReset: ptr.To("earliest")}}}
		if err := r.k8s.Create(ctx, sq); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i++ {
		sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("many-%d", i)}}
		r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
		r.produceTo(t, sq.Name, 1)
	}
	eventually(t, 30*time.Second, func() string {
		for i := 0; i < n; i++ {
			if v, _ := metricValue("kafkaqueues_queue_backlog_records", map[string]string{"namespace": ns, "name": fmt.Sprintf("many-%d", i)}); v != 1 {
				return fmt.Sprintf("many-%d backlog %v, want 1", i, v)
			}
		}
		return ""
	})
	// Every queue's waiting record is dated in the same round (issue 30: one Fetch per round
	// dated only the first partition with data, so one queue of the 30 had an age at a time).
	eventually(t, 30*time.Second, func() string {
		for i := 0; i < n; i++ {
			key := map[string]string{"namespace": ns, "name": fmt.Sprintf("many-%d", i)}
			age, _ := metricValue("kafkaqueues_queue_oldest_record_age_seconds", key)
			unread, _ := metricValue("kafkaqueues_queue_depth_unread_partitions", key)
			if age <= 0 || unread != 0 {
				return fmt.Sprintf("many-%d: oldest record age %v, unread partitions %v; want an age and 0 unread", i, age, unread)
			}
		}
		return ""
	})
	// Every KafkaCluster of the rig (other tests' namespaces too) has its own poller round:
	// compare the requests with the rounds of all of them.
	rounds := func() float64 {
		var kcs kqv1.KafkaClusterList
		if err := r.k8s.List(ctx, &kcs); err != nil {
			t.Fatal(err)
		}
		total := 0.0
		for _, kc := range kcs.Items {
			for _, o := range []string{"ok", "error"} {
				v, _ := metricValue("kafkaqueues_depth_polls_total", map[string]string{"namespace": kc.Namespace, "name": kc.Name, "outcome": o})
				total += v
			}
		}
		return total
	}
	var kcs kqv1.KafkaClusterList
	if err := r.k8s.List(ctx, &kcs); err != nil {
		t.Fatal(err)
	}
	// DescribeShareGroupOffsets as written to the brokers (nothing else in the operator sends
	// it); ListOffsets and Fetch as the operator's admin calls (the claims topic's consumer
	// also fetches), each of which is one request per leader on this one-broker rig.
	reqs := func(api string) float64 {
		if api == "DescribeShareGroupOffsets" {
			v, _ := metricValue("kafkaqueues_kafka_broker_requests_total", map[string]string{"api": api})
			return v
		}
		return metricSum("kafkaqueues_kafka_requests_total", map[string]string{"api": api})
	}
	apis := []string{"DescribeShareGroupOffsets", "ListOffsets", "Fetch"}
	before := map[string]float64{}
	for _, a := range apis {
		before[a] = reqs(a)
	}
	r0 := rounds()
	time.Sleep(3 * testDepthInterval)
	r1 := rounds()
	// A round in flight when the window closes may have sent its requests but not yet
	// counted itself: one per cluster of slack.
	slack := float64(len(kcs.Items))
	if r1-r0 < 2 {
		t.Fatalf("only %v poller rounds in %v", r1-r0, 3*testDepthInterval)
	}
	limits := map[string]float64{"DescribeShareGroupOffsets": 1, "ListOffsets": 2, "Fetch": 1}
	for _, a := range apis {
		got := reqs(a) - before[a]
		if got > limits[a]*(r1-r0+slack) {
			t.Errorf("%s: %v requests in %v rounds over %d clusters with %d queues in this one; want at most %v per round", a, got, r1-r0, len(kcs.Items), n, limits[a])
		}
	}
	if got := reqs("DescribeShareGroupOffsets") - before["DescribeShareGroupOffsets"]; got < 1 {
		t.Errorf("no DescribeShareGroupOffsets in %v rounds", r1-r0)
	}
}

// status.depth is written at --depth-status-interval, never at the metrics' pace: while the
// backlog changes every few seconds, two writes of one queue's status.depth are at least
// the status interval apart, and the metric changes more often than the status.
func TestDepthStatusIsWrittenAtTheSlowerCadence(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	sq := r.newDepthQueue(t, ns, "cadence", "earliest")
	var observed []time.Time
	metricValues := map[float64]bool{}
	for end := time.Now().Add(3*testDepthStatusInterval + testDepthInterval); time.Now().Before(end); time.Sleep(time.Second) {
		r.produceTo(t, sq.Status.TopicName, 3)
		var cur kqv1.ShareQueue
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), &cur); err != nil {
			t.Fatal(err)
		}
		if d := cur.Status.Depth; d != nil && (len(observed) == 0 || !d.ObservedAt.Time.Equal(observed[len(observed)-1])) {
			observed = append(observed, d.ObservedAt.Time)
		}
		if v, ok := metricValue("kafkaqueues_queue_backlog_records", queueSeries(sq)); ok {
			metricValues[v] = true
		}
	}
	if len(observed) < 2 {
		t.Fatalf("status.depth written %d times in %v, want at least 2", len(observed), 3*testDepthStatusInterval+testDepthInterval)
	}
	for i := 1; i < len(observed); i++ {
		// observedAt is stored to the second.
		if gap := observed[i].Sub(observed[i-1]); gap < testDepthStatusInterval-time.Second {
			t.Errorf("status.depth written %v after the previous write, want at least %v", gap, testDepthStatusInterval)
		}
	}
	if len(metricValues) <= len(observed) {
		t.Errorf("the metric took %d values and the status %d: the metric should be the fresher", len(metricValues), len(observed))
	}
}
