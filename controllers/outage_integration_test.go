package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// Issue 18 item 5, "recovery without a storm": the only broker of a cluster with Ready queues
// stops. The queues go Ready=False waiting on the outage; a reconcile of a queue whose cluster
// backs off makes no Kafka call and opens no connection; the broker starts again and every
// queue is Ready again within one capped backoff step and a reconcile round (45 s), not after
// a per-queue backoff of up to 2 minutes.
func TestBrokerOutageSharedBackoff(t *testing.T) {
	// Not parallel: it reads process-wide counters (gated reconciles by kind, failed broker connects) that other tests' outages would move.
	r := startRig(t)
	k, _ := startKafka(t, rig.KafkaOptions{})
	ns := r.newNamespace(t)
	kc := r.createCluster(t, ns, "outage", k, nil, func(kc *kqv1.KafkaCluster) string {
		return condIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionTrue, "")
	})
	var queues []*kqv1.ShareQueue
	for i := range 6 {
		sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("q%d", i)}, Spec: kqv1.ShareQueueSpec{
			ClusterRef: kqv1.ClusterReference{Name: kc.Name}, Topic: kqv1.QueueTopicSpec{Partitions: 1}}}
		if err := r.k8s.Create(ctxFor(t), sq); err != nil {
			t.Fatal(err)
		}
		queues = append(queues, sq)
	}
	for _, sq := range queues {
		r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
	}
	gatedBefore, _ := metricValue("kafkaqueues_kafka_gated_reconciles_total", map[string]string{"kind": gateQueue})

	k.StopNode(k.Nodes[0])
	stopped := time.Now()
	// Make every queue look at Kafka now rather than at the (hour-long) resync.
	for _, sq := range queues {
		r.poke(t, sq, "outage")
	}
	allWaiting := func() string {
		for _, sq := range queues {
			var cur kqv1.ShareQueue
			if err := r.k8s.Get(ctxFor(t), client.ObjectKeyFromObject(sq), &cur); err != nil {
				return err.Error()
			}
			c := findCondition(cur.Status.Conditions, kqv1.ConditionReady)
			if c == nil || c.Status != metav1.ConditionFalse || (c.Reason != kqv1.ReasonKafkaUnavailable && c.Reason != kqv1.ReasonClusterNotReady) {
				return fmt.Sprintf("%s Ready %+v, want False KafkaUnavailable or ClusterNotReady", sq.Name, c)
			}
		}
		return ""
	}
	eventually(t, 90*time.Second, allWaiting)
	// The queues wait on the cluster's shared backoff: their reconciles are gated.
	eventually(t, 60*time.Second, func() string {
		if v, _ := metricValue("kafkaqueues_kafka_gated_reconciles_total", map[string]string{"kind": gateQueue}); v <= gatedBefore {
			return fmt.Sprintf("no gated ShareQueue reconcile counted (%v) during the outage", v)
		}
		if v, ok := metricValue("kafkaqueues_kafka_backoff_seconds", map[string]string{"cluster": ns + "/" + kc.Name}); !ok || v < gateBaseStep.Seconds() {
			return fmt.Sprintf("backoff step of %s/%s is %v (present %v), want ≥ %s", ns, kc.Name, v, ok, gateBaseStep)
		}
		return ""
	})
	if v, _ := metricValue("kafkaqueues_kafka_broker_connects_total", map[string]string{"result": "error"}); v == 0 {
		t.Errorf("no failed broker connection counted with the only broker stopped")
	}

	// A reconcile of a queue whose cluster backs off makes no Kafka call: it reports the
	// gate's verdict (TestGate* prove the gate's decisions with a fake clock).
	poked := queues[0]
	r.poke(t, poked, "gated")
	eventually(t, 30*time.Second, func() string {
		var got kqv1.ShareQueue
		if err := r.k8s.Get(ctxFor(t), client.ObjectKeyFromObject(poked), &got); err != nil {
			return err.Error()
		}
		if c := findCondition(got.Status.Conditions, kqv1.ConditionReady); c == nil || !strings.Contains(c.Message, "next attempt at") || !strings.Contains(c.Message, "last error") {
			return fmt.Sprintf("Ready %+v, want a message naming the next attempt and the last error", c)
		}
		return ""
	})
	// Keep the broker down long enough for the backoff to grow past its first steps.
	time.Sleep(time.Until(stopped.Add(40 * time.Second)))
	t.Logf("outage so far %s", time.Since(stopped).Round(time.Second))

	if err := k.StartNode(context.Background(), k.Nodes[0], nil); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	eventually(t, 45*time.Second, func() string {
		for _, sq := range queues {
			var cur kqv1.ShareQueue
			if err := r.k8s.Get(ctxFor(t), client.ObjectKeyFromObject(sq), &cur); err != nil {
				return err.Error()
			}
			if c := findCondition(cur.Status.Conditions, kqv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Sprintf("%s Ready %+v %s after the broker restarted", sq.Name, c, time.Since(restarted).Round(time.Second))
			}
		}
		return ""
	})
	t.Logf("all %d queues Ready %s after the broker restarted", len(queues), time.Since(restarted).Round(100*time.Millisecond))
	if v, ok := metricValue("kafkaqueues_kafka_backoff_seconds", map[string]string{"cluster": ns + "/" + kc.Name}); ok && v != 0 {
		t.Errorf("backoff step %v after recovery, want 0", v)
	}
}
