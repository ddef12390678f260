package controllers

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// Refused are the brokers' refusals of the planned writes, sent with ValidateOnly (the
	// TopicReady / GroupConfigured KafkaRejected messages); empty when they would succeed.
	Refused []string
	// Unchecked says why some writes could not be validated (a retriable Kafka error).
	Unchecked string
}

// Previewer plans ShareQueue manifests (Preview) with one Kafka client per KafkaCluster for
// all of them; Close releases the clients.
type Previewer struct {
	// Client reads the KafkaClusters, Secrets and other ShareQueues.
	Client client.Client
	pool   *kafka.Pool
	// claimed maps each (Kafka cluster, topic or group) planned so far in this run to the
	// queue that named it first, so two new manifests naming one topic are a conflict too.
	claimed map[string]string
}

// NewPreviewer returns a Previewer reading through c.
func NewPreviewer(c client.Client) *Previewer {
	return &Previewer{Client: c, pool: kafka.NewPool(), claimed: map[string]string{}}
}

// Close closes the Kafka clients.
func (p *Previewer) Close() { p.pool.Close() }

// PreviewQueue plans one manifest with a Previewer of its own (Previewer.Preview).
func PreviewQueue(ctx context.Context, c client.Client, sq *kqv1.ShareQueue) (*Preview, error) {
	p := NewPreviewer(c)
	defer p.Close()
	return p.Preview(ctx, sq)
}

// Preview plans sq (a manifest, or the object a server-side dry run returned; its live
// status, if the object exists, is used for the pinned topic id and managed configs) without
// writing anything anywhere: the planned Kafka writes are sent to the brokers with
// ValidateOnly, and a refusal is in Refused and in the TopicReady / GroupConfigured verdicts,
// as the reconciler reports them in Plan mode.
func (p *Previewer) Preview(ctx context.Context, sq *kqv1.ShareQueue) (*Preview, error) {
	c := p.Client
	if sq.Namespace == "" {
		sq.Namespace = "default"
	}
	var live kqv1.ShareQueue
	if err := c.Get(ctx, client.ObjectKeyFromObject(sq), &live); err == nil {
		sq.Status = live.Status
		sq.UID, sq.CreationTimestamp = live.UID, live.CreationTimestamp
	} else {
		// Not created yet (a dry run's uid and timestamp are not real): younger than any
		// existing queue.
		sq.UID, sq.CreationTimestamp = "", metav1.Time{}
	}
	var kc kqv1.KafkaCluster
	if err := c.Get(ctx, types.NamespacedName{Namespace: sq.Namespace, Name: sq.Spec.ClusterRef.Name}, &kc); err != nil {
		return nil, fmt.Errorf("spec.clusterRef.name %q: %w", sq.Spec.ClusterRef.Name, err)
	}
	cl, err := pooledClientFor(ctx, c, p.pool, &kc)
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
	// Within one run, a new queue naming what an earlier manifest named would be created
	// after it, and so lose.
	cluster := "KafkaCluster " + kc.Namespace + "/" + kc.Name
	if kc.Status.ClusterID != "" {
		cluster = "cluster id " + kc.Status.ClusterID
	}
	for _, k := range claimKeys {
		key := cluster + "\x00" + k.what + " " + k.of(sq)
		first, seen := p.claimed[key]
		switch {
		case !seen:
			p.claimed[key] = out.Queue
		case first != out.Queue && out.Conflict == "" && sq.CreationTimestamp.IsZero():
			out.Conflict = fmt.Sprintf("%s %s on this Kafka cluster is also named by ShareQueue %s earlier in these manifests; applied together, that one is created first and owns it, and this one makes no Kafka change",
				k.what, k.of(sq), first)
		}
	}
	obs, _, err := r.observe(ctx, cl, sq, kc.Status)
	if err != nil {
		return nil, err
	}
	obs.ReserveLastAttempt = sq.Status.DeadLetter != nil && sq.Status.DeadLetter.Mode == kqv1.DeadLetterModeRepublisher
	plan := planQueue(sq, obs)
	out.Changes = plan.Changes()
	if out.Conflict == "" {
		// The same check as the Plan mode's: the brokers validate the writes.
		v := validatePlan(ctx, cl, &plan)
		if v.Unchecked != nil {
			out.Unchecked = v.Unchecked.Error()
		}
		res := applyResult{topicID: obs.Topic.ID, partitions: plan.Partitions, rf: obs.Topic.ReplicationFactor, topicErr: v.TopicErr, groupErr: v.GroupErr}
		var st kqv1.ShareQueueStatus
		st.TopicName, st.GroupID = sq.Status.TopicName, sq.Status.GroupID
		st.Conditions = append(st.Conditions, sq.Status.Conditions...)
		queueStatus(&st, sq.Generation, kqv1.ReconcilePlan, &plan, res, nil)
		for _, typ := range []string{kqv1.ConditionTopicReady, kqv1.ConditionGroupConfigured} {
			if cond := findCondition(st.Conditions, typ); cond != nil && cond.Reason == kqv1.ReasonKafkaRejected {
				out.Refused = append(out.Refused, cond.Message)
			}
		}
		for typ, in := range map[string]*condInput{kqv1.ConditionTopicReady: &plan.TopicReady, kqv1.ConditionGroupConfigured: &plan.GroupConfig, kqv1.ConditionConfigValid: &plan.ConfigValid} {
			if cond := findCondition(st.Conditions, typ); cond != nil {
				*in = condInput{cond.Status, cond.Reason, cond.Message}
			}
		}
	}
	for typ, in := range map[string]condInput{kqv1.ConditionTopicReady: plan.TopicReady, kqv1.ConditionGroupConfigured: plan.GroupConfig, kqv1.ConditionConfigValid: plan.ConfigValid} {
		out.Conditions[typ] = fmt.Sprintf("%s/%s: %s", in.Status, in.Reason, in.Message)
	}
	out.Effective, out.Capacity = plan.Effective, plan.Capacity
	return out, nil
}
