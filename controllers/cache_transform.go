package controllers

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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
