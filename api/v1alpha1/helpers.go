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

// DefaultDeadLetterTopicPrefix is the brokers' default errors.deadletterqueue.topic.name.prefix
// (KIP-1191), used when a KafkaCluster's status does not report one.
const DefaultDeadLetterTopicPrefix = "dlq."

// KafkaTopicName is the queue's Kafka topic: spec.topic.name, else metadata.name. The
// controllers, the webhook and kqctl all resolve the default here.
func (sq *ShareQueue) KafkaTopicName() string {
	if sq.Spec.Topic.Name != "" {
		return sq.Spec.Topic.Name
	}
	return sq.Name
}

// KafkaGroupID is the queue's share group: spec.groupId, else metadata.name.
func (sq *ShareQueue) KafkaGroupID() string {
	if sq.Spec.GroupID != "" {
		return sq.Spec.GroupID
	}
	return sq.Name
}

// DeadLetterPrefix is the brokers' errors.deadletterqueue.topic.name.prefix as the cluster's
// status reports it, else DefaultDeadLetterTopicPrefix.
func (cs *KafkaClusterStatus) DeadLetterPrefix() string {
	if cs.DeadLetterTopicPrefix != nil {
		return *cs.DeadLetterTopicPrefix
	}
	return DefaultDeadLetterTopicPrefix
}

// KafkaTopicName is the route's dead-letter topic: spec.topic.name, else the pinned
// status.topicName, else the brokers' prefix followed by the queue's topic ("dlq.orders"). The
// default carries the prefix in every mode, so a route that moves from Republisher to
// BrokerNative (share.version raised to 2) keeps its topic.
func (d *DeadLetterRoute) KafkaTopicName(queueTopic string, cs KafkaClusterStatus) string {
	switch {
	case d.Spec.Topic.Name != "":
		return d.Spec.Topic.Name
	case d.Status.TopicName != "":
		return d.Status.TopicName
	default:
		return cs.DeadLetterPrefix() + queueTopic
	}
}
