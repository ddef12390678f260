package controllers

import (
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// metricValue returns the value of the series of name whose labels include want (counter,
// gauge or histogram sample count), and whether it exists.
func metricValue(name string, want map[string]string) (float64, bool) {
	mfs, _ := metrics.Registry.Gather()
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !labelsMatch(m, want) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue(), true
			case m.Gauge != nil:
				return m.GetGauge().GetValue(), true
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// The operator's metrics: Kafka admin calls by API and outcome (a broker refusal shows its
// error code), latency, per-queue members and lag, per-cluster feature levels.
func TestOperatorMetrics(t *testing.T) {
	// Not parallel: it reads process-wide request counters by API and outcome that parallel tests would move.
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	good := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "metered-" + ns}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, Delivery: kqv1.DeliverySpec{AutoOffsetReset: ptr.To("earliest")}}}
	bad := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "refused-" + ns}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Partitions: 1, Config: kqv1.TopicConfigs{"no.such.config": "1"}}}}
	before, _ := metricValue("kafkaqueues_kafka_requests_total", map[string]string{"api": "CreateTopics", "outcome": "INVALID_CONFIG"})
	for _, sq := range []*kqv1.ShareQueue{good, bad} {
		if err := r.k8s.Create(ctx, sq); err != nil {
			t.Fatal(err)
		}
	}
	r.waitQueue(t, good, kqv1.ConditionReady, metav1.ConditionTrue)
	r.waitQueue(t, bad, kqv1.ConditionTopicReady, metav1.ConditionFalse)
	if n, err := rig.ProduceAndShareConsume(ctx, r.kafka.BootstrapServers(), good.Name, good.Name, 3, 30*time.Second); err != nil || n != 3 {
		t.Fatalf("share consumer got %d of 3: %v", n, err)
	}
	r.poke(t, good, "metrics")
	eventually(t, 30*time.Second, func() string {
		if _, ok := metricValue("kafkaqueues_queue_lag_records", map[string]string{"namespace": ns, "name": good.Name}); !ok {
			return "no lag series for the queue"
		}
		if _, ok := metricValue("kafkaqueues_queue_members", map[string]string{"namespace": ns, "name": good.Name}); !ok {
			return "no members series for the queue"
		}
		return ""
	})
	if v, _ := metricValue("kafkaqueues_kafka_requests_total", map[string]string{"api": "CreateTopics", "outcome": "ok"}); v < 1 {
		t.Errorf("CreateTopics ok count %v", v)
	}
	if v, _ := metricValue("kafkaqueues_kafka_requests_total", map[string]string{"api": "CreateTopics", "outcome": "INVALID_CONFIG"}); v <= before {
		t.Errorf("the broker's INVALID_CONFIG refusal was not counted (%v -> %v)", before, v)
	}
	if v, _ := metricValue("kafkaqueues_kafka_request_duration_seconds", map[string]string{"api": "Metadata"}); v < 1 {
		t.Errorf("no Metadata latency samples")
	}
	if v, ok := metricValue("kafkaqueues_cluster_feature_level", map[string]string{"namespace": ns, "name": "local", "feature": "share.version"}); !ok || v != 2 {
		t.Errorf("share.version gauge %v (present %v), want 2", v, ok)
	}
	// Deleting the queue removes its series.
	if err := r.k8s.Delete(ctx, good); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		if _, ok := metricValue("kafkaqueues_queue_members", map[string]string{"namespace": ns, "name": good.Name}); ok {
			return fmt.Sprintf("members series of deleted queue %s still exported", good.Name)
		}
		return ""
	})
}

// A queue's member count is a claim about the group now: when Kafka cannot be reached the
// series goes away instead of keeping the last count (issue 17: metrics never a frozen old
// value).
func TestMembersSeriesGoesAbsentWhenKafkaIsDown(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	k, _ := startKafka(t, rig.KafkaOptions{})
	ns := r.newNamespace(t)
	r.createCluster(t, ns, "solo", k, nil, func(kc *kqv1.KafkaCluster) string {
		return condIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionTrue, "")
	})
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "members"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "solo"}, Topic: kqv1.QueueTopicSpec{Partitions: 1}}}
	if err := r.k8s.Create(ctxFor(t), sq); err != nil {
		t.Fatal(err)
	}
	r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
	series := map[string]string{"namespace": ns, "name": sq.Name}
	eventually(t, 30*time.Second, func() string {
		if v, ok := metricValue("kafkaqueues_queue_members", series); !ok || v != 0 {
			return fmt.Sprintf("members series %v (present %v), want 0 for a group nobody joined", v, ok)
		}
		return ""
	})
	k.StopNode(k.Nodes[0])
	r.poke(t, sq, "broker-down")
	eventually(t, 90*time.Second, func() string {
		if v, ok := metricValue("kafkaqueues_queue_members", series); ok {
			return fmt.Sprintf("members series still %v with the only broker stopped", v)
		}
		return ""
	})
}
