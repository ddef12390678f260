package controllers

// What a Strimzi KafkaTopic means for a ShareQueue: the conflict message and status, the
// plan edit that leaves the topic to Strimzi, and the watches that requeue queues.

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// strimziConflictMessage is the Conflict message of a queue whose topic Strimzi manages.
func strimziConflictMessage(c *strimziClaim, topic, group string) string {
	return fmt.Sprintf("topic %s on this Kafka cluster is managed by Strimzi KafkaTopic %s (strimzi.io/cluster=%s); this ShareQueue configures share group %s but makes no topic change until that KafkaTopic is annotated strimzi.io/managed: \"false\" (see docs/strimzi.md)",
		topic, c, c.Cluster, group)
}

// strimziConflictStatus sets Conflict=True for a topic Strimzi manages. Unlike a conflict
// with another ShareQueue, the group stays this queue's: GroupConfigured is left to the plan.
// The topic id pin and the topic configs this queue managed are dropped: the topic is no
// longer this queue's, so deletionPolicy Delete never deletes it and a later hand-over back
// adopts it afresh. Pure.
func strimziConflictStatus(st *kqv1.ShareQueueStatus, msg string, gen int64) {
	setCondition(&st.Conditions, kqv1.ConditionConflict, condInput{metav1.ConditionTrue, kqv1.ReasonConflict, msg}, gen)
	st.TopicID, st.ManagedTopicConfigs, st.TopicCreationStarted = "", nil, nil
}

// yieldTopic removes every topic write from a plan whose topic Strimzi manages and reports
// the topic as the KafkaTopic's (TopicReady=False, reason Conflict); the group's writes stay.
// Pure.
func yieldTopic(p *queuePlan, obs queueObservation, msg string) {
	p.Blocked = true
	p.CreateTopic, p.GrowPartitionsTo, p.TopicConfigs = nil, 0, nil
	p.RecreatesTopicID, p.AdoptCreated, p.ManagedTopicConfigs = "", false, nil
	p.Partitions = 0
	if obs.Topic.Err == nil {
		p.Partitions = obs.Topic.Partitions
	}
	topicDrift := "topic " + p.TopicName + ": "
	drift := p.Drift[:0:0]
	for _, d := range p.Drift {
		if !strings.HasPrefix(d, topicDrift) {
			drift = append(drift, d)
		}
	}
	p.Drift = drift
	p.TopicReady = condInput{metav1.ConditionFalse, kqv1.ReasonConflict, msg}
	p.Capacity = capacityOf(p.Partitions, p.Effective.MaxInFlightPerPartition, p.Bounds)
}

// kafkaTopicChanged passes the KafkaTopic updates that can change which topic it claims or
// whether it is managed (the topic operator's own status updates are not).
func kafkaTopicChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return strimziClaimKey(e.ObjectOld) != strimziClaimKey(e.ObjectNew)
	}}
}

func strimziClaimKey(o client.Object) string {
	cluster, managed := strimziManages(o)
	names := strimziTopicNames(o)
	return fmt.Sprintf("%s|%t|%t|%v", cluster, managed, o.GetDeletionTimestamp().IsZero(), names)
}

// strimziTopicNames are the topic names a KafkaTopic may claim (status.topicName,
// spec.topicName, metadata.name), for mapping its events to queues.
func strimziTopicNames(o client.Object) []string {
	names := []string{o.GetName()}
	if u, ok := o.(*unstructured.Unstructured); ok {
		for _, path := range [][]string{{"spec", "topicName"}, {"status", "topicName"}} {
			if n, _, _ := unstructured.NestedString(u.Object, path...); n != "" && n != names[0] {
				names = append(names, n)
			}
		}
	}
	return names
}

// setupStrimzi looks for Strimzi's KafkaTopic CRD now and, through a manager runnable, every
// strimziRecheckInterval until it is found; when found, c watches KafkaTopics so a queue
// re-plans when one claims its topic, is set unmanaged, or goes. Without the CRD nothing is
// watched and nothing is logged beyond a failing discovery.
func (r *ShareQueueReconciler) setupStrimzi(mgr ctrl.Manager, c controller.Controller) error {
	r.strimzi = &strimziTopics{mapper: mgr.GetRESTMapper(), cache: mgr.GetCache(), reader: mgr.GetAPIReader(), ownNamespace: managerNamespace(),
		index: func(gvk schema.GroupVersionKind) error {
			kt := &unstructured.Unstructured{}
			kt.SetGroupVersionKind(gvk)
			return mgr.GetFieldIndexer().IndexField(context.Background(), kt, strimziTopicNameIndex, strimziTopicNames)
		},
		watch: func(gvk schema.GroupVersionKind) error {
			kt := &unstructured.Unstructured{}
			kt.SetGroupVersionKind(gvk)
			return c.Watch(source.Kind[client.Object](mgr.GetCache(), kt, handler.EnqueueRequestsFromMapFunc(r.queuesOfKafkaTopic), kafkaTopicChanged()))
		}}
	if _, err := r.strimzi.detect(); err != nil {
		// Not fatal: the runnable looks again.
		mgr.GetLogger().WithName("strimzi").Info("looking for Strimzi's KafkaTopic CRD failed; retrying", "error", err.Error())
	}
	return mgr.Add(r.strimzi)
}

// queuesOfKafkaTopic maps a KafkaTopic to the ShareQueues naming any topic it may claim.
func (r *ShareQueueReconciler) queuesOfKafkaTopic(ctx context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, name := range strimziTopicNames(o) {
		var list kqv1.ShareQueueList
		if err := r.List(ctx, &list, client.MatchingFields{topicNameIndex: name}); err != nil {
			continue
		}
		for _, sq := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: sq.Namespace, Name: sq.Name}})
		}
	}
	return reqs
}

// checkStrimzi is the ownership step's last check: a topic managed by a Strimzi KafkaTopic
// gets Conflict naming it, and q.strimziOwned makes the plan keep no topic write (yieldTopic);
// the reconcile goes on for the group. It reports whether Strimzi owns the topic.
func (q *queueScope) checkStrimzi(ctx context.Context) (bool, error) {
	sq := q.sq
	claim, err := q.r.strimzi.owner(ctx, sq.Status.TopicName, &q.kc)
	if err != nil || claim == nil {
		return false, err
	}
	q.strimziOwned = strimziConflictMessage(claim, sq.Status.TopicName, sq.Status.GroupID)
	strimziConflictStatus(&sq.Status, q.strimziOwned, q.gen)
	return true, nil
}

// leaveTopicToStrimzi runs after the plan: a topic Strimzi manages keeps no topic write.
func (q *queueScope) leaveTopicToStrimzi(context.Context) error {
	if q.strimziOwned == "" {
		return nil
	}
	yieldTopic(&q.plan, q.obs, q.strimziOwned)
	q.res.partitions = q.plan.Partitions
	return nil
}
