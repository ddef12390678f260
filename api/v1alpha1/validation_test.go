package v1alpha1_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// These tests run the generated CRDs' OpenAPI and CEL rules in a real kube-apiserver: each
// static rule of the API gets an example it must reject, with the message users will see.

var (
	k8s client.Client
	env *envtest.Environment
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	e, cfg, err := rig.StartAPIServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env = e
	scheme := runtime.NewScheme()
	_ = kqv1.AddToScheme(scheme)
	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func skipShort(t *testing.T) {
	rig.SkipWithoutRig(t, "the local kube-apiserver")
}

func validQueue(name string) *kqv1.ShareQueue {
	return &kqv1.ShareQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: kqv1.ShareQueueSpec{
			ClusterRef: kqv1.ClusterReference{Name: "c"},
			Topic:      kqv1.QueueTopicSpec{Name: name + "-topic", Partitions: 3},
			GroupID:    name + "-group",
			Delivery: kqv1.DeliverySpec{
				LockDuration:        &metav1.Duration{Duration: 30 * time.Second},
				MaxDeliveryAttempts: ptr.To[int32](5),
				SessionTimeout:      &metav1.Duration{Duration: 45 * time.Second},
				HeartbeatInterval:   &metav1.Duration{Duration: 5 * time.Second},
				AutoOffsetReset:     ptr.To("by_duration:PT1H"),
			},
		},
	}
}

func expectRejected(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want a rejection naming %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("rejection %q does not contain %q", err.Error(), w)
		}
	}
}

func TestShareQueueDefaults(t *testing.T) {
	skipShort(t)
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "defaults"}, Spec: kqv1.ShareQueueSpec{ClusterRef: kqv1.ClusterReference{Name: "c"}}}
	if err := k8s.Create(ctx(t), sq); err != nil {
		t.Fatal(err)
	}
	s := sq.Spec
	if s.Topic.Partitions != 1 || s.BoundsPolicy != kqv1.BoundsPolicyReject || s.DeletionPolicy != kqv1.DeletionPolicyRetain ||
		s.AdoptionPolicy != kqv1.AdoptionPolicyAdoptOrCreate || s.DriftPolicy != kqv1.DriftPolicyEnforce {
		t.Errorf("defaults not applied: %+v", s)
	}
}

func TestShareQueueCreateRules(t *testing.T) {
	skipShort(t)
	cases := []struct {
		name  string
		mut   func(*kqv1.ShareQueue)
		wants []string
	}{
		{"maxDeliveryAttempts below 2", func(q *kqv1.ShareQueue) { q.Spec.Delivery.MaxDeliveryAttempts = ptr.To[int32](1) }, []string{"spec.delivery.maxDeliveryAttempts", "greater than or equal to 2"}},
		{"lockDuration below 1s", func(q *kqv1.ShareQueue) {
			q.Spec.Delivery.LockDuration = &metav1.Duration{Duration: 500 * time.Millisecond}
		}, []string{"delivery.lockDuration must be at least 1s"}},
		{"autoOffsetReset unknown", func(q *kqv1.ShareQueue) { q.Spec.Delivery.AutoOffsetReset = ptr.To("newest") }, []string{"spec.delivery.autoOffsetReset", "should match"}},
		{"autoOffsetReset empty duration", func(q *kqv1.ShareQueue) { q.Spec.Delivery.AutoOffsetReset = ptr.To("by_duration:P") }, []string{"by_duration needs at least one duration component"}},
		{"autoOffsetReset dangling T", func(q *kqv1.ShareQueue) { q.Spec.Delivery.AutoOffsetReset = ptr.To("by_duration:P1DT") }, []string{"by_duration needs at least one duration component"}},
		{"session timeout not above heartbeat", func(q *kqv1.ShareQueue) {
			q.Spec.Delivery.SessionTimeout = &metav1.Duration{Duration: 5 * time.Second}
		}, []string{"delivery.sessionTimeout must be greater than delivery.heartbeatInterval"}},
		{"maxInFlightPerPartition below 100", func(q *kqv1.ShareQueue) { q.Spec.Delivery.MaxInFlightPerPartition = ptr.To[int32](10) }, []string{"spec.delivery.maxInFlightPerPartition"}},
		{"isolationLevel unknown", func(q *kqv1.ShareQueue) { q.Spec.Delivery.IsolationLevel = ptr.To("serializable") }, []string{"spec.delivery.isolationLevel", "Unsupported value"}},
		{"topic name with a slash", func(q *kqv1.ShareQueue) { q.Spec.Topic.Name = "a/b" }, []string{"spec.topic.name", "should match"}},
		{"topic name '..'", func(q *kqv1.ShareQueue) { q.Spec.Topic.Name = ".." }, []string{"topic.name must not be '.' or '..'"}},
		{"topic name too long", func(q *kqv1.ShareQueue) { q.Spec.Topic.Name = strings.Repeat("x", 250) }, []string{"spec.topic.name", "249"}},
		{"zero partitions", func(q *kqv1.ShareQueue) { q.Spec.Topic.Partitions = -1 }, []string{"spec.topic.partitions"}},
		{"unknown boundsPolicy", func(q *kqv1.ShareQueue) { q.Spec.BoundsPolicy = "Ignore" }, []string{"spec.boundsPolicy", "Unsupported value"}},
		{"unknown deletionPolicy", func(q *kqv1.ShareQueue) { q.Spec.DeletionPolicy = "Orphan" }, []string{"spec.deletionPolicy"}},
		{"missing clusterRef name", func(q *kqv1.ShareQueue) { q.Spec.ClusterRef.Name = "" }, []string{"spec.clusterRef.name"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := validQueue(fmt.Sprintf("create-%d", i))
			tc.mut(q)
			expectRejected(t, k8s.Create(ctx(t), q), tc.wants...)
		})
	}
}

func TestShareQueueUpdateRules(t *testing.T) {
	skipShort(t)
	cases := []struct {
		name  string
		mut   func(*kqv1.ShareQueue)
		wants []string
	}{
		{"topic name change", func(q *kqv1.ShareQueue) { q.Spec.Topic.Name = "other" }, []string{"topic.name is immutable"}},
		{"topic name removed", func(q *kqv1.ShareQueue) { q.Spec.Topic.Name = "" }, []string{"topic.name is immutable"}},
		{"group id change", func(q *kqv1.ShareQueue) { q.Spec.GroupID = "other" }, []string{"groupId is immutable"}},
		{"cluster ref change", func(q *kqv1.ShareQueue) { q.Spec.ClusterRef.Name = "other" }, []string{"clusterRef is immutable"}},
		{"partitions decreased", func(q *kqv1.ShareQueue) { q.Spec.Topic.Partitions = 2 }, []string{"topic.partitions can only grow"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := validQueue(fmt.Sprintf("update-%d", i))
			if err := k8s.Create(ctx(t), q); err != nil {
				t.Fatal(err)
			}
			tc.mut(q)
			expectRejected(t, k8s.Update(ctx(t), q), tc.wants...)
		})
	}
	// Allowed updates go through.
	q := validQueue("update-ok")
	if err := k8s.Create(ctx(t), q); err != nil {
		t.Fatal(err)
	}
	q.Spec.Topic.Partitions = 6
	q.Spec.Delivery.MaxDeliveryAttempts = ptr.To[int32](8)
	if err := k8s.Update(ctx(t), q); err != nil {
		t.Errorf("growing partitions and changing delivery refused: %v", err)
	}
	// Setting a group id that was absent is a change of the effective id: refused.
	q2 := validQueue("update-groupless")
	q2.Spec.GroupID = ""
	if err := k8s.Create(ctx(t), q2); err != nil {
		t.Fatal(err)
	}
	q2.Spec.GroupID = "late"
	expectRejected(t, k8s.Update(ctx(t), q2), "groupId is immutable")
}

func TestKafkaClusterRules(t *testing.T) {
	skipShort(t)
	mk := func(name string, mut func(*kqv1.KafkaCluster)) *kqv1.KafkaCluster {
		kc := &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: kqv1.KafkaClusterSpec{BootstrapServers: []string{"kafka-0.kafka:9092"}}}
		mut(kc)
		return kc
	}
	ok := mk("ok", func(*kqv1.KafkaCluster) {})
	if err := k8s.Create(ctx(t), ok); err != nil {
		t.Fatal(err)
	}
	if ok.Spec.FeaturePolicy != kqv1.FeaturePolicyObserve || ok.Spec.ShareStateTopic.Policy != kqv1.ShareStatePolicyObserve {
		t.Errorf("defaults not applied: %+v", ok.Spec)
	}
	expectRejected(t, k8s.Create(ctx(t), mk("finalize-no-target", func(k *kqv1.KafkaCluster) { k.Spec.FeaturePolicy = kqv1.FeaturePolicyFinalize })),
		"targetShareVersion is required when featurePolicy is Finalize")
	expectRejected(t, k8s.Create(ctx(t), mk("target-3", func(k *kqv1.KafkaCluster) {
		k.Spec.FeaturePolicy = kqv1.FeaturePolicyFinalize
		k.Spec.TargetShareVersion = ptr.To[int32](3)
	})), "spec.targetShareVersion")
	expectRejected(t, k8s.Create(ctx(t), mk("no-servers", func(k *kqv1.KafkaCluster) { k.Spec.BootstrapServers = nil })), "spec.bootstrapServers")
	expectRejected(t, k8s.Create(ctx(t), mk("no-port", func(k *kqv1.KafkaCluster) { k.Spec.BootstrapServers = []string{"kafka"} })), "spec.bootstrapServers[0]")
	expectRejected(t, k8s.Create(ctx(t), mk("bad-sasl", func(k *kqv1.KafkaCluster) {
		k.Spec.SASL = &kqv1.KafkaClusterSASL{Mechanism: "GSSAPI", SecretName: "s"}
	})), "spec.sasl.mechanism")
}

func TestDeadLetterRouteRules(t *testing.T) {
	skipShort(t)
	mk := func(name string) *kqv1.DeadLetterRoute {
		return &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: kqv1.DeadLetterRouteSpec{QueueRef: kqv1.QueueReference{Name: "q"}}}
	}
	d := mk("ok")
	if err := k8s.Create(ctx(t), d); err != nil {
		t.Fatal(err)
	}
	if d.Spec.Mode != kqv1.DeadLetterModeAuto || d.Spec.Topic.Partitions != 1 {
		t.Errorf("defaults not applied: %+v", d.Spec)
	}
	d.Spec.QueueRef.Name = "other"
	expectRejected(t, k8s.Update(ctx(t), d), "queueRef is immutable")
	internal := mk("internal")
	internal.Spec.Topic.Name = "__dlq"
	expectRejected(t, k8s.Create(ctx(t), internal), "must not start with '__'")
	badMode := mk("mode")
	badMode.Spec.Mode = "Sidecar"
	expectRejected(t, k8s.Create(ctx(t), badMode), "spec.mode")
}

// Every sample and example manifest is accepted by the real apiserver (server-side dry run).
func TestSamplesAreAdmitted(t *testing.T) {
	skipShort(t)
	files, _ := filepath.Glob(filepath.Join(rig.RepoRoot(), "config", "samples", "*.yaml"))
	more, _ := filepath.Glob(filepath.Join(rig.RepoRoot(), "config", "samples", "examples", "*.yaml"))
	files = append(files, more...)
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "kustomization.yaml") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := rig.DecodeManifests(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, u := range objs {
			u.SetNamespace("default")
			if err := k8s.Create(ctx(t), u, client.DryRunAll); err != nil {
				t.Errorf("%s: %s %s refused: %v", filepath.Base(f), u.GetKind(), u.GetName(), err)
			}
			n++
		}
	}
	if n < 8 {
		t.Errorf("only %d sample objects checked", n)
	}
}
