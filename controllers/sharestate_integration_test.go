package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// shareStateUncreatable starts one broker with Kafka's default
// share.coordinator.state.topic.replication.factor=3 (min ISR 2), and KafkaCluster local on it in
// a namespace of the test's own, once it reports ShareStateReplicated=False.
func shareStateUncreatable(t *testing.T) (*testRig, string, *rig.Kafka) {
	t.Helper()
	r := startRig(t)
	ns := r.newNamespace(t)
	k, _ := startKafka(t, rig.KafkaOptions{BrokerProps: map[string]string{
		"share.coordinator.state.topic.replication.factor": "3",
		"share.coordinator.state.topic.min.isr":            "2",
	}})
	r.createCluster(t, ns, "local", k, nil, func(kc *kqv1.KafkaCluster) string {
		return condIs(kc.Status.Conditions, kqv1.ConditionShareStateReplicated, metav1.ConditionFalse, kqv1.ReasonShareStateUncreatable)
	})
	return r, ns, k
}

// Regression (issue 30, case 1): on one broker with Kafka's default
// share.coordinator.state.topic.replication.factor=3 the KafkaCluster said
// ReplicationFactorExceedsBrokers, yet its queues said Ready=True while a share consumer received
// nothing. The queue is not Ready while the brokers cannot hold share-group state, names the
// broker settings to change, and becomes Ready by itself once they are changed — and then a
// share consumer receives what is produced.
func TestQueueNotReadyWhileShareStateCannotExist(t *testing.T) {
	t.Parallel()
	r, ns, k := shareStateUncreatable(t)
	topic := "state-" + ns
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Name: topic}, GroupID: topic,
		Delivery: kqv1.DeliverySpec{AutoOffsetReset: ptrTo("earliest")}}}
	if err := r.k8s.Create(ctxFor(t), sq); err != nil {
		t.Fatal(err)
	}
	got := &kqv1.ShareQueue{}
	readyIs := func(status metav1.ConditionStatus, reason string) func() string {
		return func() string {
			if err := r.k8s.Get(ctxFor(t), client.ObjectKeyFromObject(sq), got); err != nil {
				return err.Error()
			}
			return condIs(got.Status.Conditions, kqv1.ConditionReady, status, reason)
		}
	}
	eventually(t, 60*time.Second, readyIs(metav1.ConditionFalse, kqv1.ReasonShareStateUncreatable))
	ready := findCondition(got.Status.Conditions, kqv1.ConditionReady)
	for _, want := range []string{"receive nothing", "share.coordinator.state.topic.replication.factor=1", "share.coordinator.state.topic.min.isr=1"} {
		if !strings.Contains(ready.Message, want) {
			t.Errorf("Ready message %q lacks %q", ready.Message, want)
		}
	}
	// The topic and the group configs are still made: only Ready waits on the brokers.
	if c := findCondition(got.Status.Conditions, kqv1.ConditionTopicReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("TopicReady %+v, want True", c)
	}

	// The brokers fixed as the message says: the queue becomes Ready with nothing touched.
	if err := k.RestartNode(context.Background(), k.Nodes[0], map[string]string{
		"share.coordinator.state.topic.replication.factor": "1",
		"share.coordinator.state.topic.min.isr":            "1",
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, readyIs(metav1.ConditionTrue, kqv1.ReasonReady))
	n, err := rig.ProduceAndShareConsume(ctxFor(t), k.BootstrapServers(), topic, topic, 5, 60*time.Second)
	if err != nil || n != 5 {
		t.Errorf("a share consumer of the Ready queue received %d of 5 records (%v)", n, err)
	}
}

// The class of issue 30's cases 1 and 2: where the brokers cannot hold share-group state, an
// OffsetReset applies nothing and waits naming the brokers' settings (before, it tried to
// apply and waited with "KafkaCluster local is not connected", which it was), and is never
// Complete.
func TestOffsetResetNotCompleteWhileShareStateCannotExist(t *testing.T) {
	t.Parallel()
	r, ns, _ := shareStateUncreatable(t)
	topic := "reset-state-" + ns
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "work"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Name: topic, Partitions: 2}, GroupID: topic}}
	if err := r.k8s.Create(ctxFor(t), sq); err != nil {
		t.Fatal(err)
	}
	r.waitQueue(t, sq, kqv1.ConditionTopicReady, metav1.ConditionTrue)
	or := r.createReset(t, newReset(ns, "work", func(s *kqv1.OffsetResetSpec) { s.ToLatest = yes }))
	// Long enough for an apply and its read-back, had it started.
	deadline := time.Now().Add(20 * time.Second)
	got := &kqv1.OffsetReset{}
	for time.Now().Before(deadline) {
		if err := r.k8s.Get(ctxFor(t), client.ObjectKeyFromObject(or), got); err != nil {
			t.Fatal(err)
		}
		if got.Status.Phase == kqv1.OffsetResetComplete {
			t.Fatalf("OffsetReset Complete where the brokers cannot hold share-group state: %+v", got.Status)
		}
		time.Sleep(time.Second) // nothing may happen within the window: polled to the end
	}
	c := findCondition(got.Status.Conditions, kqv1.ConditionComplete)
	if c == nil || c.Reason != kqv1.ReasonShareStateUncreatable || !strings.Contains(c.Message, "nothing applied") || !strings.Contains(c.Message, "share.coordinator.state.topic.replication.factor=1") {
		t.Errorf("Complete condition %+v does not name the brokers' share-state settings", c)
	}
	if len(got.Status.Partitions) > 0 || got.Status.ApplyAttempts > 0 {
		t.Errorf("targets %v, %d apply attempts: want nothing resolved or applied", got.Status.Partitions, got.Status.ApplyAttempts)
	}
}
