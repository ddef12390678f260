package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// The manager's cache (CacheOptions) holds a kubectl-applied ShareQueue without its
// last-applied-configuration but with its status and other annotations, and a patch built
// on the cached object (as every write of the manager is) leaves the annotation on the
// apiserver.
func TestCacheDropsLastAppliedButPatchesKeepIt(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	unique := fmt.Sprintf("applied-%s-%d", ns, time.Now().UnixNano())
	const applied = `{"apiVersion":"kafkaqueues.io/v1alpha1","kind":"ShareQueue","metadata":{"name":"applied"}}`
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "applied",
		Annotations: map[string]string{lastAppliedAnnotation: applied, "team": "shop"}},
		Spec: kqv1.ShareQueueSpec{ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Name: unique, Partitions: 1}, GroupID: unique}}
	if err := r.k8s.Create(ctxFor(t), sq); err != nil {
		t.Fatal(err)
	}
	r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)

	opts := CacheOptions(Scope{Namespaces: []string{ns}})
	opts.Scheme = r.k8s.Scheme()
	c, err := cache.New(r.env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Start(ctx) }()
	var cached kqv1.ShareQueue
	eventually(t, 30*time.Second, func() string {
		if err := c.Get(ctxFor(t), client.ObjectKeyFromObject(sq), &cached); err != nil {
			return err.Error()
		}
		return ""
	})
	if _, ok := cached.Annotations[lastAppliedAnnotation]; ok || cached.Annotations["team"] != "shop" {
		t.Errorf("cached annotations %v: want team=shop without %s", cached.Annotations, lastAppliedAnnotation)
	}
	if cached.Status.TopicName != unique || findCondition(cached.Status.Conditions, kqv1.ConditionReady) == nil || len(cached.ManagedFields) != 0 {
		t.Errorf("cached status %+v, %d managedFields: want the status kept and managedFields dropped", cached.Status, len(cached.ManagedFields))
	}

	base := cached.DeepCopy()
	cached.Labels = map[string]string{"patched": "from-cache"}
	if err := r.k8s.Patch(ctxFor(t), &cached, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	var live kqv1.ShareQueue
	if err := r.k8s.Get(ctxFor(t), client.ObjectKeyFromObject(sq), &live); err != nil {
		t.Fatal(err)
	}
	if live.Labels["patched"] != "from-cache" || live.Annotations[lastAppliedAnnotation] != applied || live.Annotations["team"] != "shop" {
		t.Errorf("after a patch built on the cached object: labels %v, annotations %v; want the label added and both annotations kept", live.Labels, live.Annotations)
	}
}
