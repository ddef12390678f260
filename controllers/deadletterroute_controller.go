package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	"sigs.k8s.io/controller-runtime/pkg/source"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// RouteFinalizer lets a DeadLetterRoute remove the broker-native dead-letter group configs it
// set before it goes away. The dead-letter topic is always kept: it holds the dead records.
const RouteFinalizer = "kafkaqueues.io/dead-letter-cleanup"

// routeQueueIndex indexes DeadLetterRoutes by spec.queueRef.name.
const routeQueueIndex = "spec.queueRef.name"

// routeTopicIndex indexes DeadLetterRoutes by the dead-letter topic they act on.
const routeTopicIndex = "status.topicName"

// DeadLetterRouteReconciler reconciles DeadLetterRoute objects: the dead-letter topic, the
// mode (BrokerNative or Republisher) and, in BrokerNative mode, the group's KIP-1191 configs.
type DeadLetterRouteReconciler struct {
	client.Client
	APIReader client.Reader
	Pool      *kafka.Pool
	Recorder  events.EventRecorder
	// ResyncInterval is how often a route is re-checked against Kafka.
	ResyncInterval time.Duration
	KafkaTimeout   time.Duration
	// FinalizerTimeout bounds how long deletion waits for an unreachable cluster.
	FinalizerTimeout time.Duration
	// topicGone carries the routes whose dead-letter topic topicWatch found deleted; nil: no
	// watch.
	topicGone <-chan event.GenericEvent
	// gate is the per-KafkaCluster shared backoff (kafka_gate.go); gateWake carries the
	// routes it wakes. nil: each route backs off on its own.
	gate     *kafkaGate
	gateWake <-chan event.GenericEvent
}

// +kubebuilder:rbac:groups=kafkaqueues.io,resources=deadletterroutes,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kafkaqueues.io,resources=deadletterroutes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kafkaqueues.io,resources=deadletterroutes/finalizers,verbs=update

// routeScope is one DeadLetterRoute reconcile: what its steps read, planned and applied.
type routeScope struct {
	*scope
	r    *DeadLetterRouteReconciler
	dlr  *kqv1.DeadLetterRoute
	mode string // the stricter of the route's and its queue's reconcile modes

	sq        kqv1.ShareQueue
	kc        kqv1.KafkaCluster
	kctx      context.Context
	cancel    context.CancelFunc
	cl        *kafka.Client
	obs       routeObservation
	plan      routePlan
	topicName string
	topicErr  error // non-retriable item error on the topic
	groupErr  error // non-retriable item error on the group configs
}

// gateWaiter names this route to the cluster's gate.
func (d *routeScope) gateWaiter() gateWaiter {
	return gateWaiter{Kind: gateRoute, NamespacedName: types.NamespacedName{Namespace: d.dlr.Namespace, Name: d.dlr.Name}}
}

// Reconcile brings one DeadLetterRoute's topic and group configs in line with its spec. It
// reads as its steps; the deferred summarize writes status once and picks the requeue.
func (r *DeadLetterRouteReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	var dlr kqv1.DeadLetterRoute
	if err := r.Get(ctx, req.NamespacedName, &dlr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	d := &routeScope{r: r, dlr: &dlr, mode: reconcileMode(dlr.Annotations), cancel: func() {}}
	d.scope = newScope(&dlr, &dlr.Status.Conditions, func(a, b client.Object) bool {
		return equality.Semantic.DeepEqual(a.(*kqv1.DeadLetterRoute).Status, b.(*kqv1.DeadLetterRoute).Status)
	})
	defer func() { d.cancel() }()
	defer func() {
		err = gateOutcome(r.gate, &d.kc, d.gateWaiter(), err, r.ResyncInterval, "")
		res, err = d.summarize(ctx, r.Client, r.Recorder, d.waited, err)
	}()
	return ctrl.Result{}, d.run(ctx,
		step{"paused", d.paused},
		step{"finalize", d.finalize},
		step{"finalizer", d.addFinalizer},
		step{"ownership", d.checkOwnership},
		step{"queue", d.readQueue},
		step{"cluster", d.connect},
		step{"group type", d.checkGroupType},
		step{"move group", d.leaveOldGroup},
		step{"observe", d.observe},
		step{"plan", d.planChanges},
		step{"apply", d.apply},
		step{"status", d.status},
	)
}

// paused: annotation Paused (or an unknown mode) reads and writes nothing, and deleting the
// route removes nothing from Kafka.
func (d *routeScope) paused(ctx context.Context) error {
	dlr := d.dlr
	if d.mode != kqv1.ReconcilePaused && d.mode != reconcileInvalid {
		return nil
	}
	if !dlr.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(dlr, RouteFinalizer) {
			return errDone
		}
		d.r.event(dlr, corev1.EventTypeWarning, "CleanupSkipped", "Delete", fmt.Sprintf("reconcile mode %q: any dead-letter configs on group %s were left in Kafka", dlr.Annotations[kqv1.ReconcileAnnotation], dlr.Status.GroupID))
		return d.r.releaseFinalizer(ctx, dlr)
	}
	pausedStatus(&dlr.Status.Conditions, d.mode, dlr.Annotations[kqv1.ReconcileAnnotation], d.gen)
	dlr.Status.ObservedGeneration = d.gen
	return errDone
}

// addFinalizer adds the route's finalizer, and records the generation and queue.
func (d *routeScope) addFinalizer(ctx context.Context) error {
	dlr := d.dlr
	if !controllerutil.ContainsFinalizer(dlr, RouteFinalizer) {
		patch := client.MergeFromWithOptions(dlr.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(dlr, RouteFinalizer)
		if err := d.r.Patch(ctx, dlr, patch); err != nil {
			return err
		}
	}
	d.snapshot()
	dlr.Status.ObservedGeneration = d.gen
	dlr.Status.QueueName = dlr.Spec.QueueRef.Name
	return nil
}

// checkOwnership: one route per queue, the owning one (kqv1.OwningRoute) acts; another is in
// Conflict (stalled) and claims no mode, topic or group of its own, so it never claims
// ownership and its deletion cleans up nothing the owner set.
func (d *routeScope) checkOwnership(ctx context.Context) error {
	dlr := d.dlr
	first, err := d.r.firstRouteOf(ctx, dlr.Namespace, dlr.Spec.QueueRef.Name)
	if err != nil {
		return err
	}
	msg := ""
	if first != nil && first.Name != dlr.Name {
		msg = fmt.Sprintf("ShareQueue %s already has DeadLetterRoute %s (created %s); a queue has one route, so this one writes nothing", dlr.Spec.QueueRef.Name, first.Name, first.CreationTimestamp.UTC().Format(time.RFC3339))
	}
	routeConflictStatus(&dlr.Status, kqv1.ReasonConflict, msg, d.gen)
	if msg != "" {
		return &stallError{Reason: kqv1.ReasonConflict, Message: msg}
	}
	return nil
}

// readQueue reads the source queue. The route writes to the queue's group, so the queue's
// reconcile mode binds it too: the stricter of the two applies.
func (d *routeScope) readQueue(ctx context.Context) error {
	dlr := d.dlr
	if err := d.r.Get(ctx, types.NamespacedName{Namespace: dlr.Namespace, Name: dlr.Spec.QueueRef.Name}, &d.sq); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		// The ShareQueue watch brings the route back.
		return waiting(kqv1.ReasonQueueNotFound, fmt.Sprintf("ShareQueue %s/%s (spec.queueRef.name) does not exist", dlr.Namespace, dlr.Spec.QueueRef.Name))
	}
	sq := &d.sq
	switch qm := reconcileMode(sq.Annotations); qm {
	case kqv1.ReconcilePaused, reconcileInvalid:
		// Held back like a paused route: suspended, not waiting.
		msg := fmt.Sprintf("ShareQueue %s has annotation %s=%q: its route reads and writes nothing either", sq.Name, kqv1.ReconcileAnnotation, sq.Annotations[kqv1.ReconcileAnnotation])
		heldBackUnobserved(&dlr.Status.Conditions, condInput{metav1.ConditionFalse, kqv1.ReasonPaused, msg}, d.gen)
		dlr.Status.ObservedGeneration = d.gen
		return errDone
	case kqv1.ReconcileObserveOnly, kqv1.ReconcilePlan:
		if d.mode == kqv1.ReconcileActive {
			d.mode = qm
		}
	}
	// The route writes to the queue's group and names its topic after the queue's: only a
	// queue that owns them may have an active route, or two queues' routes fight over one
	// group's dead-letter configs. Queue status changes do not wake the route: look again.
	switch pending, reason, conflict := queueOwnership(sq); {
	case pending:
		return &waitError{Reason: kqv1.ReasonQueueNotReady, After: 5 * time.Second,
			Message: fmt.Sprintf("ShareQueue %s has not yet been checked for ownership of its topic and group at generation %d", sq.Name, sq.Generation)}
	case conflict != "":
		msg := fmt.Sprintf("ShareQueue %s does not own its topic or group, so this route writes nothing until it does: %s", sq.Name, conflict)
		routeConflictStatus(&dlr.Status, reason, msg, d.gen)
		return &stallError{Reason: reason, Message: msg, After: 30 * time.Second}
	}
	return nil
}

// reservableAttempts is the attempts the application gets under a Republisher route: the
// queue's (ApplicationAttempts), or with boundsPolicy Clamp, when that plus the reserved
// attempt is above the brokers' group.share.max.delivery.count.limit, one less than that
// maximum (the queue clamps the group's limit to it and the republisher keeps the last). 0
// when unknown.
func reservableAttempts(sq *kqv1.ShareQueue, cs kqv1.KafkaClusterStatus) int32 {
	attempts, ok := sq.ApplicationAttempts(cs)
	if !ok {
		return 0
	}
	if b := cs.ShareBounds; sq.Spec.BoundsPolicy == kqv1.BoundsPolicyClamp && b != nil && b.DeliveryCountLimit.Max != nil && int64(attempts)+1 > int64(*b.DeliveryCountLimit.Max) {
		return int32(*b.DeliveryCountLimit.Max) - 1
	}
	return attempts
}

// queueOwnership reads a queue's ownership verdict from its status: pending until its
// reconcile checked ownership at its current generation (Conflict condition); conflict is the
// queue's Conflict message, and reason its reason (Conflict, GroupTypeConflict), when another
// resource owns its topic or group (GroupConfigured False with that reason). A topic that a
// Strimzi KafkaTopic manages leaves the group the queue's, so it is no conflict for the route.
func queueOwnership(sq *kqv1.ShareQueue) (pending bool, reason, conflict string) {
	c := findCondition(sq.Status.Conditions, kqv1.ConditionConflict)
	if c == nil || c.ObservedGeneration != sq.Generation {
		return true, "", ""
	}
	if c.Status != metav1.ConditionTrue {
		return false, "", ""
	}
	if gc := findCondition(sq.Status.Conditions, kqv1.ConditionGroupConfigured); gc != nil && (gc.Reason == kqv1.ReasonConflict || gc.Reason == kqv1.ReasonGroupTypeConflict) {
		return false, gc.Reason, c.Message
	}
	return false, "", ""
}

// connect reads the queue's KafkaCluster and takes its pooled Kafka client.
func (d *routeScope) connect(ctx context.Context) error {
	sq := &d.sq
	if err := d.r.Get(ctx, types.NamespacedName{Namespace: sq.Namespace, Name: sq.Spec.ClusterRef.Name}, &d.kc); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		return waiting(kqv1.ReasonClusterNotFound, fmt.Sprintf("KafkaCluster %s/%s of ShareQueue %s does not exist", sq.Namespace, sq.Spec.ClusterRef.Name, sq.Name))
	}
	kc := &d.kc
	if c := findCondition(kc.Status.Conditions, kqv1.ConditionConnected); c == nil || c.Status != metav1.ConditionTrue {
		return waiting(kqv1.ReasonClusterNotReady, fmt.Sprintf("KafkaCluster %s is not connected", kc.Name))
	}
	if err := gateCheck(d.r.gate, kc, d.gateWaiter(), d.r.ResyncInterval); err != nil {
		return err
	}
	d.kctx, d.cancel = context.WithTimeout(ctx, d.r.KafkaTimeout)
	cl, err := pooledClientFor(d.kctx, d.r.APIReader, d.r.Pool, kc)
	if err != nil {
		return &waitError{Reason: kqv1.ReasonClusterNotReady, Message: fmt.Sprintf("KafkaCluster %s: %v", kc.Name, err), Cause: err}
	}
	d.cl = cl
	attempts := reservableAttempts(sq, kc.Status) // 0: unknown
	d.obs = routeObservation{Cluster: kc.Status, QueueTopic: sq.KafkaTopicName(), GroupID: sq.KafkaGroupID(), QueueAttempts: attempts}
	return nil
}

// checkGroupType: the queue's group id must not name a classic, consumer or streams group
// (groupTypeConflict). When it does the route is in Conflict (reason GroupTypeConflict),
// writes no errors.deadletterqueue.* config and creates no topic; it looks again each resync.
func (d *routeScope) checkGroupType(context.Context) error {
	dlr, groupID := d.dlr, d.obs.GroupID
	msg, err := groupTypeConflict(d.kctx, d.cl, groupID, "this DeadLetterRoute")
	if err != nil {
		return &waitError{Reason: kqv1.ReasonKafkaUnavailable, Message: fmt.Sprintf("listing the groups of other types to check group %s: %v", groupID, err), Cause: err}
	}
	if msg == "" {
		return nil
	}
	routeConflictStatus(&dlr.Status, kqv1.ReasonGroupTypeConflict, msg, d.gen)
	return &stallError{Reason: kqv1.ReasonGroupTypeConflict, Message: msg, After: d.r.ResyncInterval}
}

// leaveOldGroup: when the queue now has another group (recreated, or groupID changed), the
// configs this route set stay on the old group unless removed, which is done before the new
// group is recorded, so a failure is retried.
func (d *routeScope) leaveOldGroup(ctx context.Context) error {
	dlr, obs := d.dlr, &d.obs
	if prev := d.original.(*kqv1.DeadLetterRoute).Status; d.mode == kqv1.ReconcileActive && prev.EffectiveMode == kqv1.DeadLetterModeBrokerNative &&
		prev.GroupID != "" && prev.GroupID != obs.GroupID && prev.ClusterName == d.kc.Name {
		removed, err := removeDeadLetterConfigs(d.kctx, d.cl, prev.GroupID, prev.TopicName)
		if kafka.IsNotShareGroup(err) {
			d.r.event(dlr, corev1.EventTypeWarning, kqv1.ReasonGroupTypeConflict, "Apply", fmt.Sprintf("the queue's group is now %s; %s: its configs were left alone", obs.GroupID, errMessage(err)))
		} else if err != nil {
			return &waitError{Reason: kqv1.ReasonKafkaUnavailable, Message: fmt.Sprintf("removing the dead-letter configs of the queue's previous group %s: %v", prev.GroupID, err), Cause: err}
		}
		if len(removed) > 0 {
			d.r.event(dlr, corev1.EventTypeNormal, "DeadLetterRouteMoved", "Apply", fmt.Sprintf("the queue's group is now %s: removed %s", obs.GroupID, changesOf(removed, "group "+prev.GroupID)))
		}
	}
	dlr.Status.GroupID, dlr.Status.ClusterName = obs.GroupID, d.kc.Name
	return nil
}

// observe checks that the dead-letter topic is no live queue's topic, then reads the topic,
// its configs and the group's configs: one round of Kafka reads.
func (d *routeScope) observe(ctx context.Context) error {
	d.topicName = d.dlr.KafkaTopicName(d.obs.QueueTopic, d.kc.Status)
	owner, err := d.r.topicOwner(ctx, &d.kc, d.topicName)
	if err != nil {
		return err
	}
	d.obs.TopicOwner = owner
	if err := d.r.observe(d.kctx, d.cl, d.topicName, &d.obs); err != nil {
		return &waitError{Reason: kqv1.ReasonKafkaUnavailable, Message: fmt.Sprintf("reading topic %s / group %s: %v", d.topicName, d.obs.GroupID, err), Cause: err}
	}
	if d.r.gate != nil {
		d.r.gate.success(clusterKey(&d.kc))
	}
	return nil
}

// planChanges runs the pure plan (planRoute).
func (d *routeScope) planChanges(context.Context) error {
	d.plan = planRoute(d.dlr, d.obs)
	if prev := d.dlr.Status.TopicName; prev != "" && prev == d.plan.TopicName && d.plan.CreateTopic != nil {
		// The route acted on this topic and it is gone: deleted outside the operator.
		lost := "the republisher sidecars cannot write the records they dead-letter"
		if d.plan.Mode == kqv1.DeadLetterModeBrokerNative {
			lost = fmt.Sprintf("the brokers drop the records group %s dead-letters (the topic does not exist and is not created automatically)", d.obs.GroupID)
		}
		what := "recreating it"
		if d.mode != kqv1.ReconcileActive {
			what = "not recreated in reconcile mode " + d.mode
		}
		d.r.event(d.dlr, corev1.EventTypeWarning, kqv1.EventDeadLetterTopicDeleted, "Reconcile",
			fmt.Sprintf("dead-letter topic %s no longer exists (deleted outside the operator): until it is back %s; %s", prev, lost, what))
	}
	d.dlr.Status.TopicName = d.plan.TopicName
	d.dlr.Status.EffectiveMode = d.plan.Mode
	if d.plan.Blocked {
		// Nothing written: the route claims no topic (a queue may use the name).
		d.dlr.Status.TopicName = ""
	}
	return nil
}

// apply is the one round of Kafka writes, in Active mode and when the plan has any.
func (d *routeScope) apply(ctx context.Context) error {
	if d.plan.Blocked || d.plan.Empty() || d.mode != kqv1.ReconcileActive {
		return nil
	}
	log.FromContext(ctx).Info("kafka changes planned", "changes", d.plan.Changes())
	d.topicErr, d.groupErr, d.err = d.r.apply(d.kctx, d.cl, d.dlr, &d.plan, d.obs.GroupID)
	return nil
}

// status runs the pure status step (routeStatus) and picks the requeue.
func (d *routeScope) status(context.Context) error {
	ready, stalled := routeStatus(&d.dlr.Status, d.gen, d.mode, &d.plan, d.obs.GroupID, d.topicErr, d.groupErr, d.err)
	d.setReady(ready, stalled)
	if ra := findCondition(d.dlr.Status.Conditions, kqv1.ConditionRouteActive); ra != nil && (ra.Reason == kqv1.ReasonDeliveryLimitNotReserved || ra.Reason == kqv1.ReasonRenewAcknowledgeDisabled) {
		// The queue's reconciler raises the limit once it sees this route's mode (and writes
		// renewAcknowledge once its spec changes; the queue's watch wakes this route before
		// that write), and the brokers' reads trail their writes: look again soon rather than
		// at the next resync — every second for the first 30s of the wait (a new route and its
		// queue normally settle in one or two), then every 15s (the brokers' bounds may leave
		// no room, which only a spec or bounds change ends).
		d.requeueAfter = min(d.r.ResyncInterval, 15*time.Second)
		if time.Since(ra.LastTransitionTime.Time) < 30*time.Second {
			d.requeueAfter = min(d.r.ResyncInterval, time.Second)
		}
	} else {
		d.resyncAfter(d.r.ResyncInterval)
	}
	return nil
}

// waited reports a route waiting on its queue, cluster or Kafka (routeWaited).
func (d *routeScope) waited(w *waitError) condInput {
	return routeWaited(&d.dlr.Status.Conditions, d.gen, w.Reason, w.Message)
}

// observe reads the dead-letter topic, its configs and the group's configs (readTopicAndGroup).
func (r *DeadLetterRouteReconciler) observe(ctx context.Context, cl *kafka.Client, topicName string, obs *routeObservation) error {
	live, err := readTopicAndGroup(ctx, cl, topicName, obs.GroupID)
	obs.Topic, obs.TopicConfigs, obs.GroupConfigs = live.Topic, live.TopicConfigs, live.GroupConfigs
	return err
}

// apply sends the plan's writes concurrently and splits the outcome into the topic's and the
// group's non-retriable errors and a retriable one.
func (r *DeadLetterRouteReconciler) apply(ctx context.Context, cl *kafka.Client, dlr *kqv1.DeadLetterRoute, plan *routePlan, groupID string) (topicErr, groupErr, transient error) {
	w := topicWrites{Topic: plan.TopicName, Create: plan.CreateTopic, GrowTo: plan.GrowPartitionsTo,
		TopicConfigs: plan.TopicConfigs, Group: groupID, GroupConfigs: plan.GroupConfigs}
	var out writeOutcome
	if w.Create != nil && len(w.GroupConfigs) > 0 {
		// The group is pointed at the topic only once the topic exists: a group naming a
		// missing dead-letter topic would lose what it dead-letters.
		w.GroupConfigs = nil
		out = sendWrites(ctx, cl, w)
		if out.CreateErr == nil {
			out.GroupConfigErr = sendWrites(ctx, cl, topicWrites{Group: groupID, GroupConfigs: plan.GroupConfigs}).GroupConfigErr
		} else {
			plan.GroupConfigs = nil // not asked: the topic error says why
		}
	} else {
		out = sendWrites(ctx, cl, w)
	}
	var done []string
	settle := func(asked bool, err error, target *error, what func() string) {
		switch {
		case !asked:
		case err == nil:
			done = append(done, what())
		case kafka.IsRetriable(err) || kafka.IsAlreadyExists(err):
			transient = errors.Join(transient, err)
		default:
			*target = errors.Join(*target, err)
		}
	}
	settle(plan.CreateTopic != nil, out.CreateErr, &topicErr, func() string { return plan.Changes()[0] })
	settle(plan.GrowPartitionsTo > 0, out.GrowErr, &topicErr, func() string {
		return fmt.Sprintf("topic %s grown to %d partitions", plan.TopicName, plan.GrowPartitionsTo)
	})
	settle(len(plan.TopicConfigs) > 0, out.TopicConfigErr, &topicErr, func() string { return changesOf(plan.TopicConfigs, "topic "+plan.TopicName) })
	settle(len(plan.GroupConfigs) > 0, out.GroupConfigErr, &groupErr, func() string { return changesOf(plan.GroupConfigs, "group "+groupID) })
	if len(done) > 0 {
		r.event(dlr, corev1.EventTypeNormal, "DeadLetterRouteApplied", "Apply", strings.Join(done, "; "))
	}
	return topicErr, groupErr, transient
}

// firstRouteOf returns the route that owns queue (kqv1.OwningRoute).
func (r *DeadLetterRouteReconciler) firstRouteOf(ctx context.Context, ns, queue string) (*kqv1.DeadLetterRoute, error) {
	routes, err := routesNaming(ctx, r.Client, ns, queue)
	return kqv1.OwningRoute(routes), err
}

// routesNaming lists the DeadLetterRoutes in ns whose queueRef names queue (from the cache,
// by the queueRef index).
func routesNaming(ctx context.Context, c client.Reader, ns, queue string) ([]kqv1.DeadLetterRoute, error) {
	var list kqv1.DeadLetterRouteList
	err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{routeQueueIndex: queue})
	return list.Items, err
}

// topicOwner names the live ShareQueue on kc's Kafka cluster whose topic is topicName and
// that owns it (not in Conflict); empty when none.
func (r *DeadLetterRouteReconciler) topicOwner(ctx context.Context, kc *kqv1.KafkaCluster, topicName string) (string, error) {
	var queues kqv1.ShareQueueList
	if err := r.List(ctx, &queues, client.MatchingFields{topicNameIndex: topicName}); err != nil {
		return "", err
	}
	return queueTopicOwnerIn(ctx, r.Client, kc, topicName, queues.Items), nil
}

// queueTopicOwnerIn is topicOwner among queues (kqctl plan: those the caller could list).
func queueTopicOwnerIn(ctx context.Context, c client.Reader, kc *kqv1.KafkaCluster, topicName string, queues []kqv1.ShareQueue) string {
	for i := range queues {
		q := &queues[i]
		if q.KafkaTopicName() != topicName || !q.DeletionTimestamp.IsZero() || !sameKafka(ctx, c, kc, q.Namespace, q.Spec.ClusterRef.Name) {
			continue
		}
		if c := findCondition(q.Status.Conditions, kqv1.ConditionConflict); c != nil && c.Status == metav1.ConditionTrue {
			continue
		}
		return fmt.Sprintf("ShareQueue %s/%s", q.Namespace, q.Name)
	}
	return ""
}

func (r *DeadLetterRouteReconciler) event(obj *kqv1.DeadLetterRoute, typ, reason, action, msg string) {
	emitEvent(r.Recorder, obj, typ, reason, action, msg)
}

// SetupWithManager registers the controller, the queueRef index, and watches on ShareQueues
// (a route waits for its queue) and KafkaClusters (share.version raised → mode changes).
func (r *DeadLetterRouteReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.ResyncInterval == 0 {
		r.ResyncInterval = 10 * time.Minute
	}
	if r.KafkaTimeout == 0 {
		r.KafkaTimeout = 30 * time.Second
	}
	if r.FinalizerTimeout <= 0 {
		r.FinalizerTimeout = defaultFinalizerTimeout
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if r.topicGone != nil {
		b = b.WatchesRawSource(source.Channel(r.topicGone, &handler.EnqueueRequestForObject{}))
	}
	if r.gateWake != nil {
		b = b.WatchesRawSource(source.Channel(r.gateWake, &handler.EnqueueRequestForObject{}))
	}
	return b.
		For(&kqv1.DeadLetterRoute{}, builderWithGenerationOrAnnotationChange()).
		// A route reads its queue's spec and reconcile annotation, not its status: the
		// queue's status writes (lag, members, conditions) do not wake its route.
		Watches(&kqv1.ShareQueue{}, handler.EnqueueRequestsFromMapFunc(r.routesOfQueue), builder.WithPredicates(
			predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Watches(&kqv1.KafkaCluster{}, handler.EnqueueRequestsFromMapFunc(r.routesOfCluster)).
		// A route that loses its owner (deleted) lets the next one take over.
		Watches(&kqv1.DeadLetterRoute{}, handler.EnqueueRequestsFromMapFunc(r.siblingsOf), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false }, GenericFunc: func(event.GenericEvent) bool { return false },
			DeleteFunc: func(event.DeleteEvent) bool { return true }, UpdateFunc: deletedOrFinalizing(),
		})).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: 4,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, 2*time.Minute),
		}).
		Named("deadletterroute").
		Complete(r)
}

// indexRoutes registers the routes' indexes (shared by the queue and route reconcilers): by
// queueRef, and by the dead-letter topic a route acts on (status.topicName, when set).
func indexRoutes(mgr ctrl.Manager) error {
	ix := mgr.GetFieldIndexer()
	if err := ix.IndexField(context.Background(), &kqv1.DeadLetterRoute{}, routeQueueIndex, func(o client.Object) []string {
		return []string{o.(*kqv1.DeadLetterRoute).Spec.QueueRef.Name}
	}); err != nil {
		return err
	}
	return ix.IndexField(context.Background(), &kqv1.DeadLetterRoute{}, routeTopicIndex, func(o client.Object) []string {
		if t := o.(*kqv1.DeadLetterRoute).Status.TopicName; t != "" {
			return []string{t}
		}
		return nil
	})
}

// deadLetterTopicOwner names the live route on kc's Kafka cluster whose dead-letter topic is
// topicName (e.g. "DeadLetterRoute ns/name"); empty when none.
func deadLetterTopicOwner(ctx context.Context, c client.Reader, kc *kqv1.KafkaCluster, topicName string) (string, error) {
	var routes kqv1.DeadLetterRouteList
	if err := c.List(ctx, &routes, client.MatchingFields{routeTopicIndex: topicName}); err != nil {
		return "", err
	}
	return deadLetterTopicOwnerIn(ctx, c, kc, topicName, routes.Items), nil
}

// deadLetterTopicOwnerIn is deadLetterTopicOwner among routes (kqctl plan: those the caller
// could list).
func deadLetterTopicOwnerIn(ctx context.Context, c client.Reader, kc *kqv1.KafkaCluster, topicName string, routes []kqv1.DeadLetterRoute) string {
	for i := range routes {
		d := &routes[i]
		if d.Status.TopicName == topicName && d.DeletionTimestamp.IsZero() && d.Status.ClusterName != "" && sameKafka(ctx, c, kc, d.Namespace, d.Status.ClusterName) {
			return fmt.Sprintf("DeadLetterRoute %s/%s", d.Namespace, d.Name)
		}
	}
	return ""
}

func (r *DeadLetterRouteReconciler) routesOfQueue(ctx context.Context, o client.Object) []reconcile.Request {
	routes, _ := routesNaming(ctx, r.Client, o.GetNamespace(), o.GetName())
	return routeRequests(routes, nil)
}

func (r *DeadLetterRouteReconciler) siblingsOf(ctx context.Context, o client.Object) []reconcile.Request {
	routes, _ := routesNaming(ctx, r.Client, o.GetNamespace(), o.(*kqv1.DeadLetterRoute).Spec.QueueRef.Name)
	return routeRequests(routes, nil)
}

// routesOfCluster maps a KafkaCluster to the routes of its queues: one List of the namespace's
// routes (few) filtered by the cluster's queues, rather than one List per queue (many).
func (r *DeadLetterRouteReconciler) routesOfCluster(ctx context.Context, o client.Object) []reconcile.Request {
	var routes kqv1.DeadLetterRouteList
	// Read only (names): the cache's objects, not deep copies.
	if err := r.List(ctx, &routes, client.InNamespace(o.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil || len(routes.Items) == 0 {
		return nil
	}
	var queues kqv1.ShareQueueList
	if err := r.List(ctx, &queues, client.InNamespace(o.GetNamespace()), client.MatchingFields{clusterRefIndex: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	onCluster := make(map[string]bool, len(queues.Items))
	for i := range queues.Items {
		onCluster[queues.Items[i].Name] = true
	}
	return routeRequests(routes.Items, func(d *kqv1.DeadLetterRoute) bool { return onCluster[d.Spec.QueueRef.Name] })
}

// routeRequests maps routes (those keep accepts, all when nil) to reconcile requests.
func routeRequests(routes []kqv1.DeadLetterRoute, keep func(*kqv1.DeadLetterRoute) bool) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(routes))
	for i := range routes {
		if d := &routes[i]; keep == nil || keep(d) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: d.Namespace, Name: d.Name}})
		}
	}
	return out
}
