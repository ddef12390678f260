package controllers

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// topicWatch notices topics deleted outside the operator within one interval instead of at
// the next resync (--queue-resync-interval, 10 m): every interval it reads, for each
// connected KafkaCluster, the metadata of every queue topic the operator created or adopted
// (status.topicId set) and every dead-letter topic a route acts on (status.topicName set), in
// one Metadata request per cluster (joined with the reconciles' own reads when batching is
// on), and enqueues the ShareQueues and DeadLetterRoutes whose topic is gone. Their reconciles
// then say so (a Warning event: TopicDeleted, DeadLetterTopicDeleted) and act as their
// policies say (a dead-letter topic is recreated at once). An object is enqueued once per
// disappearance, not at every interval while its topic stays missing. It runs on the leader
// only; an interval of 0 turns it off.
type topicWatch struct {
	client   client.Reader // the manager's cache
	pool     *kafka.Pool
	interval time.Duration
	timeout  time.Duration
	queues   chan event.GenericEvent
	routes   chan event.GenericEvent
	// gone remembers the objects enqueued for a missing topic ("q/ns/name" or "r/ns/name"
	// with the topic), so they are enqueued again only after the topic was seen back.
	gone map[string]bool
}

// NeedLeaderElection: only the leader acts on what the watch finds.
func (w *topicWatch) NeedLeaderElection() bool { return true }

// Start runs the checks until ctx ends.
func (w *topicWatch) Start(ctx context.Context) error {
	if w.interval <= 0 {
		return nil
	}
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			w.check(ctx)
		}
	}
}

// watchedTopic is an object whose topic the watch checks.
type watchedTopic struct {
	key string
	obj client.Object
	ch  chan event.GenericEvent
}

// check is one round: per connected cluster, one read of all its watched topics.
func (w *topicWatch) check(ctx context.Context) {
	logger := log.FromContext(ctx).WithName("topicwatch")
	var clusters kqv1.KafkaClusterList
	if err := w.client.List(ctx, &clusters); err != nil {
		return
	}
	seen := map[string]bool{}
	for i := range clusters.Items {
		kc := &clusters.Items[i]
		if c := findCondition(kc.Status.Conditions, kqv1.ConditionConnected); c == nil || c.Status != "True" {
			continue
		}
		cl, ok := w.pool.Peek(clusterKey(kc))
		if !ok {
			continue
		}
		byTopic := map[string][]watchedTopic{}
		var queues kqv1.ShareQueueList
		if err := w.client.List(ctx, &queues, client.InNamespace(kc.Namespace), client.MatchingFields{clusterRefIndex: kc.Name}); err != nil {
			continue
		}
		for j := range queues.Items {
			sq := &queues.Items[j]
			if sq.Status.TopicID == "" || sq.Status.TopicName == "" || !sq.DeletionTimestamp.IsZero() || reconcileMode(sq.Annotations) != kqv1.ReconcileActive {
				continue
			}
			byTopic[sq.Status.TopicName] = append(byTopic[sq.Status.TopicName], watchedTopic{"q/" + sq.Namespace + "/" + sq.Name + "/" + sq.Status.TopicName, sq, w.queues})
		}
		var routes kqv1.DeadLetterRouteList
		if err := w.client.List(ctx, &routes, client.InNamespace(kc.Namespace)); err != nil {
			continue
		}
		for j := range routes.Items {
			d := &routes.Items[j]
			if d.Status.ClusterName != kc.Name || d.Status.TopicName == "" || !d.DeletionTimestamp.IsZero() || reconcileMode(d.Annotations) != kqv1.ReconcileActive {
				continue
			}
			byTopic[d.Status.TopicName] = append(byTopic[d.Status.TopicName], watchedTopic{"r/" + d.Namespace + "/" + d.Name + "/" + d.Status.TopicName, d, w.routes})
		}
		if len(byTopic) == 0 {
			continue
		}
		names := make([]string, 0, len(byTopic))
		for n := range byTopic {
			names = append(names, n)
		}
		rctx, cancel := context.WithTimeout(ctx, w.timeout)
		topics, err := cl.DescribeTopics(rctx, names...)
		cancel()
		if err != nil {
			logger.V(1).Info("reading topic metadata failed", "kafkaCluster", clusterKey(kc), "error", err.Error())
			continue
		}
		for name, objs := range byTopic {
			tp, ok := topics[name]
			missing := ok && kafka.IsNotFound(tp.Err)
			for _, o := range objs {
				seen[o.key] = true
				switch {
				case !missing:
					delete(w.gone, o.key)
				case !w.gone[o.key]:
					w.gone[o.key] = true
					logger.Info("topic deleted outside the operator", "kafkaCluster", clusterKey(kc), "topic", name, "object", o.key)
					select {
					case o.ch <- event.GenericEvent{Object: o.obj}:
					case <-ctx.Done():
						return
					}
				}
			}
		}
	}
	for k := range w.gone {
		if !seen[k] {
			delete(w.gone, k) // the object or its topic name is gone
		}
	}
}
