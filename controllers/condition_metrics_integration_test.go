package controllers

import (
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// conditionSeries is what kafkaqueues_resource_condition says of one object: "type=status/reason"
// for each of its series.
func conditionSeries(t *testing.T, kind, ns, name string) map[string]string {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, mf := range mfs {
		if mf.GetName() != "kafkaqueues_resource_condition" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := labelsOf(m)
			if l["kind"] == kind && l["namespace"] == ns && l["name"] == name {
				if m.GetGauge().GetValue() != 1 {
					t.Errorf("series %v = %v, want 1", l, m.GetGauge().GetValue())
				}
				if _, dup := out[l["type"]]; dup {
					t.Errorf("two series for %s %s/%s condition %s", kind, ns, name, l["type"])
				}
				out[l["type"]] = l["status"] + "/" + l["reason"]
			}
		}
	}
	return out
}

func labelsOf(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// kafkaqueues_resource_condition follows the status the apiserver holds: one series per
// condition with its status and reason, replaced when the condition changes, gone with the
// object.
func TestConditionMetricFollowsStatus(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, GroupID: "orders-" + ns, Topic: kqv1.QueueTopicSpec{Name: "orders-" + ns, Partitions: 1}}}
	if err := r.k8s.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
	eventually(t, 30*time.Second, func() string {
		s := conditionSeries(t, "ShareQueue", ns, "orders")
		if s[kqv1.ConditionReady] != "True/"+kqv1.ReasonReady || s[kqv1.ConditionTopicReady] == "" {
			return fmt.Sprintf("series %v: want Ready True/Ready and TopicReady", s)
		}
		return ""
	})
	if s := conditionSeries(t, "KafkaCluster", ns, "local"); s[kqv1.ConditionReady] != "True/"+kqv1.ReasonReady {
		t.Errorf("KafkaCluster series %v", s)
	}

	// Out of the brokers' bounds: Ready False, OutOfBrokerBounds; the True series is gone.
	if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), sq); err != nil {
		t.Fatal(err)
	}
	base := sq.DeepCopy()
	sq.Spec.Delivery.LockDuration = &metav1.Duration{Duration: time.Hour}
	if err := r.k8s.Patch(ctx, sq, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() string {
		if s := conditionSeries(t, "ShareQueue", ns, "orders"); s[kqv1.ConditionReady] != "False/"+kqv1.ReasonOutOfBrokerBounds {
			return fmt.Sprintf("series %v: want Ready False/OutOfBrokerBounds", s)
		}
		return ""
	})

	if err := r.k8s.Delete(ctx, sq); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() string {
		if s := conditionSeries(t, "ShareQueue", ns, "orders"); len(s) != 0 {
			return fmt.Sprintf("series of a deleted queue: %v", s)
		}
		return ""
	})
}
