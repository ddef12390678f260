package controllers

// The manager's cache: what it holds (the watched namespaces and shard, only the Pods that
// name a queue) and what it drops from every object (trimCachedObject).

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// lastAppliedAnnotation is kubectl's client-side apply record
// (kubectl.kubernetes.io/last-applied-configuration): a JSON copy of the whole manifest as
// last applied, on every object created or changed with `kubectl apply` (and by GitOps
// tools in client-side apply mode).
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// trimCachedObject is the manager cache's transform: it drops what no controller reads from
// every cached object, managedFields (about a third of a ShareQueue) and kubectl's
// last-applied-configuration annotation (a second copy of the spec). It keeps everything
// else, status above all: status patches are computed against the cached object. Safe
// because the manager never Updates a cached object (which would write the dropped fields
// away); its patches are diffs, which leave fields absent on both sides alone.
func trimCachedObject(in any) (any, error) {
	out, err := cache.TransformStripManagedFields()(in)
	if err != nil {
		return out, err
	}
	if obj, err := meta.Accessor(out); err == nil {
		if a := obj.GetAnnotations(); a != nil {
			if _, ok := a[lastAppliedAnnotation]; ok {
				delete(a, lastAppliedAnnotation)
				if len(a) == 0 {
					a = nil
				}
				obj.SetAnnotations(a)
			}
		}
	}
	return out, nil
}

// CacheOptions are the manager's cache options for scope: managedFields and kubectl's
// last-applied-configuration annotation stripped (never read; trimCachedObject), Pods cached only when labelled
// kafkaqueues.io/queue, the watched namespaces, and the shard selector on ShareQueues and
// DeadLetterRoutes.
func CacheOptions(scope Scope) cache.Options {
	opts := cache.Options{
		DefaultTransform: trimCachedObject,
		ByObject:         CacheByObject(),
	}
	if len(scope.Namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range scope.Namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	if scope.Selector != nil {
		opts.ByObject[&kqv1.ShareQueue{}] = cache.ByObject{Label: scope.Selector}
		opts.ByObject[&kqv1.DeadLetterRoute{}] = cache.ByObject{Label: scope.Selector}
		// A redrive is run by the shard of its route: label it as the route is (kqctl
		// redrive copies the route's kafkaqueues.io/shard label).
		opts.ByObject[&kqv1.DeadLetterRedrive{}] = cache.ByObject{Label: scope.Selector}
		// Likewise a reset, by the shard of its queue (kqctl reset-offsets and purge copy the
		// queue's label): a shard that saw every reset wrote QueueNotFound over the owning
		// shard's status, even over Complete, which then applied the reset again.
		opts.ByObject[&kqv1.OffsetReset{}] = cache.ByObject{Label: scope.Selector}
	}
	return opts
}

// queuePodSelector matches the Pods that name a ShareQueue (label kafkaqueues.io/queue, any
// value).
func queuePodSelector() labels.Selector {
	req, err := labels.NewRequirement(kqv1.QueueLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid label key
	}
	return labels.NewSelector().Add(*req)
}

// connectionConfigMapSelector matches the ConfigMaps ShareQueues publish
// (spec.connectionConfigMap).
func connectionConfigMapSelector() labels.Selector {
	req, err := labels.NewRequirement(kqv1.ConnectionLabel, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant, valid label key
	}
	return labels.NewSelector().Add(*req)
}

// CacheByObject returns the manager cache's per-kind options the reconcilers need (pass it as
// cache.Options.ByObject): Pods are cached only when they carry the kafkaqueues.io/queue
// label, so the manager holds the Pods of queues, not every Pod of the cluster. A manager
// built without it caches every Pod; PodReconciler still looks only at labelled ones.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Pod{}:       {Label: queuePodSelector()},
		&corev1.ConfigMap{}: {Label: connectionConfigMapSelector()},
	}
}
