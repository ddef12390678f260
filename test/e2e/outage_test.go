package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// Issue 18: a broker outage shows in status at the manager's default intervals, with nothing
// poking the queues. The prober looks every 3 m and a Ready queue is re-checked every 10 m, so
// before the topic watch (--topic-check-interval, 10 s) started the cluster's shared backoff
// on a failed check, a 92 s outage at 10,000 queues left every queue Ready=True. Here the only
// broker stops: within one topic-check interval plus a probe (bounded at 100 s here, against
// the 3 m probe interval) the KafkaCluster is Connected=False and every queue Ready=False; the
// broker starts again and all are Ready within 90 s, again with nothing poking them.
func TestBrokerOutageShowsAtDefaultIntervals(t *testing.T) {
	t.Parallel()
	rig.SkipWithoutRig(t, "the local apiserver and Kafka rig")
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	r := newE2ERig(t, ctx, rig.KafkaOptions{})
	logPath := filepath.Join(r.dir, "manager.log")
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("manager log (tail):\n%s", tail(string(b), 6000))
		}
	}()
	// Every interval at its default.
	startManagerWith(t, r.bin, r.kubeconfig, logPath)

	kc := &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "local"}, Spec: kqv1.KafkaClusterSpec{BootstrapServers: r.kafka.BootstrapServers()}}
	if err := r.c.Create(ctx, kc); err != nil {
		t.Fatal(err)
	}
	var queues []*kqv1.ShareQueue
	for i := range 5 {
		sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("outage-%d", i)}, Spec: kqv1.ShareQueueSpec{
			ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Partitions: 1}}}
		if err := r.c.Create(ctx, sq); err != nil {
			t.Fatal(err)
		}
		queues = append(queues, sq)
	}
	// every reports "" when each queue's Ready and the cluster's Connected are want.
	every := func(want metav1.ConditionStatus) string {
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(kc), kc); err != nil {
			return err.Error()
		}
		if c := meta.FindStatusCondition(kc.Status.Conditions, kqv1.ConditionConnected); c == nil || c.Status != want {
			return fmt.Sprintf("KafkaCluster Connected %+v, want %s", c, want)
		}
		for _, sq := range queues {
			var cur kqv1.ShareQueue
			if err := r.c.Get(ctx, client.ObjectKeyFromObject(sq), &cur); err != nil {
				return err.Error()
			}
			c := meta.FindStatusCondition(cur.Status.Conditions, kqv1.ConditionReady)
			if c == nil || c.Status != want {
				return fmt.Sprintf("%s Ready %+v, want %s", sq.Name, c, want)
			}
			if want == metav1.ConditionFalse && c.Reason != kqv1.ReasonKafkaUnavailable && c.Reason != kqv1.ReasonClusterNotReady {
				return fmt.Sprintf("%s Ready %+v, want reason KafkaUnavailable or ClusterNotReady", sq.Name, c)
			}
		}
		return ""
	}
	waitFor(t, 90*time.Second, func() string { return every(metav1.ConditionTrue) })

	r.kafka.StopNode(r.kafka.Nodes[0])
	stopped := time.Now()
	// 100 s: one topic-check interval, the watch's failed reads, the woken probe and the
	// queues' status writes, each bounded by a Kafka timeout when the brokers do not answer;
	// well under the 3 m probe interval that noticed an outage before.
	waitFor(t, 100*time.Second, func() string { return every(metav1.ConditionFalse) })
	t.Logf("the cluster and all %d queues reported the outage %s after the broker stopped", len(queues), time.Since(stopped).Round(100*time.Millisecond))

	if err := r.kafka.StartNode(ctx, r.kafka.Nodes[0], nil); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	waitFor(t, 90*time.Second, func() string { return every(metav1.ConditionTrue) })
	t.Logf("all Ready and Connected %s after the broker restarted", time.Since(restarted).Round(100*time.Millisecond))
}
