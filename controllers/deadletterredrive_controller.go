package controllers

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// redriveRecords counts the dead letters this manager process handled in committed redrive
// transactions, by result: moved, filtered, refused.
var redriveRecords = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "kafkaqueues_redrive_records_total",
	Help: "Dead letters read by DeadLetterRedrives in committed transactions of this manager process, by namespace, route and result (moved, filtered, refused).",
}, []string{"namespace", "route", "result"})

func init() { metrics.Registry.MustRegister(redriveRecords) }

// DeadLetterRedriveReconciler reconciles DeadLetterRedrive objects: it records the bound
// (the dead-letter topic's offsets when the redrive starts) and runs one mover per active
// redrive in this manager (kafka.Client.Redrive), which writes progress to status at most
// every ProgressInterval. Runs only on the elected leader.
type DeadLetterRedriveReconciler struct {
	client.Client
	APIReader client.Reader
	Pool      *kafka.Pool
	Recorder  events.EventRecorder
	// KafkaTimeout bounds the reconcile's own Kafka requests (listing offsets).
	KafkaTimeout time.Duration
	// ProgressInterval is the least time between two progress writes of one redrive to the
	// apiserver; default 5s.
	ProgressInterval time.Duration

	runners *redriveRunners
}

// +kubebuilder:rbac:groups=kafkaqueues.io,resources=deadletterredrives,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kafkaqueues.io,resources=deadletterredrives/status,verbs=get;update;patch

// Reconcile observes the redrive, its route, queue and cluster, plans (planRedrive) and acts.
func (r *DeadLetterRedriveReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if !r.runners.started() {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	var dr kqv1.DeadLetterRedrive
	if err := r.Get(ctx, req.NamespacedName, &dr); err != nil {
		if apierrors.IsNotFound(err) {
			r.runners.stop(req.NamespacedName, true)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if dr.DeletionTimestamp != nil {
		r.runners.stop(req.NamespacedName, true)
		return ctrl.Result{}, nil
	}
	obs := redriveObservation{Running: r.runners.running(req.NamespacedName, dr.UID)}
	var route kqv1.DeadLetterRoute
	var sq kqv1.ShareQueue
	var kc kqv1.KafkaCluster
	if err := r.Get(ctx, types.NamespacedName{Namespace: dr.Namespace, Name: dr.Spec.RouteRef.Name}, &route); err == nil {
		obs.RouteFound = true
		obs.SourceTopic = route.Status.TopicName
		obs.RouteReady = findCondition(route.Status.Conditions, kqv1.ConditionReady)
		queue := route.Status.QueueName
		if queue == "" {
			queue = route.Spec.QueueRef.Name
		}
		if err := r.Get(ctx, types.NamespacedName{Namespace: dr.Namespace, Name: queue}, &sq); err == nil {
			obs.QueueFound = true
			obs.TargetTopic = sq.KafkaTopicName()
			obs.Cluster = sq.Spec.ClusterRef.Name
			if err := r.Get(ctx, types.NamespacedName{Namespace: sq.Namespace, Name: obs.Cluster}, &kc); err == nil {
				obs.ClusterFound = true
			} else if !apierrors.IsNotFound(err) {
				return ctrl.Result{}, err
			}
		} else if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
	} else if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	var others kqv1.DeadLetterRedriveList
	if !dr.Status.Phase.Terminal() && dr.Status.Phase != kqv1.RedriveRunning {
		if err := r.List(ctx, &others, client.InNamespace(dr.Namespace)); err != nil {
			return ctrl.Result{}, err
		}
		obs.Blocker = redriveBlocker(&dr, others.Items)
	}

	plan := planRedrive(&dr, obs)
	switch plan.Action {
	case redriveNothing:
		return ctrl.Result{}, nil
	case redriveStop:
		r.runners.stop(req.NamespacedName, false)
		return ctrl.Result{}, nil
	case redriveCancelNow:
		return ctrl.Result{}, r.finish(ctx, &dr, kqv1.RedriveCancelled, kqv1.ConditionCancelled, kqv1.ReasonRedriveCancelled,
			fmt.Sprintf("spec.cancel is true: stopped with %d of %d records moved", dr.Status.Moved, dr.Status.Total), nil)
	case redriveWait:
		orig := dr.DeepCopy()
		dr.Status.Phase = kqv1.RedrivePending
		dr.Status.ObservedGeneration = dr.Generation
		setCondition(&dr.Status.Conditions, kqv1.ConditionComplete, condInput{metav1.ConditionFalse, plan.Reason, plan.Message}, dr.Generation)
		if equality.Semantic.DeepEqual(orig.Status, dr.Status) {
			return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
		}
		return ctrl.Result{RequeueAfter: 5 * time.Second}, r.Status().Patch(ctx, &dr, client.MergeFrom(orig))
	case redriveFail:
		return ctrl.Result{}, r.finish(ctx, &dr, kqv1.RedriveFailed, kqv1.ConditionFailed, plan.Reason, plan.Message, nil)
	}

	// Start or resume: both need the cluster's client.
	kctx, cancel := context.WithTimeout(ctx, r.KafkaTimeout)
	defer cancel()
	cl, err := pooledClientFor(kctx, r.APIReader, r.Pool, &kc)
	if err != nil {
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	if plan.Action == redriveStart {
		bounds, err := cl.RedriveBounds(kctx, obs.SourceTopic)
		if err != nil {
			err = withAuthError(cl, err)
			if kafka.IsUnknownTopic(err) {
				orig := dr.DeepCopy()
				dr.Status.Phase = kqv1.RedrivePending
				setCondition(&dr.Status.Conditions, kqv1.ConditionComplete, condInput{metav1.ConditionFalse, kqv1.ReasonTopicNotFound,
					fmt.Sprintf("dead-letter topic %s of DeadLetterRoute %s does not exist", obs.SourceTopic, route.Name)}, dr.Generation)
				return ctrl.Result{RequeueAfter: 10 * time.Second}, r.Status().Patch(ctx, &dr, client.MergeFrom(orig))
			}
			return ctrl.Result{}, fmt.Errorf("listing offsets of %s: %w", obs.SourceTopic, err)
		}
		bounds = redriveStartOffsets(&dr, obs.SourceTopic, bounds, others.Items)
		orig := dr.DeepCopy()
		dr.Status.Bound = nil
		for _, b := range bounds {
			dr.Status.Bound = append(dr.Status.Bound, kqv1.PartitionBound{Partition: b.Partition, StartOffset: b.Start, EndOffset: b.End})
		}
		now := metav1.Now()
		dr.Status.Phase = kqv1.RedriveRunning
		dr.Status.ObservedGeneration = dr.Generation
		dr.Status.SourceTopic, dr.Status.TargetTopic = obs.SourceTopic, obs.TargetTopic
		dr.Status.Total = redriveBoundTotal(dr.Status.Bound)
		dr.Status.StartTime = &now
		setCondition(&dr.Status.Conditions, kqv1.ConditionComplete, condInput{metav1.ConditionFalse, kqv1.ReasonRedriveRunning,
			fmt.Sprintf("moving up to %d records from %s to %s", dr.Status.Total, obs.SourceTopic, obs.TargetTopic)}, dr.Generation)
		// The bound is written before anything moves: a restart resumes within it.
		if err := r.Status().Patch(ctx, &dr, client.MergeFrom(orig)); err != nil {
			return ctrl.Result{}, err
		}
		emitEvent(r.Recorder, &dr, corev1.EventTypeNormal, kqv1.ReasonRedriveStarted, "Redrive",
			fmt.Sprintf("moving up to %d records from %s to %s", dr.Status.Total, obs.SourceTopic, obs.TargetTopic))
	}
	r.runners.start(req.NamespacedName, dr.UID, func(ctx context.Context, run *redriveRun) {
		r.run(ctx, run, dr.DeepCopy(), cl)
	})
	return ctrl.Result{}, nil
}

// run moves the records of one redrive until it is done, cancelled, deleted or the manager
// stops, retrying failed transactions from the committed position.
func (r *DeadLetterRedriveReconciler) run(ctx context.Context, run *redriveRun, dr *kqv1.DeadLetterRedrive, cl *kafka.Client) {
	logger := log.FromContext(ctx).WithValues("deadletterredrive", client.ObjectKeyFromObject(dr))
	stop := &run.stop
	defer func() {
		if run.abandoned.Load() {
			// The object is gone: nothing will read its position again. Its group is deleted
			// now that Redrive returned (its client left the group); the manager's own
			// context may be ending, so the deletion gets its own.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.KafkaTimeout)
			defer cancel()
			r.forget(fctx, cl, dr)
		}
	}()
	if dr.Spec.Cancel {
		stop.Store(true)
	}
	var bound []kafka.RedriveBound
	for _, b := range dr.Status.Bound {
		bound = append(bound, kafka.RedriveBound{Partition: b.Partition, Start: b.StartOffset, End: b.EndOffset})
	}
	rate := 0
	if dr.Spec.RateLimit != nil {
		rate = int(*dr.Spec.RateLimit)
	}
	var last time.Time
	var counted *kafka.RedriveProgress // what this process counted so far in this call of Redrive
	progress := func(p kafka.RedriveProgress, perSecond float64) {
		if counted != nil {
			ns, route := dr.Namespace, dr.Spec.RouteRef.Name
			redriveRecords.WithLabelValues(ns, route, "moved").Add(float64(p.Moved - counted.Moved))
			redriveRecords.WithLabelValues(ns, route, "filtered").Add(float64(p.Filtered - counted.Filtered))
			redriveRecords.WithLabelValues(ns, route, "refused").Add(float64(p.Refused - counted.Refused))
		}
		// The first call reports the committed prefix (possibly another process's work).
		counted = &p
		if time.Since(last) < r.ProgressInterval {
			return
		}
		last = time.Now()
		if err := r.patchProgress(ctx, dr, p, perSecond, nil); err != nil && ctx.Err() == nil {
			logger.Error(err, "writing redrive progress")
		}
	}
	opts := kafka.RedriveOptions{
		ID: redriveID(dr), Source: dr.Status.SourceTopic, Target: dr.Status.TargetTopic, Bound: bound,
		RateLimit: rate, Decide: redriveDecider(dr.Spec), Rewrite: redriveRewriter(dr.Namespace, dr.Name, dr.Spec),
		Progress: progress, Stop: stop.Load,
	}
	backoff := time.Second
	for {
		counted = nil
		p, err := cl.Redrive(ctx, opts)
		if ctx.Err() != nil {
			return // deleted, leadership lost or shutdown: the next leader resumes
		}
		switch {
		case err == nil && p.Done:
			if r.complete(ctx, dr, p) == nil {
				r.forget(ctx, cl, dr)
			}
			return
		case err == nil: // stopped by spec.cancel
			cancelled := kqv1.RedriveCancelled
			if r.patchProgress(ctx, dr, p, 0, &cancelled) == nil {
				r.forget(ctx, cl, dr)
			}
			return
		case kafka.IsFenced(err):
			// Another manager (a new leader) runs this redrive now and fenced this one.
			logger.Info("redrive taken over by another process with the same transactional id; stopping", "error", err.Error())
			return
		case kafka.IsFatalRedrive(err):
			dr.Status.Moved, dr.Status.Filtered, dr.Status.Refused = p.Moved, p.Filtered, p.Refused
			if r.finish(ctx, dr, kqv1.RedriveFailed, kqv1.ConditionFailed, kqv1.ReasonRedriveFailed, withAuthError(cl, err).Error(), &p) == nil {
				r.forget(ctx, cl, dr) // Failed is terminal: its position is never read again
			}
			return
		}
		logger.Error(err, "redrive interrupted; resuming from the committed position", "retryIn", backoff)
		emitEvent(r.Recorder, dr, corev1.EventTypeWarning, kqv1.ReasonKafkaUnavailable, "Redrive", fmt.Sprintf("retrying in %s: %v", backoff, err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Minute)
	}
}

// forget deletes the consumer group holding a finished redrive's position, once its terminal
// status is written (deleting it earlier would let a restart move the records again).
func (r *DeadLetterRedriveReconciler) forget(ctx context.Context, cl *kafka.Client, dr *kqv1.DeadLetterRedrive) {
	kctx, cancel := context.WithTimeout(ctx, r.KafkaTimeout)
	defer cancel()
	if err := cl.DeleteRedriveGroup(kctx, redriveID(dr)); err != nil {
		log.FromContext(ctx).Error(err, "deleting the redrive's consumer group", "group", redriveID(dr))
	}
}

// patchProgress writes the counts (and, with phase, the terminal phase) to status.
func (r *DeadLetterRedriveReconciler) patchProgress(ctx context.Context, dr *kqv1.DeadLetterRedrive, p kafka.RedriveProgress, perSecond float64, phase *kqv1.DeadLetterRedrivePhase) error {
	if phase != nil {
		dr.Status.Moved, dr.Status.Filtered, dr.Status.Refused = p.Moved, p.Filtered, p.Refused
		return r.finish(ctx, dr, *phase, kqv1.ConditionCancelled, kqv1.ReasonRedriveCancelled,
			fmt.Sprintf("spec.cancel is true: stopped at a transaction boundary with %d of %d records moved", p.Moved, dr.Status.Total), &p)
	}
	var cur kqv1.DeadLetterRedrive
	if err := r.Get(ctx, client.ObjectKeyFromObject(dr), &cur); err != nil {
		return err
	}
	orig := cur.DeepCopy()
	cur.Status.Moved, cur.Status.Filtered, cur.Status.Refused = p.Moved, p.Filtered, p.Refused
	cur.Status.RecordsPerSecond = int64(perSecond)
	setCondition(&cur.Status.Conditions, kqv1.ConditionComplete, condInput{metav1.ConditionFalse, kqv1.ReasonRedriveRunning,
		fmt.Sprintf("%d of %d records read: %d moved, %d filtered, %d refused", p.Read, cur.Status.Total, p.Moved, p.Filtered, p.Refused)}, cur.Generation)
	return r.Status().Patch(ctx, &cur, client.MergeFrom(orig))
}

// complete marks the redrive Complete, with total corrected to the records actually read, and
// says whether records were refused (condition RecordsRefused and a Warning Event).
func (r *DeadLetterRedriveReconciler) complete(ctx context.Context, dr *kqv1.DeadLetterRedrive, p kafka.RedriveProgress) error {
	msg := fmt.Sprintf("%d records moved from %s to %s; %d filtered, %d refused", p.Moved, dr.Status.SourceTopic, dr.Status.TargetTopic, p.Filtered, p.Refused)
	err := r.finish(ctx, dr, kqv1.RedriveComplete, kqv1.ConditionComplete, kqv1.ReasonRedriveComplete, msg, &p)
	if p.Refused > 0 {
		emitEvent(r.Recorder, dr, corev1.EventTypeWarning, kqv1.ReasonRedriveLimitReached, "Redrive", refusedMessage(dr, p.Refused))
	}
	emitEvent(r.Recorder, dr, corev1.EventTypeNormal, kqv1.ReasonRedriveComplete, "Redrive", msg)
	return err
}

func refusedMessage(dr *kqv1.DeadLetterRedrive, n int64) string {
	max := int32(defaultMaxRedrives)
	if dr.Spec.MaxRedrives != nil {
		max = *dr.Spec.MaxRedrives
	}
	return fmt.Sprintf("%d records were not moved: their %s header had reached spec.maxRedrives=%d; they stay in %s", n, kqv1.HeaderRedriveCount, max, dr.Status.SourceTopic)
}

// finish writes a terminal phase with its condition set True, completionTime, and, with p,
// the final counts. The runner of the redrive, if any, is left to return on its own.
func (r *DeadLetterRedriveReconciler) finish(ctx context.Context, dr *kqv1.DeadLetterRedrive, phase kqv1.DeadLetterRedrivePhase, condType, reason, msg string, p *kafka.RedriveProgress) error {
	var cur kqv1.DeadLetterRedrive
	if err := r.Get(ctx, client.ObjectKeyFromObject(dr), &cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	orig := cur.DeepCopy()
	if p != nil {
		cur.Status.Moved, cur.Status.Filtered, cur.Status.Refused = p.Moved, p.Filtered, p.Refused
		for i := range cur.Status.Bound {
			if next, ok := p.Positions[cur.Status.Bound[i].Partition]; ok {
				cur.Status.Bound[i].NextOffset = &next
			}
		}
		if phase == kqv1.RedriveComplete {
			cur.Status.Total = p.Read
		}
	}
	now := metav1.Now()
	cur.Status.Phase = phase
	cur.Status.CompletionTime = &now
	if st := cur.Status.StartTime; st != nil && now.Sub(st.Time) > 0 {
		// The final rate is the whole redrive's average, across manager restarts.
		cur.Status.RecordsPerSecond = int64(float64(cur.Status.Moved) / now.Sub(st.Time).Seconds())
	}
	cur.Status.ObservedGeneration = cur.Generation
	setCondition(&cur.Status.Conditions, condType, condInput{metav1.ConditionTrue, reason, msg}, cur.Generation)
	if condType != kqv1.ConditionComplete {
		setCondition(&cur.Status.Conditions, kqv1.ConditionComplete, condInput{metav1.ConditionFalse, reason, msg}, cur.Generation)
	}
	if cur.Status.Refused > 0 {
		setCondition(&cur.Status.Conditions, kqv1.ConditionRecordsRefused, condInput{metav1.ConditionTrue, kqv1.ReasonRedriveLimitReached, refusedMessage(&cur, cur.Status.Refused)}, cur.Generation)
	} else {
		setCondition(&cur.Status.Conditions, kqv1.ConditionRecordsRefused, condInput{metav1.ConditionFalse, kqv1.ReasonNoRecordsRefused, "no record had reached spec.maxRedrives"}, cur.Generation)
	}
	if err := r.Status().Patch(ctx, &cur, client.MergeFrom(orig)); err != nil {
		return err
	}
	if phase == kqv1.RedriveCancelled {
		emitEvent(r.Recorder, &cur, corev1.EventTypeNormal, kqv1.ReasonRedriveCancelled, "Redrive", msg)
	}
	if phase == kqv1.RedriveFailed {
		emitEvent(r.Recorder, &cur, corev1.EventTypeWarning, kqv1.ReasonRedriveFailed, "Redrive", msg)
	}
	return nil
}

// SetupWithManager registers the controller and the runnable that owns the movers (started
// on the elected leader; its context ends with leadership or shutdown).
func (r *DeadLetterRedriveReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.KafkaTimeout == 0 {
		r.KafkaTimeout = 30 * time.Second
	}
	if r.ProgressInterval <= 0 {
		r.ProgressInterval = 5 * time.Second
	}
	r.runners = &redriveRunners{ready: make(chan struct{}), m: map[types.NamespacedName]*redriveRun{}}
	if err := mgr.Add(r.runners); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&kqv1.DeadLetterRedrive{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Named("deadletterredrive").
		Complete(r)
}

// redriveRunners owns the goroutines moving records, one per active redrive; it is a
// manager Runnable that needs leader election, so movers run only on the leader and stop
// with its context.
type redriveRunners struct {
	mu    sync.Mutex
	ctx   context.Context
	ready chan struct{}
	m     map[types.NamespacedName]*redriveRun
	wg    sync.WaitGroup
}

type redriveRun struct {
	uid    types.UID
	cancel context.CancelFunc
	stop   atomic.Bool
	// abandoned: the object was deleted; the run deletes its consumer group on return.
	abandoned atomic.Bool
	done      chan struct{}
}

func (rs *redriveRunners) NeedLeaderElection() bool { return true }

func (rs *redriveRunners) Start(ctx context.Context) error {
	rs.mu.Lock()
	rs.ctx = ctx
	close(rs.ready)
	rs.mu.Unlock()
	<-ctx.Done()
	rs.wg.Wait()
	return nil
}

func (rs *redriveRunners) started() bool {
	select {
	case <-rs.ready:
		return true
	default:
		return false
	}
}

func (rs *redriveRunners) running(key types.NamespacedName, uid types.UID) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	run, ok := rs.m[key]
	if !ok {
		return false
	}
	select {
	case <-run.done:
		delete(rs.m, key)
		return false
	default:
	}
	return run.uid == uid
}

// start runs fn for key unless a run of the same object is active; a run of an older object
// of the same name is cancelled first.
func (rs *redriveRunners) start(key types.NamespacedName, uid types.UID, fn func(context.Context, *redriveRun)) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if old, ok := rs.m[key]; ok {
		select {
		case <-old.done:
		default:
			if old.uid == uid {
				return
			}
			old.abandoned.Store(true) // a new object of the same name: the old one is gone
			old.cancel()
		}
	}
	ctx, cancel := context.WithCancel(rs.ctx)
	run := &redriveRun{uid: uid, cancel: cancel, done: make(chan struct{})}
	rs.m[key] = run
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		defer close(run.done)
		defer cancel()
		fn(ctx, run)
	}()
}

// stop asks the run of key to stop at its next transaction boundary, or, with abandon (the
// object is gone), cancels it at once.
func (rs *redriveRunners) stop(key types.NamespacedName, abandon bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	run, ok := rs.m[key]
	if !ok {
		return
	}
	run.stop.Store(true)
	if abandon {
		run.abandoned.Store(true)
		run.cancel()
		delete(rs.m, key)
	}
}
