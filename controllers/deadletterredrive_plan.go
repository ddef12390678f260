package controllers

import (
	"fmt"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/internal/republisher"
)

// Provenance headers a dead letter's original partition is read from: the republisher's,
// then the brokers' own (KIP-1191, docs/kafka-findings.md).
const brokerDLQPartitionHeader = "__dlq.errors.partition"

// defaultMaxRedrives is spec.maxRedrives when absent (the CRD default).
const defaultMaxRedrives = 3

// redriveObservation is what a DeadLetterRedrive reconcile read before planning.
type redriveObservation struct {
	// RouteFound, QueueFound, ClusterFound: the route, its ShareQueue and the queue's
	// KafkaCluster exist (the cluster is looked up only when the queue was found).
	RouteFound, QueueFound, ClusterFound bool
	// Cluster is the queue's spec.clusterRef.name (empty without the queue).
	Cluster string
	// SourceTopic is the route's dead-letter topic (status.topicName, empty until the route
	// resolved it); TargetTopic the queue's topic.
	SourceTopic, TargetTopic string
	// RouteReady is the route's Ready condition (nil without the route or before its first
	// status): why a route has no dead-letter topic yet.
	RouteReady *metav1.Condition
	// Blocker names another active redrive of the same route that goes first; empty: none.
	Blocker string
	// Running: this manager runs the redrive now.
	Running bool
}

// redriveAction is what one reconcile does.
type redriveAction int

const (
	redriveNothing redriveAction = iota
	// redriveWait: Pending, with Reason/Message; look again later.
	redriveWait
	// redriveStart: record the bound and start moving.
	redriveStart
	// redriveResume: the bound is recorded but nothing here runs it (manager restarted).
	redriveResume
	// redriveStop: ask the running mover to stop at the next transaction boundary.
	redriveStop
	// redriveCancelNow: nothing runs; mark Cancelled.
	redriveCancelNow
	// redriveFail: a started redrive cannot be resumed (its route, queue or cluster is gone):
	// mark Failed with Reason/Message.
	redriveFail
)

type redrivePlan struct {
	Action          redriveAction
	Reason, Message string
}

// planRedrive decides a DeadLetterRedrive reconcile from its spec and status and what was
// observed. Pure.
func planRedrive(dr *kqv1.DeadLetterRedrive, obs redriveObservation) redrivePlan {
	if dr.Status.Phase.Terminal() {
		if obs.Running {
			return redrivePlan{Action: redriveStop}
		}
		return redrivePlan{Action: redriveNothing}
	}
	started := dr.Status.Phase == kqv1.RedriveRunning && len(dr.Status.Bound) > 0
	gone := redriveGone(dr, obs)
	if dr.Spec.Cancel {
		switch {
		case obs.Running:
			return redrivePlan{Action: redriveStop}
		case started && gone.Action == redriveNothing:
			// Started by a manager that is gone: resume stopped, which reads the committed
			// position and counts, then ends Cancelled with them.
			return redrivePlan{Action: redriveResume}
		}
		return redrivePlan{Action: redriveCancelNow}
	}
	if obs.Running {
		return redrivePlan{Action: redriveNothing}
	}
	if started {
		// Resuming needs the queue's cluster (its client); without it the redrive could
		// never go on, so it fails rather than staying Running for ever.
		if gone.Action != redriveNothing {
			return gone
		}
		return redrivePlan{Action: redriveResume}
	}
	switch {
	case !obs.RouteFound:
		return redrivePlan{redriveWait, kqv1.ReasonRouteNotFound,
			fmt.Sprintf("spec.routeRef.name: DeadLetterRoute %s/%s does not exist", dr.Namespace, dr.Spec.RouteRef.Name)}
	case obs.SourceTopic == "" && obs.RouteReady != nil && obs.RouteReady.Status == metav1.ConditionFalse:
		// Regression (issue 30, case 7): a route in Conflict was reported as merely not having
		// resolved its topic yet. Say what holds the route and when this redrive can start.
		return redrivePlan{redriveWait, kqv1.ReasonRedriveWaiting,
			fmt.Sprintf("DeadLetterRoute %s has no dead-letter topic: it is Ready=False/%s: %s; this redrive starts by itself once the route is Ready, and never while that lasts",
				dr.Spec.RouteRef.Name, obs.RouteReady.Reason, obs.RouteReady.Message)}
	case obs.SourceTopic == "":
		return redrivePlan{redriveWait, kqv1.ReasonRedriveWaiting,
			fmt.Sprintf("DeadLetterRoute %s has not resolved its dead-letter topic yet (status.topicName is empty)", dr.Spec.RouteRef.Name)}
	case !obs.QueueFound:
		return redrivePlan{redriveWait, kqv1.ReasonQueueNotFound,
			fmt.Sprintf("the ShareQueue of DeadLetterRoute %s does not exist", dr.Spec.RouteRef.Name)}
	case !obs.ClusterFound:
		return redrivePlan{redriveWait, kqv1.ReasonClusterNotFound,
			fmt.Sprintf("KafkaCluster %s/%s of the route's ShareQueue does not exist", dr.Namespace, obs.Cluster)}
	case obs.Blocker != "":
		return redrivePlan{redriveWait, kqv1.ReasonRedriveWaiting,
			fmt.Sprintf("DeadLetterRedrive %s of the same route (spec.routeRef.name %s) is active; one redrive per route runs at a time", obs.Blocker, dr.Spec.RouteRef.Name)}
	}
	return redrivePlan{Action: redriveStart}
}

// redriveGone is, for a redrive whose bound is recorded, the Failed plan naming the first of
// its route, queue and cluster that no longer exists; action redriveNothing when all three
// exist. Pure.
func redriveGone(dr *kqv1.DeadLetterRedrive, obs redriveObservation) redrivePlan {
	const lost = "; the redrive cannot go on: %d of %d records were moved before it stopped"
	switch {
	case !obs.RouteFound:
		return redrivePlan{redriveFail, kqv1.ReasonRouteNotFound,
			fmt.Sprintf("spec.routeRef.name: DeadLetterRoute %s/%s no longer exists"+lost, dr.Namespace, dr.Spec.RouteRef.Name, dr.Status.Moved, dr.Status.Total)}
	case !obs.QueueFound:
		return redrivePlan{redriveFail, kqv1.ReasonQueueNotFound,
			fmt.Sprintf("the ShareQueue of DeadLetterRoute %s no longer exists"+lost, dr.Spec.RouteRef.Name, dr.Status.Moved, dr.Status.Total)}
	case !obs.ClusterFound:
		return redrivePlan{redriveFail, kqv1.ReasonClusterNotFound,
			fmt.Sprintf("KafkaCluster %s/%s of the route's ShareQueue no longer exists"+lost, dr.Namespace, obs.Cluster, dr.Status.Moved, dr.Status.Total)}
	}
	return redrivePlan{Action: redriveNothing}
}

// goesFirst reports whether redrive a runs before b on the same route: an older
// creationTimestamp first, the name breaking ties.
func goesFirst(a, b *kqv1.DeadLetterRedrive) bool {
	ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	return a.Name < b.Name
}

// redriveBlocker is the name of the first of others (same route, same namespace) that is not
// terminal and either runs or goes before dr; empty when none.
func redriveBlocker(dr *kqv1.DeadLetterRedrive, others []kqv1.DeadLetterRedrive) string {
	for i := range others {
		o := &others[i]
		if o.UID == dr.UID || o.Spec.RouteRef.Name != dr.Spec.RouteRef.Name || o.Status.Phase.Terminal() || o.DeletionTimestamp != nil {
			continue
		}
		if o.Status.Phase == kqv1.RedriveRunning || goesFirst(o, dr) {
			return o.Name
		}
	}
	return ""
}

// lastHeader is the value of the last header named key, and whether there is one.
func lastHeader(hs []kafka.Header, key string) (string, bool) {
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].Key == key {
			return string(hs[i].Value), true
		}
	}
	return "", false
}

// redriveCount is a record's kqo.redrive.count: 0 without the header; a value that is not a
// non-negative integer counts as max (the record is refused rather than looped).
func redriveCount(hs []kafka.Header, max int) int {
	v, ok := lastHeader(hs, kqv1.HeaderRedriveCount)
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return max
	}
	return n
}

// redriveDecider returns the pure per-record decision of a redrive: Filter when spec.filter
// does not select the record, else Refuse when its kqo.redrive.count already reached
// spec.maxRedrives, else Move.
func redriveDecider(spec kqv1.DeadLetterRedriveSpec) func([]kafka.Header) kafka.RedriveDecision {
	max := defaultMaxRedrives
	if spec.MaxRedrives != nil {
		max = int(*spec.MaxRedrives)
	}
	var reasons []string
	var parts []string
	if f := spec.Filter; f != nil {
		reasons = f.Reasons
		for _, p := range f.SourcePartitions {
			parts = append(parts, strconv.Itoa(int(p)))
		}
	}
	return func(hs []kafka.Header) kafka.RedriveDecision {
		if len(reasons) > 0 {
			v, ok := lastHeader(hs, republisher.HeaderReason)
			if !ok || !slices.Contains(reasons, v) {
				return kafka.RedriveFilter
			}
		}
		if len(parts) > 0 {
			v, ok := lastSourcePartition(hs)
			if !ok || !slices.Contains(parts, v) {
				return kafka.RedriveFilter
			}
		}
		if redriveCount(hs, max) >= max {
			return kafka.RedriveRefuse
		}
		return kafka.RedriveMove
	}
}

// lastSourcePartition is the original partition of a dead letter: the last
// kqo.source.partition or __dlq.errors.partition header, whichever comes later.
func lastSourcePartition(hs []kafka.Header) (string, bool) {
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].Key == republisher.HeaderSourcePartition || hs[i].Key == brokerDLQPartitionHeader {
			return string(hs[i].Value), true
		}
	}
	return "", false
}

// redriveRewriter returns the headers of a moved record: its own, without earlier
// kqo.redriven / kqo.redrive.count, then kqo.redriven=<namespace/name> and
// kqo.redrive.count=<previous count + 1>.
func redriveRewriter(namespace, name string, spec kqv1.DeadLetterRedriveSpec) func([]kafka.Header) []kafka.Header {
	max := defaultMaxRedrives
	if spec.MaxRedrives != nil {
		max = int(*spec.MaxRedrives)
	}
	by := []byte(namespace + "/" + name)
	return func(hs []kafka.Header) []kafka.Header {
		n := redriveCount(hs, max)
		out := make([]kafka.Header, 0, len(hs)+2)
		for _, h := range hs {
			if h.Key != kqv1.HeaderRedriveCount && h.Key != kqv1.HeaderRedriven {
				out = append(out, h)
			}
		}
		return append(out,
			kafka.Header{Key: kqv1.HeaderRedriven, Value: by},
			kafka.Header{Key: kqv1.HeaderRedriveCount, Value: []byte(strconv.Itoa(n + 1))})
	}
}

// redriveBoundTotal is the records within a bound: the sum of End - Start.
func redriveBoundTotal(b []kqv1.PartitionBound) int64 {
	var t int64
	for _, p := range b {
		if p.EndOffset > p.StartOffset {
			t += p.EndOffset - p.StartOffset
		}
	}
	return t
}

// redriveID is the transactional.id and consumer group id of a redrive: fixed per object
// (its UID), so a restarted manager fences the dead one's producer and resumes from its
// committed position, and a new object of the same name starts afresh.
func redriveID(dr *kqv1.DeadLetterRedrive) string { return "kqo.redrive." + string(dr.UID) }

// redriveStartOffsets raises each partition's Start in bounds (the log start offsets and end
// offsets now) to where the last finished redrive of the same route and dead-letter topic
// stopped reading (its status.bound nextOffset, or endOffset when a Complete one has none),
// unless spec.startFrom is Earliest. Never beyond End. Pure.
func redriveStartOffsets(dr *kqv1.DeadLetterRedrive, sourceTopic string, bounds []kafka.RedriveBound, others []kqv1.DeadLetterRedrive) []kafka.RedriveBound {
	out := append([]kafka.RedriveBound(nil), bounds...)
	if dr.Spec.StartFrom == kqv1.RedriveStartEarliest {
		return out
	}
	reached := map[int32]int64{}
	for i := range others {
		o := &others[i]
		if o.UID == dr.UID || o.Spec.RouteRef.Name != dr.Spec.RouteRef.Name || o.Status.SourceTopic != sourceTopic ||
			(o.Status.Phase != kqv1.RedriveComplete && o.Status.Phase != kqv1.RedriveCancelled) {
			continue
		}
		for _, b := range o.Status.Bound {
			next := b.EndOffset
			if b.NextOffset != nil {
				next = *b.NextOffset
			} else if o.Status.Phase != kqv1.RedriveComplete {
				continue
			}
			reached[b.Partition] = max(reached[b.Partition], next)
		}
	}
	for i := range out {
		if r, ok := reached[out[i].Partition]; ok && r > out[i].Start {
			out[i].Start = min(r, out[i].End)
		}
	}
	return out
}
