package controllers

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// Indexes of ShareQueues by the Kafka names they resolve to (defaults applied).
const (
	topicNameIndex      = "kafka.topicName"
	groupIDIndex        = "kafka.groupId"
	topicCollisionIndex = "kafka.topicCollisionName"
)

// claimKey is one Kafka name a ShareQueue claims on its cluster, with its cache index and
// its kind in the claims topic. of returns "" when the queue claims no such name.
type claimKey struct {
	index string
	what  string
	kind  kafka.ClaimKind
	of    func(*kqv1.ShareQueue) string
}

// claimKeys are the Kafka names a ShareQueue claims on its cluster: ownership, its watch,
// the claims topic and kqctl plan all read them from here. The topic's collision name makes
// "orders.eu" and "orders_eu" one claim: Kafka allows only one of them (TopicCollisionName).
var claimKeys = []claimKey{
	{topicNameIndex, "topic", kafka.ClaimTopic, (*kqv1.ShareQueue).KafkaTopicName},
	{groupIDIndex, "group", kafka.ClaimGroup, (*kqv1.ShareQueue).KafkaGroupID},
	{topicCollisionIndex, "topic collision name", kafka.ClaimTopicCollision, topicCollisionName},
}

// topicCollisionName is the collision name of sq's topic, "" when it has neither '.' nor '_'.
func topicCollisionName(sq *kqv1.ShareQueue) string {
	name, _ := kafka.TopicCollisionName(sq.KafkaTopicName())
	return name
}

// claimed describes, for a Conflict message, other's claim on k as sq sees it.
func (k claimKey) claimed(sq, other *kqv1.ShareQueue) string {
	if k.kind != kafka.ClaimTopicCollision {
		return k.what + " " + k.of(sq)
	}
	theirs := "a topic"
	if other != nil && other.KafkaTopicName() != "" {
		theirs = "topic " + other.KafkaTopicName()
	}
	return fmt.Sprintf("%s, whose name collides with this queue's topic %s (Kafka refuses two topic names that differ only in '.' and '_': its metric names replace '.' with '_'),", theirs, sq.KafkaTopicName())
}

// claimant is another ShareQueue that names the same topic or group.
type claimant struct {
	queue *kqv1.ShareQueue
	what  string // "topic X" or "group Y"
	// viaClaims: known from the claims topic only (another manager's queue).
	viaClaims bool
}

// sameCluster reports whether two ShareQueues' clusters are the same Kafka cluster (sameKafka).
func sameCluster(ctx context.Context, c client.Reader, a *kqv1.ShareQueue, aCluster *kqv1.KafkaCluster, b *kqv1.ShareQueue) bool {
	if a.Namespace == b.Namespace && a.Spec.ClusterRef.Name == b.Spec.ClusterRef.Name {
		return true
	}
	return aCluster != nil && sameKafka(ctx, c, aCluster, b.Namespace, b.Spec.ClusterRef.Name)
}

// sameKafka reports whether KafkaCluster ns/name is the same Kafka cluster as kc: the same
// object, or one whose probe reported the same cluster id.
func sameKafka(ctx context.Context, c client.Reader, kc *kqv1.KafkaCluster, ns, name string) bool {
	if kc.Namespace == ns && kc.Name == name {
		return true
	}
	if kc.Status.ClusterID == "" {
		return false
	}
	var other kqv1.KafkaCluster
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &other); err != nil {
		return false
	}
	return other.Status.ClusterID == kc.Status.ClusterID
}

// claimants lists the other live ShareQueues on the same Kafka cluster that name sq's topic
// or group, through the manager cache's indexes.
func (r *ShareQueueReconciler) claimants(ctx context.Context, sq *kqv1.ShareQueue, kc *kqv1.KafkaCluster) ([]claimant, error) {
	lists := make([][]kqv1.ShareQueue, len(claimKeys))
	for i, k := range claimKeys {
		if k.of(sq) == "" {
			continue
		}
		var list kqv1.ShareQueueList
		if err := r.List(ctx, &list, client.MatchingFields{k.index: k.of(sq)}); err != nil {
			return nil, err
		}
		lists[i] = list.Items
	}
	return claimantsAmong(ctx, r.Client, sq, kc, lists), nil
}

// claimantsIn is claimants for a client without the cache's indexes (kqctl plan): it matches
// the names itself among all, the ShareQueues the caller could list.
func claimantsIn(ctx context.Context, c client.Reader, sq *kqv1.ShareQueue, kc *kqv1.KafkaCluster, all []kqv1.ShareQueue) []claimant {
	lists := make([][]kqv1.ShareQueue, len(claimKeys))
	for i, k := range claimKeys {
		for _, o := range all {
			if k.of(sq) != "" && k.of(&o) == k.of(sq) {
				lists[i] = append(lists[i], o)
			}
		}
	}
	return claimantsAmong(ctx, c, sq, kc, lists)
}

// claimantsAmong picks, from the queues naming each of claimKeys (lists, in claimKeys'
// order), the other live ones on sq's Kafka cluster.
func claimantsAmong(ctx context.Context, c client.Reader, sq *kqv1.ShareQueue, kc *kqv1.KafkaCluster, lists [][]kqv1.ShareQueue) []claimant {
	var out []claimant
	seen := map[types.UID]bool{}
	for i, k := range claimKeys {
		for j := range lists[i] {
			o := &lists[i][j]
			if o.UID == sq.UID || seen[o.UID] || !o.DeletionTimestamp.IsZero() {
				continue
			}
			if sameCluster(ctx, c, sq, kc, o) {
				seen[o.UID] = true
				out = append(out, claimant{queue: o, what: k.claimed(sq, o)})
			}
		}
	}
	return out
}

// ownerOf picks the owner among sq and its claimants: the oldest by creationTimestamp, ties
// broken by namespace/name, so every reconciler agrees without coordination. It returns nil
// when sq itself owns everything it names.
func ownerOf(sq *kqv1.ShareQueue, others []claimant) *claimant {
	if len(others) == 0 {
		return nil
	}
	sort.Slice(others, func(i, j int) bool { return older(others[i].queue, others[j].queue) })
	if older(others[0].queue, sq) {
		return &others[0]
	}
	return nil
}

func older(a, b *kqv1.ShareQueue) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
}

func conflictMessage(c *claimant) string {
	by := ""
	if c.viaClaims {
		by = fmt.Sprintf(" (UID %s, created %s; recorded in the claims topic by a manager that watches it)", c.queue.UID, c.queue.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z"))
	}
	return fmt.Sprintf("%s on this Kafka cluster is already owned by ShareQueue %s/%s%s; this ShareQueue makes no Kafka change until that one is deleted, or this one is recreated naming another topic and group (spec.topic.name and spec.groupId cannot be changed in place)",
		c.what, c.queue.Namespace, c.queue.Name, by)
}

// groupTypeConflict returns the Conflict message when groupID names a classic, consumer or
// streams group on cl's cluster (kafka.OtherGroupTypes; "" for a share group or no group).
// Kafka keeps one group per id: share configs written under that id would land on the other
// group, share consumers would be refused (GROUP_ID_NOT_FOUND "is not a share group"), and
// DeleteGroups would delete it with its committed offsets. who names the resource that
// therefore writes nothing to the group.
func groupTypeConflict(ctx context.Context, cl *kafka.Client, groupID, who string) (string, error) {
	types, err := cl.OtherGroupTypes(ctx, groupID)
	if err != nil {
		return "", err
	}
	return groupTypeMessage(groupID, types[groupID], who), nil
}

// groupTypeMessage is groupTypeConflict's message for group groupID of type typ ("" when it
// is no other type's).
func groupTypeMessage(groupID, typ, who string) string {
	if typ == "" {
		return ""
	}
	return fmt.Sprintf("%s on this Kafka cluster: %s writes no group config and never deletes or alters that group; name another group id (spec.groupId of the ShareQueue, immutable: recreate it) or delete the %s group",
		kafka.NotShareGroupMessage(groupID, typ), who, typ)
}

// sharersOf re-queues the ShareQueues that name the same topic or group as a deleted one, so
// a queue waiting in Conflict takes over when the owner goes.
func (r *ShareQueueReconciler) sharersOf(ctx context.Context, o client.Object) []reconcile.Request {
	sq, ok := o.(*kqv1.ShareQueue)
	if !ok {
		return nil
	}
	var reqs []reconcile.Request
	for _, k := range claimKeys {
		var list kqv1.ShareQueueList
		if k.of(sq) == "" || r.List(ctx, &list, client.MatchingFields{k.index: k.of(sq)}) != nil {
			continue
		}
		for _, other := range list.Items {
			if other.UID != sq.UID {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: other.Namespace, Name: other.Name}})
			}
		}
	}
	return reqs
}

// deletedOrFinalizing passes deletions and the start of a deletion (deletionTimestamp set).
func deletedOrFinalizing() func(event.TypedUpdateEvent[client.Object]) bool {
	return func(e event.TypedUpdateEvent[client.Object]) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
	}
}
