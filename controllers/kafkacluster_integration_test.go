package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// startKafka starts a dedicated Kafka cluster for one test and stops it at the end.
func startKafka(t *testing.T, opts rig.KafkaOptions) (*rig.Kafka, *kafka.Client) {
	t.Helper()
	opts.Log = func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	k, err := rig.StartKafka(context.Background(), opts)
	if err != nil {
		t.Fatalf("starting kafka %+v: %v", opts, err)
	}
	t.Cleanup(k.Stop)
	admin, err := kafka.NewClient(kafka.Config{BootstrapServers: k.BootstrapServers(), ClientID: "test-admin"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	return k, admin
}

// createCluster creates a KafkaCluster for k and waits until check(status) returns "".
func (r *testRig) createCluster(t *testing.T, ns, name string, k *rig.Kafka, mut func(*kqv1.KafkaCluster), check func(*kqv1.KafkaCluster) string) *kqv1.KafkaCluster {
	t.Helper()
	kc := &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kqv1.KafkaClusterSpec{BootstrapServers: k.BootstrapServers()}}
	if mut != nil {
		mut(kc)
	}
	if err := r.k8s.Create(ctxFor(t), kc); err != nil {
		t.Fatal(err)
	}
	// The test's brokers stop at its end: remove the cluster object with them.
	t.Cleanup(func() { _ = r.k8s.Delete(context.Background(), kc) })
	return r.waitCluster(t, kc, check)
}

func (r *testRig) waitCluster(t *testing.T, kc *kqv1.KafkaCluster, check func(*kqv1.KafkaCluster) string) *kqv1.KafkaCluster {
	t.Helper()
	out := &kqv1.KafkaCluster{}
	eventually(t, 90*time.Second, func() string {
		if err := r.k8s.Get(ctxFor(t), client.ObjectKeyFromObject(kc), out); err != nil {
			return err.Error()
		}
		if out.Status.ObservedGeneration != out.Generation {
			return "status not at the current generation"
		}
		if msg := check(out); msg != "" {
			return fmt.Sprintf("KafkaCluster %s: %s; conditions %+v", kc.Name, msg, out.Status.Conditions)
		}
		return ""
	})
	return out
}

func condIs(conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason string) string {
	c := findCondition(conds, typ)
	if c == nil || c.Status != status || (reason != "" && c.Reason != reason) {
		return fmt.Sprintf("want %s=%s/%s, have %+v", typ, status, reason, c)
	}
	return ""
}

// A cluster formatted at release 4.1 starts with share.version 0: Observe reports it and the
// command to run, queues wait with ShareGroupsDisabled and write no group config; Finalize
// raises the level to 1 and the waiting queue becomes Ready without being touched.
func TestFinalizeShareVersionOnRelease41Cluster(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	k, admin := startKafka(t, rig.KafkaOptions{ReleaseVersion: "4.1"})
	ns := r.newNamespace(t)
	kc := r.createCluster(t, ns, "old", k, nil, func(kc *kqv1.KafkaCluster) string {
		return condIs(kc.Status.Conditions, kqv1.ConditionShareGroupsEnabled, metav1.ConditionFalse, kqv1.ReasonShareGroupsDisabled)
	})
	if kc.Status.ShareVersion != 0 {
		t.Errorf("shareVersion %d, want 0 at release 4.1", kc.Status.ShareVersion)
	}
	c := findCondition(kc.Status.Conditions, kqv1.ConditionShareGroupsEnabled)
	if !strings.Contains(c.Message, "upgrade --feature share.version=1") {
		t.Errorf("ShareGroupsEnabled message %q does not give the command", c.Message)
	}
	var sv *kqv1.FeatureRange
	for i, f := range kc.Status.SupportedFeatures {
		if f.Name == "share.version" {
			sv = &kc.Status.SupportedFeatures[i]
		}
	}
	if sv == nil || sv.MaxLevel < 1 {
		t.Errorf("supportedFeatures %+v lacks share.version up to >= 1", kc.Status.SupportedFeatures)
	}

	sq := &kqv1.ShareQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "waiting"},
		Spec: kqv1.ShareQueueSpec{ClusterRef: kqv1.ClusterReference{Name: "old"},
			Delivery: kqv1.DeliverySpec{MaxDeliveryAttempts: ptr.To[int32](4)}},
	}
	if err := r.k8s.Create(ctxFor(t), sq); err != nil {
		t.Fatal(err)
	}
	got := r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionFalse)
	if c := findCondition(got.Status.Conditions, kqv1.ConditionReady); c.Reason != kqv1.ReasonShareGroupsDisabled {
		t.Errorf("Ready %+v, want reason ShareGroupsDisabled", c)
	}
	groupKey := kafka.ResourceKey{Type: kafka.GroupResource, Name: "waiting"}
	if cfgs, err := admin.DescribeConfigs(ctxFor(t), []kafka.ResourceKey{groupKey}); err == nil && cfgs[groupKey].Err == nil {
		if e := cfgs[groupKey].Configs["share.delivery.count.limit"]; e.IsOverride() {
			t.Errorf("group config written while share groups are off: %+v", e)
		}
	}

	// Finalize: only the KafkaCluster changes.
	patch := client.MergeFrom(kc.DeepCopy())
	kc.Spec.FeaturePolicy = kqv1.FeaturePolicyFinalize
	kc.Spec.TargetShareVersion = ptr.To[int32](1)
	if err := r.k8s.Patch(ctxFor(t), kc, patch); err != nil {
		t.Fatal(err)
	}
	kc = r.waitCluster(t, kc, func(kc *kqv1.KafkaCluster) string {
		if kc.Status.ShareVersion != 1 {
			return fmt.Sprintf("shareVersion %d", kc.Status.ShareVersion)
		}
		return condIs(kc.Status.Conditions, kqv1.ConditionShareGroupsEnabled, metav1.ConditionTrue, "")
	})
	info, err := admin.DescribeCluster(ctxFor(t))
	if err != nil || info.FeatureLevel("share.version") != 1 {
		t.Errorf("brokers report share.version %d (%v), want 1", info.FeatureLevel("share.version"), err)
	}
	got = r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
	waitConfig(t, admin, groupKey, "share.delivery.count.limit", func(e kafka.ConfigEntry) string {
		if e.Value != "4" || !e.IsOverride() {
			return fmt.Sprintf("group config after finalize: %+v", e)
		}
		return ""
	})
	var finalized bool
	var evs eventsv1.EventList
	if err := r.k8s.List(ctxFor(t), &evs, client.InNamespace(ns)); err == nil {
		for _, e := range evs.Items {
			if e.Reason == kqv1.ReasonFeatureFinalized && strings.Contains(e.Note, "share.version raised from 0 to 1") {
				finalized = true
			}
		}
	}
	if !finalized {
		t.Errorf("no FeatureFinalized event for the share.version upgrade")
	}
}

// Three brokers whose __share_group_state was created at RF 1: Manage raises every partition
// to RF 3 (spread over the brokers) and the topic's min.insync.replicas to 2.
func TestManageRaisesShareStateReplication(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	k, admin := startKafka(t, rig.KafkaOptions{Brokers: 3, BrokerProps: map[string]string{
		"share.coordinator.state.topic.replication.factor": "1",
		"share.coordinator.state.topic.min.isr":            "1",
	}})
	ns := r.newNamespace(t)
	// First share-group use creates the state topic at the brokers' RF 1.
	if _, err := admin.CreateTopics(ctxFor(t), []kafka.NewTopic{{Name: "work", Partitions: 3, ReplicationFactor: 3}}); err != nil {
		t.Fatal(err)
	}
	gk := kafka.ResourceKey{Type: kafka.GroupResource, Name: "g"}
	if _, err := admin.IncrementalAlterConfigs(ctxFor(t), []kafka.Alteration{{Resource: gk, Configs: []kafka.AlterConfig{{Name: "share.auto.offset.reset", Op: kafka.OpSet, Value: "earliest"}}}}); err != nil {
		t.Fatal(err)
	}
	if n, err := rig.ProduceAndShareConsume(ctxFor(t), k.BootstrapServers(), "work", "g", 3, 30*time.Second); err != nil || n != 3 {
		t.Fatalf("share consumer got %d of 3 records: %v", n, err)
	}
	eventually(t, 30*time.Second, func() string {
		ts, err := admin.DescribeTopics(ctxFor(t), ShareStateTopic)
		if err != nil {
			return err.Error()
		}
		if ts[ShareStateTopic].Err != nil {
			return "state topic not created yet: " + ts[ShareStateTopic].Err.Error()
		}
		return ""
	})
	r.createCluster(t, ns, "three", k, nil, func(kc *kqv1.KafkaCluster) string {
		ss := kc.Status.ShareStateTopic
		if ss == nil || !ss.Exists || ss.ReplicationFactor != 1 {
			return fmt.Sprintf("share state %+v", ss)
		}
		return condIs(kc.Status.Conditions, kqv1.ConditionShareStateReplicated, metav1.ConditionFalse, kqv1.ReasonShareStateUnderReplicated)
	})
	var kc kqv1.KafkaCluster
	if err := r.k8s.Get(ctxFor(t), client.ObjectKey{Namespace: ns, Name: "three"}, &kc); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(kc.DeepCopy())
	kc.Spec.ShareStateTopic.Policy = kqv1.ShareStatePolicyManage
	if err := r.k8s.Patch(ctxFor(t), &kc, patch); err != nil {
		t.Fatal(err)
	}
	got := r.waitCluster(t, &kc, func(kc *kqv1.KafkaCluster) string {
		return condIs(kc.Status.Conditions, kqv1.ConditionShareStateReplicated, metav1.ConditionTrue, kqv1.ReasonShareStateReplicated)
	})
	if ss := got.Status.ShareStateTopic; ss.ReplicationFactor != 3 || ss.MinInSyncReplicas == nil || *ss.MinInSyncReplicas != 2 {
		t.Errorf("status share state %+v", ss)
	}
	// Check from a separate client.
	ts, err := admin.DescribeTopics(ctxFor(t), ShareStateTopic)
	if err != nil {
		t.Fatal(err)
	}
	st := ts[ShareStateTopic]
	load := map[int32]int{}
	for p, reps := range st.Replicas {
		seen := map[int32]bool{}
		for _, b := range reps {
			seen[b] = true
			load[b]++
		}
		if len(reps) != 3 || len(seen) != 3 {
			t.Errorf("partition %d replicas %v, want 3 distinct brokers", p, reps)
		}
	}
	if len(load) != 3 {
		t.Errorf("replicas spread over %v, want all 3 brokers", load)
	}
	key := kafka.ResourceKey{Type: kafka.TopicResource, Name: ShareStateTopic}
	cfgs, err := admin.DescribeConfigs(ctxFor(t), []kafka.ResourceKey{key})
	if err != nil {
		t.Fatal(err)
	}
	if v := cfgs[key].Configs["min.insync.replicas"].Value; v != "2" {
		t.Errorf("min.insync.replicas %q, want 2", v)
	}

	// A broker that leaves: the cluster says so and never shrinks replication by itself.
	k.StopNode(k.Nodes[2])
	got = r.waitCluster(t, &kc, func(kc *kqv1.KafkaCluster) string {
		if kc.Status.BrokerCount != 2 {
			return fmt.Sprintf("brokerCount %d", kc.Status.BrokerCount)
		}
		return condIs(kc.Status.Conditions, kqv1.ConditionShareStateReplicated, metav1.ConditionFalse, kqv1.ReasonShareStateBrokerMissing)
	})
	if c := findCondition(got.Status.Conditions, kqv1.ConditionReady); c.Status != metav1.ConditionFalse {
		t.Errorf("Ready %+v while a broker holding share state is gone", c)
	}
	ts, err = admin.DescribeTopics(ctxFor(t), ShareStateTopic)
	if err != nil {
		t.Fatal(err)
	}
	for p, reps := range ts[ShareStateTopic].Replicas {
		if len(reps) != 3 {
			t.Errorf("partition %d shrank to %v after a broker left", p, reps)
		}
	}
}

// Kafka 4.2 has no KIP-1240 min/max for delivery count and record locks and no group-level
// share.delivery.count.limit: a queue using maxDeliveryAttempts is told the field is
// unsupported here; a queue without it is Ready.
func TestKafka42ReportsUnsupportedFields(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	k, _ := startKafka(t, rig.KafkaOptions{Version: "4.2.0"})
	ns := r.newNamespace(t)
	kc := r.createCluster(t, ns, "k42", k, nil, func(kc *kqv1.KafkaCluster) string {
		return condIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionTrue, "")
	})
	if b := kc.Status.ShareBounds; b == nil || b.DeliveryCountLimit.Min != nil || b.DeliveryCountLimit.Max != nil {
		t.Errorf("4.2 bounds %+v: delivery-count min/max must be absent, not invented", b)
	}
	t.Logf("4.2 share.version=%d bounds=%+v", kc.Status.ShareVersion, kc.Status.ShareBounds)
	mk := func(name string, attempts *int32) *kqv1.ShareQueue {
		sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kqv1.ShareQueueSpec{
			ClusterRef: kqv1.ClusterReference{Name: "k42"},
			Delivery:   kqv1.DeliverySpec{LockDuration: &metav1.Duration{Duration: 20 * time.Second}, MaxDeliveryAttempts: attempts},
		}}
		if err := r.k8s.Create(ctxFor(t), sq); err != nil {
			t.Fatal(err)
		}
		return sq
	}
	with := r.waitQueue(t, mk("with-attempts", ptr.To[int32](4)), kqv1.ConditionConfigValid, metav1.ConditionFalse)
	c := findCondition(with.Status.Conditions, kqv1.ConditionConfigValid)
	if c.Reason != kqv1.ReasonUnsupportedByCluster || !strings.Contains(c.Message, "delivery.maxDeliveryAttempts=4") || !strings.Contains(c.Message, "share.delivery.count.limit") {
		t.Errorf("ConfigValid %+v", c)
	}
	without := r.waitQueue(t, mk("without-attempts", nil), kqv1.ConditionReady, metav1.ConditionTrue)
	if e := without.Status.Effective.LockDuration; e.Value != "20s" || e.Source != kqv1.SourceGroupOverride {
		t.Errorf("effective lock on 4.2 %+v", e)
	}
}

// Brokers restarted with a narrower lock-duration bound: the cluster's bounds, and with them
// the queue's condition and effective value, follow.
func TestQueueFollowsNarrowedBrokerBounds(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	k, _ := startKafka(t, rig.KafkaOptions{})
	ns := r.newNamespace(t)
	r.createCluster(t, ns, "b", k, nil, func(kc *kqv1.KafkaCluster) string {
		return condIs(kc.Status.Conditions, kqv1.ConditionReady, metav1.ConditionTrue, "")
	})
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lease"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "b"},
		Delivery:   kqv1.DeliverySpec{LockDuration: &metav1.Duration{Duration: 50 * time.Second}},
	}}
	if err := r.k8s.Create(ctxFor(t), sq); err != nil {
		t.Fatal(err)
	}
	got := r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
	if got.Status.Effective.LockDuration.Value != "50s" {
		t.Fatalf("effective lock %+v", got.Status.Effective.LockDuration)
	}
	if err := k.RestartNode(context.Background(), k.Nodes[0], map[string]string{"group.share.max.record.lock.duration.ms": "40000"}); err != nil {
		t.Fatal(err)
	}
	var out kqv1.ShareQueue
	eventually(t, 90*time.Second, func() string {
		if err := r.k8s.Get(ctxFor(t), client.ObjectKeyFromObject(sq), &out); err != nil {
			return err.Error()
		}
		c := findCondition(out.Status.Conditions, kqv1.ConditionConfigValid)
		if c == nil || c.Reason != kqv1.ReasonOutOfBrokerBounds || !strings.Contains(c.Message, "group.share.max.record.lock.duration.ms=40000") {
			return fmt.Sprintf("ConfigValid %+v", c)
		}
		return ""
	})
	// The stored 50000 override is clamped by the brokers at run time (KIP-1240).
	if e := out.Status.Effective.LockDuration; e.Value != "40s" || e.Source != kqv1.SourceClamped {
		t.Errorf("effective lock after narrowing %+v, want 40s Clamped", e)
	}

	// Another delivery field edited meanwhile (the soak's spec-edits fault, seed 20261203):
	// the brokers refuse any alteration of a group whose stored override is out of bounds, so
	// the change waits and the queue says why (OutOfBrokerBounds, not KafkaRejected from a
	// write refused on every reconcile).
	out.Spec.Delivery.MaxDeliveryAttempts = ptr.To[int32](4)
	if err := r.k8s.Update(ctxFor(t), &out); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() string {
		if err := r.k8s.Get(ctxFor(t), client.ObjectKeyFromObject(sq), &out); err != nil {
			return err.Error()
		}
		c := findCondition(out.Status.Conditions, kqv1.ConditionConfigValid)
		if c == nil || c.ObservedGeneration != out.Generation || !strings.Contains(c.Message, "share.delivery.count.limit wait") {
			return fmt.Sprintf("ConfigValid %+v", c)
		}
		return ""
	})
	if c := findCondition(out.Status.Conditions, kqv1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != kqv1.ReasonOutOfBrokerBounds {
		t.Errorf("Ready %+v, want False/OutOfBrokerBounds", c)
	}
	if e := out.Status.Effective.MaxDeliveryAttempts; e == nil || e.Value == "4" {
		t.Errorf("effective attempts %+v: the waiting change is shown as applied", e)
	}
}

// SASL against a real broker: SCRAM-SHA-512 and PLAIN connect; a wrong password gives
// Connected=False with a clear reason and no secret in status; fixing the Secret rebuilds the
// client and the cluster connects.
func TestSASLConnections(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	k, _ := startKafka(t, rig.KafkaOptions{SASLUsers: map[string]string{"alice": "alice-secret"}})
	ns := r.newNamespace(t)
	secret := func(name, user, pass string) {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"username": user, "password": pass}}
		if err := r.k8s.Create(ctxFor(t), s); err != nil {
			t.Fatal(err)
		}
	}
	secret("good", "alice", "alice-secret")
	secret("bad", "alice", "wrong-password-123")
	for _, mech := range []kqv1.SASLMechanism{kqv1.SASLMechanismScramSHA512, kqv1.SASLMechanismScramSHA256, kqv1.SASLMechanismPlain} {
		name := strings.ToLower(strings.ReplaceAll(string(mech), "-", ""))
		r.createCluster(t, ns, name, k, func(kc *kqv1.KafkaCluster) {
			kc.Spec.BootstrapServers = k.SASLBootstrapServers()
			kc.Spec.SASL = &kqv1.KafkaClusterSASL{Mechanism: mech, SecretName: "good"}
		}, func(kc *kqv1.KafkaCluster) string {
			return condIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionTrue, "")
		})
	}
	kc := r.createCluster(t, ns, "wrong", k, func(kc *kqv1.KafkaCluster) {
		kc.Spec.BootstrapServers = k.SASLBootstrapServers()
		kc.Spec.SASL = &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismScramSHA512, SecretName: "bad"}
	}, func(kc *kqv1.KafkaCluster) string {
		return condIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionFalse, kqv1.ReasonConnectionFailed)
	})
	c := findCondition(kc.Status.Conditions, kqv1.ConditionConnected)
	if !strings.Contains(strings.ToLower(c.Message), "authentication") {
		t.Errorf("Connected message %q does not say authentication failed", c.Message)
	}
	raw, _ := json.Marshal(kc.Status)
	if strings.Contains(string(raw), "wrong-password-123") {
		t.Errorf("the password appears in status: %s", raw)
	}
	// Fix the Secret: the client is rebuilt and connects.
	var s corev1.Secret
	if err := r.k8s.Get(ctxFor(t), client.ObjectKey{Namespace: ns, Name: "bad"}, &s); err != nil {
		t.Fatal(err)
	}
	s.Data = map[string][]byte{"username": []byte("alice"), "password": []byte("alice-secret")}
	if err := r.k8s.Update(ctxFor(t), &s); err != nil {
		t.Fatal(err)
	}
	r.waitCluster(t, kc, func(kc *kqv1.KafkaCluster) string {
		return condIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionTrue, "")
	})
}

// TLS against a real broker: with the CA from a Secret the cluster connects; without it
// (system roots) the certificate is refused with a clear message; a CA Secret that holds no
// PEM is SecretInvalid.
func TestTLSConnections(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ca, err := rig.NewTestCA()
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.ServerCert()
	if err != nil {
		t.Fatal(err)
	}
	k, _ := startKafka(t, rig.KafkaOptions{TLS: server})
	ns := r.newNamespace(t)
	for name, data := range map[string]string{"ca": ca.CertPEM, "not-pem": "hello"} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, StringData: map[string]string{"ca.crt": data}}
		if err := r.k8s.Create(ctxFor(t), s); err != nil {
			t.Fatal(err)
		}
	}
	r.createCluster(t, ns, "tls", k, func(kc *kqv1.KafkaCluster) {
		kc.Spec.BootstrapServers = k.TLSBootstrapServers()
		kc.Spec.TLS = &kqv1.KafkaClusterTLS{CASecretRef: &kqv1.SecretKeyReference{Name: "ca", Key: "ca.crt"}}
	}, func(kc *kqv1.KafkaCluster) string {
		return condIs(kc.Status.Conditions, kqv1.ConditionReady, metav1.ConditionTrue, "")
	})
	kc := r.createCluster(t, ns, "no-ca", k, func(kc *kqv1.KafkaCluster) {
		kc.Spec.BootstrapServers = k.TLSBootstrapServers()
		kc.Spec.TLS = &kqv1.KafkaClusterTLS{}
	}, func(kc *kqv1.KafkaCluster) string {
		return condIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionFalse, kqv1.ReasonConnectionFailed)
	})
	if c := findCondition(kc.Status.Conditions, kqv1.ConditionConnected); !strings.Contains(c.Message, "certificate") {
		t.Errorf("Connected message %q does not mention the certificate", c.Message)
	}
	r.createCluster(t, ns, "bad-ca", k, func(kc *kqv1.KafkaCluster) {
		kc.Spec.BootstrapServers = k.TLSBootstrapServers()
		kc.Spec.TLS = &kqv1.KafkaClusterTLS{CASecretRef: &kqv1.SecretKeyReference{Name: "not-pem", Key: "ca.crt"}}
	}, func(kc *kqv1.KafkaCluster) string {
		return condIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionFalse, kqv1.ReasonSecretInvalid)
	})

	// Regression (issue 30, case 6): a Strimzi KafkaUser Secret's ca.crt is the clients CA,
	// not the CA that signed the brokers; the cluster got the bare "x509: certificate signed by
	// unknown authority". It now names the Secret and key used and where the cluster CA is.
	clientsCA, err := rig.NewTestCA()
	if err != nil {
		t.Fatal(err)
	}
	user := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alice", Labels: map[string]string{"strimzi.io/cluster": "my-cluster", "strimzi.io/kind": "KafkaUser"}},
		StringData: map[string]string{"ca.crt": clientsCA.CertPEM, "user.crt": "-", "user.key": "-", "user.p12": "-", "user.password": "-"}}
	if err := r.k8s.Create(ctxFor(t), user); err != nil {
		t.Fatal(err)
	}
	kc = r.createCluster(t, ns, "strimzi-user-ca", k, func(kc *kqv1.KafkaCluster) {
		kc.Spec.BootstrapServers = k.TLSBootstrapServers()
		kc.Spec.TLS = &kqv1.KafkaClusterTLS{CASecretRef: &kqv1.SecretKeyReference{Name: "alice", Key: "ca.crt"}}
	}, func(kc *kqv1.KafkaCluster) string {
		return condIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionFalse, kqv1.ReasonConnectionFailed)
	})
	c := findCondition(kc.Status.Conditions, kqv1.ConditionConnected)
	for _, want := range []string{`not signed by the CA in Secret ` + ns + `/alice key "ca.crt" (spec.tls.caSecretRef)`, "Strimzi KafkaUser", "Secret my-cluster-cluster-ca-cert key \"ca.crt\""} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("Connected message %q lacks %q", c.Message, want)
		}
	}
}

// Mutual TLS: a listener requiring client certificates accepts the one from the KafkaCluster's
// kubernetes.io/tls Secret and refuses a cluster without one; serverName is checked.
func TestMutualTLSAndServerName(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ca, err := rig.NewTestCA()
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.ServerCert()
	if err != nil {
		t.Fatal(err)
	}
	server.ClientCAPEM = ca.CertPEM
	clientCert, err := ca.ClientCert()
	if err != nil {
		t.Fatal(err)
	}
	k, _ := startKafka(t, rig.KafkaOptions{TLS: server})
	ns := r.newNamespace(t)
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ca"}, StringData: map[string]string{"ca.crt": ca.CertPEM}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "client"}, Type: corev1.SecretTypeTLS,
			StringData: map[string]string{"tls.crt": clientCert.CertPEM, "tls.key": clientCert.KeyPEM}},
	} {
		if err := r.k8s.Create(ctxFor(t), s); err != nil {
			t.Fatal(err)
		}
	}
	tlsSpec := func(client, serverName string) *kqv1.KafkaClusterTLS {
		return &kqv1.KafkaClusterTLS{CASecretRef: &kqv1.SecretKeyReference{Name: "ca", Key: "ca.crt"}, ClientCertSecretName: client, ServerName: serverName}
	}
	r.createCluster(t, ns, "mtls", k, func(kc *kqv1.KafkaCluster) {
		kc.Spec.BootstrapServers, kc.Spec.TLS = k.TLSBootstrapServers(), tlsSpec("client", "localhost")
	}, func(kc *kqv1.KafkaCluster) string {
		return condIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionTrue, "")
	})
	r.createCluster(t, ns, "no-client-cert", k, func(kc *kqv1.KafkaCluster) {
		kc.Spec.BootstrapServers, kc.Spec.TLS = k.TLSBootstrapServers(), tlsSpec("", "")
	}, func(kc *kqv1.KafkaCluster) string {
		return condIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionFalse, kqv1.ReasonConnectionFailed)
	})
	kc := r.createCluster(t, ns, "wrong-name", k, func(kc *kqv1.KafkaCluster) {
		kc.Spec.BootstrapServers, kc.Spec.TLS = k.TLSBootstrapServers(), tlsSpec("client", "kafka.example.com")
	}, func(kc *kqv1.KafkaCluster) string {
		return condIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionFalse, kqv1.ReasonConnectionFailed)
	})
	if c := findCondition(kc.Status.Conditions, kqv1.ConditionConnected); !strings.Contains(c.Message, "kafka.example.com") {
		t.Errorf("serverName mismatch message %q does not name the expected name", c.Message)
	}
	raw, _ := json.Marshal(kc.Status)
	if strings.Contains(string(raw), "PRIVATE KEY") {
		t.Errorf("key material in status")
	}
}
