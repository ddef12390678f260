package controllers

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// redriveFixture creates a cluster, a ShareQueue (3 partitions) and a Republisher-mode
// DeadLetterRoute with a 2-partition dead-letter topic, and waits for both.
func (r *testRig) redriveFixture(t *testing.T) (ns, queueTopic, dlqTopic string) {
	t.Helper()
	ns = r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	queueTopic, dlqTopic = "work-"+ns, "work-dead-"+ns
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Name: queueTopic, Partitions: 3}, GroupID: "work-" + ns,
		Delivery: kqv1.DeliverySpec{MaxDeliveryAttempts: ptr.To[int32](3)}}}
	if err := r.k8s.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	dlr := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work-dead"}, Spec: kqv1.DeadLetterRouteSpec{
		QueueRef: kqv1.QueueReference{Name: "work"}, Mode: kqv1.DeadLetterModeRepublisher,
		Topic: kqv1.DeadLetterTopicSpec{Name: dlqTopic, Partitions: 2}}}
	if err := r.k8s.Create(ctx, dlr); err != nil {
		t.Fatal(err)
	}
	r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
	r.waitRoute(t, dlr, kqv1.ConditionReady, metav1.ConditionTrue)
	return ns, queueTopic, dlqTopic
}

// produceRecords writes rs to topic (acks=all, idempotent) and fails the test on any error.
func produceRecords(t *testing.T, bootstrap []string, topic string, rs []*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.DefaultProduceTopic(topic), kgo.UnknownTopicRetries(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// deadLetter is a record as the republisher writes it: key, value, the app's header, and
// the provenance headers (source partition, reason), plus extra headers.
func deadLetter(id string, partition int, reason string, extra ...kgo.RecordHeader) *kgo.Record {
	hs := []kgo.RecordHeader{{Key: "app", Value: []byte("h-" + id)},
		{Key: "kqo.source.partition", Value: []byte(strconv.Itoa(partition))}, {Key: "kqo.reason", Value: []byte(reason)}}
	return &kgo.Record{Key: []byte("k-" + id), Value: []byte(id), Headers: append(hs, extra...)}
}

// readCommitted reads every record of topic with isolation level read_committed until
// nothing new arrives for quiet.
func readCommitted(t *testing.T, bootstrap []string, topic string, quiet time.Duration) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for {
		ctx, cancel := context.WithTimeout(context.Background(), quiet)
		fs := cl.PollFetches(ctx)
		cancel()
		rs := fs.Records()
		if len(rs) == 0 {
			return out
		}
		out = append(out, rs...)
	}
}

func header(r *kgo.Record, key string) string {
	v := ""
	for _, h := range r.Headers {
		if h.Key == key {
			v = string(h.Value)
		}
	}
	return v
}

// waitRedrive waits until the redrive reaches phase and returns it.
func (r *testRig) waitRedrive(t *testing.T, key client.ObjectKey, phase kqv1.DeadLetterRedrivePhase, timeout time.Duration) *kqv1.DeadLetterRedrive {
	t.Helper()
	out := &kqv1.DeadLetterRedrive{}
	eventually(t, timeout, func() string {
		if err := r.k8s.Get(ctxFor(t), key, out); err != nil {
			return err.Error()
		}
		if out.Status.Phase != phase {
			return fmt.Sprintf("DeadLetterRedrive %s: phase %q, want %s; status %+v", key.Name, out.Status.Phase, phase, out.Status)
		}
		return ""
	})
	return out
}

// The filter (kqo.reason, original partition) and the loop guard (maxRedrives), against the
// real broker: of 40 dead letters only the 10 selected ones that were not redriven too often
// are moved — with key, value and headers kept and kqo.redriven / kqo.redrive.count added —
// 10 at kqo.redrive.count=2 are refused (status, condition RecordsRefused, Warning Event), 20
// are filtered, and records dead-lettered after the redrive started (beyond its bound) stay.
func TestRedriveFilterAndLoopRefused(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns, queueTopic, dlqTopic := r.redriveFixture(t)
	ctx := ctxFor(t)
	bs := r.kafka.BootstrapServers()
	var rs []*kgo.Record
	for i := range 10 {
		rs = append(rs,
			deadLetter(fmt.Sprintf("move-%d", i), 1, "rejected"),
			deadLetter(fmt.Sprintf("other-reason-%d", i), 1, "lease-expired-on-last-attempt"),
			deadLetter(fmt.Sprintf("other-partition-%d", i), 0, "rejected"),
			deadLetter(fmt.Sprintf("looping-%d", i), 1, "rejected",
				kgo.RecordHeader{Key: "kqo.redriven", Value: []byte(ns + "/earlier")}, kgo.RecordHeader{Key: "kqo.redrive.count", Value: []byte("2")}))
	}
	produceRecords(t, bs, dlqTopic, rs)

	dr := &kqv1.DeadLetterRedrive{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "again"}, Spec: kqv1.DeadLetterRedriveSpec{
		RouteRef: kqv1.RouteReference{Name: "work-dead"}, MaxRedrives: ptr.To[int32](2),
		Filter: &kqv1.RedriveFilter{Reasons: []string{"rejected"}, SourcePartitions: []int32{1}}}}
	if err := r.k8s.Create(ctx, dr); err != nil {
		t.Fatal(err)
	}
	// Wait for the bound, then add a record it must not touch.
	eventually(t, 60*time.Second, func() string {
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(dr), dr); err != nil {
			return err.Error()
		}
		if len(dr.Status.Bound) == 0 {
			return fmt.Sprintf("no bound yet: %+v", dr.Status)
		}
		return ""
	})
	produceRecords(t, bs, dlqTopic, []*kgo.Record{deadLetter("late", 1, "rejected")})

	got := r.waitRedrive(t, client.ObjectKeyFromObject(dr), kqv1.RedriveComplete, 90*time.Second)
	st := got.Status
	if st.Total != 40 || st.Moved != 10 || st.Filtered != 20 || st.Refused != 10 {
		t.Errorf("status total/moved/filtered/refused = %d/%d/%d/%d, want 40/10/20/10", st.Total, st.Moved, st.Filtered, st.Refused)
	}
	if st.SourceTopic != dlqTopic || st.TargetTopic != queueTopic || st.StartTime == nil || st.CompletionTime == nil {
		t.Errorf("status topics/times: %+v", st)
	}
	if c := findCondition(st.Conditions, kqv1.ConditionComplete); c == nil || c.Status != metav1.ConditionTrue || c.Reason != kqv1.ReasonRedriveComplete {
		t.Errorf("Complete condition %+v", c)
	}
	c := findCondition(st.Conditions, kqv1.ConditionRecordsRefused)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != kqv1.ReasonRedriveLimitReached ||
		!strings.Contains(c.Message, "10 records") || !strings.Contains(c.Message, "spec.maxRedrives=2") || !strings.Contains(c.Message, "kqo.redrive.count") {
		t.Errorf("RecordsRefused condition %+v: want True/RedriveLimitReached naming the count, the field and the header", c)
	}
	eventually(t, 30*time.Second, func() string {
		var evs eventsv1.EventList
		if err := r.k8s.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return err.Error()
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "again" && e.Reason == kqv1.ReasonRedriveLimitReached && e.Type == "Warning" && strings.Contains(e.Note, "spec.maxRedrives=2") {
				return ""
			}
		}
		return "no Warning Event RedriveLimitReached for DeadLetterRedrive again"
	})

	moved := readCommitted(t, bs, queueTopic, 3*time.Second)
	seen := map[string]int{}
	for _, m := range moved {
		id := string(m.Value)
		seen[id]++
		if !strings.HasPrefix(id, "move-") {
			t.Errorf("record %s was moved; only move-* are selected and under the limit", id)
			continue
		}
		if string(m.Key) != "k-"+id || header(m, "app") != "h-"+id || header(m, "kqo.reason") != "rejected" {
			t.Errorf("record %s lost its key or headers: key %q headers %v", id, m.Key, m.Headers)
		}
		if header(m, "kqo.redriven") != ns+"/again" || header(m, "kqo.redrive.count") != "1" {
			t.Errorf("record %s: kqo.redriven=%q kqo.redrive.count=%q, want %s/again and 1", id, header(m, "kqo.redriven"), header(m, "kqo.redrive.count"), ns)
		}
	}
	for i := range 10 {
		if id := fmt.Sprintf("move-%d", i); seen[id] != 1 {
			t.Errorf("record %s is in the queue's topic %d times, want once", id, seen[id])
		}
	}
	if seen["late"] != 0 {
		t.Error("a record dead-lettered after the redrive started (beyond its bound) was moved")
	}
	// A second redrive of the route starts where the first stopped (startFrom
	// AfterPreviousRedrive): only the late record is read and moved; nothing moves twice.
	next := &kqv1.DeadLetterRedrive{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "next"}, Spec: kqv1.DeadLetterRedriveSpec{
		RouteRef: kqv1.RouteReference{Name: "work-dead"}}}
	if err := r.k8s.Create(ctx, next); err != nil {
		t.Fatal(err)
	}
	got2 := r.waitRedrive(t, client.ObjectKeyFromObject(next), kqv1.RedriveComplete, 90*time.Second)
	if s := got2.Status; s.Total != 1 || s.Moved != 1 {
		t.Errorf("second redrive total/moved %d/%d, want 1/1 (only the record that arrived after the first began); bound %+v", s.Total, s.Moved, s.Bound)
	}
	seen = map[string]int{}
	for _, m := range readCommitted(t, bs, queueTopic, 3*time.Second) {
		seen[string(m.Value)]++
	}
	if len(seen) != 11 || seen["late"] != 1 {
		t.Errorf("after the second redrive the queue holds %v, want move-0..9 and late, once each", seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("record %s is in the queue's topic %d times", id, n)
		}
	}

	// kafkaqueues_redrive_records_total counts what this (the only) manager did.
	for result, want := range map[string]float64{"moved": 11, "filtered": 20, "refused": 10} {
		if got := testutil.ToFloat64(redriveRecords.WithLabelValues(ns, "work-dead", result)); got != want {
			t.Errorf("kafkaqueues_redrive_records_total{result=%q} = %v, want %v", result, got, want)
		}
	}

	// The group that held the redrive's position is deleted once it is Complete.
	kcl, err := kgo.NewClient(kgo.SeedBrokers(bs...))
	if err != nil {
		t.Fatal(err)
	}
	defer kcl.Close()
	eventually(t, 30*time.Second, func() string {
		groups, err := kadm.NewClient(kcl).ListGroups(ctx)
		if err != nil {
			return err.Error()
		}
		if _, ok := groups[redriveID(got)]; ok {
			return fmt.Sprintf("consumer group %s still exists after completion", redriveID(got))
		}
		return ""
	})
}

// spec.rateLimit caps what status reports (recordsPerSecond never above it), and spec.cancel
// stops the redrive at a transaction boundary: phase Cancelled with condition Cancelled, and
// exactly status.moved records (read with read_committed) in the queue's topic.
func TestRedriveRateLimitAndCancel(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns, queueTopic, dlqTopic := r.redriveFixture(t)
	ctx := ctxFor(t)
	bs := r.kafka.BootstrapServers()
	var rs []*kgo.Record
	for i := range 300 {
		rs = append(rs, deadLetter(fmt.Sprintf("r-%d", i), i%3, "rejected"))
	}
	produceRecords(t, bs, dlqTopic, rs)
	dr := &kqv1.DeadLetterRedrive{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow"}, Spec: kqv1.DeadLetterRedriveSpec{
		RouteRef: kqv1.RouteReference{Name: "work-dead"}, RateLimit: ptr.To[int32](10)}}
	if err := r.k8s.Create(ctx, dr); err != nil {
		t.Fatal(err)
	}
	var rates []int64
	eventually(t, 90*time.Second, func() string {
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(dr), dr); err != nil {
			return err.Error()
		}
		if dr.Status.RecordsPerSecond > 0 {
			rates = append(rates, dr.Status.RecordsPerSecond)
		}
		if dr.Status.Moved < 20 {
			return fmt.Sprintf("moved %d, want at least 20 before cancelling", dr.Status.Moved)
		}
		return ""
	})
	if dr.Status.Total != 300 || dr.Status.Phase != kqv1.RedriveRunning {
		t.Errorf("while running: total %d phase %s, want 300 Running", dr.Status.Total, dr.Status.Phase)
	}
	if len(rates) == 0 {
		t.Error("status.recordsPerSecond never reported while running")
	}
	for _, v := range rates {
		if v > 10 {
			t.Errorf("status.recordsPerSecond %d above spec.rateLimit 10", v)
		}
	}
	// A second redrive of the same route waits for the running one, saying which.
	queued := &kqv1.DeadLetterRedrive{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "queued"}, Spec: kqv1.DeadLetterRedriveSpec{
		RouteRef: kqv1.RouteReference{Name: "work-dead"}}}
	if err := r.k8s.Create(ctx, queued); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(queued), queued); err != nil {
			return err.Error()
		}
		c := findCondition(queued.Status.Conditions, kqv1.ConditionComplete)
		if queued.Status.Phase != kqv1.RedrivePending || c == nil || c.Reason != kqv1.ReasonRedriveWaiting || !strings.Contains(c.Message, "DeadLetterRedrive slow") {
			return fmt.Sprintf("second redrive: phase %s condition %+v, want Pending/Waiting naming slow", queued.Status.Phase, c)
		}
		return ""
	})
	patch := client.MergeFrom(dr.DeepCopy())
	dr.Spec.Cancel = true
	if err := r.k8s.Patch(ctx, dr, patch); err != nil {
		t.Fatal(err)
	}
	got := r.waitRedrive(t, client.ObjectKeyFromObject(dr), kqv1.RedriveCancelled, 60*time.Second)
	if c := findCondition(got.Status.Conditions, kqv1.ConditionCancelled); c == nil || c.Status != metav1.ConditionTrue || c.Reason != kqv1.ReasonRedriveCancelled {
		t.Errorf("Cancelled condition %+v", c)
	}
	if got.Status.Moved >= 300 || got.Status.Moved < 20 || got.Status.CompletionTime == nil {
		t.Errorf("cancelled with moved %d of 300 (want between 20 and 299), completionTime %v", got.Status.Moved, got.Status.CompletionTime)
	}
	moved := readCommitted(t, bs, queueTopic, 3*time.Second)
	if int64(len(moved)) != got.Status.Moved {
		t.Errorf("queue topic holds %d committed records, status.moved says %d", len(moved), got.Status.Moved)
	}
	// The queued redrive starts where the cancelled one stopped (its status.bound nextOffset)
	// and moves the rest: every record is then in the queue's topic exactly once.
	done := r.waitRedrive(t, client.ObjectKeyFromObject(queued), kqv1.RedriveComplete, 90*time.Second)
	if done.Status.Moved+got.Status.Moved != 300 || done.Status.Total != 300-got.Status.Moved {
		t.Errorf("queued redrive moved %d of %d after the cancelled one moved %d; want the remaining %d", done.Status.Moved, done.Status.Total, got.Status.Moved, 300-got.Status.Moved)
	}
	ids := map[string]int{}
	for _, m := range readCommitted(t, bs, queueTopic, 3*time.Second) {
		ids[string(m.Value)]++
	}
	for i := range 300 {
		if n := ids[fmt.Sprintf("r-%d", i)]; n != 1 {
			t.Errorf("record r-%d is in the queue's topic %d times after both redrives, want once", i, n)
		}
	}
}

// rejectAll runs a share consumer of group on topic that rejects every record until it has
// seen want records, and returns their values.
func rejectAll(t *testing.T, bootstrap []string, group, topic string, want int) []string {
	t.Helper()
	cons, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var seen []string
	ctx := ctxFor(t)
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < want && time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		fs := cons.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(rec *kgo.Record) {
			seen = append(seen, string(rec.Value))
			rec.Ack(kgo.AckReject)
		})
		if err := cons.FlushAcks(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) < want {
		t.Fatalf("share consumer of %s saw %v, want %d records", group, seen, want)
	}
	return seen
}

// The loop guard with the brokers' own dead-letter queue (KIP-1191, copyRecord): the brokers
// keep key and value but drop the record's headers, so the redrive reads them back from the
// origin record (__dlq.errors.partition/offset in the queue's topic). A record that is
// rejected, redriven (with its app header restored and kqo.redrive.count=1), and rejected
// again is then refused by the next redrive with maxRedrives 1 instead of looping again.
func TestRedriveLoopRefusedBrokerNative(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	topic := "loop-" + ns
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "loop"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Name: topic}, GroupID: topic,
		Delivery: kqv1.DeliverySpec{AutoOffsetReset: ptr.To("earliest")}}}
	dlr := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "loop-dead"}, Spec: kqv1.DeadLetterRouteSpec{
		QueueRef: kqv1.QueueReference{Name: "loop"}, Mode: kqv1.DeadLetterModeBrokerNative, CopyRecord: true}}
	for _, o := range []client.Object{sq, dlr} {
		if err := r.k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
	route := r.waitRoute(t, dlr, kqv1.ConditionReady, metav1.ConditionTrue)
	dlqTopic := route.Status.TopicName
	waitConfig(t, r.admin, kafka.ResourceKey{Type: kafka.GroupResource, Name: topic}, dlqTopicNameConfig, func(e kafka.ConfigEntry) string {
		if e.Value != dlqTopic {
			return fmt.Sprintf("%s = %q, want %q", dlqTopicNameConfig, e.Value, dlqTopic)
		}
		return ""
	})
	bs := r.kafka.BootstrapServers()
	produceRecords(t, bs, topic, []*kgo.Record{{Key: []byte("k"), Value: []byte("poison"), Headers: []kgo.RecordHeader{{Key: "app", Value: []byte("1")}}}})
	rejectAll(t, bs, topic, topic, 1)
	if dead := readAll(t, bs, dlqTopic, 1, 60*time.Second); len(dead) != 1 {
		t.Fatalf("dead-letter topic holds %d records after the first reject, want 1", len(dead))
	}

	redrive := func(name string) *kqv1.DeadLetterRedrive {
		dr := &kqv1.DeadLetterRedrive{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kqv1.DeadLetterRedriveSpec{
			RouteRef: kqv1.RouteReference{Name: "loop-dead"}, MaxRedrives: ptr.To[int32](1)}}
		if err := r.k8s.Create(ctx, dr); err != nil {
			t.Fatal(err)
		}
		return r.waitRedrive(t, client.ObjectKeyFromObject(dr), kqv1.RedriveComplete, 90*time.Second)
	}
	first := redrive("first")
	if first.Status.Moved != 1 || first.Status.Refused != 0 {
		t.Fatalf("first redrive moved %d refused %d, want 1 and 0", first.Status.Moved, first.Status.Refused)
	}
	// The moved record has the headers the brokers dropped (restored from the origin record)
	// besides the brokers' provenance and the redrive's own.
	moved := readCommitted(t, bs, topic, 2*time.Second)
	if len(moved) != 2 {
		t.Fatalf("queue topic holds %d records, want the original and the redriven one", len(moved))
	}
	if m := moved[1]; string(m.Value) != "poison" || header(m, "app") != "1" || header(m, "kqo.redrive.count") != "1" || header(m, "__dlq.errors.offset") != "0" {
		t.Errorf("redriven record %q headers %v: want app=1 restored, kqo.redrive.count=1, __dlq.errors.offset=0", m.Value, m.Headers)
	}
	// Rejected again: the brokers dead-letter the redriven copy.
	rejectAll(t, bs, topic, topic, 1)
	var again *kgo.Record
	eventually(t, 60*time.Second, func() string {
		dead := readCommitted(t, bs, dlqTopic, 2*time.Second)
		if len(dead) < 2 {
			return fmt.Sprintf("dead-letter topic holds %d records, want the second dead-lettering too", len(dead))
		}
		again = dead[len(dead)-1]
		return ""
	})
	var hs []string
	for _, h := range again.Headers {
		hs = append(hs, h.Key+"="+string(h.Value))
	}
	// Kafka 4.4.0 copies key and value but none of the record's headers (docs/kafka-findings.md):
	// the redrive reads them back from the origin record in the queue's topic.
	t.Logf("broker-written dead letter of a redriven record: headers %s", strings.Join(hs, ", "))
	second := redrive("second")
	if second.Status.Total != 1 || second.Status.Moved != 0 || second.Status.Refused != 1 {
		t.Errorf("second redrive total/moved/refused %d/%d/%d, want 1/0/1 (the loop refused)", second.Status.Total, second.Status.Moved, second.Status.Refused)
	}
	if c := findCondition(second.Status.Conditions, kqv1.ConditionRecordsRefused); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("RecordsRefused %+v", c)
	}
}

// Issue 30, case 7: a redrive of a route in Conflict waited with "has not resolved its
// dead-letter topic yet", as if it would start soon. It waits naming the route's Conflict and
// saying it starts only once the route is Ready; it starts when the other route goes.
func TestRedriveOfARouteInConflictSaysSo(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns, _, _ := r.redriveFixture(t)
	ctx := ctxFor(t)
	second := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work-dead-2"}, Spec: kqv1.DeadLetterRouteSpec{
		QueueRef: kqv1.QueueReference{Name: "work"}, Mode: kqv1.DeadLetterModeRepublisher}}
	if err := r.k8s.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	r.waitRoute(t, second, kqv1.ConditionConflict, metav1.ConditionTrue)
	dr := &kqv1.DeadLetterRedrive{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "from-conflict"}, Spec: kqv1.DeadLetterRedriveSpec{
		RouteRef: kqv1.RouteReference{Name: "work-dead-2"}}}
	if err := r.k8s.Create(ctx, dr); err != nil {
		t.Fatal(err)
	}
	got := r.waitRedrive(t, client.ObjectKeyFromObject(dr), kqv1.RedrivePending, 60*time.Second)
	eventually(t, 30*time.Second, func() string {
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(dr), got); err != nil {
			return err.Error()
		}
		c := findCondition(got.Status.Conditions, kqv1.ConditionComplete)
		if c == nil || !strings.Contains(c.Message, "Ready=False/"+kqv1.ReasonConflict) || !strings.Contains(c.Message, "never while that lasts") {
			return fmt.Sprintf("Complete condition %+v does not name the route's Conflict and when the redrive can start", c)
		}
		return ""
	})
	// The first route goes: the second takes over the queue and the redrive runs.
	if err := r.k8s.Delete(ctx, &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work-dead"}}); err != nil {
		t.Fatal(err)
	}
	r.waitRoute(t, second, kqv1.ConditionReady, metav1.ConditionTrue)
	r.waitRedrive(t, client.ObjectKeyFromObject(dr), kqv1.RedriveComplete, 90*time.Second)
}
