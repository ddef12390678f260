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
}

// +kubebuilder:rbac:groups=kafkaqueues.io,resources=deadletterroutes,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=kafkaqueues.io,resources=deadletterroutes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kafkaqueues.io,resources=deadletterroutes/finalizers,verbs=update

// Reconcile brings one DeadLetterRoute's topic and group configs in line with its spec.
func (r *DeadLetterRouteReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	var dlr kqv1.DeadLetterRoute
	if err := r.Get(ctx, req.NamespacedName, &dlr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	mode := reconcileMode(dlr.Annotations)
	if mode == kqv1.ReconcilePaused || mode == reconcileInvalid {
		return r.paused(ctx, &dlr, mode)
	}
	if !dlr.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &dlr)
	}
	if !controllerutil.ContainsFinalizer(&dlr, RouteFinalizer) {
		patch := client.MergeFromWithOptions(dlr.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(&dlr, RouteFinalizer)
		if err := r.Patch(ctx, &dlr, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	original := dlr.DeepCopy()
	gen := dlr.Generation
	dlr.Status.ObservedGeneration = gen
	dlr.Status.QueueName = dlr.Spec.QueueRef.Name

	// --- one route per queue: the oldest wins
	if first, err := r.firstRouteOf(ctx, dlr.Namespace, dlr.Spec.QueueRef.Name); err != nil {
		return ctrl.Result{}, err
	} else if first != nil && first.Name != dlr.Name {
		msg := fmt.Sprintf("ShareQueue %s already has DeadLetterRoute %s (created %s); a queue has one route, so this one writes nothing", dlr.Spec.QueueRef.Name, first.Name, first.CreationTimestamp.UTC().Format(time.RFC3339))
		if prev := findCondition(dlr.Status.Conditions, kqv1.ConditionConflict); prev == nil || prev.Status != metav1.ConditionTrue {
			r.event(&dlr, corev1.EventTypeWarning, kqv1.ReasonConflict, "Reconcile", msg)
		}
		setCondition(&dlr.Status.Conditions, kqv1.ConditionConflict, condInput{metav1.ConditionTrue, kqv1.ReasonConflict, msg}, gen)
		setCondition(&dlr.Status.Conditions, kqv1.ConditionRouteActive, condInput{metav1.ConditionFalse, kqv1.ReasonConflict, msg}, gen)
		setKstatus(&dlr.Status.Conditions, condInput{metav1.ConditionFalse, kqv1.ReasonConflict, msg}, true, gen)
		// Not acting for the queue: no mode, topic or group of its own (so it never claims
		// ownership and its deletion cleans up nothing the owner set).
		dlr.Status.EffectiveMode, dlr.Status.TopicName, dlr.Status.GroupID, dlr.Status.ClusterName = "", "", "", ""
		return ctrl.Result{}, r.patchStatus(ctx, original, &dlr)
	}
	setCondition(&dlr.Status.Conditions, kqv1.ConditionConflict, condInput{metav1.ConditionFalse, kqv1.ReasonNoConflict,
		fmt.Sprintf("this is the only DeadLetterRoute of ShareQueue %s", dlr.Spec.QueueRef.Name)}, gen)

	// --- source queue and its cluster
	var sq kqv1.ShareQueue
	if err := r.Get(ctx, types.NamespacedName{Namespace: dlr.Namespace, Name: dlr.Spec.QueueRef.Name}, &sq); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.waiting(&dlr, kqv1.ReasonQueueNotFound, fmt.Sprintf("ShareQueue %s/%s (spec.queueRef.name) does not exist", dlr.Namespace, dlr.Spec.QueueRef.Name))
		return ctrl.Result{}, r.patchStatus(ctx, original, &dlr) // the ShareQueue watch brings us back
	}
	// The route writes to the queue's group, so the queue's reconcile mode binds it too: the
	// stricter of the two applies.
	switch qm := reconcileMode(sq.Annotations); qm {
	case kqv1.ReconcilePaused, reconcileInvalid:
		r.waiting(&dlr, kqv1.ReasonPaused, fmt.Sprintf("ShareQueue %s has annotation %s=%q: its route reads and writes nothing either", sq.Name, kqv1.ReconcileAnnotation, sq.Annotations[kqv1.ReconcileAnnotation]))
		return ctrl.Result{}, r.patchStatus(ctx, original, &dlr)
	case kqv1.ReconcileObserveOnly, kqv1.ReconcilePlan:
		if mode == kqv1.ReconcileActive {
			mode = qm
		}
	}
	var kc kqv1.KafkaCluster
	if err := r.Get(ctx, types.NamespacedName{Namespace: sq.Namespace, Name: sq.Spec.ClusterRef.Name}, &kc); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		r.waiting(&dlr, kqv1.ReasonClusterNotFound, fmt.Sprintf("KafkaCluster %s/%s of ShareQueue %s does not exist", sq.Namespace, sq.Spec.ClusterRef.Name, sq.Name))
		return ctrl.Result{}, r.patchStatus(ctx, original, &dlr)
	}
	if c := findCondition(kc.Status.Conditions, kqv1.ConditionConnected); c == nil || c.Status != metav1.ConditionTrue {
		r.waiting(&dlr, kqv1.ReasonClusterNotReady, fmt.Sprintf("KafkaCluster %s is not connected", kc.Name))
		return ctrl.Result{}, r.patchStatus(ctx, original, &dlr)
	}
	kctx, cancel := context.WithTimeout(ctx, r.KafkaTimeout)
	defer cancel()
	cl, err := pooledClientFor(kctx, r.APIReader, r.Pool, &kc)
	if err != nil {
		r.waiting(&dlr, kqv1.ReasonClusterNotReady, fmt.Sprintf("KafkaCluster %s: %v", kc.Name, err))
		return ctrl.Result{}, errors.Join(err, r.patchStatus(ctx, original, &dlr))
	}

	// --- observe
	attempts, _ := sq.ApplicationAttempts(kc.Status) // 0: unknown
	obs := routeObservation{Cluster: kc.Status, QueueTopic: topicNameOf(&sq), GroupID: groupIDOf(&sq), QueueAttempts: attempts}
	if prev := original.Status; mode == kqv1.ReconcileActive && prev.EffectiveMode == kqv1.DeadLetterModeBrokerNative &&
		prev.GroupID != "" && prev.GroupID != obs.GroupID && prev.ClusterName == kc.Name {
		// The queue now has another group (recreated, or groupID changed): the configs this
		// route set stay on the old group unless removed, which is done before the new group
		// is recorded, so a failure is retried.
		removed, err := removeDeadLetterConfigs(kctx, cl, prev.GroupID, prev.TopicName)
		if err != nil {
			r.waiting(&dlr, kqv1.ReasonKafkaUnavailable, fmt.Sprintf("removing the dead-letter configs of the queue's previous group %s: %v", prev.GroupID, err))
			return ctrl.Result{}, errors.Join(err, r.patchStatus(ctx, original, &dlr))
		}
		if len(removed) > 0 {
			r.event(&dlr, corev1.EventTypeNormal, "DeadLetterRouteMoved", "Apply", fmt.Sprintf("the queue's group is now %s: removed %s", obs.GroupID, changesOf(removed, "group "+prev.GroupID)))
		}
	}
	dlr.Status.GroupID, dlr.Status.ClusterName = obs.GroupID, kc.Name
	topicName := deadLetterTopicNameOf(&dlr, obs.QueueTopic, kc.Status)
	owner, err := r.topicOwner(ctx, &kc, topicName)
	if err != nil {
		return ctrl.Result{}, err
	}
	obs.TopicOwner = owner
	if err := r.observe(kctx, cl, topicName, &obs); err != nil {
		r.waiting(&dlr, kqv1.ReasonKafkaUnavailable, fmt.Sprintf("reading topic %s / group %s: %v", topicName, obs.GroupID, err))
		return ctrl.Result{}, errors.Join(err, r.patchStatus(ctx, original, &dlr))
	}

	// --- plan, apply
	plan := planRoute(&dlr, obs)
	dlr.Status.TopicName = plan.TopicName
	dlr.Status.EffectiveMode = plan.Mode
	if plan.Blocked {
		// Nothing written: the route claims no topic (a queue may use the name).
		dlr.Status.TopicName = ""
	}
	var topicErr, groupErr, transient error
	topicCond, routeCond := plan.TopicReady, plan.RouteActive
	switch {
	case plan.Blocked || plan.Empty():
	case mode != kqv1.ReconcileActive:
		reason := kqv1.ReasonPlanned
		if mode == kqv1.ReconcileObserveOnly {
			reason = kqv1.ReasonObserveOnly
		}
		routeCond = condInput{metav1.ConditionFalse, reason, fmt.Sprintf("reconcile mode %s (annotation %s on the route or its queue): not applied: %s", mode, kqv1.ReconcileAnnotation, strings.Join(plan.Changes(), "; "))}
	default:
		logger.Info("kafka changes planned", "changes", plan.Changes())
		topicErr, groupErr, transient = r.apply(kctx, cl, &dlr, &plan, obs.GroupID)
	}

	// --- report
	if topicErr != nil {
		topicCond = condInput{metav1.ConditionFalse, kqv1.ReasonKafkaRejected, "the brokers refused spec.topic: " + topicErr.Error()}
		routeCond = condInput{metav1.ConditionFalse, kqv1.ReasonKafkaRejected, "no dead-letter topic: " + topicErr.Error()}
	}
	if groupErr != nil {
		routeCond = condInput{metav1.ConditionFalse, kqv1.ReasonKafkaRejected, fmt.Sprintf("the brokers refused the dead-letter configs of group %s: %v", obs.GroupID, groupErr)}
	}
	if transient != nil {
		routeCond = condInput{metav1.ConditionUnknown, kqv1.ReasonKafkaUnavailable, "applying: " + transient.Error()}
	}
	setCondition(&dlr.Status.Conditions, kqv1.ConditionTopicReady, topicCond, gen)
	setCondition(&dlr.Status.Conditions, kqv1.ConditionRouteActive, routeCond, gen)
	ready := condInput{metav1.ConditionTrue, kqv1.ReasonReady, routeCond.Message}
	stalled := false
	switch {
	case topicCond.Status != metav1.ConditionTrue:
		ready = condInput{metav1.ConditionFalse, topicCond.Reason, topicCond.Message}
		stalled = topicCond.Status == metav1.ConditionFalse
	case routeCond.Status != metav1.ConditionTrue:
		ready = condInput{metav1.ConditionFalse, routeCond.Reason, routeCond.Message}
		stalled = routeCond.Status == metav1.ConditionFalse
	}
	setKstatus(&dlr.Status.Conditions, ready, stalled, gen)
	if err := r.patchStatus(ctx, original, &dlr); err != nil {
		return ctrl.Result{}, err
	}
	if transient != nil {
		return ctrl.Result{}, transient
	}
	if routeCond.Reason == kqv1.ReasonDeliveryLimitNotReserved {
		// The queue's reconciler raises the limit once it sees this route's mode, and the
		// brokers' reads trail their writes: look again soon rather than at the next resync.
		return ctrl.Result{RequeueAfter: min(r.ResyncInterval, 15*time.Second)}, nil
	}
	return ctrl.Result{RequeueAfter: r.ResyncInterval}, nil
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

// waiting records a wait on something outside the route (queue, cluster, Kafka).
func (r *DeadLetterRouteReconciler) waiting(dlr *kqv1.DeadLetterRoute, reason, msg string) {
	gen := dlr.Generation
	in := condInput{metav1.ConditionFalse, reason, msg}
	if reason == kqv1.ReasonKafkaUnavailable {
		in.Status = metav1.ConditionUnknown
	}
	unknown := condInput{metav1.ConditionUnknown, reason, "not evaluated: " + msg}
	setCondition(&dlr.Status.Conditions, kqv1.ConditionTopicReady, unknown, gen)
	setCondition(&dlr.Status.Conditions, kqv1.ConditionRouteActive, in, gen)
	setKstatus(&dlr.Status.Conditions, in, false, gen)
}

// finalize removes the broker-native dead-letter configs this route set on the group (so the
// brokers stop writing to a topic nobody declares), keeps the topic, and releases the
// finalizer. An unreachable cluster is waited for up to FinalizerTimeout.
func (r *DeadLetterRouteReconciler) finalize(ctx context.Context, dlr *kqv1.DeadLetterRoute) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(dlr, RouteFinalizer) {
		return ctrl.Result{}, nil
	}
	release := func() (ctrl.Result, error) {
		patch := client.MergeFrom(dlr.DeepCopy())
		controllerutil.RemoveFinalizer(dlr, RouteFinalizer)
		return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, dlr, patch))
	}
	if dlr.Status.EffectiveMode != kqv1.DeadLetterModeBrokerNative {
		return release()
	}
	if next, err := r.firstRouteOf(ctx, dlr.Namespace, dlr.Spec.QueueRef.Name); err != nil {
		return ctrl.Result{}, err
	} else if next != nil {
		// Another route of the queue takes over and sets its own configs: removing these
		// would leave the group without a dead-letter topic in between.
		return release()
	}
	giveUp := func(why string) (ctrl.Result, error) {
		if wait := r.FinalizerTimeout - time.Since(dlr.DeletionTimestamp.Time); wait > 0 {
			return ctrl.Result{RequeueAfter: min(wait, 15*time.Second)}, nil
		}
		r.event(dlr, corev1.EventTypeWarning, "CleanupAbandoned", "Delete",
			fmt.Sprintf("%s; released the finalizer after %s, leaving the %s configs on the group", why, r.FinalizerTimeout, dlqTopicNameConfig))
		return release()
	}
	// The group and cluster as last resolved: the ShareQueue may already be gone (with
	// deletionPolicy Retain its group, and these configs, stay in Kafka).
	groupID, clusterName := dlr.Status.GroupID, dlr.Status.ClusterName
	var sq kqv1.ShareQueue
	if err := r.Get(ctx, types.NamespacedName{Namespace: dlr.Namespace, Name: dlr.Spec.QueueRef.Name}, &sq); err == nil {
		groupID, clusterName = groupIDOf(&sq), sq.Spec.ClusterRef.Name
	} else if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	if groupID == "" || clusterName == "" {
		r.event(dlr, corev1.EventTypeWarning, "CleanupAbandoned", "Delete",
			fmt.Sprintf("ShareQueue %s is gone and this route never recorded its group: any %s configs it set stay on the group", dlr.Spec.QueueRef.Name, dlqTopicNameConfig))
		return release()
	}
	var kc kqv1.KafkaCluster
	if err := r.Get(ctx, types.NamespacedName{Namespace: dlr.Namespace, Name: clusterName}, &kc); err != nil {
		if apierrors.IsNotFound(err) {
			r.event(dlr, corev1.EventTypeWarning, "CleanupAbandoned", "Delete",
				fmt.Sprintf("KafkaCluster %s is gone: the %s configs stay on group %s", clusterName, dlqTopicNameConfig, groupID))
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
	del, err := removeDeadLetterConfigs(kctx, cl, groupID, dlr.Status.TopicName)
	if err != nil {
		return giveUp(fmt.Sprintf("removing the dead-letter configs of group %s on KafkaCluster %s: %v", groupID, kc.Name, err))
	}
	if len(del) > 0 {
		r.event(dlr, corev1.EventTypeNormal, "DeadLetterRouteRemoved", "Delete",
			fmt.Sprintf("removed %s from group %s; topic %s and its dead records are kept", changesOf(del, "group "+groupID), groupID, dlr.Status.TopicName))
	}
	return release()
}

// removeDeadLetterConfigs unsets the KIP-1191 configs a route set on a group: the topic name
// only while it still names topicName (a value someone else put there stays), and the
// copy-record switch. It returns what it removed.
func removeDeadLetterConfigs(ctx context.Context, cl *kafka.Client, groupID, topicName string) ([]kafka.AlterConfig, error) {
	groupKey := kafka.ResourceKey{Type: kafka.GroupResource, Name: groupID}
	cfgs, err := cl.DescribeConfigs(ctx, []kafka.ResourceKey{groupKey})
	if err != nil {
		return nil, err
	}
	var del []kafka.AlterConfig
	for _, k := range []string{dlqTopicNameConfig, dlqCopyRecordConfig} {
		e, ok := cfgs[groupKey].Configs[k]
		if ok && e.IsOverride() && (k != dlqTopicNameConfig || e.Value == topicName) {
			del = append(del, kafka.AlterConfig{Name: k, Op: kafka.OpDelete})
		}
	}
	if len(del) == 0 {
		return nil, nil
	}
	res, err := cl.IncrementalAlterConfigs(ctx, []kafka.Alteration{{Resource: groupKey, Configs: del}})
	if err == nil {
		err = res[groupKey]
	}
	if err != nil {
		return nil, err
	}
	return del, nil
}

// paused reports a route whose kafkaqueues.io/reconcile annotation is Paused (or not a known
// mode): nothing is read or written, and deleting it removes nothing from Kafka.
func (r *DeadLetterRouteReconciler) paused(ctx context.Context, dlr *kqv1.DeadLetterRoute, mode string) (ctrl.Result, error) {
	if !dlr.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(dlr, RouteFinalizer) {
			return ctrl.Result{}, nil
		}
		r.event(dlr, corev1.EventTypeWarning, "CleanupSkipped", "Delete", fmt.Sprintf("reconcile mode %q: any dead-letter configs on group %s were left in Kafka", dlr.Annotations[kqv1.ReconcileAnnotation], dlr.Status.GroupID))
		patch := client.MergeFrom(dlr.DeepCopy())
		controllerutil.RemoveFinalizer(dlr, RouteFinalizer)
		return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, dlr, patch))
	}
	original := dlr.DeepCopy()
	in := condInput{metav1.ConditionFalse, kqv1.ReasonPaused, "annotation kafkaqueues.io/reconcile=Paused: nothing is read or written"}
	if mode == reconcileInvalid {
		in = condInput{metav1.ConditionFalse, kqv1.ReasonInvalidReconcileMode, fmt.Sprintf("annotation kafkaqueues.io/reconcile=%q is not one of Active, Paused, ObserveOnly, Plan; nothing is read or written until it is fixed", dlr.Annotations[kqv1.ReconcileAnnotation])}
	}
	setCondition(&dlr.Status.Conditions, kqv1.ConditionReconciling, in, dlr.Generation)
	dlr.Status.ObservedGeneration = dlr.Generation
	return ctrl.Result{}, r.patchStatus(ctx, original, dlr)
}

// topicOwner names the live ShareQueue on kc's Kafka cluster whose topic is topicName and
// that owns it (not in Conflict); empty when none.
func (r *DeadLetterRouteReconciler) topicOwner(ctx context.Context, kc *kqv1.KafkaCluster, topicName string) (string, error) {
	var queues kqv1.ShareQueueList
	if err := r.List(ctx, &queues, client.MatchingFields{topicNameIndex: topicName}); err != nil {
		return "", err
	}
	for i := range queues.Items {
		q := &queues.Items[i]
		if !q.DeletionTimestamp.IsZero() || !sameKafka(ctx, r.Client, kc, q.Namespace, q.Spec.ClusterRef.Name) {
			continue
		}
		if c := findCondition(q.Status.Conditions, kqv1.ConditionConflict); c != nil && c.Status == metav1.ConditionTrue {
			continue
		}
		return fmt.Sprintf("ShareQueue %s/%s", q.Namespace, q.Name), nil
	}
	return "", nil
}

func (r *DeadLetterRouteReconciler) patchStatus(ctx context.Context, original, dlr *kqv1.DeadLetterRoute) error {
	return patchStatusIfChanged(ctx, r.Client, original, dlr, equality.Semantic.DeepEqual(original.Status, dlr.Status))
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
	return ctrl.NewControllerManagedBy(mgr).
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
	for i := range routes.Items {
		d := &routes.Items[i]
		if d.DeletionTimestamp.IsZero() && d.Status.ClusterName != "" && sameKafka(ctx, c, kc, d.Namespace, d.Status.ClusterName) {
			return fmt.Sprintf("DeadLetterRoute %s/%s", d.Namespace, d.Name), nil
		}
	}
	return "", nil
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
	if err := r.List(ctx, &routes, client.InNamespace(o.GetNamespace())); err != nil || len(routes.Items) == 0 {
		return nil
	}
	var queues kqv1.ShareQueueList
	if err := r.List(ctx, &queues, client.InNamespace(o.GetNamespace()), client.MatchingFields{clusterRefIndex: o.GetName()}); err != nil {
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
