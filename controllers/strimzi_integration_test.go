package controllers

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

func init() {
	// The rig's manager starts before a test installs Strimzi's CRDs: look for them often.
	strimziRecheckInterval = time.Second
}

var strimziCRDsOnce sync.Once

// installStrimziCRDs installs the stand-ins for Strimzi's Kafka and KafkaTopic CRDs
// (testdata/strimzi) into the rig's apiserver, once, after the manager started without them.
func (r *testRig) installStrimziCRDs(t *testing.T) {
	t.Helper()
	var err error
	strimziCRDsOnce.Do(func() {
		_, err = envtest.InstallCRDs(r.env.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join("testdata", "strimzi")}, ErrorIfPathMissing: true})
	})
	if err != nil {
		t.Fatalf("installing the Strimzi CRDs: %v", err)
	}
}

func strimziObject(kind, ns, name string, labels map[string]string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion("kafka.strimzi.io/v1beta2")
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(labels)
	return u
}

// TestStrimziKafkaTopicOwnsTheTopic: a topic a managed KafkaTopic declares on the same Kafka
// cluster gets Conflict naming it and no topic write, while the group configs are written;
// set unmanaged, the queue adopts or creates the topic and becomes Ready. A KafkaTopic of
// another Strimzi cluster does not hold a queue back.
func TestStrimziKafkaTopicOwnsTheTopic(t *testing.T) {
	// Not parallel: it installs Strimzi's CRDs into the shared apiserver, which changes what the suite's manager watches.
	r := startRig(t)
	r.installStrimziCRDs(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)

	// Strimzi Kafka my-cluster reports the rig's broker as its plain listener.
	k := strimziObject("Kafka", ns, "my-cluster", nil, map[string]any{"kafka": map[string]any{"replicas": int64(1)}})
	if err := r.k8s.Create(ctx, k); err != nil {
		t.Fatal(err)
	}
	k.Object["status"] = map[string]any{"listeners": []any{map[string]any{"name": "plain", "bootstrapServers": r.kafka.Bootstrap()}}}
	if err := r.k8s.Status().Update(ctx, k); err != nil {
		t.Fatal(err)
	}
	mine := map[string]string{strimziClusterLabel: "my-cluster"}
	fresh, existing, free := "strimzi-fresh-"+ns, "strimzi-existing-"+ns, "strimzi-free-"+ns
	kts := []*unstructured.Unstructured{
		// spec.topicName names the topic; it does not exist yet.
		strimziObject("KafkaTopic", ns, "fresh-kt", mine, map[string]any{"topicName": fresh, "partitions": int64(3), "replicas": int64(1)}),
		// metadata.name is the topic; it exists with one partition.
		strimziObject("KafkaTopic", ns, existing, mine, map[string]any{"partitions": int64(1), "replicas": int64(1)}),
		// Another Strimzi cluster, which nothing shows to be the rig's broker.
		strimziObject("KafkaTopic", ns, "free-kt", map[string]string{strimziClusterLabel: "other"}, map[string]any{"topicName": free}),
	}
	for _, kt := range kts {
		if err := r.k8s.Create(ctx, kt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.admin.CreateTopics(ctx, []kafka.NewTopic{{Name: existing, Partitions: 1, ReplicationFactor: -1}}); err != nil {
		t.Fatal(err)
	}

	queue := func(name, topic string, annotations map[string]string) *kqv1.ShareQueue {
		sq := &kqv1.ShareQueue{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
			Spec: kqv1.ShareQueueSpec{
				ClusterRef: kqv1.ClusterReference{Name: "local"},
				GroupID:    topic,
				Topic:      kqv1.QueueTopicSpec{Name: topic, Partitions: 3, Config: kqv1.TopicConfigs{"retention.ms": "3600000"}},
				Delivery:   kqv1.DeliverySpec{LockDuration: &metav1.Duration{Duration: 45 * time.Second}},
			},
		}
		if err := r.k8s.Create(ctx, sq); err != nil {
			t.Fatal(err)
		}
		return sq
	}
	// Plan first: the manager may still be finding the CRD; a planned queue writes nothing
	// whichever way it decides.
	plan := map[string]string{kqv1.ReconcileAnnotation: kqv1.ReconcilePlan}
	sqFresh, sqExisting := queue("fresh", fresh, plan), queue("existing", existing, plan)
	sqFree := queue("free", free, nil)

	for _, c := range []struct {
		sq *kqv1.ShareQueue
		kt string
	}{{sqFresh, ns + "/fresh-kt"}, {sqExisting, ns + "/" + existing}} {
		got := r.waitQueue(t, c.sq, kqv1.ConditionConflict, metav1.ConditionTrue)
		if cond := findCondition(got.Status.Conditions, kqv1.ConditionConflict); !strings.Contains(cond.Message, "Strimzi KafkaTopic "+c.kt+" ") {
			t.Errorf("%s: Conflict message %q does not name KafkaTopic %s", c.sq.Name, cond.Message, c.kt)
		}
		for _, change := range got.Status.PlannedChanges {
			if !strings.HasPrefix(change, "group ") {
				t.Errorf("%s: planned change %q touches the topic Strimzi manages", c.sq.Name, change)
			}
		}
		if len(got.Status.PlannedChanges) == 0 {
			t.Errorf("%s: no group change planned", c.sq.Name)
		}
		// Now for real.
		patch := client.MergeFrom(got.DeepCopy())
		delete(got.Annotations, kqv1.ReconcileAnnotation)
		if err := r.k8s.Patch(ctx, got, patch); err != nil {
			t.Fatal(err)
		}
	}
	r.waitQueue(t, sqFree, kqv1.ConditionReady, metav1.ConditionTrue)

	for _, sq := range []*kqv1.ShareQueue{sqFresh, sqExisting} {
		groupKey := kafka.ResourceKey{Type: kafka.GroupResource, Name: sq.Spec.GroupID}
		waitConfig(t, r.admin, groupKey, "share.record.lock.duration.ms", func(e kafka.ConfigEntry) string {
			if e.Value != "45000" || !e.IsOverride() {
				return fmt.Sprintf("%s: group config share.record.lock.duration.ms = %+v, want override 45000", sq.Name, e)
			}
			return ""
		})
		got := r.waitQueue(t, sq, kqv1.ConditionGroupConfigured, metav1.ConditionTrue)
		for typ, want := range map[string]metav1.ConditionStatus{kqv1.ConditionConflict: metav1.ConditionTrue, kqv1.ConditionTopicReady: metav1.ConditionFalse, kqv1.ConditionReady: metav1.ConditionFalse} {
			if c := findCondition(got.Status.Conditions, typ); c == nil || c.Status != want || (typ != kqv1.ConditionConflict && c.Reason != kqv1.ReasonConflict) {
				t.Errorf("%s: condition %s = %+v, want %s (Conflict)", sq.Name, typ, c, want)
			}
		}
		if got.Status.TopicID != "" || len(got.Status.PlannedChanges) != 0 {
			t.Errorf("%s: topicId %q plannedChanges %v; a topic Strimzi manages is not pinned", sq.Name, got.Status.TopicID, got.Status.PlannedChanges)
		}
	}
	// No topic write: fresh was not created, existing was neither grown nor configured.
	topics, err := r.admin.DescribeTopics(ctx, fresh, existing)
	if err != nil {
		t.Fatal(err)
	}
	if err := topics[fresh].Err; err == nil || !kafka.IsNotFound(err) {
		t.Errorf("topic %s: %+v; want it not created while a KafkaTopic manages it", fresh, topics[fresh])
	}
	if live := topics[existing]; live.Err != nil || live.Partitions != 1 {
		t.Errorf("topic %s: %+v; want it left at 1 partition", existing, live)
	}
	if e := r.topicConfig(t, r.admin, existing, "retention.ms"); e.IsOverride() {
		t.Errorf("topic %s retention.ms = %+v; want no topic config written", existing, e)
	}

	// Hand both topics over.
	for _, kt := range kts[:2] {
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(kt), kt); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(kt.DeepCopy())
		kt.SetAnnotations(map[string]string{strimziManagedAnnotation: "false"})
		if err := r.k8s.Patch(ctx, kt, patch); err != nil {
			t.Fatal(err)
		}
	}
	for _, sq := range []*kqv1.ShareQueue{sqFresh, sqExisting} {
		got := r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
		if c := findCondition(got.Status.Conditions, kqv1.ConditionConflict); c == nil || c.Status != metav1.ConditionFalse {
			t.Errorf("%s: Conflict %+v after the hand-over", sq.Name, c)
		}
		topic := got.Status.TopicName
		eventually(t, 10*time.Second, func() string {
			ts, err := r.admin.DescribeTopics(ctx, topic)
			if err != nil {
				return err.Error()
			}
			if live := ts[topic]; live.Err != nil || live.Partitions != 3 || live.ID != got.Status.TopicID {
				return fmt.Sprintf("topic %s: %+v; status topicId %q", topic, live, got.Status.TopicID)
			}
			return ""
		})
		waitConfig(t, r.admin, kafka.ResourceKey{Type: kafka.TopicResource, Name: topic}, "retention.ms", func(e kafka.ConfigEntry) string {
			if e.Value != "3600000" || !e.IsOverride() {
				return fmt.Sprintf("topic %s retention.ms = %+v after the hand-over", topic, e)
			}
			return ""
		})
	}
}
