package controllers

import (
	"context"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/webhook"
)

// ReasonPodWithoutRepublisher is the reason of the Warning Event a ShareQueue gets for a Pod
// of the queue that runs without the republisher sidecar while the queue's route needs one.
const ReasonPodWithoutRepublisher = "PodWithoutRepublisher"

// One series per namespace that has such a Pod: bounded by the namespaces.
var podsWithoutRepublisher = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "kafkaqueues_pods_without_republisher_total",
	Help: "Pods labelled kafkaqueues.io/queue found without the republisher sidecar while their queue's DeadLetterRoute is active in Republisher mode (each Pod counted once).",
}, []string{"namespace"})

func init() {
	metrics.Registry.MustRegister(podsWithoutRepublisher)
}

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// PodReconciler reports Pods that should carry the republisher sidecar and do not: a Pod
// labelled kafkaqueues.io/queue whose queue's owning DeadLetterRoute is in Republisher mode
// with RouteActive=True, yet has no kqo-republisher container. The webhook's failurePolicy is
// Ignore, so such a Pod was created while the webhook was unavailable (or before the route
// was active) and nobody would notice: the queue gets a Warning Event naming the Pod, and
// kafkaqueues_pods_without_republisher_total counts it. Each Pod (UID) is reported once per
// manager process; a terminated or deleting Pod is not reported. It only reads.
type PodReconciler struct {
	// Client reads Pods, ShareQueues and DeadLetterRoutes (the manager's cache).
	Client   client.Client
	Recorder events.EventRecorder
	// APIReader reads, uncached and only when a Pod is about to be reported, the webhook's
	// MutatingWebhookConfiguration and the Pod's Namespace, to tell a Pod the webhook can
	// never see (its namespaceSelector or objectSelector excludes it) from one admitted while
	// the webhook was down. Nil, or WebhookConfigName empty, skips that check.
	APIReader client.Reader
	// WebhookConfigName is the manager's --webhook-config-name (empty: the webhook is off).
	WebhookConfigName string

	mu       sync.Mutex
	reported map[types.NamespacedName]types.UID
}

// Reconcile implements reconcile.Reconciler.
func (r *PodReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var pod corev1.Pod
	if err := r.Client.Get(ctx, req.NamespacedName, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !pod.DeletionTimestamp.IsZero() || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		r.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	queue := queueOfPod(&pod)
	// A Windows Pod never gets the sidecar (Linux only; the webhook warns at admission).
	windows := pod.Spec.OS != nil && pod.Spec.OS.Name == corev1.Windows
	if queue == "" || windows || hasRepublisher(&pod) || r.wasReported(req.NamespacedName, pod.UID) {
		return ctrl.Result{}, nil
	}
	var sq kqv1.ShareQueue
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: queue}, &sq); err != nil {
		// No queue, no one to tell (the webhook warned at admission).
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	route, err := activeRepublisherRoute(ctx, r.Client, pod.Namespace, queue)
	if err != nil || route == nil {
		return ctrl.Result{}, err
	}
	if !r.markReported(req.NamespacedName, pod.UID) {
		return ctrl.Result{}, nil
	}
	podsWithoutRepublisher.WithLabelValues(pod.Namespace).Inc()
	why := "The webhook was unavailable, or the route was not yet active, when the Pod was created: recreate the Pod (delete it, or restart its workload) to have the sidecar injected; " +
		"if it comes back without one, the webhook's admission warning says why"
	if excluded := r.outOfWebhookScope(ctx, &pod); excluded != "" {
		why = excluded
	}
	emitRelatedEvent(r.Recorder, &sq, &pod, corev1.EventTypeWarning, ReasonPodWithoutRepublisher, "InjectRepublisher",
		fmt.Sprintf("Pod %s runs without the %s sidecar although DeadLetterRoute %s is active in Republisher mode, so it has no local receive/ack API and nothing writes its dead records. %s",
			pod.Name, webhook.ContainerName, route.Name, why))
	return ctrl.Result{}, nil
}

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get

// outOfWebhookScope says why the webhook never sees pod — its configuration's namespaceSelector
// or objectSelector excludes it (for example the operator's own namespace, which the Helm
// chart always excludes) — or "" when it would see it, or when that cannot be read.
func (r *PodReconciler) outOfWebhookScope(ctx context.Context, pod *corev1.Pod) string {
	if r.APIReader == nil || r.WebhookConfigName == "" {
		return ""
	}
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := r.APIReader.Get(ctx, types.NamespacedName{Name: r.WebhookConfigName}, &cfg); err != nil {
		return ""
	}
	var ns corev1.Namespace
	if err := r.APIReader.Get(ctx, types.NamespacedName{Name: pod.Namespace}, &ns); err != nil {
		return ""
	}
	for _, wh := range cfg.Webhooks {
		if why := selectorExcludes(wh.NamespaceSelector, ns.Labels); why != "" {
			return fmt.Sprintf("Recreating it will not help: the webhook (MutatingWebhookConfiguration %s) never sees Pods of namespace %s, which its namespaceSelector %s; run the application, its ShareQueue, route and KafkaCluster in a namespace the webhook serves", cfg.Name, pod.Namespace, why)
		}
		if why := selectorExcludes(wh.ObjectSelector, pod.Labels); why != "" {
			return fmt.Sprintf("Recreating it will not help: the webhook (MutatingWebhookConfiguration %s) never sees this Pod, which its objectSelector %s", cfg.Name, why)
		}
	}
	return ""
}

// selectorExcludes says how sel refuses a set of labels ("" when it matches, or is absent or
// invalid).
func selectorExcludes(sel *metav1.LabelSelector, set map[string]string) string {
	if sel == nil {
		return ""
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Matches(labels.Set(set)) {
		return ""
	}
	return fmt.Sprintf("(%s) excludes", s.String())
}

// activeRepublisherRoute returns the route owning queue in ns (kqv1.OwningRoute) when it runs
// in Republisher mode with RouteActive=True, else nil.
func activeRepublisherRoute(ctx context.Context, c client.Reader, ns, queue string) (*kqv1.DeadLetterRoute, error) {
	var list kqv1.DeadLetterRouteList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var naming []kqv1.DeadLetterRoute
	for _, d := range list.Items {
		if d.Spec.QueueRef.Name == queue {
			naming = append(naming, d)
		}
	}
	route := kqv1.OwningRoute(naming)
	if route == nil || !activeRepublisher(route) {
		return nil, nil
	}
	return route, nil
}

func activeRepublisher(d *kqv1.DeadLetterRoute) bool {
	return d.Status.EffectiveMode == kqv1.DeadLetterModeRepublisher &&
		meta.IsStatusConditionTrue(d.Status.Conditions, kqv1.ConditionRouteActive)
}

// queueOfPod is the ShareQueue a Pod names: the kafkaqueues.io/queue label's value, or when
// that is empty (names longer than a label value allows) the annotation of the same key; ""
// when the Pod has no such label.
func queueOfPod(pod *corev1.Pod) string {
	v, ok := pod.Labels[kqv1.QueueLabel]
	if !ok {
		return ""
	}
	if v == "" {
		v = pod.Annotations[kqv1.QueueAnnotation]
	}
	return v
}

// hasRepublisher reports whether pod has the injected sidecar (an init container, as the
// webhook injects it, or a regular container of that name).
func hasRepublisher(pod *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if c.Name == webhook.ContainerName {
				return true
			}
		}
	}
	return false
}

func (r *PodReconciler) wasReported(key types.NamespacedName, uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reported[key] == uid
}

// markReported records key's Pod uid as reported; false when it already was.
func (r *PodReconciler) markReported(key types.NamespacedName, uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reported == nil {
		r.reported = map[types.NamespacedName]types.UID{}
	}
	if r.reported[key] == uid {
		return false
	}
	r.reported[key] = uid
	return true
}

func (r *PodReconciler) forget(key types.NamespacedName) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.reported, key)
}

// emitRelatedEvent records an Event on regarding that names related, when a recorder is
// configured.
func emitRelatedEvent(rec events.EventRecorder, regarding, related client.Object, typ, reason, action, msg string) {
	if rec != nil {
		rec.Eventf(regarding, related, typ, reason, action, "%s", msg)
	}
}

// podsOfRoute maps a route to the labelled Pods of its queue (from the cache), so Pods created
// before the route became active are checked once it is.
func (r *PodReconciler) podsOfRoute(ctx context.Context, o client.Object) []reconcile.Request {
	d, ok := o.(*kqv1.DeadLetterRoute)
	if !ok {
		return nil
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(d.Namespace), client.MatchingLabelsSelector{Selector: queuePodSelector()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the Pods of a DeadLetterRoute's queue", "route", client.ObjectKeyFromObject(d))
		return nil
	}
	var reqs []reconcile.Request
	for i := range pods.Items {
		if queueOfPod(&pods.Items[i]) == d.Spec.QueueRef.Name {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pods.Items[i])})
		}
	}
	return reqs
}

// SetupWithManager registers the controller: labelled Pods on creation (which includes every
// Pod the cache lists when the manager starts) and deletion (to forget them), and
// DeadLetterRoutes when they become active in Republisher mode.
func (r *PodReconciler) SetupWithManager(mgr ctrl.Manager) error {
	labelled := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[kqv1.QueueLabel]
		return ok
	})
	createOrDelete := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return true },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	becameActive := predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			d, ok := e.Object.(*kqv1.DeadLetterRoute)
			return ok && activeRepublisher(d)
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldD, ok1 := e.ObjectOld.(*kqv1.DeadLetterRoute)
			newD, ok2 := e.ObjectNew.(*kqv1.DeadLetterRoute)
			return ok1 && ok2 && activeRepublisher(newD) && !activeRepublisher(oldD)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&corev1.Pod{}, builder.WithPredicates(labelled, createOrDelete)).
		Watches(&kqv1.DeadLetterRoute{}, handler.EnqueueRequestsFromMapFunc(r.podsOfRoute), builder.WithPredicates(becameActive)).
		Named("republisherpod").
		Complete(r)
}
