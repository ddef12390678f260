package controllers

import (
	"context"
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/internal/scaler"
)

// MaxDepthInterval is the longest --depth-interval the manager accepts: the freshness the
// autoscaling recipes (docs/autoscaling.md) rely on.
const MaxDepthInterval = 30 * time.Second

// ValidateDepthIntervals checks the manager's --depth-interval (0 … MaxDepthInterval; 0 turns
// the poller off) and --depth-status-interval (0, which leaves status.depth unwritten, or at
// least the depth interval): the error names the flag, the value and the bound.
func ValidateDepthIntervals(interval, statusInterval time.Duration) error {
	if interval < 0 || interval > MaxDepthInterval {
		return fmt.Errorf("--depth-interval %s: must be between 0 (off) and %s, the freshness the depth metrics promise", interval, MaxDepthInterval)
	}
	if statusInterval < 0 || statusInterval > 0 && statusInterval < interval {
		return fmt.Errorf("--depth-status-interval %s: must be 0 (status.depth unwritten) or at least --depth-interval (%s)", statusInterval, interval)
	}
	return nil
}

// depthPoller reads the depth of every queue of every connected KafkaCluster every interval,
// independent of the ShareQueue resync, and exports it as metrics (depth_metrics.go); it
// writes status.depth at the slower statusInterval. One round per cluster is one
// kafka.Client.Depth call: a Metadata request, one DescribeShareGroupOffsets per group
// coordinator, one or two ListOffsets and at most one Fetch per partition leader for all of
// the cluster's queues and dead-letter topics together. Queues in Paused mode (or an invalid
// mode) are not read. It runs on the leader only; an interval of 0 turns it off.
type depthPoller struct {
	reader         client.Reader // the manager's cache
	writer         client.Client
	pool           *kafka.Pool
	interval       time.Duration
	statusInterval time.Duration
	timeout        time.Duration
	// scaler, when set, receives every round (the KEDA external scaler answers from it).
	scaler *scaler.Store

	// lastWrite is when status.depth was last written by this process, by queue, until the
	// cache's status.depth.observedAt says the same: entries older than statusInterval are
	// dropped (both then say the queue is due).
	lastWrite map[types.NamespacedName]time.Time
}

// NeedLeaderElection: one manager reads and writes.
func (p *depthPoller) NeedLeaderElection() bool { return true }

// Start polls until ctx ends.
func (p *depthPoller) Start(ctx context.Context) error {
	p.lastWrite = map[types.NamespacedName]time.Time{}
	every(ctx, p.interval, p.poll)
	return nil
}

// queueDepthOf is one queue's figures of a round, as metrics and status carry them.
type queueDepthOf struct {
	sq    *kqv1.ShareQueue
	depth kafka.QueueDepth
	err   string // why the queue could not be read ("" when read)
	dead  *int64 // its route's dead-letter count
	// notOwned: not read because the queue does not own its topic or group (err says so);
	// its Conflict is reported elsewhere, so no read failure is timed for it.
	notOwned bool
}

// poll is one round over every cluster.
func (p *depthPoller) poll(ctx context.Context) {
	logger := log.FromContext(ctx).WithName("depth")
	var clusters kqv1.KafkaClusterList
	if err := p.reader.List(ctx, &clusters); err != nil {
		return
	}
	// Every queue and route read in this round is marked in the metrics; the series of
	// those not marked (gone since the last round) are swept at the end.
	pollRound := perQueueMetrics.beginPoll()
	var round []queueDepthOf
	for i := range clusters.Items {
		kc := &clusters.Items[i]
		queues, routes, err := p.objectsOf(ctx, kc)
		if err != nil || len(queues) == 0 && len(routes) == 0 {
			continue
		}
		var rep kafka.DepthReport
		readErr := ""
		cl, ok := p.pool.Peek(clusterKey(kc))
		switch {
		case !conditionIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionTrue) || !ok:
			readErr = "KafkaCluster " + kc.Name + " is not connected"
		default:
			qs := make([]kafka.DepthQuery, 0, len(queues))
			for _, sq := range queues {
				if depthNotOwned(sq) != "" {
					continue
				}
				qs = append(qs, kafka.DepthQuery{Topic: sq.Status.TopicName, Group: sq.Status.GroupID, AutoOffsetReset: autoOffsetResetOf(sq)})
			}
			topics := make([]string, 0, len(routes))
			for _, d := range routes {
				topics = append(topics, d.Status.TopicName)
			}
			rctx, cancel := context.WithTimeout(ctx, p.timeout)
			rep, err = cl.Depth(rctx, qs, topics)
			cancel()
			if err != nil {
				readErr = err.Error()
				depthRounds.WithLabelValues(kc.Namespace, kc.Name, "error").Inc()
				logger.V(1).Info("reading queue depth failed", "kafkaCluster", clusterKey(kc), "error", readErr)
			} else {
				depthRounds.WithLabelValues(kc.Namespace, kc.Name, "ok").Inc()
			}
		}
		deadOf := map[string]*int64{} // by queue name
		for _, d := range routes {
			tr, ok := rep.Topics[d.Status.TopicName]
			if readErr != "" || !ok || tr.Err != nil || len(tr.Unread) > 0 {
				perQueueMetrics.clearDeadLetters(d.Namespace, d.Name, d.Spec.QueueRef.Name)
				continue
			}
			perQueueMetrics.setDeadLetters(pollRound, d.Namespace, d.Name, d.Spec.QueueRef.Name, float64(tr.Records))
			deadOf[d.Spec.QueueRef.Name] = ptr.To(tr.Records)
		}
		now := time.Now()
		for _, sq := range queues {
			q := queueDepthOf{sq: sq, err: readErr, dead: deadOf[sq.Name]}
			if why := depthNotOwned(sq); why != "" {
				q.err, q.dead, q.notOwned = why, nil, true
			} else if readErr == "" {
				q.depth = rep.Queues[sq.Status.GroupID]
				if q.depth.Err != nil {
					q.err = q.depth.Err.Error()
				}
			}
			exportQueueDepth(pollRound, types.NamespacedName{Namespace: sq.Namespace, Name: sq.Name}, q, now)
			round = append(round, q)
		}
	}
	perQueueMetrics.sweepPolls(pollRound)
	if p.scaler != nil {
		p.scaler.Replace(scalerReadings(round, time.Now()))
	}
	p.pruneLastWrite(round, time.Now())
	p.writeStatus(ctx, round)
}

// scalerReadings is a round as the KEDA scaler's store holds it. Pure.
func scalerReadings(round []queueDepthOf, now time.Time) map[types.NamespacedName]scaler.Reading {
	out := make(map[types.NamespacedName]scaler.Reading, len(round))
	for _, q := range round {
		out[client.ObjectKeyFromObject(q.sq)] = scaler.Reading{Backlog: q.depth.Backlog, Unread: len(q.depth.Unread), Err: q.err, At: now}
	}
	return out
}

// pruneLastWrite drops the write times of queues not in this round (deleted: one created
// again under the name starts afresh) and those older than statusInterval (the cache's
// status.depth.observedAt then says the same), so the map holds only recent writes.
func (p *depthPoller) pruneLastWrite(round []queueDepthOf, now time.Time) {
	inRound := make(map[types.NamespacedName]bool, len(p.lastWrite))
	for _, q := range round {
		if k := client.ObjectKeyFromObject(q.sq); p.lastWrite[k] != (time.Time{}) {
			inRound[k] = true
		}
	}
	for k, t := range p.lastWrite {
		if !inRound[k] || now.Sub(t) > p.statusInterval {
			delete(p.lastWrite, k)
		}
	}
}

// exportQueueDepth sets a queue's series from one read, or removes them when it failed.
func exportQueueDepth(round uint64, k types.NamespacedName, q queueDepthOf, now time.Time) {
	if q.err != "" {
		since := float64(now.Unix())
		if q.notOwned {
			since = 0
		}
		perQueueMetrics.clearDepth(round, k.Namespace, k.Name, since)
		return
	}
	d := q.depth
	age := 0.0
	if !d.Oldest.IsZero() && d.Backlog > 0 {
		age = max(now.Sub(d.Oldest).Seconds(), 0)
	}
	perQueueMetrics.setDepth(round, k.Namespace, k.Name, float64(d.Backlog), age, float64(len(d.Unread)+len(d.Undated)), float64(now.Unix()))
}

// objectsOf lists the queues (with a topic and group in status, not deleting, not held
// back) and routes (with a dead-letter topic) of kc.
func (p *depthPoller) objectsOf(ctx context.Context, kc *kqv1.KafkaCluster) ([]*kqv1.ShareQueue, []*kqv1.DeadLetterRoute, error) {
	// The cache's own objects, not copies (a round reads every queue; copying 10,000 of them
	// every --depth-interval was most of the poller's memory): read only, writeStatus copies
	// the few it patches.
	var queues kqv1.ShareQueueList
	if err := p.reader.List(ctx, &queues, client.InNamespace(kc.Namespace), client.MatchingFields{clusterRefIndex: kc.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, err
	}
	var qs []*kqv1.ShareQueue
	for i := range queues.Items {
		sq := &queues.Items[i]
		if sq.Status.TopicName == "" || sq.Status.GroupID == "" || !sq.DeletionTimestamp.IsZero() || heldBackMode(sq.Annotations) {
			continue
		}
		qs = append(qs, sq)
	}
	var routes kqv1.DeadLetterRouteList
	if err := p.reader.List(ctx, &routes, client.InNamespace(kc.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, err
	}
	var ds []*kqv1.DeadLetterRoute
	for i := range routes.Items {
		d := &routes.Items[i]
		if d.Status.ClusterName != kc.Name || d.Status.TopicName == "" || !d.DeletionTimestamp.IsZero() || heldBackMode(d.Annotations) {
			continue
		}
		ds = append(ds, d)
	}
	return qs, ds, nil
}

// depthNotOwned says why a queue's depth is not read: it was checked and does not own its
// topic or group (Conflict=True: another ShareQueue's, or a group of another type), so the
// figures would be another owner's, and an autoscaler following them would add consumers to
// a group that is not the queue's. Empty when the queue owns both or was not checked yet.
// Pure.
func depthNotOwned(sq *kqv1.ShareQueue) string {
	if _, _, conflict := queueOwnership(sq); conflict != "" {
		return "not read: ShareQueue " + sq.Name + " does not own its topic or group (Conflict): " + conflict
	}
	return ""
}

// autoOffsetResetOf is the group's share.auto.offset.reset as the queue last observed it
// (status.effective), else its spec, else the broker default latest.
func autoOffsetResetOf(sq *kqv1.ShareQueue) string {
	if e := sq.Status.Effective; e != nil && e.AutoOffsetReset != nil && e.AutoOffsetReset.Value != "" {
		return e.AutoOffsetReset.Value
	}
	if v := sq.Spec.Delivery.AutoOffsetReset; v != nil {
		return *v
	}
	return "latest"
}

// depthStatusOf is the status.depth a read gives.
func depthStatusOf(q queueDepthOf, now time.Time) *kqv1.QueueDepthStatus {
	st := &kqv1.QueueDepthStatus{ObservedAt: metav1.NewTime(now), DeadLetters: q.dead}
	if q.err != "" {
		st.Error = q.err
		return st
	}
	st.Backlog = ptr.To(q.depth.Backlog)
	st.UnreadPartitions = q.depth.Unread
	if !q.depth.Oldest.IsZero() && q.depth.Backlog > 0 {
		st.OldestRecordTime = ptr.To(metav1.NewTime(q.depth.Oldest.Truncate(time.Second)))
	}
	return st
}

// sameDepth compares two status.depth values but their observedAt.
func sameDepth(a, b *kqv1.QueueDepthStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	eq64 := func(x, y *int64) bool { return x == nil && y == nil || x != nil && y != nil && *x == *y }
	if !eq64(a.Backlog, b.Backlog) || !eq64(a.DeadLetters, b.DeadLetters) || a.Error != b.Error || len(a.UnreadPartitions) != len(b.UnreadPartitions) {
		return false
	}
	for i := range a.UnreadPartitions {
		if a.UnreadPartitions[i] != b.UnreadPartitions[i] {
			return false
		}
	}
	if (a.OldestRecordTime == nil) != (b.OldestRecordTime == nil) {
		return false
	}
	return a.OldestRecordTime == nil || a.OldestRecordTime.Unix() == b.OldestRecordTime.Unix()
}

// depthStatusDue picks the queues whose status.depth is written this round: a queue without
// one; a changed one written at least statusInterval ago. An unchanged one is never rewritten,
// so a fleet whose backlogs stand still costs no apiserver writes (the metrics carry the
// freshness: kafkaqueues_queue_depth_last_read_timestamp_seconds). At most budget are written, those waiting longest
// first, so 10,000 queues are spread over the status interval rather than written at once.
func depthStatusDue(round []queueDepthOf, last func(*kqv1.ShareQueue) time.Time, now time.Time, statusInterval time.Duration, budget int) []int {
	type cand struct {
		i    int
		last time.Time
	}
	var due []cand
	for i, q := range round {
		cur := q.sq.Status.Depth
		l := last(q.sq)
		age := now.Sub(l)
		switch {
		case cur == nil:
		case age >= statusInterval && !sameDepth(cur, depthStatusOf(q, now)):
		default:
			continue
		}
		due = append(due, cand{i, l})
	}
	sort.SliceStable(due, func(a, b int) bool { return due[a].last.Before(due[b].last) })
	if len(due) > budget {
		due = due[:budget]
	}
	out := make([]int, len(due))
	for j, c := range due {
		out[j] = c.i
	}
	return out
}

// writeStatus patches status.depth of the queues due this round (depthStatusDue). The
// budget per round is the queues' share of one status interval: n × interval /
// statusInterval, rounded up (10,000 queues at 30s / 5m: 1,000 a round, about 33 a second).
// Queues without status.depth come first, so a new queue's is written within a round or two;
// 10,000 new ones (a fresh install, an upgrade adding the field) take one status interval.
func (p *depthPoller) writeStatus(ctx context.Context, round []queueDepthOf) {
	if p.statusInterval <= 0 || len(round) == 0 {
		return
	}
	now := time.Now()
	budget := int((int64(len(round))*int64(p.interval) + int64(p.statusInterval) - 1) / int64(p.statusInterval))
	last := func(sq *kqv1.ShareQueue) time.Time {
		if t, ok := p.lastWrite[client.ObjectKeyFromObject(sq)]; ok {
			return t
		}
		if sq.Status.Depth != nil {
			return sq.Status.Depth.ObservedAt.Time
		}
		return time.Time{}
	}
	for _, i := range depthStatusDue(round, last, now, p.statusInterval, budget) {
		q := round[i]
		// q.sq is the cache's object (objectsOf): never modified, patched from a copy.
		sq := q.sq.DeepCopy()
		sq.Status.Depth = depthStatusOf(q, now)
		if err := p.writer.Status().Patch(ctx, sq, client.MergeFrom(q.sq)); err != nil {
			log.FromContext(ctx).WithName("depth").V(1).Info("writing status.depth failed", "shareQueue", client.ObjectKeyFromObject(sq).String(), "error", err.Error())
			continue
		}
		depthStatusWrites.Inc()
		p.lastWrite[client.ObjectKeyFromObject(sq)] = now
	}
}
