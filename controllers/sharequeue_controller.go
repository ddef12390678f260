package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// CleanupFinalizer guards deletionPolicy Delete: the topic and group are deleted before the
// ShareQueue goes away. ShareQueues with deletionPolicy Retain carry no finalizer.
const CleanupFinalizer = "kafkaqueues.io/cleanup"

// clusterRefIndex indexes ShareQueues by spec.clusterRef.name.
const clusterRefIndex = "spec.clusterRef.name"

// defaultFinalizerTimeout is how long a deleting ShareQueue waits for an unreachable cluster
// before its finalizer is removed anyway (an Event says what was left in Kafka), so a
// namespace never wedges.
const defaultFinalizerTimeout = 10 * time.Minute

// ShareQueueReconciler turns a ShareQueue into a Kafka topic plus share-group configs:
// observe → plan (pure, planQueue) → apply (batched admin requests; nothing when the plan is
// empty) → status (pure, queueStatus), with status written once per reconcile, only when it
// changed, by the shared summarize step (reconcile.go).
type ShareQueueReconciler struct {
	client.Client
	APIReader client.Reader
	Pool      *kafka.Pool
	Recorder  events.EventRecorder
	// ResyncInterval is how often a queue is re-checked against Kafka (drift, group state).
	ResyncInterval time.Duration
	KafkaTimeout   time.Duration
	// Concurrency is the number of parallel reconciles (MaxConcurrentReconciles).
	Concurrency int
	// FinalizerTimeout bounds how long deletion waits for an unreachable cluster.
	FinalizerTimeout time.Duration

	// strimzi finds the Strimzi KafkaTopics managing a queue's topic (strimzi.go).
	strimzi *strimziTopics
	// topicGone carries the queues whose topic topicWatch found deleted; nil: no watch.
	topicGone <-chan event.GenericEvent
	// ClaimsTopic is Options.ClaimsTopic: where managers record which queue owns a topic and
	// group (sharequeue_claims.go); empty: ownership among the cached queues only.
	ClaimsTopic string
	// ManagerName goes into this manager's claims (informational).
	ManagerName string
	// WatchNamespaces is Scope.Namespaces: a namespace-scoped manager sweeps the claims of
	// its namespaces' deleted queues when it starts (sweepClaims).
	WatchNamespaces []string
	// claimsChanged carries the queues to look at again after another manager's claim or
	// release (claimChanged); stopping closes when the manager stops.
	claimsChanged chan event.GenericEvent
	stopping      chan struct{}
	// gate is the per-KafkaCluster shared backoff (kafka_gate.go); gateWake carries the
	// queues it wakes. nil: each queue backs off on its own.
	gate     *kafkaGate
	gateWake <-chan event.GenericEvent
}

// +kubebuilder:rbac:groups=kafkaqueues.io,resources=sharequeues,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kafkaqueues.io,resources=sharequeues/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kafkaqueues.io,resources=sharequeues/finalizers,verbs=update
// +kubebuilder:rbac:groups=kafkaqueues.io,resources=kafkaclusters,verbs=get;list;watch

// queueScope is one ShareQueue reconcile: what its steps read, planned and applied.
type queueScope struct {
	*scope
	r    *ShareQueueReconciler
	sq   *kqv1.ShareQueue
	mode string

	kc     kqv1.KafkaCluster
	kctx   context.Context // bounds the Kafka requests (KafkaTimeout)
	cancel context.CancelFunc
	cl     *kafka.Client
	obs    queueObservation
	group  *kqv1.QueueGroupStatus
	// groupRead is true when this reconcile read the share group (group is not the status's
	// previous one).
	groupRead bool
	plan      queuePlan
	res       applyResult
	logKV     []any // the cluster, topic and group, for the log lines of this reconcile
	// strimziOwned is the Conflict message when a Strimzi KafkaTopic manages the topic: the
	// plan then keeps no topic write ("" otherwise).
	strimziOwned string
	// downTrial is set when this reconcile is its disconnected cluster's trial (gateDown).
	downTrial bool
}

// gateWaiter names this queue to the cluster's gate.
func (q *queueScope) gateWaiter() gateWaiter {
	return gateWaiter{Kind: gateQueue, NamespacedName: types.NamespacedName{Namespace: q.sq.Namespace, Name: q.sq.Name}}
}

// Reconcile brings one ShareQueue's topic and group in line with its spec. It reads as its
// steps; the deferred summarize writes status once and picks the requeue.
func (r *ShareQueueReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	var sq kqv1.ShareQueue
	if err := r.Get(ctx, req.NamespacedName, &sq); err != nil {
		if apierrors.IsNotFound(err) {
			perQueueMetrics.forgetQueue(req.Namespace, req.Name)
			r.releaseClaimsOf(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	q := &queueScope{r: r, sq: &sq, mode: reconcileMode(sq.Annotations), cancel: func() {}}
	q.scope = newScope(&sq, &sq.Status.Conditions, func(a, b client.Object) bool {
		return equality.Semantic.DeepEqual(a.(*kqv1.ShareQueue).Status, b.(*kqv1.ShareQueue).Status)
	})
	defer func() { q.cancel() }()
	defer func() {
		reason := ""
		if q.downTrial {
			reason = kqv1.ReasonClusterNotReady
		}
		err = gateOutcome(r.gate, &q.kc, q.gateWaiter(), err, r.ResyncInterval, reason)
		res, err = q.summarize(ctx, r.Client, r.Recorder, q.waited, err)
	}()
	return ctrl.Result{}, q.run(ctx,
		step{"paused", q.paused},
		step{"finalize", q.finalize},
		step{"finalizer", q.syncFinalizer},
		step{"names", q.resolveNames},
		step{"cluster", q.connect},
		step{"ownership", q.checkOwnership},
		step{"observe", q.observe},
		step{"plan", q.planChanges},
		step{"strimzi", q.leaveTopicToStrimzi},
		step{"record creation intent", q.recordCreationIntent},
		step{"apply", q.apply},
		step{"status", q.status},
		step{"connection", q.publishConnection},
	)
}

// paused: annotation Paused (or an unknown mode) reads and writes nothing; deleting a paused
// queue keeps its topic and group, and the finalizer is released so the namespace never
// wedges.
func (q *queueScope) paused(ctx context.Context) error {
	sq := q.sq
	if q.mode != kqv1.ReconcilePaused && q.mode != reconcileInvalid {
		return nil
	}
	if !sq.DeletionTimestamp.IsZero() && controllerutil.ContainsFinalizer(sq, CleanupFinalizer) {
		q.r.event(sq, corev1.EventTypeWarning, "CleanupSkipped", "Delete", fmt.Sprintf("reconcile mode %q: topic %s and group %s were left in Kafka", sq.Annotations[kqv1.ReconcileAnnotation], sq.KafkaTopicName(), sq.KafkaGroupID()))
		return q.r.releaseFinalizer(ctx, sq)
	}
	pausedStatus(&sq.Status.Conditions, q.mode, sq.Annotations[kqv1.ReconcileAnnotation], q.gen)
	sq.Status.ObservedGeneration = q.gen // the status describes this generation: paused
	return errDone
}

// syncFinalizer adds the cleanup finalizer for deletionPolicy Delete and removes it otherwise.
func (q *queueScope) syncFinalizer(ctx context.Context) error {
	sq := q.sq
	want := sq.Spec.DeletionPolicy == kqv1.DeletionPolicyDelete
	if want != controllerutil.ContainsFinalizer(sq, CleanupFinalizer) {
		patch := client.MergeFromWithOptions(sq.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if want {
			controllerutil.AddFinalizer(sq, CleanupFinalizer)
		} else {
			controllerutil.RemoveFinalizer(sq, CleanupFinalizer)
		}
		if err := q.r.Patch(ctx, sq, patch); err != nil {
			return err
		}
	}
	q.snapshot()
	return nil
}

// resolveNames records the topic, group and dead-letter route this generation resolves to.
func (q *queueScope) resolveNames(ctx context.Context) error {
	sq := q.sq
	sq.Status.TopicName, sq.Status.GroupID = sq.KafkaTopicName(), sq.KafkaGroupID()
	sq.Status.ObservedGeneration = q.gen
	return q.r.syncDeadLetterStatus(ctx, sq)
}

// connect reads the KafkaCluster and takes its pooled Kafka client; a missing or unconnected
// cluster is a wait (the KafkaCluster watch brings the queue back).
func (q *queueScope) connect(ctx context.Context) error {
	sq := q.sq
	if err := q.r.Get(ctx, types.NamespacedName{Namespace: sq.Namespace, Name: sq.Spec.ClusterRef.Name}, &q.kc); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		return waiting(kqv1.ReasonClusterNotFound, fmt.Sprintf("KafkaCluster %s/%s (spec.clusterRef.name) does not exist", sq.Namespace, sq.Spec.ClusterRef.Name))
	}
	kc := &q.kc
	if c := findCondition(kc.Status.Conditions, kqv1.ConditionConnected); c == nil || c.Status != metav1.ConditionTrue {
		msg := fmt.Sprintf("KafkaCluster %s is not connected yet", kc.Name)
		if c != nil {
			msg = fmt.Sprintf("KafkaCluster %s is not connected: %s", kc.Name, c.Message)
		}
		trial, err := gateDown(q.r.gate, kc, q.gateWaiter(), c, msg, q.r.ResyncInterval)
		if !trial {
			return err
		}
		q.downTrial = true
	} else if err := gateCheck(q.r.gate, kc, q.gateWaiter(), q.r.ResyncInterval); err != nil {
		return err
	}
	q.kctx, q.cancel = context.WithTimeout(ctx, q.r.KafkaTimeout)
	cl, err := pooledClientFor(q.kctx, q.r.APIReader, q.r.Pool, kc)
	if err != nil {
		return &waitError{Reason: kqv1.ReasonClusterNotReady, Message: fmt.Sprintf("KafkaCluster %s: %v", kc.Name, err), Cause: err}
	}
	q.cl = cl
	return nil
}

// checkOwnership: one owner per (cluster, topic) and (cluster, group), a queue's topic is
// never the claims topic nor a route's dead-letter topic, and its group id is not held by a group of another type
// (classic, consumer, streams: reason GroupTypeConflict). A queue in Conflict makes no Kafka
// change (stalled). A
// topic managed by a Strimzi KafkaTopic is a Conflict too, but only the topic is left alone:
// the reconcile goes on and writes the group's configs (checkStrimzi).
func (q *queueScope) checkOwnership(ctx context.Context) error {
	sq := q.sq
	others, err := q.r.claimants(ctx, sq, &q.kc)
	if err != nil {
		return err
	}
	owner := ownerOf(sq, others)
	if owner == nil && q.r.ClaimsTopic != "" {
		if owner, err = q.kafkaOwner(ctx); err != nil {
			return err
		}
	}
	msg := ""
	if q.r.ClaimsTopic != "" && sq.Status.TopicName == q.r.ClaimsTopic {
		// The managers' own records of who owns what: no queue may write, adopt or delete it.
		msg = fmt.Sprintf("topic %s on this Kafka cluster is the operator's claims topic (--claims-topic), where managers record which ShareQueue owns each topic and group; this ShareQueue makes no Kafka change until it is recreated naming another topic (spec.topic.name cannot be changed in place)", sq.Status.TopicName)
	} else if owner != nil {
		msg = conflictMessage(owner)
	} else if route, err := deadLetterTopicOwner(ctx, q.r.Client, &q.kc, sq.Status.TopicName); err != nil {
		return err
	} else if route != "" {
		msg = fmt.Sprintf("topic %s on this Kafka cluster is the dead-letter topic of %s; this ShareQueue makes no Kafka change until it is recreated naming another topic (spec.topic.name cannot be changed in place)", sq.Status.TopicName, route)
	} else if typed, err := groupTypeConflict(q.kctx, q.cl, sq.Status.GroupID, "this ShareQueue"); err != nil {
		return &waitError{Reason: kqv1.ReasonKafkaUnavailable, Message: fmt.Sprintf("listing the groups of other types to check group %s: %v", sq.Status.GroupID, err), Cause: err}
	} else if typed != "" {
		conflictStatus(&sq.Status, kqv1.ReasonGroupTypeConflict, typed, q.gen)
		sq.Status.Group = nil // no share group state to report: the id is another type's
		// Nothing in Kubernetes changes when that group goes away: look again each resync.
		return &stallError{Reason: kqv1.ReasonGroupTypeConflict, Message: typed, After: q.r.ResyncInterval}
	} else if owned, err := q.checkStrimzi(ctx); err != nil || owned {
		return err
	}
	conflictStatus(&sq.Status, kqv1.ReasonConflict, msg, q.gen)
	if msg != "" {
		return &stallError{Reason: kqv1.ReasonConflict, Message: msg}
	}
	return nil
}

// observe is the one round of Kafka reads: topic, topic and group configs, share group.
func (q *queueScope) observe(ctx context.Context) error {
	sq := q.sq
	obs, group, err := q.r.observe(q.kctx, q.cl, sq, q.kc.Status)
	if err != nil {
		err = withAuthError(q.cl, err)
		return &waitError{Reason: kqv1.ReasonKafkaUnavailable, Message: fmt.Sprintf("reading topic %s / group %s: %v", sq.Status.TopicName, sq.Status.GroupID, err), Cause: err}
	}
	if q.r.gate != nil {
		q.r.gate.success(clusterKey(&q.kc)) // the brokers answered: any backoff of the cluster ends
	}
	obs.ReserveLastAttempt = sq.Status.DeadLetter != nil && sq.Status.DeadLetter.Mode == kqv1.DeadLetterModeRepublisher
	q.obs, q.group = obs, group
	// observe hands back the status's own group (the same pointer) when it could not read it.
	q.groupRead = group != nil && group != sq.Status.Group
	if pinned := sq.Status.TopicID; pinned != "" && obs.Topic.Err == nil && obs.Topic.ID != "" && obs.Topic.ID != pinned {
		// Another id than the pinned one is TopicIDChanged, a stall: first make sure the pin
		// is not just stale in the cache (this queue recreated the topic a moment ago and its
		// status write has not reached the informer yet).
		var fresh kqv1.ShareQueue
		if err := q.r.APIReader.Get(ctx, client.ObjectKeyFromObject(sq), &fresh); err == nil && fresh.ResourceVersion != sq.ResourceVersion {
			q.requeueAfter = time.Second
			return errDone
		}
	}
	return nil
}

// planChanges runs the pure plan (planQueue).
func (q *queueScope) planChanges(ctx context.Context) error {
	sq := q.sq
	q.plan = planQueue(sq, q.obs)
	q.res = applyResult{topicID: q.obs.Topic.ID, partitions: q.plan.Partitions, rf: q.obs.Topic.ReplicationFactor, topicConfigs: q.obs.TopicConfigs}
	q.logKV = []any{"kafkaCluster", q.kc.Name, "clusterID", q.kc.Status.ClusterID, "topic", sq.Status.TopicName, "group", sq.Status.GroupID}
	logger := log.FromContext(ctx).WithValues(q.logKV...)
	if !q.plan.Empty() {
		logger.Info("kafka changes planned", "mode", q.mode, "changes", q.plan.Changes())
	} else {
		logger.V(1).Info("in sync with kafka")
	}
	return nil
}

// recordCreationIntent is the safety write before creating a topic under adoptionPolicy
// Create: status.topicCreationStarted is patched first, so if the manager stops before the
// topic id is recorded, the topic is still recognised as ours rather than reported as
// someone else's.
func (q *queueScope) recordCreationIntent(ctx context.Context) error {
	sq := q.sq
	if q.mode != kqv1.ReconcileActive || q.plan.CreateTopic == nil || sq.Spec.AdoptionPolicy != kqv1.AdoptionPolicyCreate || sq.Status.TopicCreationStarted != nil {
		return nil
	}
	now := metav1.Now()
	sq.Status.TopicCreationStarted = &now
	if err := q.r.Status().Patch(ctx, sq, client.MergeFrom(q.original)); err != nil {
		return err
	}
	q.snapshot()
	q.res.intentFresh = true
	return nil
}

// apply is the one round of Kafka writes (Active), or records the plan and has the brokers
// validate it without writing (Plan, ObserveOnly: validatePlan).
func (q *queueScope) apply(ctx context.Context) error {
	if q.mode != kqv1.ReconcileActive {
		// Nothing is written: status.partitions is the topic's as it is (0 when missing).
		q.res.partitions = 0
		if q.obs.Topic.Err == nil {
			q.res.partitions = q.obs.Topic.Partitions
		}
		q.sq.Status.PlannedChanges = q.plan.Changes()
		v := validatePlan(q.kctx, q.cl, &q.plan)
		q.res.topicErr, q.res.groupErr = v.TopicErr, v.GroupErr
		if v.Unchecked != nil {
			log.FromContext(ctx).WithValues(q.logKV...).Info("could not validate the planned changes", "error", v.Unchecked.Error())
		}
		return nil
	}
	q.sq.Status.PlannedChanges = nil
	q.res = q.r.apply(q.kctx, q.cl, q.sq, &q.plan, q.res)
	return nil
}

// status runs the pure status step (queueStatus), performs its events and metrics, and picks
// the requeue.
func (q *queueScope) status(ctx context.Context) error {
	sq, r := q.sq, q.r
	rep := queueStatus(&sq.Status, q.gen, q.mode, &q.plan, q.res, q.group)
	if q.groupRead {
		perQueueMetrics.setMembers(sq.Namespace, sq.Name, float64(q.group.Members))
	} else {
		// A group this reconcile could not read has no member count: absent, never the last
		// one seen (as the depth series).
		perQueueMetrics.clearMembers(sq.Namespace, sq.Name)
	}
	exportRetention(sq, q.res.topicConfigs)
	if rep.DriftDetected != "" {
		driftDetections.WithLabelValues("ShareQueue", "config").Inc()
		r.event(sq, corev1.EventTypeWarning, kqv1.ReasonDriftDetected, "Reconcile", rep.DriftDetected)
	}
	if rep.DriftCorrected != "" {
		if rep.CorrectedTopic {
			driftCorrections.WithLabelValues("ShareQueue", "topic").Inc()
		}
		if rep.CorrectedGroup {
			driftCorrections.WithLabelValues("ShareQueue", "group").Inc()
		}
		r.event(sq, corev1.EventTypeNormal, kqv1.ReasonDriftCorrected, "Reconcile", rep.DriftCorrected)
	}
	for _, cfg := range rep.Rejections {
		outOfBoundsRejections.WithLabelValues("ShareQueue", cfg).Inc()
	}
	q.setReady(rep.Ready, rep.Stalled)

	logger := log.FromContext(ctx).WithValues(q.logKV...)
	if q.res.topicErr != nil || q.res.groupErr != nil {
		logger.Info("brokers refused a change", "topicError", errString(q.res.topicErr), "groupError", errString(q.res.groupErr))
	}
	switch {
	case q.res.transient != nil:
		logger.Info("kafka request failed; retrying", "error", q.res.transient.Error())
		q.err = q.res.transient
	case q.plan.TopicReady.Reason == kqv1.ReasonTopicNotFound, q.plan.TopicReady.Reason == kqv1.ReasonTopicUnderReplicated:
		// Both heal without any change to the queue (a topic created, a broker back in the
		// ISR): look again soon so Ready follows Kafka rather than the next resync.
		q.requeueAfter = 30 * time.Second
	case q.group == nil && q.kc.Status.ShareVersion >= 1:
		// The share group's state could not be read (coordinator still loading): look again
		// soon rather than at the next resync.
		q.requeueAfter = min(r.ResyncInterval, 15*time.Second)
	default:
		q.resyncAfter(r.ResyncInterval)
	}
	return nil
}

// exportRetention sets the queue's topic retention series from the topic configs this
// reconcile read (absent when they were not read, or retention.ms is not a number).
func exportRetention(sq *kqv1.ShareQueue, topicConfigs map[string]kafka.ConfigEntry) {
	e, ok := topicConfigs["retention.ms"]
	ms, err := strconv.ParseInt(e.Value, 10, 64)
	if !ok || err != nil {
		perQueueMetrics.clearRetention(sq.Namespace, sq.Name)
		return
	}
	perQueueMetrics.setRetention(sq.Namespace, sq.Name, float64(ms)/1000)
}

// waited reports a queue held back by something outside it (queueWaited).
func (q *queueScope) waited(w *waitError) condInput {
	// Held back before its group was read (cluster not connected, Kafka unreachable): no
	// member count, rather than the last one seen.
	perQueueMetrics.clearMembers(q.sq.Namespace, q.sq.Name)
	perQueueMetrics.clearRetention(q.sq.Namespace, q.sq.Name)
	return queueWaited(&q.sq.Status.Conditions, q.gen, w.Reason, w.Message)
}

// observe reads the live topic, its configs, the group configs and the share group. The three
// reads are independent and run concurrently, so with batching on a reconcile waits for one
// shared round of requests rather than three in a row. A share group that cannot be read does
// not hold the queue back: the group returned is then sq.Status.Group itself (the same
// pointer, so the caller can tell it was not read).
func (r *ShareQueueReconciler) observe(ctx context.Context, cl *kafka.Client, sq *kqv1.ShareQueue, cs kqv1.KafkaClusterStatus) (queueObservation, *kqv1.QueueGroupStatus, error) {
	obs := queueObservation{Cluster: cs}
	groupID := sq.Status.GroupID
	var (
		wg       sync.WaitGroup
		groups   map[string]kafka.ShareGroup
		groupErr error
	)
	describeShareGroup := cs.ShareVersion >= 1
	if describeShareGroup {
		wg.Add(1)
		go func() { defer wg.Done(); groups, groupErr = cl.DescribeShareGroups(ctx, groupID) }()
	}
	live, err := readTopicAndGroup(ctx, cl, sq.Status.TopicName, groupID)
	wg.Wait()
	if err != nil {
		return obs, nil, err
	}
	obs.Topic, obs.TopicConfigs, obs.GroupConfigs = live.Topic, live.TopicConfigs, live.GroupConfigs
	if !describeShareGroup {
		return obs, nil, nil
	}
	// The share group's state is informative: a failure here does not hold the queue back.
	if groupErr != nil {
		return obs, sq.Status.Group, nil
	}
	g := groups[groupID]
	if g.Err != nil {
		return obs, sq.Status.Group, nil
	}
	// totalLag is no longer written: the depth poller's status.depth.backlog counts every
	// partition and is never older than its status interval.
	gs := &kqv1.QueueGroupStatus{State: g.State, Members: g.Members}
	if !g.Exists {
		gs.State = "NotCreated"
	}
	return obs, gs, nil
}

// applyResult is what applying a plan produced.
type applyResult struct {
	topicID      string
	topicCreated bool
	partitions   int32
	rf           int32
	// topicConfigs are the topic's configs as this reconcile read them and its acknowledged
	// writes left them: those the CreateTopics answer reported, or the observed ones with
	// the acknowledged changes applied (a deleted override's value unknown until read).
	topicConfigs map[string]kafka.ConfigEntry
	topicErr     error // non-retriable item error on the topic
	groupErr     error // non-retriable item error on the group configs
	transient    error // a retriable failure: status says so and the reconcile is retried
	// createNotMade is set when this reconcile's CreateTopics certainly made no topic: the
	// brokers answered TOPIC_ALREADY_EXISTS or another refusal, or the call was withdrawn
	// before any request carried it (kafka.IsNotSent). A timeout or transport failure after
	// sending leaves it unset: the topic may have been made.
	createNotMade bool
	// intentFresh is set when this reconcile recorded status.topicCreationStarted itself
	// (recordCreationIntent): no earlier CreateTopics of this queue can have created the
	// topic, so with createNotMade the intent claims nothing.
	intentFresh bool
}

// apply makes the plan's Kafka writes: one CreateTopics, one CreatePartitions and one
// IncrementalAlterConfigs (topic and group together) at most, sent concurrently (none depends
// on another's result); none when the plan is empty.
func (r *ShareQueueReconciler) apply(ctx context.Context, cl *kafka.Client, sq *kqv1.ShareQueue, plan *queuePlan, res applyResult) applyResult {
	if t := plan.CreateTopic; t != nil && plan.RecreatesTopicID != "" {
		r.event(sq, corev1.EventTypeWarning, kqv1.EventTopicDeleted, "CreateTopic",
			fmt.Sprintf("topic %s (id %s) was deleted outside the operator; creating it again (its records are gone)", t.Name, plan.RecreatesTopicID))
	}
	out := sendWrites(ctx, cl, topicWrites{Topic: plan.TopicName, Create: plan.CreateTopic, GrowTo: plan.GrowPartitionsTo,
		TopicConfigs: plan.TopicConfigs, Group: plan.GroupID, GroupConfigs: plan.GroupConfigs})

	// One Normal event per reconcile lists every Kafka change made (its reason is the first
	// change's kind), so a new queue costs one Event write rather than one per change.
	var reason string
	var done []string
	applied := func(why, what string) {
		if reason == "" {
			reason = why
		}
		done = append(done, what)
	}
	classify := func(err error, target *error) {
		if err == nil {
			return
		}
		if kafka.IsRetriable(err) {
			res.transient = errors.Join(res.transient, err)
		} else {
			*target = err
		}
	}
	if plan.CreateTopic != nil {
		res = createOutcome(out, res)
		if out.CreateErr == nil {
			applied("TopicCreated", plan.Changes()[0])
		}
	}
	if plan.GrowPartitionsTo > 0 {
		if out.GrowErr != nil {
			classify(out.GrowErr, &res.topicErr)
		} else {
			res.partitions = plan.GrowPartitionsTo
			applied("PartitionsGrown", fmt.Sprintf("topic %s grown to %d partitions", plan.TopicName, plan.GrowPartitionsTo))
		}
	}
	if len(plan.TopicConfigs) > 0 {
		if out.TopicConfigErr != nil {
			classify(out.TopicConfigErr, &res.topicErr)
		} else {
			applied("TopicConfigUpdated", changesOf(plan.TopicConfigs, "topic "+plan.TopicName))
			res.topicConfigs = withChanges(res.topicConfigs, plan.TopicConfigs)
		}
	}
	if len(plan.GroupConfigs) > 0 {
		if out.GroupConfigErr != nil {
			classify(out.GroupConfigErr, &res.groupErr)
		} else {
			applied("GroupConfigUpdated", changesOf(plan.GroupConfigs, "group "+plan.GroupID))
		}
	}
	if len(done) > 0 {
		r.event(sq, corev1.EventTypeNormal, reason, "Apply", strings.Join(done, "; "))
	}
	return res
}

// withChanges is cfgs with acknowledged config changes applied: a set value is the
// override's; a deleted override leaves the value unknown (absent) until the next read. Pure.
func withChanges(cfgs map[string]kafka.ConfigEntry, changes []kafka.AlterConfig) map[string]kafka.ConfigEntry {
	out := maps.Clone(cfgs)
	if out == nil {
		out = map[string]kafka.ConfigEntry{}
	}
	for _, c := range changes {
		if c.Op == kafka.OpSet {
			out[c.Name] = kafka.ConfigEntry{Value: c.Value, Source: kafka.ConfigSourceDynamicTopic}
		} else {
			delete(out, c.Name)
		}
	}
	return out
}

// createOutcome records a planned CreateTopics' answer (out.CreateErr, out.Created) in res.
// Pure.
//   - Created: the topic's id, partitions and replication factor.
//   - TOPIC_ALREADY_EXISTS: the metadata planned from lagged behind a topic that now exists;
//     a transient failure (observe again), not a rejection. This attempt made no topic.
//   - Another retriable failure (timeout, transport): transient; the topic may have been
//     made unless the call was withdrawn before any request carried it (kafka.IsNotSent).
//   - Any other error: the brokers refused the topic (topicErr); no topic was made.
func createOutcome(out writeOutcome, res applyResult) applyResult {
	switch err := out.CreateErr; {
	case err == nil:
		ct := out.Created
		res.topicID, res.topicCreated, res.partitions, res.rf = ct.ID, true, ct.Partitions, ct.ReplicationFactor
		res.topicConfigs = ct.Configs // nil when the broker reports none: unknown until read
	case kafka.IsAlreadyExists(err):
		res.transient = errors.Join(res.transient, err)
		res.createNotMade = true
	case kafka.IsRetriable(err):
		res.transient = errors.Join(res.transient, err)
		res.createNotMade = kafka.IsNotSent(err)
	default:
		res.topicErr = err
		res.createNotMade = true
	}
	return res
}

// planVerdict is the brokers' answer to a plan's writes sent with ValidateOnly.
type planVerdict struct {
	// TopicErr and GroupErr are the brokers' refusals of the topic writes (create, grow,
	// configs) and of the group configs; nil when accepted or not planned.
	TopicErr, GroupErr error
	// Unchecked is a retriable failure that kept some writes from being validated.
	Unchecked error
}

// validatePlan sends the plan's writes with ValidateOnly (validateWrites): the brokers check
// them as they would the real writes, and nothing is written. An empty plan sends nothing. A
// TOPIC_ALREADY_EXISTS answer (the topic appeared since it was observed) is not a refusal.
func validatePlan(ctx context.Context, cl *kafka.Client, plan *queuePlan) planVerdict {
	var v planVerdict
	if plan.Empty() || cl == nil {
		return v
	}
	out := validateWrites(ctx, cl, topicWrites{Topic: plan.TopicName, Create: plan.CreateTopic, GrowTo: plan.GrowPartitionsTo,
		TopicConfigs: plan.TopicConfigs, Group: plan.GroupID, GroupConfigs: plan.GroupConfigs})
	keep := func(err error, target *error) {
		switch {
		case err == nil, kafka.IsAlreadyExists(err):
		case kafka.IsRetriable(err):
			v.Unchecked = errors.Join(v.Unchecked, err)
		case *target == nil:
			*target = err
		}
	}
	keep(out.CreateErr, &v.TopicErr)
	keep(out.GrowErr, &v.TopicErr)
	keep(out.TopicConfigErr, &v.TopicErr)
	keep(out.GroupConfigErr, &v.GroupErr)
	return v
}

func changesOf(cs []kafka.AlterConfig, resource string) string {
	parts := make([]string, 0, len(cs))
	for _, c := range cs {
		parts = append(parts, describeAlter(resource, c))
	}
	return strings.Join(parts, "; ")
}

func (r *ShareQueueReconciler) event(obj *kqv1.ShareQueue, typ, reason, action, msg string) {
	emitEvent(r.Recorder, obj, typ, reason, action, msg)
}

// SetupWithManager registers the controller, the clusterRef index and the KafkaCluster watch
// (a cluster's status change — share.version, bounds, connection — re-plans its queues), and
// the Strimzi KafkaTopic watch once that CRD is found (setupStrimzi).
func (r *ShareQueueReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.ResyncInterval == 0 {
		r.ResyncInterval = 10 * time.Minute
	}
	if r.KafkaTimeout == 0 {
		r.KafkaTimeout = 30 * time.Second
	}
	if r.Concurrency <= 0 {
		r.Concurrency = 8
	}
	if r.FinalizerTimeout <= 0 {
		r.FinalizerTimeout = defaultFinalizerTimeout
	}
	indexes := map[string]func(*kqv1.ShareQueue) string{
		clusterRefIndex: func(sq *kqv1.ShareQueue) string { return sq.Spec.ClusterRef.Name },
	}
	for _, k := range claimKeys {
		indexes[k.index] = k.of
	}
	for name, fn := range indexes {
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), &kqv1.ShareQueue{}, name, func(o client.Object) []string {
			if v := fn(o.(*kqv1.ShareQueue)); v != "" {
				return []string{v}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if r.topicGone != nil {
		b = b.WatchesRawSource(source.Channel(r.topicGone, &handler.EnqueueRequestForObject{}))
	}
	if r.gateWake != nil {
		b = b.WatchesRawSource(source.Channel(r.gateWake, &handler.EnqueueRequestForObject{}))
	}
	if r.ClaimsTopic != "" {
		r.claimsChanged, r.stopping = make(chan event.GenericEvent, 64), make(chan struct{})
		b = b.WatchesRawSource(source.Channel(r.claimsChanged, &handler.EnqueueRequestForObject{}))
		if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
			<-ctx.Done()
			close(r.stopping)
			return nil
		})); err != nil {
			return err
		}
		if len(r.WatchNamespaces) > 0 {
			if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
				if !mgr.GetCache().WaitForCacheSync(ctx) {
					return nil
				}
				r.sweepClaims(ctx)
				return nil
			})); err != nil {
				return err
			}
		}
	}
	c, err := b.
		For(&kqv1.ShareQueue{}, builderWithGenerationOrAnnotationChange()).
		Watches(&kqv1.KafkaCluster{}, handler.EnqueueRequestsFromMapFunc(r.queuesOfCluster)).
		Watches(&kqv1.DeadLetterRoute{}, handler.EnqueueRequestsFromMapFunc(queueOfRoute)).
		Owns(&corev1.ConfigMap{}).
		Watches(&kqv1.ShareQueue{}, handler.EnqueueRequestsFromMapFunc(r.sharersOf), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false }, GenericFunc: func(event.GenericEvent) bool { return false },
			DeleteFunc: func(event.DeleteEvent) bool { return true }, UpdateFunc: deletedOrFinalizing(),
		})).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: r.Concurrency,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, 2*time.Minute),
		}).
		Named("sharequeue").
		Build(r)
	if err != nil {
		return err
	}
	return r.setupStrimzi(mgr, c)
}

// syncDeadLetterStatus copies the queue's DeadLetterRoute (the oldest live one naming it) into
// status.deadLetter.
func (r *ShareQueueReconciler) syncDeadLetterStatus(ctx context.Context, sq *kqv1.ShareQueue) error {
	routes, err := routesNaming(ctx, r.Client, sq.Namespace, sq.Name)
	if err != nil {
		return err
	}
	route := kqv1.OwningRoute(routes)
	if route == nil {
		sq.Status.DeadLetter = nil
		return nil
	}
	active := findCondition(route.Status.Conditions, kqv1.ConditionRouteActive)
	sq.Status.DeadLetter = &kqv1.QueueDeadLetterStatus{Route: route.Name, TopicName: route.Status.TopicName, Mode: route.Status.EffectiveMode,
		Active: active != nil && active.Status == metav1.ConditionTrue}
	return nil
}

// queueOfRoute maps a DeadLetterRoute to the ShareQueue it names.
func queueOfRoute(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.(*kqv1.DeadLetterRoute).Spec.QueueRef.Name}}}
}

func (r *ShareQueueReconciler) queuesOfCluster(ctx context.Context, o client.Object) []reconcile.Request {
	var list kqv1.ShareQueueList
	// Only the keys are read: the cache's objects, not 10,000 deep copies per cluster event.
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{clusterRefIndex: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, sq := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: sq.Namespace, Name: sq.Name}})
	}
	return reqs
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
