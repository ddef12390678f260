package v1alpha1

// OwningRoute returns the DeadLetterRoute that owns a queue among routes naming it: one that
// is not being deleted and, first, one that already acts for the queue (status.effectiveMode
// set; a route in Conflict clears it), then the oldest creationTimestamp, then the lowest
// name; nil when none. Preferring the acting route keeps ownership from moving to a route
// created in the same second (creationTimestamp has one-second resolution). A queue has one
// route; the others report Conflict.
func OwningRoute(routes []DeadLetterRoute) *DeadLetterRoute {
	var first *DeadLetterRoute
	for i := range routes {
		c := &routes[i]
		if !c.DeletionTimestamp.IsZero() {
			continue
		}
		if first == nil || routeBefore(c, first) {
			first = c
		}
	}
	return first
}

func routeBefore(a, b *DeadLetterRoute) bool {
	if aActs, bActs := a.Status.EffectiveMode != "", b.Status.EffectiveMode != ""; aActs != bActs {
		return aActs
	}
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// ApplicationAttempts is how many deliveries the queue's application gets:
// spec.delivery.maxDeliveryAttempts, else the brokers' default share.delivery.count.limit
// from the cluster's status (group.share.delivery.count.limit's default); ok is false when
// neither is known.
func (sq *ShareQueue) ApplicationAttempts(cs KafkaClusterStatus) (attempts int32, ok bool) {
	if sq.Spec.Delivery.MaxDeliveryAttempts != nil {
		return *sq.Spec.Delivery.MaxDeliveryAttempts, true
	}
	if b := cs.ShareBounds; b != nil && b.DeliveryCountLimit.Default != nil {
		return int32(*b.DeliveryCountLimit.Default), true
	}
	return 0, false
}
