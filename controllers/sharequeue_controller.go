package controllers

import (
	"context"
	"errors"
	"fmt"
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
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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
// empty) → report (status written only when it changed).
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
}

// +kubebuilder:rbac:groups=kafkaqueues.io,resources=sharequeues,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kafkaqueues.io,resources=sharequeues/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kafkaqueues.io,resources=sharequeues/finalizers,verbs=update
// +kubebuilder:rbac:groups=kafkaqueues.io,resources=kafkaclusters,verbs=get;list;watch

// Reconcile brings one ShareQueue's topic and group in line with its spec.
func (r *ShareQueueReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	var sq kqv1.ShareQueue
	if err := r.Get(ctx, req.NamespacedName, &sq); err != nil {
		if apierrors.IsNotFound(err) {
			queueLag.DeleteLabelValues(req.Namespace, req.Name)
			queueMembers.DeleteLabelValues(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	mode := reconcileMode(sq.Annotations)
	original := sq.DeepCopy()
	gen := sq.Generation

	if mode == kqv1.ReconcilePaused || mode == reconcileInvalid {
		if !sq.DeletionTimestamp.IsZero() && controllerutil.ContainsFinalizer(&sq, CleanupFinalizer) {
			// Paused means no Kafka change: deleting a paused queue keeps its topic and group,
			// and the finalizer is released so the namespace never wedges.
			r.event(&sq, corev1.EventTypeWarning, "CleanupSkipped", "Delete", fmt.Sprintf("reconcile mode %q: topic %s and group %s were left in Kafka", sq.Annotations[kqv1.ReconcileAnnotation], topicNameOf(&sq), groupIDOf(&sq)))
			patch := client.MergeFrom(sq.DeepCopy())
			controllerutil.RemoveFinalizer(&sq, CleanupFinalizer)
			return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, &sq, patch))
		}
		in := condInput{metav1.ConditionFalse, kqv1.ReasonPaused, "annotation kafkaqueues.io/reconcile=Paused: nothing is read or written"}
		if mode == reconcileInvalid {
			in = condInput{metav1.ConditionFalse, kqv1.ReasonInvalidReconcileMode, fmt.Sprintf("annotation kafkaqueues.io/reconcile=%q is not one of Active, Paused, ObserveOnly, Plan; nothing is read or written until it is fixed", sq.Annotations[kqv1.ReconcileAnnotation])}
		}
		setCondition(&sq.Status.Conditions, kqv1.ConditionReconciling, in, gen)
		sq.Status.ObservedGeneration = gen // the status describes this generation: paused
		return ctrl.Result{}, r.patchStatus(ctx, original, &sq)
	}

	if !sq.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &sq)
	}
	if err := r.syncFinalizer(ctx, &sq); err != nil {
		return ctrl.Result{}, err
	}
	original = sq.DeepCopy()
	sq.Status.TopicName, sq.Status.GroupID = topicNameOf(&sq), groupIDOf(&sq)
	sq.Status.ObservedGeneration = gen
	if err := r.syncDeadLetterStatus(ctx, &sq); err != nil {
		return ctrl.Result{}, err
	}

	// --- cluster
	var kc kqv1.KafkaCluster
	if err := r.Get(ctx, types.NamespacedName{Namespace: sq.Namespace, Name: sq.Spec.ClusterRef.Name}, &kc); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.waiting(&sq, kqv1.ReasonClusterNotFound, fmt.Sprintf("KafkaCluster %s/%s (spec.clusterRef.name) does not exist", sq.Namespace, sq.Spec.ClusterRef.Name))
		return ctrl.Result{}, r.patchStatus(ctx, original, &sq) // the KafkaCluster watch brings us back
	}
	if c := findCondition(kc.Status.Conditions, kqv1.ConditionConnected); c == nil || c.Status != metav1.ConditionTrue {
		msg := fmt.Sprintf("KafkaCluster %s is not connected yet", kc.Name)
		if c != nil {
			msg = fmt.Sprintf("KafkaCluster %s is not connected: %s", kc.Name, c.Message)
		}
		r.waiting(&sq, kqv1.ReasonClusterNotReady, msg)
		return ctrl.Result{}, r.patchStatus(ctx, original, &sq)
	}
	kctx, cancel := context.WithTimeout(ctx, r.KafkaTimeout)
	defer cancel()
	cl, err := pooledClientFor(kctx, r.APIReader, r.Pool, &kc)
	if err != nil {
		r.waiting(&sq, kqv1.ReasonClusterNotReady, fmt.Sprintf("KafkaCluster %s: %v", kc.Name, err))
		return ctrl.Result{}, errors.Join(err, r.patchStatus(ctx, original, &sq))
	}

	// --- ownership: one owner per (cluster, topic) and (cluster, group)
	others, err := r.claimants(ctx, &sq, &kc)
	if err != nil {
		return ctrl.Result{}, err
	}
	msg := ""
	if owner := ownerOf(&sq, others); owner != nil {
		msg = conflictMessage(owner)
	} else if route, err := deadLetterTopicOwner(ctx, r.Client, &kc, sq.Status.TopicName); err != nil {
		return ctrl.Result{}, err
	} else if route != "" {
		msg = fmt.Sprintf("topic %s on this Kafka cluster is the dead-letter topic of %s; this ShareQueue makes no Kafka change until it names another topic", sq.Status.TopicName, route)
	}
	if msg != "" {
		prev := findCondition(sq.Status.Conditions, kqv1.ConditionConflict)
		if prev == nil || prev.Status != metav1.ConditionTrue {
			r.event(&sq, corev1.EventTypeWarning, kqv1.ReasonConflict, "Reconcile", msg)
		}
		setCondition(&sq.Status.Conditions, kqv1.ConditionConflict, condInput{metav1.ConditionTrue, kqv1.ReasonConflict, msg}, gen)
		setCondition(&sq.Status.Conditions, kqv1.ConditionTopicReady, condInput{metav1.ConditionFalse, kqv1.ReasonConflict, msg}, gen)
		setCondition(&sq.Status.Conditions, kqv1.ConditionGroupConfigured, condInput{metav1.ConditionFalse, kqv1.ReasonConflict, msg}, gen)
		setKstatus(&sq.Status.Conditions, condInput{metav1.ConditionFalse, kqv1.ReasonConflict, msg}, true, gen)
		sq.Status.PlannedChanges = nil
		return ctrl.Result{}, r.patchStatus(ctx, original, &sq)
	}
	setCondition(&sq.Status.Conditions, kqv1.ConditionConflict, condInput{metav1.ConditionFalse, kqv1.ReasonNoConflict,
		fmt.Sprintf("this ShareQueue owns topic %s and group %s", sq.Status.TopicName, sq.Status.GroupID)}, gen)

	// --- observe
	obs, group, err := r.observe(kctx, cl, &sq, kc.Status)
	if err != nil {
		r.waiting(&sq, kqv1.ReasonKafkaUnavailable, fmt.Sprintf("reading topic %s / group %s: %v", sq.Status.TopicName, sq.Status.GroupID, err))
		return ctrl.Result{}, errors.Join(err, r.patchStatus(ctx, original, &sq))
	}

	// --- plan
	obs.ReserveLastAttempt = sq.Status.DeadLetter != nil && sq.Status.DeadLetter.Mode == kqv1.DeadLetterModeRepublisher
	plan := planQueue(&sq, obs)
	logger = logger.WithValues("kafkaCluster", kc.Name, "clusterID", kc.Status.ClusterID, "topic", sq.Status.TopicName, "group", sq.Status.GroupID)
	ctx = log.IntoContext(ctx, logger)
	if !plan.Empty() {
		logger.Info("kafka changes planned", "mode", mode, "changes", plan.Changes())
	} else {
		logger.V(1).Info("in sync with kafka")
	}
	res := applyResult{topicID: obs.Topic.ID, partitions: plan.Partitions, rf: obs.Topic.ReplicationFactor}

	// --- apply
	switch mode {
	case kqv1.ReconcileActive:
		sq.Status.PlannedChanges = nil
		if plan.CreateTopic != nil && sq.Spec.AdoptionPolicy == kqv1.AdoptionPolicyCreate && sq.Status.TopicCreationStarted == nil {
			// Record the attempt first: if the manager stops before the id is recorded, the
			// topic is still recognised as ours rather than reported as someone else's.
			now := metav1.Now()
			sq.Status.TopicCreationStarted = &now
			if err := r.Status().Patch(ctx, &sq, client.MergeFrom(original)); err != nil {
				return ctrl.Result{}, err
			}
			original = sq.DeepCopy()
		}
		res = r.apply(kctx, cl, &sq, &plan, res)
	default: // Plan, ObserveOnly
		sq.Status.PlannedChanges = plan.Changes()
	}

	// --- report
	r.report(&sq, &plan, res, group, mode)
	if err := r.patchStatus(ctx, original, &sq); err != nil {
		return ctrl.Result{}, err
	}
	if res.topicErr != nil || res.groupErr != nil {
		logger.Info("brokers refused a change", "topicError", errString(res.topicErr), "groupError", errString(res.groupErr))
	}
	if res.transient != nil {
		logger.Info("kafka request failed; retrying", "error", res.transient.Error())
		return ctrl.Result{}, res.transient
	}
	if plan.TopicReady.Reason == kqv1.ReasonTopicNotFound {
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
	}
	if group == nil && kc.Status.ShareVersion >= 1 {
		// The share group's state could not be read (coordinator still loading): look again
		// soon rather than at the next resync.
		return ctrl.Result{RequeueAfter: min(r.ResyncInterval, 15*time.Second)}, nil
	}
	return ctrl.Result{RequeueAfter: r.ResyncInterval}, nil
}

// observe reads the live topic, its configs, the group configs and the share group. The three
// reads are independent and run concurrently, so with batching on a reconcile waits for one
// shared round of requests rather than three in a row.
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
	gs := &kqv1.QueueGroupStatus{State: g.State, Members: g.Members, TotalLag: g.TotalLag}
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
	topicErr     error // non-retriable item error on the topic
	groupErr     error // non-retriable item error on the group configs
	transient    error // a retriable failure: status says so and the reconcile is retried
	// createRefused is set when CreateTopics answered TOPIC_ALREADY_EXISTS.
	createRefused bool
}

// apply makes the plan's Kafka writes: one CreateTopics, one CreatePartitions and one
// IncrementalAlterConfigs (topic and group together) at most, sent concurrently (none depends
// on another's result); none when the plan is empty.
func (r *ShareQueueReconciler) apply(ctx context.Context, cl *kafka.Client, sq *kqv1.ShareQueue, plan *queuePlan, res applyResult) applyResult {
	if t := plan.CreateTopic; t != nil && plan.RecreatesTopicID != "" {
		r.event(sq, corev1.EventTypeWarning, "TopicDeleted", "CreateTopic",
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
		switch err := out.CreateErr; {
		case err == nil:
			ct := out.Created
			res.topicID, res.topicCreated, res.partitions, res.rf = ct.ID, true, ct.Partitions, ct.ReplicationFactor
			applied("TopicCreated", plan.Changes()[0])
		case kafka.IsAlreadyExists(err):
			// The metadata we planned from lagged behind a topic that now exists: observe
			// again rather than report a rejection. The broker says this attempt did not
			// create it, so the creation intent no longer claims it.
			res.transient = errors.Join(res.transient, err)
			res.createRefused = true
		default:
			classify(err, &res.topicErr)
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

func changesOf(cs []kafka.AlterConfig, resource string) string {
	parts := make([]string, 0, len(cs))
	for _, c := range cs {
		parts = append(parts, describeAlter(resource, c))
	}
	return strings.Join(parts, "; ")
}

// stallingReasons need a change from the user; other False reasons are waits.
var stallingReasons = map[string]bool{
	kqv1.ReasonOutOfBrokerBounds: true, kqv1.ReasonUnsupportedByCluster: true, kqv1.ReasonKafkaRejected: true,
	kqv1.ReasonTopicExists: true, kqv1.ReasonTopicIDChanged: true, kqv1.ReasonPartitionCountMismatch: true,
	kqv1.ReasonReplicationFactorMismatch: true, kqv1.ReasonConflict: true, kqv1.ReasonDeletionProtected: true,
}

// report writes the plan's and the apply's outcome into status.
func (r *ShareQueueReconciler) report(sq *kqv1.ShareQueue, plan *queuePlan, res applyResult, group *kqv1.QueueGroupStatus, mode string) {
	gen := sq.Generation
	st := &sq.Status
	switch {
	case res.topicCreated:
		st.TopicID, st.TopicCreated, st.TopicCreationStarted = res.topicID, true, nil
	case plan.AdoptCreated && mode == kqv1.ReconcileActive:
		st.TopicID, st.TopicCreated, st.TopicCreationStarted = res.topicID, true, nil
	case !plan.Blocked && st.TopicID == "" && res.topicID != "" && mode == kqv1.ReconcileActive:
		st.TopicID = res.topicID // adopted and pinned: a topic recreated outside the operator is detected, not adopted
	}
	if res.createRefused {
		st.TopicCreationStarted = nil
	}
	if mode == kqv1.ReconcileActive && !plan.Blocked && res.topicErr == nil && res.transient == nil {
		st.ManagedTopicConfigs = plan.ManagedTopicConfigs
	}
	st.Partitions, st.ReplicationFactor = res.partitions, res.rf
	st.Group = group
	if group != nil {
		queueMembers.WithLabelValues(sq.Namespace, sq.Name).Set(float64(group.Members))
		if group.TotalLag != nil {
			queueLag.WithLabelValues(sq.Namespace, sq.Name).Set(float64(*group.TotalLag))
		}
	}

	topicCond, groupCond, validCond := plan.TopicReady, plan.GroupConfig, plan.ConfigValid
	effective := plan.Effective
	if mode != kqv1.ReconcileActive {
		effective = plan.EffectiveNow
	}
	if res.topicErr != nil {
		topicCond = condInput{metav1.ConditionFalse, kqv1.ReasonKafkaRejected, "the brokers refused spec.topic (name, partitions, replicationFactor, config): " + res.topicErr.Error()}
		if plan.CreateTopic != nil {
			st.Partitions = 0
		}
	}
	if res.groupErr != nil {
		groupCond = condInput{metav1.ConditionFalse, kqv1.ReasonKafkaRejected, "the brokers refused spec.delivery (" + changesOf(plan.GroupConfigs, "group "+plan.GroupID) + "): " + res.groupErr.Error()}
		if kafka.IsInvalidConfig(res.groupErr) {
			validCond = groupCond
		}
		effective = plan.EffectiveNow
	}
	if res.transient != nil {
		if plan.CreateTopic != nil && res.topicID == "" {
			topicCond = condInput{metav1.ConditionUnknown, kqv1.ReasonKafkaUnavailable, res.transient.Error()}
		}
		if len(plan.GroupConfigs) > 0 {
			groupCond = condInput{metav1.ConditionUnknown, kqv1.ReasonKafkaUnavailable, res.transient.Error()}
			effective = plan.EffectiveNow
		}
	}
	st.Effective = &effective
	st.Capacity = capacityOf(st.Partitions, effective.MaxInFlightPerPartition, plan.Bounds)

	// Drift: Report leaves it and says so; Enforce corrects it (a non-empty plan on a queue
	// that was already Ready at this generation is drift, not a spec change).
	prevReady := findCondition(st.Conditions, kqv1.ConditionReady)
	wasSettled := prevReady != nil && prevReady.Status == metav1.ConditionTrue && prevReady.ObservedGeneration == gen
	prevDrift := findCondition(st.Conditions, kqv1.ConditionDriftDetected)
	switch {
	case len(plan.Drift) > 0:
		msg := "driftPolicy Report, not corrected: " + strings.Join(plan.Drift, "; ")
		if prevDrift == nil || prevDrift.Message != msg {
			driftDetections.WithLabelValues("ShareQueue", "config").Inc()
			r.event(sq, corev1.EventTypeWarning, kqv1.ReasonDriftDetected, "Reconcile", msg)
		}
		setCondition(&st.Conditions, kqv1.ConditionDriftDetected, condInput{metav1.ConditionTrue, kqv1.ReasonDriftDetected, msg}, gen)
	case mode == kqv1.ReconcileActive && wasSettled && !plan.Empty() && res.topicErr == nil && res.groupErr == nil && res.transient == nil:
		corrected := plan.Changes()
		setCondition(&st.Conditions, kqv1.ConditionDriftDetected, condInput{metav1.ConditionFalse, kqv1.ReasonDriftCorrected,
			"corrected drift: " + strings.Join(corrected, "; ")}, gen)
		if len(plan.TopicConfigs) > 0 || plan.GrowPartitionsTo > 0 || plan.CreateTopic != nil {
			driftCorrections.WithLabelValues("ShareQueue", "topic").Inc()
		}
		if len(plan.GroupConfigs) > 0 {
			driftCorrections.WithLabelValues("ShareQueue", "group").Inc()
		}
		r.event(sq, corev1.EventTypeNormal, kqv1.ReasonDriftCorrected, "Reconcile", "corrected drift: "+strings.Join(corrected, "; "))
	case prevDrift == nil || prevDrift.Reason == kqv1.ReasonDriftDetected:
		setCondition(&st.Conditions, kqv1.ConditionDriftDetected, condInput{metav1.ConditionFalse, kqv1.ReasonNoDrift, "live configs match the spec"}, gen)
	}
	if mode == kqv1.ReconcileActive {
		for _, cfg := range plan.Rejected {
			if prevReady == nil || prevReady.Reason != kqv1.ReasonOutOfBrokerBounds || prevReady.ObservedGeneration != gen {
				outOfBoundsRejections.WithLabelValues("ShareQueue", cfg).Inc()
			}
		}
	}

	setCondition(&st.Conditions, kqv1.ConditionTopicReady, topicCond, gen)
	setCondition(&st.Conditions, kqv1.ConditionGroupConfigured, groupCond, gen)
	setCondition(&st.Conditions, kqv1.ConditionConfigValid, validCond, gen)

	var ready condInput
	switch {
	case topicCond.Status != metav1.ConditionTrue:
		ready = condInput{metav1.ConditionFalse, topicCond.Reason, topicCond.Message}
	case groupCond.Reason == kqv1.ReasonShareGroupsDisabled:
		ready = condInput{metav1.ConditionFalse, groupCond.Reason, groupCond.Message}
	case validCond.Status != metav1.ConditionTrue:
		ready = condInput{metav1.ConditionFalse, validCond.Reason, validCond.Message}
	case groupCond.Status != metav1.ConditionTrue:
		ready = condInput{metav1.ConditionFalse, groupCond.Reason, groupCond.Message}
	default:
		ready = condInput{metav1.ConditionTrue, kqv1.ReasonReady, fmt.Sprintf("topic %s (%d partitions) and share group %s are configured", st.TopicName, st.Partitions, st.GroupID)}
	}
	if mode != kqv1.ReconcileActive && len(st.PlannedChanges) > 0 {
		reason := kqv1.ReasonPlanned
		if mode == kqv1.ReconcileObserveOnly {
			reason = kqv1.ReasonObserveOnly
		}
		ready = condInput{metav1.ConditionFalse, reason, fmt.Sprintf("annotation kafkaqueues.io/reconcile=%s: %d change(s) computed in status.plannedChanges, none applied", mode, len(st.PlannedChanges))}
	}
	prev := findCondition(st.Conditions, kqv1.ConditionReady)
	if ready.Status == metav1.ConditionFalse && (prev == nil || prev.Reason != ready.Reason) && ready.Reason != kqv1.ReasonPlanned && ready.Reason != kqv1.ReasonObserveOnly {
		// Every new failure reason gets one Warning event (not one per reconcile).
		r.event(sq, corev1.EventTypeWarning, ready.Reason, "Reconcile", ready.Message)
	}
	setKstatus(&st.Conditions, ready, stallingReasons[ready.Reason], gen)
}

// waiting reports a queue held back by something outside it (cluster missing or not
// connected, Kafka unavailable).
func (r *ShareQueueReconciler) waiting(sq *kqv1.ShareQueue, reason, msg string) {
	gen := sq.Generation
	if prev := findCondition(sq.Status.Conditions, kqv1.ConditionReady); prev == nil || prev.Reason != reason {
		r.event(sq, corev1.EventTypeWarning, reason, "Reconcile", msg)
	}
	in := condInput{metav1.ConditionFalse, reason, msg}
	if reason == kqv1.ReasonKafkaUnavailable {
		in.Status = metav1.ConditionUnknown
	}
	setCondition(&sq.Status.Conditions, kqv1.ConditionTopicReady, in, gen)
	// Conditions that could not be re-evaluated at this generation say so, instead of
	// repeating an older generation's verdict.
	unknown := condInput{metav1.ConditionUnknown, reason, "not evaluated: " + msg}
	for _, typ := range []string{kqv1.ConditionGroupConfigured, kqv1.ConditionConfigValid} {
		if c := findCondition(sq.Status.Conditions, typ); c != nil && c.ObservedGeneration != gen {
			setCondition(&sq.Status.Conditions, typ, unknown, gen)
		}
	}
	setKstatus(&sq.Status.Conditions, condInput{metav1.ConditionFalse, reason, msg}, false, gen)
}

// syncFinalizer adds the cleanup finalizer for deletionPolicy Delete and removes it otherwise.
func (r *ShareQueueReconciler) syncFinalizer(ctx context.Context, sq *kqv1.ShareQueue) error {
	want := sq.Spec.DeletionPolicy == kqv1.DeletionPolicyDelete
	if want == controllerutil.ContainsFinalizer(sq, CleanupFinalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(sq.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if want {
		controllerutil.AddFinalizer(sq, CleanupFinalizer)
	} else {
		controllerutil.RemoveFinalizer(sq, CleanupFinalizer)
	}
	return r.Patch(ctx, sq, patch)
}

// finalize deletes the topic and share group of a deletionPolicy Delete queue, then releases
// the finalizer. Only a topic whose id matches status.topicId is deleted: one recreated by
// someone else is left alone. When the cluster is gone or unreachable for finalizerGiveUp,
// the finalizer is released with a Warning event naming what was left behind.
func (r *ShareQueueReconciler) finalize(ctx context.Context, sq *kqv1.ShareQueue) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(sq, CleanupFinalizer) {
		return ctrl.Result{}, nil
	}
	topicName, groupID := topicNameOf(sq), groupIDOf(sq)
	release := func() (ctrl.Result, error) {
		patch := client.MergeFrom(sq.DeepCopy())
		controllerutil.RemoveFinalizer(sq, CleanupFinalizer)
		return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, sq, patch))
	}
	giveUp := func(why string) (ctrl.Result, error) {
		if wait := r.FinalizerTimeout - time.Since(sq.DeletionTimestamp.Time); wait > 0 {
			return ctrl.Result{RequeueAfter: min(wait, 15*time.Second)}, nil
		}
		r.event(sq, corev1.EventTypeWarning, "CleanupAbandoned", "Delete",
			fmt.Sprintf("%s; released the finalizer after %s, leaving topic %s and group %s in Kafka", why, r.FinalizerTimeout, topicName, groupID))
		return release()
	}
	if sq.Spec.DeletionPolicy != kqv1.DeletionPolicyDelete {
		return release()
	}
	if sq.Spec.DeletionProtection {
		original := sq.DeepCopy()
		msg := fmt.Sprintf("deletionProtection is true: topic %s and group %s are kept and this ShareQueue stays until deletionProtection is set to false (removing the finalizer %s by hand also keeps them)", topicName, groupID, CleanupFinalizer)
		setKstatus(&sq.Status.Conditions, condInput{metav1.ConditionFalse, kqv1.ReasonDeletionProtected, msg}, true, sq.Generation)
		if prev := findCondition(original.Status.Conditions, kqv1.ConditionReady); prev == nil || prev.Reason != kqv1.ReasonDeletionProtected {
			r.event(sq, corev1.EventTypeWarning, kqv1.ReasonDeletionProtected, "Delete", msg)
		}
		return ctrl.Result{}, r.patchStatus(ctx, original, sq)
	}
	var kc kqv1.KafkaCluster
	if err := r.Get(ctx, types.NamespacedName{Namespace: sq.Namespace, Name: sq.Spec.ClusterRef.Name}, &kc); err != nil {
		if apierrors.IsNotFound(err) {
			r.event(sq, corev1.EventTypeWarning, "CleanupAbandoned", "Delete",
				fmt.Sprintf("KafkaCluster %s is gone; topic %s and group %s were not deleted", sq.Spec.ClusterRef.Name, topicName, groupID))
			return release()
		}
		return ctrl.Result{}, err
	}
	kctx, cancel := context.WithTimeout(ctx, r.KafkaTimeout)
	defer cancel()
	cl, err := pooledClientFor(kctx, r.APIReader, r.Pool, &kc)
	if err != nil {
		return giveUp(fmt.Sprintf("cannot build a client for KafkaCluster %s: %v", kc.Name, err))
	}
	// Never delete what another ShareQueue on this cluster still names.
	others, err := r.claimants(ctx, sq, &kc)
	if err != nil {
		return ctrl.Result{}, err
	}
	topicShared, groupShared := "", ""
	for _, c := range others {
		who := c.queue.Namespace + "/" + c.queue.Name
		if topicNameOf(c.queue) == topicName {
			topicShared = who
		}
		if groupIDOf(c.queue) == groupID {
			groupShared = who
		}
	}
	topics, err := cl.DescribeTopics(kctx, topicName)
	if err != nil {
		return giveUp(fmt.Sprintf("cannot reach KafkaCluster %s: %v", kc.Name, err))
	}
	t := topics[topicName]
	switch {
	case topicShared != "":
		r.event(sq, corev1.EventTypeWarning, kqv1.ReasonConflict, "Delete", fmt.Sprintf("topic %s is also named by ShareQueue %s: not deleted", topicName, topicShared))
	case t.Err != nil && kafka.IsNotFound(t.Err):
	case t.Err != nil:
		return giveUp(t.Err.Error())
	case sq.Status.TopicID == "" || t.ID != sq.Status.TopicID:
		r.event(sq, corev1.EventTypeWarning, kqv1.ReasonTopicIDChanged, "Delete",
			fmt.Sprintf("topic %s has id %s, not the pinned %q: not deleting a topic this ShareQueue does not own", topicName, t.ID, sq.Status.TopicID))
	default:
		res, err := cl.DeleteTopics(kctx, topicName)
		if err == nil {
			err = res[topicName]
		}
		if err != nil {
			return giveUp(fmt.Sprintf("deleting topic %s: %v", topicName, err))
		}
		r.event(sq, corev1.EventTypeNormal, "TopicDeleted", "Delete", fmt.Sprintf("deleted topic %s (deletionPolicy Delete)", topicName))
	}
	if groupShared != "" {
		r.event(sq, corev1.EventTypeWarning, kqv1.ReasonConflict, "Delete", fmt.Sprintf("group %s is also named by ShareQueue %s: not deleted", groupID, groupShared))
		return release()
	}
	if err := r.deleteGroup(kctx, cl, groupID); err != nil {
		return giveUp(err.Error())
	}
	r.event(sq, corev1.EventTypeNormal, "GroupDeleted", "Delete", fmt.Sprintf("deleted share group %s and its configs (deletionPolicy Delete)", groupID))
	return release()
}

// deleteGroup deletes the share group and every group config override it had (the configs
// outlive a group that never had members).
func (r *ShareQueueReconciler) deleteGroup(ctx context.Context, cl *kafka.Client, groupID string) error {
	res, err := cl.DeleteShareGroups(ctx, groupID)
	if err == nil {
		err = res[groupID]
	}
	if err != nil && !kafka.IsUnsupported(err) {
		return fmt.Errorf("deleting share group %s: %w", groupID, err)
	}
	key := kafka.ResourceKey{Type: kafka.GroupResource, Name: groupID}
	cfgs, err := cl.DescribeConfigs(ctx, []kafka.ResourceKey{key})
	if err != nil {
		return err
	}
	rc := cfgs[key]
	if rc.Err != nil {
		return nil
	}
	var dels []kafka.AlterConfig
	for name, e := range rc.Configs {
		if e.IsOverride() {
			dels = append(dels, kafka.AlterConfig{Name: name, Op: kafka.OpDelete})
		}
	}
	if len(dels) == 0 {
		return nil
	}
	out, err := cl.IncrementalAlterConfigs(ctx, []kafka.Alteration{{Resource: key, Configs: dels}})
	if err == nil {
		err = out[key]
	}
	return err
}

func (r *ShareQueueReconciler) patchStatus(ctx context.Context, original, sq *kqv1.ShareQueue) error {
	return patchStatusIfChanged(ctx, r.Client, original, sq, equality.Semantic.DeepEqual(original.Status, sq.Status))
}

func (r *ShareQueueReconciler) event(obj *kqv1.ShareQueue, typ, reason, action, msg string) {
	emitEvent(r.Recorder, obj, typ, reason, action, msg)
}

// SetupWithManager registers the controller, the clusterRef index and the KafkaCluster watch
// (a cluster's status change — share.version, bounds, connection — re-plans its queues).
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
		topicNameIndex:  topicNameOf,
		groupIDIndex:    groupIDOf,
	}
	for name, fn := range indexes {
		if err := mgr.GetFieldIndexer().IndexField(context.Background(), &kqv1.ShareQueue{}, name, func(o client.Object) []string {
			return []string{fn(o.(*kqv1.ShareQueue))}
		}); err != nil {
			return err
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&kqv1.ShareQueue{}, builderWithGenerationOrAnnotationChange()).
		Watches(&kqv1.KafkaCluster{}, handler.EnqueueRequestsFromMapFunc(r.queuesOfCluster)).
		Watches(&kqv1.DeadLetterRoute{}, handler.EnqueueRequestsFromMapFunc(queueOfRoute)).
		Watches(&kqv1.ShareQueue{}, handler.EnqueueRequestsFromMapFunc(r.sharersOf), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false }, GenericFunc: func(event.GenericEvent) bool { return false },
			DeleteFunc: func(event.DeleteEvent) bool { return true }, UpdateFunc: deletedOrFinalizing(),
		})).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: r.Concurrency,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, 2*time.Minute),
		}).
		Named("sharequeue").
		Complete(r)
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
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{clusterRefIndex: o.GetName()}); err != nil {
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
