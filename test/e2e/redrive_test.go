package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

const redriveRecords = 1000

// Issue 17, redrive: 1,000 dead letters are redriven at 40 records/s; the manager is killed
// with SIGKILL once about half of them are in the queue's topic (counted by a read_committed
// consumer as they arrive), and a new manager process finishes the redrive. Every record is
// then in the queue's topic exactly once for a read_committed reader — counted by the unique
// id in each record: none missing, none twice — and status says moved == total == 1,000.
// What a read_uncommitted reader sees (the aborted transaction of the killed manager) is
// logged as a figure.
func TestRedriveSurvivesManagerKill(t *testing.T) {
	t.Parallel()
	rig.SkipWithoutRig(t, "the local apiserver and Kafka rig")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r := newE2ERig(t, ctx, rig.KafkaOptions{})
	dir, bin, k, kubeconfig, c := r.dir, r.bin, r.kafka, r.kubeconfig, r.c
	bs := k.BootstrapServers()
	logPath := filepath.Join(dir, "manager.log")
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("manager log (tail):\n%s", tail(string(b), 6000))
		}
	}()
	m := startManager(t, bin, kubeconfig, logPath)

	kc := &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "local"}, Spec: kqv1.KafkaClusterSpec{BootstrapServers: bs}}
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orders"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Partitions: 3},
		Delivery: kqv1.DeliverySpec{MaxDeliveryAttempts: ptr.To[int32](3)}}}
	dlr := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orders-dead"}, Spec: kqv1.DeadLetterRouteSpec{
		QueueRef: kqv1.QueueReference{Name: "orders"}, Mode: kqv1.DeadLetterModeRepublisher,
		Topic: kqv1.DeadLetterTopicSpec{Name: "orders-dead", Partitions: 3}}}
	for _, o := range []client.Object{kc, sq, dlr} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 2*time.Minute, func() string {
		if err := c.Get(ctx, client.ObjectKeyFromObject(dlr), dlr); err != nil {
			return err.Error()
		}
		if !meta.IsStatusConditionTrue(dlr.Status.Conditions, kqv1.ConditionReady) {
			return fmt.Sprintf("DeadLetterRoute not Ready: %+v", dlr.Status.Conditions)
		}
		return ""
	})

	pc, err := kgo.NewClient(kgo.SeedBrokers(bs...), kgo.DefaultProduceTopic("orders-dead"))
	if err != nil {
		t.Fatal(err)
	}
	var rs []*kgo.Record
	for i := range redriveRecords {
		rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "id-%04d", i), Headers: []kgo.RecordHeader{
			{Key: "kqo.source.partition", Value: fmt.Appendf(nil, "%d", i%3)}, {Key: "kqo.reason", Value: []byte("rejected")}}})
	}
	if err := pc.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pc.Close()

	// Count the moved records as they commit.
	var arrived atomic.Int64
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watcher, err := kgo.NewClient(kgo.SeedBrokers(bs...), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	go func() {
		for watchCtx.Err() == nil {
			arrived.Add(int64(watcher.PollFetches(watchCtx).NumRecords()))
		}
	}()

	dr := &kqv1.DeadLetterRedrive{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orders-redrive"}, Spec: kqv1.DeadLetterRedriveSpec{
		RouteRef: kqv1.RouteReference{Name: "orders-dead"}, RateLimit: ptr.To[int32](40)}}
	if err := c.Create(ctx, dr); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Minute, func() string {
		if n := arrived.Load(); n < redriveRecords/2 {
			return fmt.Sprintf("%d records in the queue's topic, waiting for half", n)
		}
		return ""
	})
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.done
	killedAt := arrived.Load()
	if err := c.Get(ctx, client.ObjectKeyFromObject(dr), dr); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the manager with %d records committed to the queue's topic; status then: phase %s moved %d/%d", killedAt, dr.Status.Phase, dr.Status.Moved, dr.Status.Total)
	if killedAt >= redriveRecords || dr.Status.Phase != kqv1.RedriveRunning {
		t.Fatalf("the kill came after the redrive was done (%d moved, phase %s): the restart path was not exercised", killedAt, dr.Status.Phase)
	}

	restarted := time.Now()
	startManager(t, bin, kubeconfig, logPath)
	waitFor(t, 5*time.Minute, func() string {
		if err := c.Get(ctx, client.ObjectKeyFromObject(dr), dr); err != nil {
			return err.Error()
		}
		if dr.Status.Phase != kqv1.RedriveComplete {
			return fmt.Sprintf("phase %s, moved %d/%d; %d records arrived", dr.Status.Phase, dr.Status.Moved, dr.Status.Total, arrived.Load())
		}
		return ""
	})
	t.Logf("the new manager completed the redrive %s after it started", time.Since(restarted).Round(time.Second))
	if dr.Status.Moved != redriveRecords || dr.Status.Total != redriveRecords || dr.Status.Filtered != 0 || dr.Status.Refused != 0 {
		t.Errorf("status moved/total/filtered/refused %d/%d/%d/%d, want %d/%d/0/0", dr.Status.Moved, dr.Status.Total, dr.Status.Filtered, dr.Status.Refused, redriveRecords, redriveRecords)
	}
	// The final rate is the whole redrive's average (moved over completion - start, a kill
	// and a restart included): above 0, never above the rate limit.
	if rps := dr.Status.RecordsPerSecond; rps < 1 || rps > int64(*dr.Spec.RateLimit) {
		t.Errorf("status.recordsPerSecond %d at completion, want the average, 1..%d", rps, *dr.Spec.RateLimit)
	}
	stopWatch()

	committed := readTopic(t, bs, "orders", kgo.ReadCommitted())
	ids := map[string]int{}
	for _, rec := range committed {
		ids[string(rec.Value)]++
	}
	var missing, twice int
	for i := range redriveRecords {
		switch n := ids[fmt.Sprintf("id-%04d", i)]; {
		case n == 0:
			missing++
		case n > 1:
			twice++
		}
	}
	if missing != 0 || twice != 0 || len(committed) != redriveRecords {
		t.Errorf("read_committed: %d records, %d ids missing, %d ids more than once; want each of %d exactly once", len(committed), missing, twice, redriveRecords)
	}
	uncommitted := readTopic(t, bs, "orders", kgo.ReadUncommitted())
	t.Logf("a read_uncommitted reader sees %d records (%d from the killed manager's aborted transaction)", len(uncommitted), len(uncommitted)-len(committed))
}

// readTopic reads every record of topic at the isolation level until it is quiet for 3s.
func readTopic(t *testing.T, bs []string, topic string, level kgo.IsolationLevel) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(bs...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		rs := cl.PollFetches(ctx).Records()
		cancel()
		if len(rs) == 0 {
			return out
		}
		out = append(out, rs...)
	}
}
