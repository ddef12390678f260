package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// Plan and ObserveOnly have the brokers validate the planned writes (ValidateOnly): a topic
// config value they refuse is reported as in Active (TopicReady=False/KafkaRejected with the
// broker's message, repeated in Ready's Planned/ObserveOnly message), and nothing is written.
func TestPlanModeValidatesWithTheBrokers(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)

	// Plan: the topic's creation with cleanup.policy=bogus is refused, and not made.
	topic := "validated-" + ns
	sq := &kqv1.ShareQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "validated", Annotations: map[string]string{kqv1.ReconcileAnnotation: kqv1.ReconcilePlan}},
		Spec: kqv1.ShareQueueSpec{
			ClusterRef: kqv1.ClusterReference{Name: "local"},
			Topic:      kqv1.QueueTopicSpec{Name: topic, Partitions: 1, Config: kqv1.TopicConfigs{"cleanup.policy": "bogus"}},
		},
	}
	if err := r.k8s.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	got := r.waitQueue(t, sq, kqv1.ConditionTopicReady, metav1.ConditionFalse)
	tr := findCondition(got.Status.Conditions, kqv1.ConditionTopicReady)
	if tr.Reason != kqv1.ReasonKafkaRejected || !strings.Contains(tr.Message, "Invalid value bogus for configuration cleanup.policy") || !strings.Contains(tr.Message, "nothing was written") {
		t.Errorf("TopicReady %+v, want KafkaRejected with the broker's message", tr)
	}
	// Held back on purpose: no Ready; Reconciling carries Planned and repeats the refusal.
	if c := findCondition(got.Status.Conditions, kqv1.ConditionReconciling); c == nil || c.Reason != kqv1.ReasonPlanned || !strings.Contains(c.Message, "cleanup.policy") {
		t.Errorf("Reconciling %+v, want Planned naming the refusal", c)
	}
	if len(got.Status.PlannedChanges) != 1 || !strings.Contains(got.Status.PlannedChanges[0], "cleanup.policy=bogus") {
		t.Errorf("plannedChanges %q", got.Status.PlannedChanges)
	}
	if ts, err := r.admin.DescribeTopics(ctx, topic); err != nil || !kafka.IsNotFound(ts[topic].Err) {
		t.Fatalf("Plan mode created the topic: %v %+v", err, ts[topic])
	}

	// ObserveOnly on an existing topic: retention.ms=abc is refused; the live value stays.
	patch := client.MergeFrom(got.DeepCopy())
	delete(got.Annotations, kqv1.ReconcileAnnotation)
	got.Spec.Topic.Config = kqv1.TopicConfigs{"retention.ms": "3600000"}
	if err := r.k8s.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	got = r.waitQueue(t, got, kqv1.ConditionReady, metav1.ConditionTrue)
	patch = client.MergeFrom(got.DeepCopy())
	got.Annotations = map[string]string{kqv1.ReconcileAnnotation: kqv1.ReconcileObserveOnly}
	got.Spec.Topic.Config = kqv1.TopicConfigs{"retention.ms": "abc"}
	if err := r.k8s.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		var cur kqv1.ShareQueue
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), &cur); err != nil {
			return err.Error()
		}
		tr := findCondition(cur.Status.Conditions, kqv1.ConditionTopicReady)
		if tr == nil || tr.ObservedGeneration != cur.Generation || tr.Reason != kqv1.ReasonKafkaRejected || !strings.Contains(tr.Message, "retention.ms") {
			return fmt.Sprintf("TopicReady %+v, want KafkaRejected naming retention.ms", tr)
		}
		if c := findCondition(cur.Status.Conditions, kqv1.ConditionReconciling); c == nil || c.Reason != kqv1.ReasonObserveOnly {
			return fmt.Sprintf("Reconciling %+v, want ObserveOnly", c)
		}
		return ""
	})
	key := kafka.ResourceKey{Type: kafka.TopicResource, Name: topic}
	cfgs, err := r.admin.DescribeConfigs(ctx, []kafka.ResourceKey{key})
	if err != nil {
		t.Fatal(err)
	}
	if v := cfgs[key].Configs["retention.ms"].Value; v != "3600000" {
		t.Errorf("ObserveOnly changed retention.ms to %q", v)
	}
}
