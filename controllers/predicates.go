package controllers

import (
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// builderWithGenerationOrAnnotationChange skips updates that only touch status, so a status
// write never re-triggers its own reconcile; spec (generation), deletion and annotation
// changes (kafkaqueues.io/reconcile) still do.
func builderWithGenerationOrAnnotationChange() builder.Predicates {
	return builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))
}
