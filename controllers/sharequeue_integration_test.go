package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

func TestKafkaClusterReportsTheBroker(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	kc := r.newCluster(t, ns)
	st := kc.Status
	if st.ClusterID != r.kafka.ClusterID || st.BrokerCount != 1 || len(st.Brokers) != 1 || st.Brokers[0].ID != 1 {
		t.Errorf("cluster id %q brokers %d %+v; want %q and broker 1", st.ClusterID, st.BrokerCount, st.Brokers, r.kafka.ClusterID)
	}
	if st.ShareVersion != 2 || !st.BrokerNativeDLQ {
		t.Errorf("shareVersion %d brokerNativeDLQ %v; Kafka 4.4 formats share.version 2", st.ShareVersion, st.BrokerNativeDLQ)
	}
	levels := map[string]int32{}
	for _, f := range st.FinalizedFeatures {
		levels[f.Name] = f.Level
	}
	for _, name := range []string{"metadata.version", "share.version", "group.version", "transaction.version"} {
		if levels[name] == 0 {
			t.Errorf("finalized feature %s missing from %+v", name, st.FinalizedFeatures)
		}
	}
	b := st.ShareBounds
	if b == nil || b.RecordLockDurationMs.Min == nil || *b.RecordLockDurationMs.Min != 15000 || *b.RecordLockDurationMs.Max != 60000 ||
		*b.DeliveryCountLimit.Default != 5 || *b.PartitionMaxRecordLocks.Default != 2000 {
		t.Errorf("share bounds %+v do not match the 4.4 broker defaults", b)
	}
	for _, typ := range []string{kqv1.ConditionConnected, kqv1.ConditionShareGroupsEnabled, kqv1.ConditionShareStateReplicated, kqv1.ConditionReady} {
		if c := findCondition(st.Conditions, typ); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != kc.Generation {
			t.Errorf("condition %s = %+v, want True at generation %d", typ, c, kc.Generation)
		}
	}
}

func TestShareQueueCreatesTopicAndGroupConfigs(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	topic := "orders-" + ns
	sq := &kqv1.ShareQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"},
		Spec: kqv1.ShareQueueSpec{
			ClusterRef: kqv1.ClusterReference{Name: "local"},
			Topic:      kqv1.QueueTopicSpec{Name: topic, Partitions: 3, Config: kqv1.TopicConfigs{"retention.ms": "3600000"}},
			Delivery: kqv1.DeliverySpec{
				LockDuration:        &metav1.Duration{Duration: 45 * time.Second},
				MaxDeliveryAttempts: ptr.To[int32](4),
				AutoOffsetReset:     ptr.To("earliest"),
			},
		},
	}
	if err := r.k8s.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	got := r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)

	// Read Kafka back with a client of our own (polling: a broker's metadata image follows
	// the controller's commit by a moment).
	eventually(t, 10*time.Second, func() string {
		topics, err := r.admin.DescribeTopics(ctx, topic)
		if err != nil {
			return err.Error()
		}
		if live := topics[topic]; live.Err != nil || live.Partitions != 3 || live.ID != got.Status.TopicID {
			return fmt.Sprintf("topic %s in Kafka: %+v; status topicId %q", topic, live, got.Status.TopicID)
		}
		return ""
	})
	groupKey := kafka.ResourceKey{Type: kafka.GroupResource, Name: "orders"}
	topicKey := kafka.ResourceKey{Type: kafka.TopicResource, Name: topic}
	// The broker serves DescribeConfigs from its metadata image, which follows the
	// controller's commit by a few milliseconds: poll briefly.
	var cfgs map[kafka.ResourceKey]kafka.ResourceConfigs
	eventually(t, 10*time.Second, func() string {
		var err error
		if cfgs, err = r.admin.DescribeConfigs(ctx, []kafka.ResourceKey{groupKey, topicKey}); err != nil {
			return err.Error()
		}
		for name, want := range map[string]string{"share.record.lock.duration.ms": "45000", "share.delivery.count.limit": "4", "share.auto.offset.reset": "earliest"} {
			if e := cfgs[groupKey].Configs[name]; e.Value != want || !e.IsOverride() {
				return fmt.Sprintf("group config %s = %+v, want override %s", name, e, want)
			}
		}
		return ""
	})
	if e := cfgs[groupKey].Configs["share.session.timeout.ms"]; e.IsOverride() {
		t.Errorf("share.session.timeout.ms was written (%+v) though the spec leaves it to the broker", e)
	}
	if e := cfgs[topicKey].Configs["retention.ms"]; e.Value != "3600000" || !e.IsOverride() {
		t.Errorf("topic retention.ms = %+v, want override 3600000", e)
	}

	// Status: effective values with their sources, capacity, printer-column fields.
	eff := got.Status.Effective
	if eff == nil || eff.LockDuration.Value != "45s" || eff.LockDuration.Source != kqv1.SourceGroupOverride ||
		eff.MaxDeliveryAttempts.Value != "4" || eff.SessionTimeout.Value != "45s" || eff.SessionTimeout.Source != kqv1.SourceBrokerDefault {
		t.Errorf("effective %+v", eff)
	}
	if c := got.Status.Capacity; c == nil || c.MaxInFlightRecords != 3*2000 || c.InFlightStateBytes != 3*2000*32 {
		t.Errorf("capacity %+v, want 6000 records and 192000 bytes", c)
	}
	if got.Status.Partitions != 3 || got.Status.TopicName != topic || got.Status.GroupID != "orders" || !got.Status.TopicCreated {
		t.Errorf("status %+v", got.Status)
	}

	// Grow partitions.
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Topic.Partitions = 5
	if err := r.k8s.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		ts, err := r.admin.DescribeTopics(ctx, topic)
		if err != nil {
			return err.Error()
		}
		if ts[topic].Partitions != 5 {
			return fmt.Sprintf("topic has %d partitions, want 5", ts[topic].Partitions)
		}
		return ""
	})
	got = r.waitQueue(t, got, kqv1.ConditionReady, metav1.ConditionTrue)
	if got.Status.Partitions != 5 || got.Status.Capacity.MaxInFlightRecords != 10000 {
		t.Errorf("after growth: partitions %d capacity %+v", got.Status.Partitions, got.Status.Capacity)
	}

	// Dropping a delivery field hands the setting back to the broker default.
	patch = client.MergeFrom(got.DeepCopy())
	got.Spec.Delivery.AutoOffsetReset = nil
	if err := r.k8s.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		cfgs, err := r.admin.DescribeConfigs(ctx, []kafka.ResourceKey{groupKey})
		if err != nil {
			return err.Error()
		}
		if e := cfgs[groupKey].Configs["share.auto.offset.reset"]; e.IsOverride() {
			return fmt.Sprintf("share.auto.offset.reset still overridden: %+v", e)
		}
		return ""
	})
}

func TestShareQueueOutOfBoundsIsRejectedWithCondition(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	sq := &kqv1.ShareQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow-" + ns},
		Spec: kqv1.ShareQueueSpec{
			ClusterRef: kqv1.ClusterReference{Name: "local"},
			Delivery: kqv1.DeliverySpec{
				LockDuration:        &metav1.Duration{Duration: 2 * time.Minute}, // broker max 60s
				MaxDeliveryAttempts: ptr.To[int32](3),
			},
		},
	}
	if err := r.k8s.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	got := r.waitQueue(t, sq, kqv1.ConditionConfigValid, metav1.ConditionFalse)
	c := findCondition(got.Status.Conditions, kqv1.ConditionConfigValid)
	for _, want := range []string{"delivery.lockDuration", "2m0s", "share.record.lock.duration.ms=120000", "group.share.max.record.lock.duration.ms=60000"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("ConfigValid message %q does not name %q", c.Message, want)
		}
	}
	if c.Reason != kqv1.ReasonOutOfBrokerBounds {
		t.Errorf("ConfigValid reason %q, want %s", c.Reason, kqv1.ReasonOutOfBrokerBounds)
	}
	ready := findCondition(got.Status.Conditions, kqv1.ConditionReady)
	stalled := findCondition(got.Status.Conditions, kqv1.ConditionStalled)
	if ready.Status != metav1.ConditionFalse || ready.Reason != kqv1.ReasonOutOfBrokerBounds || stalled.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v Stalled %+v, want Ready=False/OutOfBrokerBounds and Stalled=True", ready, stalled)
	}
	// The in-bounds field was still written; the out-of-bounds one was not.
	groupKey := kafka.ResourceKey{Type: kafka.GroupResource, Name: sq.Name}
	var cfgs map[kafka.ResourceKey]kafka.ResourceConfigs
	eventually(t, 10*time.Second, func() string {
		var err error
		if cfgs, err = r.admin.DescribeConfigs(ctx, []kafka.ResourceKey{groupKey}); err != nil {
			return err.Error()
		}
		if e := cfgs[groupKey].Configs["share.delivery.count.limit"]; e.Value != "3" || !e.IsOverride() {
			return fmt.Sprintf("in-bounds delivery count limit not written: %+v", e)
		}
		return ""
	})
	if e := cfgs[groupKey].Configs["share.record.lock.duration.ms"]; e.IsOverride() {
		t.Errorf("out-of-bounds lock duration was written: %+v", e)
	}
	if got.Status.Effective.LockDuration.Value != "30s" || got.Status.Effective.LockDuration.Source != kqv1.SourceBrokerDefault {
		t.Errorf("effective lock duration %+v, want the broker default 30s", got.Status.Effective.LockDuration)
	}

	// boundsPolicy Clamp writes the bound instead.
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.BoundsPolicy = kqv1.BoundsPolicyClamp
	if err := r.k8s.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	got = r.waitQueue(t, got, kqv1.ConditionReady, metav1.ConditionTrue)
	c = findCondition(got.Status.Conditions, kqv1.ConditionConfigValid)
	if c.Reason != kqv1.ReasonClampedToBrokerBounds || !strings.Contains(c.Message, "wrote 1m0s") {
		t.Errorf("ConfigValid after Clamp: %+v", c)
	}
	waitConfig(t, r.admin, groupKey, "share.record.lock.duration.ms", func(e kafka.ConfigEntry) string {
		if e.Value != "60000" || !e.IsOverride() {
			return fmt.Sprintf("clamped lock duration in Kafka: %+v, want 60000", e)
		}
		return ""
	})
	if got.Status.Effective.LockDuration.Value != "1m0s" || got.Status.Effective.LockDuration.Source != kqv1.SourceClamped {
		t.Errorf("effective lock duration %+v, want 1m0s Clamped", got.Status.Effective.LockDuration)
	}
}

func TestShareQueueDeletionPolicies(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	mk := func(name string, policy kqv1.DeletionPolicy) *kqv1.ShareQueue {
		sq := &kqv1.ShareQueue{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: kqv1.ShareQueueSpec{
				ClusterRef:     kqv1.ClusterReference{Name: "local"},
				Topic:          kqv1.QueueTopicSpec{Name: name + "-" + ns, Partitions: 1},
				Delivery:       kqv1.DeliverySpec{MaxDeliveryAttempts: ptr.To[int32](3)},
				DeletionPolicy: policy,
			},
		}
		if err := r.k8s.Create(ctx, sq); err != nil {
			t.Fatal(err)
		}
		return r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
	}
	retain := mk("keep", kqv1.DeletionPolicyRetain)
	del := mk("drop", kqv1.DeletionPolicyDelete)
	if len(retain.Finalizers) != 0 {
		t.Errorf("Retain queue has finalizers %v", retain.Finalizers)
	}
	if len(del.Finalizers) != 1 || del.Finalizers[0] != CleanupFinalizer {
		t.Errorf("Delete queue finalizers %v, want [%s]", del.Finalizers, CleanupFinalizer)
	}
	for _, sq := range []*kqv1.ShareQueue{retain, del} {
		if err := r.k8s.Delete(ctx, sq); err != nil {
			t.Fatal(err)
		}
	}
	for _, sq := range []*kqv1.ShareQueue{retain, del} {
		eventually(t, 60*time.Second, func() string {
			err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), &kqv1.ShareQueue{})
			if client.IgnoreNotFound(err) != nil {
				return err.Error()
			}
			if err == nil {
				return sq.Name + " still exists"
			}
			return ""
		})
	}
	var topics map[string]kafka.Topic
	eventually(t, 10*time.Second, func() string {
		var err error
		if topics, err = r.admin.DescribeTopics(ctx, retain.Status.TopicName, del.Status.TopicName); err != nil {
			return err.Error()
		}
		if !kafka.IsNotFound(topics[del.Status.TopicName].Err) {
			return fmt.Sprintf("Delete: topic %s still exists (%v)", del.Status.TopicName, topics[del.Status.TopicName].Err)
		}
		return ""
	})
	if topics[retain.Status.TopicName].Err != nil {
		t.Errorf("Retain: topic %s gone after CR deletion: %v", retain.Status.TopicName, topics[retain.Status.TopicName].Err)
	}
	groupKey := kafka.ResourceKey{Type: kafka.GroupResource, Name: "drop"}
	waitConfig(t, r.admin, groupKey, "share.delivery.count.limit", func(e kafka.ConfigEntry) string {
		if e.IsOverride() {
			return fmt.Sprintf("Delete: group config override survived: %+v", e)
		}
		return ""
	})
}

func TestNoOpReconcileWritesNothing(t *testing.T) {
	// Not parallel: it counts the suite manager's Kafka requests, which parallel tests would add to.
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	sq := &kqv1.ShareQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quiet-" + ns},
		Spec: kqv1.ShareQueueSpec{
			ClusterRef: kqv1.ClusterReference{Name: "local"},
			Topic:      kqv1.QueueTopicSpec{Partitions: 2, Config: kqv1.TopicConfigs{"cleanup.policy": "delete", "retention.ms": " 86400000 "}},
			Delivery:   kqv1.DeliverySpec{LockDuration: &metav1.Duration{Duration: 20 * time.Second}, RenewAcknowledge: ptr.To(true), IsolationLevel: ptr.To("read_committed")},
		},
	}
	if err := r.k8s.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	settled := r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
	// Settled means the share group's state has been read too (it is retried soon when the
	// coordinator is still loading).
	eventually(t, 30*time.Second, func() string {
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), settled); err != nil {
			return err.Error()
		}
		if settled.Status.Group == nil {
			return "share group state not read yet"
		}
		if settled.Status.Depth == nil {
			return "depth not written yet (the depth poller's first status write)"
		}
		return ""
	})
	time.Sleep(time.Second) // let any reconcile in flight finish

	before := r.counter.Snapshot()
	// An annotation change triggers a reconcile without changing the spec.
	patch := client.MergeFrom(settled.DeepCopy())
	if settled.Annotations == nil {
		settled.Annotations = map[string]string{}
	}
	settled.Annotations["test/poke"] = "1"
	if err := r.k8s.Patch(ctx, settled, patch); err != nil {
		t.Fatal(err)
	}
	rvAfterPoke := settled.ResourceVersion
	// Wait for the reconcile to have read Kafka (DescribeConfigs for this queue).
	eventually(t, 30*time.Second, func() string {
		d := kafka.Diff(before, r.counter.Snapshot())
		if d["DescribeConfigs"] == 0 {
			return fmt.Sprintf("no reconcile observed yet: %v", d)
		}
		return ""
	})
	time.Sleep(time.Second)
	d := kafka.Diff(before, r.counter.Snapshot())
	if w := kafka.Writes(d); w != 0 {
		t.Errorf("no-op reconcile sent %d Kafka write request(s): %v", w, d)
	}
	var now kqv1.ShareQueue
	if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), &now); err != nil {
		t.Fatal(err)
	}
	if now.ResourceVersion != rvAfterPoke {
		t.Errorf("no-op reconcile wrote to the apiserver: resourceVersion %s -> %s\nbefore: %+v\nafter:  %+v", rvAfterPoke, now.ResourceVersion, settled.Status, now.Status)
	}
	t.Logf("no-op reconcile requests: %v", d)
}

func TestReconcileModesPlanAndPaused(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	topic := "planned-" + ns
	sq := &kqv1.ShareQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planned", Annotations: map[string]string{kqv1.ReconcileAnnotation: kqv1.ReconcilePlan}},
		Spec: kqv1.ShareQueueSpec{
			ClusterRef: kqv1.ClusterReference{Name: "local"},
			Topic:      kqv1.QueueTopicSpec{Name: topic, Partitions: 2},
			Delivery:   kqv1.DeliverySpec{MaxDeliveryAttempts: ptr.To[int32](3)},
		},
	}
	if err := r.k8s.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	got := r.waitQueue(t, sq, kqv1.ConditionReconciling, metav1.ConditionFalse)
	want := []string{
		"create topic " + topic + ": partitions=2 replicationFactor=broker default",
		"group planned: set share.delivery.count.limit=3",
	}
	if fmt.Sprint(got.Status.PlannedChanges) != fmt.Sprint(want) {
		t.Errorf("plannedChanges %q, want %q", got.Status.PlannedChanges, want)
	}
	if c := findCondition(got.Status.Conditions, kqv1.ConditionReconciling); c.Reason != kqv1.ReasonPlanned {
		t.Errorf("Reconciling %+v, want reason Planned", c)
	}
	if c := findCondition(got.Status.Conditions, kqv1.ConditionReady); c != nil {
		t.Errorf("Ready %+v in Plan mode with pending changes, want none", c)
	}
	ts, err := r.admin.DescribeTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if !kafka.IsNotFound(ts[topic].Err) {
		t.Fatalf("Plan mode created the topic: %+v", ts[topic])
	}

	// Paused: a spec change is neither read nor applied.
	patch := client.MergeFrom(got.DeepCopy())
	got.Annotations[kqv1.ReconcileAnnotation] = kqv1.ReconcilePaused
	got.Spec.Topic.Partitions = 4
	if err := r.k8s.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		var cur kqv1.ShareQueue
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), &cur); err != nil {
			return err.Error()
		}
		if c := findCondition(cur.Status.Conditions, kqv1.ConditionReconciling); c == nil || c.Reason != kqv1.ReasonPaused {
			return fmt.Sprintf("Reconciling %+v, want reason Paused", c)
		}
		return ""
	})
	if ts, _ := r.admin.DescribeTopics(ctx, topic); !kafka.IsNotFound(ts[topic].Err) {
		t.Fatalf("Paused mode touched Kafka: %+v", ts[topic])
	}

	// Active again: the plan is applied and cleared.
	patch = client.MergeFrom(got.DeepCopy())
	delete(got.Annotations, kqv1.ReconcileAnnotation)
	if err := r.k8s.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	got = r.waitQueue(t, got, kqv1.ConditionReady, metav1.ConditionTrue)
	if len(got.Status.PlannedChanges) != 0 || got.Status.Partitions != 4 {
		t.Errorf("after activation: plannedChanges %v partitions %d", got.Status.PlannedChanges, got.Status.Partitions)
	}
}

// A share consumer joining the queue's group shows in status.group.
func TestQueueStatusShowsShareGroup(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	topic := "consumed-" + ns
	sq := &kqv1.ShareQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "consumed-" + ns},
		Spec: kqv1.ShareQueueSpec{
			ClusterRef: kqv1.ClusterReference{Name: "local"},
			Topic:      kqv1.QueueTopicSpec{Name: topic, Partitions: 1},
			Delivery:   kqv1.DeliverySpec{AutoOffsetReset: ptr.To("earliest")},
		},
	}
	if err := r.k8s.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	got := r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
	// On a fresh broker the first group lookup creates __consumer_offsets, and until its
	// coordinator has loaded the share group cannot be described: Ready does not wait for
	// it (the group's state is informative), and the queue looks again within 15 s.
	eventually(t, 30*time.Second, func() string {
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), got); err != nil {
			return err.Error()
		}
		if g := got.Status.Group; g == nil || g.State != "NotCreated" || g.Members != 0 {
			return fmt.Sprintf("group before any consumer: %+v", g)
		}
		return ""
	})
	n, err := rig.ProduceAndShareConsume(ctx, r.kafka.BootstrapServers(), topic, sq.Name, 5, 30*time.Second)
	if err != nil || n != 5 {
		t.Fatalf("share consumer received %d of 5 records: %v", n, err)
	}
	// Any spec-neutral change re-reads the group.
	patch := client.MergeFrom(got.DeepCopy())
	got.Annotations = map[string]string{"test/poke": "1"}
	if err := r.k8s.Patch(ctx, got, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		var cur kqv1.ShareQueue
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), &cur); err != nil {
			return err.Error()
		}
		g := cur.Status.Group
		if g == nil || g.State == "NotCreated" {
			return fmt.Sprintf("group status %+v", g)
		}
		if d := cur.Status.Depth; d == nil || d.Backlog == nil {
			return fmt.Sprintf("depth status %+v", d)
		}
		return ""
	})
}
