package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// The reconcile skeleton shared by KafkaCluster, ShareQueue and DeadLetterRoute (cluster-api's
// scope and deferred patch, Flux's typed outcomes and summarize step):
//
//	s := newScope(obj, conds, statusEqual)          // snapshot of the object as read
//	defer func() { res, err = s.summarize(ctx, c, recorder, onWait, err) }()
//	return s.run(ctx, steps...)                      // each step a named method
//
// A step returns nil (go on), errDone (stop: nothing more to do this pass), a waiting or
// stalled outcome (stop, and report it), or any other error (stop, report nothing, retry
// with backoff). The last step of a full pass is the kind's status step (a pure function of
// what was observed and applied) which sets the Ready verdict on the scope. summarize then,
// once per reconcile: sets Ready/Reconciling/Stalled together, records a Warning event when
// Ready's reason changes to a new failure, patches status when it changed, and picks the
// requeue.

// errDone ends a reconcile's step list early with nothing left to do (paused, finalized, or
// an outcome already set on the scope).
var errDone = errors.New("done")

// waitError is a "waiting" outcome: the object waits on something outside it (its cluster
// missing or not connected, Kafka unavailable, another resource's change). Ready becomes
// False (or what the kind's onWait decides); Reconciling is True, Stalled False.
type waitError struct {
	Reason, Message string
	// After is when to look again; 0 leaves it to a watch (or to Cause's backoff).
	After time.Duration
	// Cause, when set, is returned to controller-runtime after status is written, so the
	// retry backs off exponentially.
	Cause error
}

func (e *waitError) Error() string { return e.Reason + ": " + e.Message }

// waiting is a waitError without requeue or cause.
func waiting(reason, msg string) *waitError { return &waitError{Reason: reason, Message: msg} }

// stallError is a "stalled" outcome: the user must change the spec or the cluster. Ready is
// False, Stalled True, Reconciling False.
type stallError struct {
	Reason, Message string
	// After, when set, re-checks anyway (a Secret may appear without an event we watch).
	After time.Duration
}

func (e *stallError) Error() string { return e.Reason + ": " + e.Message }

// stepPatchStatus is the step label of summarize's status patch in reconcileStepSeconds.
const stepPatchStatus = "patch status"

// reconcileStepSeconds times each named step of a reconcile and summarize's status patch
// (issue 18: a reconcile took 3.4 s at 10,000 queues while its Kafka calls took at most
// 0.31 s). Labels are bounded: three kinds, about a dozen steps each.
var reconcileStepSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Name:    "kafkaqueues_reconcile_step_duration_seconds",
	Help:    "Time spent in each named step of a ShareQueue, DeadLetterRoute or KafkaCluster reconcile; step \"patch status\" is the status write that ends it (a write inside a step, such as the creation intent, counts in that step).",
	Buckets: prometheus.ExponentialBuckets(0.001, 4, 8), // 1 ms … 16 s
}, []string{"kind", "step"})

func init() { metrics.Registry.MustRegister(reconcileStepSeconds) }

// kindOf is the kind label of a reconciled object.
func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *kqv1.ShareQueue:
		return "ShareQueue"
	case *kqv1.DeadLetterRoute:
		return "DeadLetterRoute"
	case *kqv1.KafkaCluster:
		return "KafkaCluster"
	}
	return fmt.Sprintf("%T", obj)
}

// step is one named part of a reconcile.
type step struct {
	name string
	run  func(context.Context) error
}

// scope is one reconcile of one object: the object (its status is built in place), the
// snapshot its status patch is computed against, and the outcome summarize reports.
type scope struct {
	// kind labels the step timings (reconcileStepSeconds).
	kind     string
	obj      client.Object
	original client.Object
	conds    *[]metav1.Condition
	gen      int64
	// statusEqual compares two objects' statuses (equality.Semantic on the kind's Status).
	statusEqual func(a, b client.Object) bool

	// ready is the Ready verdict the status step set; nil leaves Ready, Reconciling and
	// Stalled as they are (a paused object sets only Reconciling).
	ready   *condInput
	stalled bool
	// requeueAfter is the timed requeue of a successful pass (0: none).
	requeueAfter time.Duration
	// resync marks requeueAfter as the periodic re-check of an object that needs nothing
	// (resyncAfter): it is queued at handler.LowPriority, so every create, edit and deletion
	// waiting in the workqueue is reconciled before it. At 10,000 queues a short resync
	// interval otherwise keeps every worker busy re-checking Ready queues while new ones wait
	// (issue 18: a 30 s resync cost new queues a 20 s mean wait in the workqueue).
	resync bool
	// err is a transient failure found after status was decided (a retriable Kafka error
	// while applying): status is written, then it is returned so the retry backs off.
	err error
	// warned are the Warning reasons already recorded in this reconcile (by an action), so
	// summarize does not record the same reason twice.
	warned map[string]bool
}

func newScope(obj client.Object, conds *[]metav1.Condition, statusEqual func(a, b client.Object) bool) *scope {
	s := &scope{kind: kindOf(obj), obj: obj, conds: conds, gen: obj.GetGeneration(), statusEqual: statusEqual, warned: map[string]bool{}}
	s.snapshot()
	return s
}

// snapshot makes the object as it is now the base of the status patch (after a write that
// returned the object from the server: the finalizer, the creation-intent record).
func (s *scope) snapshot() { s.original = s.obj.DeepCopyObject().(client.Object) }

// setReady records the Ready verdict for summarize.
func (s *scope) setReady(ready condInput, stalled bool) {
	s.ready, s.stalled = &ready, stalled
}

// run runs the steps in order until one stops.
func (s *scope) run(ctx context.Context, steps ...step) error {
	for _, st := range steps {
		start := time.Now()
		err := st.run(ctx)
		reconcileStepSeconds.WithLabelValues(s.kind, st.name).Observe(time.Since(start).Seconds())
		if err != nil {
			if errors.Is(err, errDone) {
				return nil
			}
			var w *waitError
			var sl *stallError
			if errors.As(err, &w) || errors.As(err, &sl) {
				return err
			}
			return fmt.Errorf("%s: %w", st.name, err)
		}
	}
	return nil
}

// quietReasons are Ready reasons that are not failures: no Warning event.
var quietReasons = map[string]bool{
	kqv1.ReasonPlanned: true, kqv1.ReasonObserveOnly: true, kqv1.ReasonProgressing: true,
	kqv1.ReasonShareStateReassigning: true, kqv1.ReasonPaused: true,
}

// summarize is the one deferred step of every reconcile. err is what the steps returned;
// onWait sets the kind's own conditions for a waiting outcome and returns its Ready.
func (s *scope) summarize(ctx context.Context, c client.Client, rec events.EventRecorder, onWait func(*waitError) condInput, err error) (ctrl.Result, error) {
	var w *waitError
	var sl *stallError
	switch {
	case errors.As(err, &w):
		s.setReady(onWait(w), false)
		s.requeueAfter, err = w.After, w.Cause
	case errors.As(err, &sl):
		s.setReady(condInput{metav1.ConditionFalse, sl.Reason, sl.Message}, true)
		s.requeueAfter, err = sl.After, nil
	case err != nil:
		// A failure before anything could be decided (an apiserver read): nothing is
		// reported, the retry backs off.
		return ctrl.Result{}, err
	}
	if r := s.ready; r != nil {
		prev := findCondition(*s.conds, kqv1.ConditionReady)
		if r.Status != metav1.ConditionTrue && (prev == nil || prev.Reason != r.Reason) && !quietReasons[r.Reason] && !s.warned[r.Reason] {
			// Every new failure reason gets one Warning event (not one per reconcile).
			emitEvent(rec, s.obj, corev1.EventTypeWarning, r.Reason, "Reconcile", r.Message)
		}
		setKstatus(s.conds, *r, s.stalled, s.gen)
	}
	var perr error
	if !s.statusEqual(s.original, s.obj) {
		start := time.Now()
		perr = client.IgnoreNotFound(c.Status().Patch(ctx, s.obj, client.MergeFrom(s.original)))
		reconcileStepSeconds.WithLabelValues(s.kind, stepPatchStatus).Observe(time.Since(start).Seconds())
	}
	if err := errors.Join(err, s.err, perr); err != nil {
		return ctrl.Result{}, err
	}
	res := ctrl.Result{RequeueAfter: s.requeueAfter}
	if s.resync && s.requeueAfter > 0 {
		res.Priority = ptr.To(handler.LowPriority)
	}
	return res, nil
}

// resyncAfter schedules the periodic re-check of an object with nothing left to do, at low
// priority (scope.resync).
func (s *scope) resyncAfter(d time.Duration) {
	s.requeueAfter, s.resync = d, true
}

// warn records a Warning event for an action's failure and remembers its reason, so the
// summary does not repeat it.
func (s *scope) warn(rec events.EventRecorder, reason, action, msg string) {
	s.warned[reason] = true
	emitEvent(rec, s.obj, corev1.EventTypeWarning, reason, action, msg)
}

// pausedStatus reports an object whose kafkaqueues.io/reconcile annotation is Paused or not a
// known mode (or, for a route, whose queue's is): nothing is read or written, Reconciling and
// Stalled say why, Ready is removed (heldBack), and every other condition about Kafka
// (TopicReady, GroupConfigured, RouteActive, Connected, ...) becomes Unknown, "not observed":
// nothing is read, so no earlier claim stands. Conflict, an ownership verdict among
// Kubernetes objects, is kept. Pure.
func pausedStatus(conds *[]metav1.Condition, mode, annotation string, gen int64) {
	in := condInput{metav1.ConditionFalse, kqv1.ReasonPaused, "annotation kafkaqueues.io/reconcile=Paused: nothing is read or written"}
	if mode == reconcileInvalid {
		in = condInput{metav1.ConditionFalse, kqv1.ReasonInvalidReconcileMode, fmt.Sprintf("annotation kafkaqueues.io/reconcile=%q is not one of Active, Paused, ObserveOnly, Plan; nothing is read or written until it is fixed", annotation)}
	}
	heldBackUnobserved(conds, in, gen)
}

// heldBackUnobserved is heldBack for a reconcile that reads nothing (pausedStatus, or a route
// of a paused queue, whose in names the queue).
func heldBackUnobserved(conds *[]metav1.Condition, in condInput, gen int64) {
	heldBack(conds, in, gen)
	// No earlier verdict about Kafka stands while nothing is read.
	for _, c := range *conds {
		switch c.Type {
		case kqv1.ConditionReconciling, kqv1.ConditionStalled, kqv1.ConditionConflict:
		default:
			if c.Status != metav1.ConditionUnknown || c.Reason != in.Reason {
				setCondition(conds, c.Type, condInput{metav1.ConditionUnknown, in.Reason, "not observed: " + in.Message}, gen)
			}
		}
	}
}

// markNotEvaluated sets each of types to Unknown when it was last evaluated at another
// generation, so a condition never repeats an older generation's verdict. Pure.
func markNotEvaluated(conds *[]metav1.Condition, gen int64, reason, msg string, types ...string) {
	unknown := condInput{metav1.ConditionUnknown, reason, "not evaluated: " + msg}
	for _, typ := range types {
		if c := findCondition(*conds, typ); c != nil && c.ObservedGeneration != gen {
			setCondition(conds, typ, unknown, gen)
		}
	}
}

// waitBeforeAbandoning is a finalizer's patience with an unreachable cluster: while
// timeout has not passed since the object's deletion it schedules another look (at most 15s
// away) and reports true; after that it reports false and the caller releases the finalizer,
// saying what it left behind.
func (s *scope) waitBeforeAbandoning(timeout time.Duration) bool {
	wait := timeout - time.Since(s.obj.GetDeletionTimestamp().Time)
	if wait <= 0 {
		return false
	}
	s.requeueAfter = min(wait, 15*time.Second)
	return true
}

// removeFinalizer removes finalizer from obj (a NotFound object has nothing left to remove)
// and ends the reconcile: errDone on success.
func removeFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) error {
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	controllerutil.RemoveFinalizer(obj, finalizer)
	if err := client.IgnoreNotFound(c.Patch(ctx, obj, patch)); err != nil {
		return err
	}
	return errDone
}
