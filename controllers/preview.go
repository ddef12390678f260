package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// Preview is what the operator would do for a ShareQueue manifest, computed with the same
// pure plan the reconciler uses, from the live KafkaCluster status and live Kafka state.
type Preview struct {
	Queue string
	// Changes are the Kafka writes the operator would make, one line each.
	Changes []string
	// Conditions are the TopicReady, GroupConfigured and ConfigValid verdicts.
	Conditions map[string]string
	Effective  kqv1.EffectiveDelivery
	Capacity   *kqv1.QueueCapacity
	// Conflict names another ShareQueue that owns the topic or group, if any.
	Conflict string
}

// PreviewQueue plans sq (a manifest; its live status, if the object exists, is used for the
// pinned topic id and managed configs) without writing anything anywhere. c reads the
// KafkaCluster, Secrets and other ShareQueues.
func PreviewQueue(ctx context.Context, c client.Client, sq *kqv1.ShareQueue) (*Preview, error) {
	if sq.Namespace == "" {
		sq.Namespace = "default"
	}
	var live kqv1.ShareQueue
	if err := c.Get(ctx, client.ObjectKeyFromObject(sq), &live); err == nil {
		sq.Status = live.Status
		sq.UID, sq.CreationTimestamp = live.UID, live.CreationTimestamp
	}
	var kc kqv1.KafkaCluster
	if err := c.Get(ctx, types.NamespacedName{Namespace: sq.Namespace, Name: sq.Spec.ClusterRef.Name}, &kc); err != nil {
		return nil, fmt.Errorf("spec.clusterRef.name %q: %w", sq.Spec.ClusterRef.Name, err)
	}
	pool := kafka.NewPool()
	defer pool.Close()
	cl, err := clientFor(ctx, c, pool, &kc)
	if err != nil {
		return nil, err
	}
	sq.Status.TopicName, sq.Status.GroupID = sq.KafkaTopicName(), sq.KafkaGroupID()
	r := &ShareQueueReconciler{Client: c}
	out := &Preview{Queue: sq.Namespace + "/" + sq.Name, Conditions: map[string]string{}}
	// c has no cache indexes: the claimants are matched by name here, from one List.
	others, err := claimantsUncached(ctx, c, sq, &kc)
	if err != nil {
		return nil, fmt.Errorf("listing ShareQueues that name topic %s or group %s: %w", sq.Status.TopicName, sq.Status.GroupID, err)
	}
	if sq.CreationTimestamp.IsZero() && len(others) > 0 {
		out.Conflict = conflictMessage(&others[0]) // a new queue is younger than any existing one
	} else if owner := ownerOf(sq, others); owner != nil {
		out.Conflict = conflictMessage(owner)
	}
	obs, _, err := r.observe(ctx, cl, sq, kc.Status)
	if err != nil {
		return nil, err
	}
	obs.ReserveLastAttempt = sq.Status.DeadLetter != nil && sq.Status.DeadLetter.Mode == kqv1.DeadLetterModeRepublisher
	plan := planQueue(sq, obs)
	out.Changes = plan.Changes()
	for typ, in := range map[string]condInput{kqv1.ConditionTopicReady: plan.TopicReady, kqv1.ConditionGroupConfigured: plan.GroupConfig, kqv1.ConditionConfigValid: plan.ConfigValid} {
		out.Conditions[typ] = fmt.Sprintf("%s/%s: %s", in.Status, in.Reason, in.Message)
	}
	out.Effective, out.Capacity = plan.Effective, plan.Capacity
	return out, nil
}
