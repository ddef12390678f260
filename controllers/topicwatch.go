package controllers

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// topicWatch notices what happens to Kafka outside the operator within one interval instead of
// at the next resync (--queue-resync-interval, 10 m): every interval, for each connected
// KafkaCluster, one Metadata request names every queue topic the operator pinned
// (status.topicId) and every dead-letter topic a route acts on (status.topicName), and one
// ListGroups request (filtered to classic, consumer and streams groups) names their group ids;
// both are joined with the reconciles' own reads when batching is on. It enqueues
//   - a queue whose topic is gone or has another id than the one it pinned, and a route whose
//     dead-letter topic is gone, while its status still claims the topic
//     (TopicReady / RouteActive True);
//   - a queue or route whose group id another group type now holds, while its status does
//     not say so yet.
//
// Their reconciles then report it and act as their policies say (a dead-letter topic is
// recreated at once, with a DeadLetterTopicDeleted Warning). Objects in any reconcile mode but
// Paused are checked: Plan and ObserveOnly report what they see. It runs on the leader only;
// an interval of 0 turns it off.
type topicWatch struct {
	client   client.Reader // the manager's cache
	pool     *kafka.Pool
	interval time.Duration
	timeout  time.Duration
	queues   chan event.GenericEvent
	routes   chan event.GenericEvent
	// unreachable, when set, is told of a check that could not reach the cluster (a
	// request-level failure, kafka.IsUnreachable). SetupAll starts the cluster's shared
	// backoff and wakes its prober, so a broker outage shows in Connected and in every
	// queue's Ready within one interval plus a probe, not at the next probe or resync
	// (3 m, 10 m by default; issue 18: a 90 s outage went unreported at those defaults).
	unreachable func(cluster string, err error)
}

// NeedLeaderElection: only the leader acts on what the watch finds.
func (w *topicWatch) NeedLeaderElection() bool { return true }

// Start runs the checks until ctx ends.
func (w *topicWatch) Start(ctx context.Context) error {
	every(ctx, w.interval, w.check)
	return nil
}

// every calls fn every interval until ctx ends; an interval of 0 or less never calls it.
func every(ctx context.Context, interval time.Duration, fn func(context.Context)) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn(ctx)
		}
	}
}

// watched is an object the watch checks: its topic and group, whether its status claims
// the topic (so a missing one must be reported) and the group (not yet a type conflict).
type watched struct {
	obj          client.Object
	ch           chan event.GenericEvent
	topic, group string
	pinnedID     string // a queue's status.topicId
	claimsTopic  bool
	claimsGroup  bool
	// reportsNewID: the queue already reports a topic id other than its pin (TopicIDChanged).
	reportsNewID bool
}

// check is one round: per connected cluster, one read of its watched topics and groups.
func (w *topicWatch) check(ctx context.Context) {
	logger := log.FromContext(ctx).WithName("topicwatch")
	var clusters kqv1.KafkaClusterList
	if err := w.client.List(ctx, &clusters); err != nil {
		return
	}
	for i := range clusters.Items {
		kc := &clusters.Items[i]
		if c := findCondition(kc.Status.Conditions, kqv1.ConditionConnected); c == nil || c.Status != metav1.ConditionTrue {
			continue
		}
		cl, ok := w.pool.Peek(clusterKey(kc))
		if !ok {
			continue
		}
		objs, err := w.watchedOf(ctx, kc)
		if err != nil || len(objs) == 0 {
			continue
		}
		topicSet, groupSet := map[string]bool{}, map[string]bool{}
		for _, o := range objs {
			topicSet[o.topic] = true
			if o.group != "" {
				groupSet[o.group] = true
			}
		}
		rctx, cancel := context.WithTimeout(ctx, w.timeout)
		topics, terr := cl.DescribeTopics(rctx, keys(topicSet)...)
		types, gerr := cl.OtherGroupTypes(rctx, keys(groupSet)...)
		cancel()
		if terr == nil {
			terr = w.confirmMissing(ctx, cl, objs, topics)
		}
		if terr != nil {
			logger.V(1).Info("reading topic metadata failed", "kafkaCluster", clusterKey(kc), "error", terr.Error())
		}
		if lost := errors.Join(terr, gerr); lost != nil && kafka.IsUnreachable(lost) && w.unreachable != nil {
			w.unreachable(clusterKey(kc), lost)
		}
		if gerr != nil {
			logger.V(1).Info("listing groups failed", "kafkaCluster", clusterKey(kc), "error", gerr.Error())
		}
		for _, o := range objs {
			why := ""
			if tp, ok := topics[o.topic]; terr == nil && ok {
				switch {
				case kafka.IsNotFound(tp.Err) && o.claimsTopic:
					why = "topic " + o.topic + " was deleted outside the operator"
				case tp.Err == nil && o.pinnedID != "" && tp.ID != "" && tp.ID != o.pinnedID && !o.reportsNewID:
					why = "topic " + o.topic + " has another id than the one pinned"
				}
			}
			if typ := types[o.group]; why == "" && gerr == nil && typ != "" && o.claimsGroup {
				why = "group " + o.group + " is now a " + typ + " group"
			}
			if why == "" {
				continue
			}
			logger.Info("Kafka changed outside the operator", "kafkaCluster", clusterKey(kc), "object", o.obj.GetNamespace()+"/"+o.obj.GetName(), "why", why)
			select {
			case o.ch <- event.GenericEvent{Object: o.obj}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// confirmMissing reads again, after a pause, the topics of topics that looked missing while
// their objects' status claims them, and keeps the second answer. A broker's metadata trails
// the controller's commit: a topic created a moment ago can be unknown to the broker asked
// (seen on a loaded machine as hundreds of false "deleted outside the operator" reports per
// 10,000 new queues), and each false report re-ran a reconcile that tried to create the
// topic again (TOPIC_ALREADY_EXISTS).
func (w *topicWatch) confirmMissing(ctx context.Context, cl *kafka.Client, objs []watched, topics map[string]kafka.Topic) error {
	var missing []string
	for _, o := range objs {
		if tp, ok := topics[o.topic]; ok && o.claimsTopic && kafka.IsNotFound(tp.Err) {
			missing = append(missing, o.topic)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(min(2*time.Second, w.interval/2)):
	}
	rctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	again, err := cl.DescribeTopics(rctx, missing...)
	if err != nil {
		return err
	}
	for name, tp := range again {
		topics[name] = tp
	}
	return nil
}

// watchedOf lists the queues and routes of kc whose Kafka state the watch checks.
func (w *topicWatch) watchedOf(ctx context.Context, kc *kqv1.KafkaCluster) ([]watched, error) {
	var out []watched
	// The cache's objects, not deep copies (read only here; an event carries only the
	// object's key to the handler): at 10,000 queues a deep copy of every queue each interval
	// was 20 MB of garbage every 10 s (heap profile, issue 18).
	var queues kqv1.ShareQueueList
	if err := w.client.List(ctx, &queues, client.InNamespace(kc.Namespace), client.MatchingFields{clusterRefIndex: kc.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	for j := range queues.Items {
		sq := &queues.Items[j]
		if sq.Status.TopicID == "" || sq.Status.TopicName == "" || !sq.DeletionTimestamp.IsZero() || heldBackMode(sq.Annotations) {
			continue
		}
		out = append(out, watched{obj: sq, ch: w.queues, topic: sq.Status.TopicName, group: sq.Status.GroupID, pinnedID: sq.Status.TopicID,
			claimsTopic:  conditionIs(sq.Status.Conditions, kqv1.ConditionTopicReady, metav1.ConditionTrue),
			claimsGroup:  !conditionReason(sq.Status.Conditions, kqv1.ConditionConflict, kqv1.ReasonGroupTypeConflict),
			reportsNewID: hasReason(sq.Status.Conditions, kqv1.ConditionTopicReady, kqv1.ReasonTopicIDChanged)})
	}
	var routes kqv1.DeadLetterRouteList
	if err := w.client.List(ctx, &routes, client.InNamespace(kc.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	for j := range routes.Items {
		d := &routes.Items[j]
		if d.Status.ClusterName != kc.Name || d.Status.TopicName == "" || !d.DeletionTimestamp.IsZero() || heldBackMode(d.Annotations) {
			continue
		}
		active := conditionIs(d.Status.Conditions, kqv1.ConditionRouteActive, metav1.ConditionTrue)
		out = append(out, watched{obj: d, ch: w.routes, topic: d.Status.TopicName, group: d.Status.GroupID, claimsTopic: active, claimsGroup: active})
	}
	return out, nil
}

// heldBackMode reports the reconcile modes in which nothing is read (Paused, an invalid value).
func heldBackMode(annotations map[string]string) bool {
	m := reconcileMode(annotations)
	return m == kqv1.ReconcilePaused || m == reconcileInvalid
}

func conditionIs(conds []metav1.Condition, typ string, status metav1.ConditionStatus) bool {
	c := findCondition(conds, typ)
	return c != nil && c.Status == status
}

func conditionReason(conds []metav1.Condition, typ, reason string) bool {
	c := findCondition(conds, typ)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason
}

func hasReason(conds []metav1.Condition, typ, reason string) bool {
	c := findCondition(conds, typ)
	return c != nil && c.Reason == reason
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
