package controllers

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// A queue with spec.connectionConfigMap publishes what its application needs into a
// ConfigMap it controls; the ConfigMap comes back when deleted; a ConfigMap of that name the
// queue does not control is never written, and the queue is not Ready, naming it.
func TestQueuePublishesItsConnection(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, GroupID: "billing-" + ns,
		Topic:               kqv1.QueueTopicSpec{Name: "orders-" + ns, Partitions: 2},
		ConnectionConfigMap: &kqv1.LocalObjectReference{Name: "orders-kafka"},
	}}
	if err := r.k8s.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	sq = r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
	want := map[string]string{
		"KAFKA_BOOTSTRAP_SERVERS": strings.Join(r.kafka.BootstrapServers(), ","),
		"KAFKA_TOPIC":             "orders-" + ns,
		"KAFKA_GROUP_ID":          "billing-" + ns,
		"KAFKA_SECURITY_PROTOCOL": "PLAINTEXT",
		"KQO_SHARE_QUEUE":         "orders",
	}
	key := client.ObjectKey{Namespace: ns, Name: "orders-kafka"}
	published := func() string {
		var cm corev1.ConfigMap
		if err := r.k8s.Get(ctx, key, &cm); err != nil {
			return err.Error()
		}
		if !maps.Equal(cm.Data, want) {
			return fmt.Sprintf("ConfigMap data %v, want %v", cm.Data, want)
		}
		if !metav1.IsControlledBy(&cm, sq) || cm.Labels[kqv1.ConnectionLabel] != "orders" {
			return fmt.Sprintf("ConfigMap owners %v labels %v: want controlled by the queue, labelled", cm.OwnerReferences, cm.Labels)
		}
		return ""
	}
	eventually(t, 30*time.Second, published)

	// Deleted by hand: the queue writes it again.
	if err := r.k8s.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-kafka"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, published)

	// A ConfigMap of the name, not the queue's: left as it is; Ready names it.
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-settings"}, Data: map[string]string{"LOG_LEVEL": "debug"}}
	if err := r.k8s.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	other := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "audit"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, GroupID: "audit-" + ns, Topic: kqv1.QueueTopicSpec{Name: "audit-" + ns, Partitions: 1},
		ConnectionConfigMap: &kqv1.LocalObjectReference{Name: "app-settings"},
	}}
	if err := r.k8s.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	other = r.waitQueue(t, other, kqv1.ConditionReady, metav1.ConditionFalse)
	c := findCondition(other.Status.Conditions, kqv1.ConditionReady)
	if c.Reason != kqv1.ReasonConnectionNotPublished || !strings.Contains(c.Message, "ConfigMap "+ns+"/app-settings") {
		t.Errorf("Ready %s: %s; want %s naming the ConfigMap", c.Reason, c.Message, kqv1.ReasonConnectionNotPublished)
	}
	var got corev1.ConfigMap
	if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(theirs), &got); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got.Data, theirs.Data) || len(got.OwnerReferences) != 0 {
		t.Errorf("the ConfigMap the queue does not own was written: %v, owners %v", got.Data, got.OwnerReferences)
	}
	// Renamed to a free name: Ready.
	base := other.DeepCopy()
	other.Spec.ConnectionConfigMap.Name = "audit-kafka"
	if err := r.k8s.Patch(ctx, other, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	r.waitQueue(t, other, kqv1.ConditionReady, metav1.ConditionTrue)
	if err := r.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "audit-kafka"}, &got); err != nil || got.Data["KAFKA_TOPIC"] != "audit-"+ns {
		t.Errorf("audit-kafka: %v %v", err, got.Data)
	}
	if err := r.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "nothing"}, &got); !apierrors.IsNotFound(err) {
		t.Errorf("unexpected: %v", err)
	}
}

// A breaker's finding on issue 34: renaming spec.connectionConfigMap left the old ConfigMap,
// still controlled by the queue, stale after the next KafkaCluster change and still holding
// its name against another queue; removing the field left both. The queue now deletes the
// connection ConfigMaps it controls that its spec no longer names. One whose label was removed
// by hand is labelled and written again, not called someone else's.
func TestRenamedConnectionConfigMapIsRemoved(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, GroupID: "renamed-" + ns,
		Topic:               kqv1.QueueTopicSpec{Name: "renamed-" + ns, Partitions: 1},
		ConnectionConfigMap: &kqv1.LocalObjectReference{Name: "first"},
	}}
	if err := r.k8s.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	sq = r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
	state := func(name string) string {
		var cm corev1.ConfigMap
		switch err := r.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm); {
		case apierrors.IsNotFound(err):
			return "absent"
		case err != nil:
			return err.Error()
		case !metav1.IsControlledBy(&cm, sq) || cm.Labels[kqv1.ConnectionLabel] != sq.Name || cm.Data["KAFKA_TOPIC"] != "renamed-"+ns:
			return fmt.Sprintf("not the queue's published connection: owners %v labels %v data %v", cm.OwnerReferences, cm.Labels, cm.Data)
		}
		return "published"
	}
	want := func(w map[string]string) func() string {
		return func() string {
			for name, s := range w {
				if got := state(name); got != s {
					return fmt.Sprintf("ConfigMap %s: %s, want %s", name, got, s)
				}
			}
			return ""
		}
	}
	eventually(t, 30*time.Second, want(map[string]string{"first": "published"}))

	edit := func(mut func(*kqv1.ShareQueue)) {
		t.Helper()
		eventually(t, 30*time.Second, func() string {
			var cur kqv1.ShareQueue
			if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), &cur); err != nil {
				return err.Error()
			}
			mut(&cur)
			if err := r.k8s.Update(ctx, &cur); err != nil {
				return err.Error()
			}
			return ""
		})
	}
	edit(func(q *kqv1.ShareQueue) { q.Spec.ConnectionConfigMap = &kqv1.LocalObjectReference{Name: "second"} })
	eventually(t, 30*time.Second, want(map[string]string{"first": "absent", "second": "published"}))
	r.hasEvent(t, sq, corev1.EventTypeNormal, "ConnectionConfigMapDeleted", "deleted ConfigMap "+ns+"/first: spec.connectionConfigMap no longer names it")

	// Its label removed by hand: still the queue's, labelled again.
	var cm corev1.ConfigMap
	if err := r.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "second"}, &cm); err != nil {
		t.Fatal(err)
	}
	base := cm.DeepCopy()
	delete(cm.Labels, kqv1.ConnectionLabel)
	cm.Data["KAFKA_TOPIC"] = "stale"
	if err := r.k8s.Patch(ctx, &cm, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	edit(func(q *kqv1.ShareQueue) { q.Spec.ConnectionConfigMap = &kqv1.LocalObjectReference{Name: "first"} })
	edit(func(q *kqv1.ShareQueue) { q.Spec.ConnectionConfigMap = &kqv1.LocalObjectReference{Name: "second"} })
	eventually(t, 30*time.Second, want(map[string]string{"first": "absent", "second": "published"}))
	r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)

	edit(func(q *kqv1.ShareQueue) { q.Spec.ConnectionConfigMap = nil })
	eventually(t, 30*time.Second, want(map[string]string{"first": "absent", "second": "absent"}))
}
