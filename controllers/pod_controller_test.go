package controllers

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/webhook"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

func TestQueueOfPod(t *testing.T) {
	for _, tc := range []struct {
		labels, annotations map[string]string
		want                string
	}{
		{nil, nil, ""},
		{nil, map[string]string{kqv1.QueueAnnotation: "orders"}, ""}, // annotation alone: not a queue Pod
		{map[string]string{kqv1.QueueLabel: "orders"}, nil, "orders"},
		{map[string]string{kqv1.QueueLabel: "orders"}, map[string]string{kqv1.QueueAnnotation: "other"}, "orders"},
		{map[string]string{kqv1.QueueLabel: ""}, map[string]string{kqv1.QueueAnnotation: "a-long-name"}, "a-long-name"},
		{map[string]string{kqv1.QueueLabel: ""}, nil, ""},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels, Annotations: tc.annotations}}
		if got := queueOfPod(pod); got != tc.want {
			t.Errorf("labels %v annotations %v: queue %q, want %q", tc.labels, tc.annotations, got, tc.want)
		}
	}
	if !queuePodSelector().Matches(labels.Set{kqv1.QueueLabel: ""}) || queuePodSelector().Matches(labels.Set{"app": "x"}) {
		t.Error("the Pod cache selector must match the label with any value, and only it")
	}
}

// A labelled Pod admitted without its sidecar while its queue's route is active in
// Republisher mode gets exactly one Warning Event on the queue (and is counted); a Pod with
// the sidecar, an unlabelled one, one under a BrokerNative route and a terminated one get
// none; a Pod created before its route became active is reported once it is. No controller
// but PodReconciler runs, and no broker: the objects' status is set by hand.
func TestPodWithoutRepublisherIsReportedOnce(t *testing.T) {
	t.Parallel()
	rig.SkipWithoutRig(t, "a kube-apiserver")
	env, cfg, err := rig.StartAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = kqv1.AddToScheme(scheme)
	// The package's shared rig (other tests) registers the same controller in its manager.
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache:      cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: CacheByObject()},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &PodReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("kafka-queue-operator")}
	if err := rec.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(mctx) }()
	defer func() { cancel(); <-done }()

	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kqo-pods-"}}
	if err := c.Create(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	ns := nsObj.Name
	kc := &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"}, Spec: kqv1.KafkaClusterSpec{BootstrapServers: []string{"kafka-0:9092"}}}
	if err := c.Create(ctx, kc); err != nil {
		t.Fatal(err)
	}
	// orders: Republisher, active. natives: BrokerNative, active. later: Republisher, not
	// active yet.
	routes := map[string]*kqv1.DeadLetterRoute{}
	for _, q := range []struct {
		name   string
		mode   kqv1.DeadLetterMode
		active bool
	}{{"orders", kqv1.DeadLetterModeRepublisher, true}, {"natives", kqv1.DeadLetterModeBrokerNative, true}, {"later", kqv1.DeadLetterModeRepublisher, false}} {
		sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: q.name}, Spec: kqv1.ShareQueueSpec{ClusterRef: kqv1.ClusterReference{Name: "main"}}}
		route := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: q.name + "-dlq"}, Spec: kqv1.DeadLetterRouteSpec{
			QueueRef: kqv1.QueueReference{Name: q.name}, Mode: q.mode}}
		for _, o := range []client.Object{sq, route} {
			if err := c.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		setRouteStatus(t, c, route, q.mode, q.active)
		routes[q.name] = route
	}

	sidecar := corev1.ContainerRestartPolicyAlways
	app := []corev1.Container{{Name: "app", Image: "example.com/app:1"}}
	pod := func(name string, labels, annotations map[string]string, init []corev1.Container) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations},
			Spec: corev1.PodSpec{Containers: app, InitContainers: init}}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	label := func(q string) map[string]string { return map[string]string{kqv1.QueueLabel: q} }
	pod("bare", label("orders"), nil, nil)
	pod("injected", label("orders"), nil, []corev1.Container{{Name: webhook.ContainerName, Image: "example.com/kqo:1", RestartPolicy: &sidecar}})
	unlabelled := pod("unlabelled", map[string]string{"app": "x"}, map[string]string{kqv1.QueueAnnotation: "orders"}, nil)
	pod("long-name", label(""), map[string]string{kqv1.QueueAnnotation: "orders"}, nil)
	pod("native", label("natives"), nil, nil)
	// A Windows Pod is admitted without the sidecar on purpose (Linux only): not reported.
	win := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "windows", Labels: label("orders")},
		Spec: corev1.PodSpec{OS: &corev1.PodOS{Name: corev1.Windows}, Containers: app}}
	if err := c.Create(ctx, win); err != nil {
		t.Fatal(err)
	}
	pod("early", label("later"), nil, nil)
	finished := pod("finished", label("later"), nil, nil)
	finished.Status.Phase = corev1.PodSucceeded
	if err := c.Status().Update(ctx, finished); err != nil {
		t.Fatal(err)
	}

	// The manager's cache holds labelled Pods only.
	eventually(t, 30*time.Second, func() string {
		var p corev1.Pod
		if err := mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(finished), &p); err != nil || p.Status.Phase != corev1.PodSucceeded {
			return fmt.Sprintf("the cache has not seen the finished Pod (%v)", err)
		}
		return ""
	})
	if err := mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(unlabelled), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("the manager's cache serves an unlabelled Pod (err %v); CacheByObject should keep it out", err)
	}

	// Only now does the "later" route become active: "early" is reported, "finished" is not.
	setRouteStatus(t, c, routes["later"], kqv1.DeadLetterModeRepublisher, true)

	want := []string{"bare", "early", "long-name"}
	var got map[string][]eventsv1.Event
	eventually(t, 60*time.Second, func() string {
		got = podEvents(t, c, ns)
		if len(got) < len(want) {
			return fmt.Sprintf("PodWithoutRepublisher events for %v, want %v", eventPods(got), want)
		}
		return ""
	})
	// Reconciling again (as after a Pod or route event) reports nothing new.
	for _, name := range want {
		if _, err := rec.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3 * time.Second)
	got = podEvents(t, c, ns)
	if fmt.Sprint(eventPods(got)) != fmt.Sprint(want) {
		t.Errorf("PodWithoutRepublisher events for %v, want %v", eventPods(got), want)
	}
	for name, evs := range got {
		if len(evs) != 1 || evs[0].Series != nil {
			t.Errorf("Pod %s: %d events (series %+v), want exactly one", name, len(evs), evs[0].Series)
			continue
		}
		e := evs[0]
		queue := "orders"
		if name == "early" {
			queue = "later"
		}
		if e.Type != corev1.EventTypeWarning || e.Regarding.Kind != "ShareQueue" || e.Regarding.Name != queue ||
			e.Related == nil || e.Related.Kind != "Pod" || e.Related.Name != name {
			t.Errorf("Pod %s: event %s on %s %s (related %+v), want a Warning on ShareQueue %s naming the Pod", name, e.Type, e.Regarding.Kind, e.Regarding.Name, e.Related, queue)
		}
		for _, s := range []string{"Pod " + name, webhook.ContainerName, "recreate the Pod"} {
			if !strings.Contains(e.Note, s) {
				t.Errorf("Pod %s: event note %q does not mention %q", name, e.Note, s)
			}
		}
	}
	if v, _ := metricValue("kafkaqueues_pods_without_republisher_total", map[string]string{"namespace": ns}); v != 3 {
		t.Errorf("kafkaqueues_pods_without_republisher_total{namespace=%q} = %v, want 3", ns, v)
	}
}

// setRouteStatus gives route the status the DeadLetterRoute controller would (none runs here).
func setRouteStatus(t *testing.T, c client.Client, route *kqv1.DeadLetterRoute, mode kqv1.DeadLetterMode, active bool) {
	t.Helper()
	status, reason := metav1.ConditionTrue, kqv1.ReasonRepublisher
	if !active {
		status, reason = metav1.ConditionFalse, kqv1.ReasonDeliveryLimitNotReserved
	}
	if err := c.Get(ctxFor(t), client.ObjectKeyFromObject(route), route); err != nil {
		t.Fatal(err)
	}
	route.Status = kqv1.DeadLetterRouteStatus{EffectiveMode: mode, TopicName: "dlq." + route.Spec.QueueRef.Name, QueueName: route.Spec.QueueRef.Name,
		Conditions: []metav1.Condition{{Type: kqv1.ConditionRouteActive, Status: status, Reason: reason, Message: "set by the test", LastTransitionTime: metav1.Now()}}}
	if err := c.Status().Update(ctxFor(t), route); err != nil {
		t.Fatal(err)
	}
}

// podEvents returns the PodWithoutRepublisher events in ns by the Pod they name.
func podEvents(t *testing.T, c client.Client, ns string) map[string][]eventsv1.Event {
	t.Helper()
	var evs eventsv1.EventList
	if err := c.List(ctxFor(t), &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string][]eventsv1.Event{}
	for _, e := range evs.Items {
		if e.Reason != ReasonPodWithoutRepublisher {
			continue
		}
		name := ""
		if e.Related != nil {
			name = e.Related.Name
		}
		out[name] = append(out[name], e)
	}
	return out
}

func eventPods[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Regression: a Pod in a namespace the webhook never sees (the chart always excludes the
// operator's own) was reported as if the webhook had been down, advising a recreate that can
// never help. The configuration and Namespace are read from a real apiserver.
func TestPodOutsideTheWebhookScopeIsSaidSo(t *testing.T) {
	t.Parallel()
	rig.SkipWithoutRig(t, "a kube-apiserver")
	env, cfg, err := rig.StartBareAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t)
	for _, n := range []string{"kqo-system", "apps"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	none, ignore := admissionregistrationv1.SideEffectClassNone, admissionregistrationv1.Ignore
	url := "https://127.0.0.1:1/mutate-v1-pod"
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "kqo-republisher"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "republisher.kafkaqueues.io", AdmissionReviewVersions: []string{"v1"}, SideEffects: &none, FailurePolicy: &ignore,
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url},
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "kqo-system"}}}},
			ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: kqv1.QueueLabel, Operator: metav1.LabelSelectorOpExists}}},
		}}}
	if err := c.Create(ctx, mwc); err != nil {
		t.Fatal(err)
	}
	r := &PodReconciler{APIReader: c, WebhookConfigName: mwc.Name}
	inOwn := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kqo-system", Name: "app", Labels: map[string]string{kqv1.QueueLabel: "orders"}}}
	if got := r.outOfWebhookScope(ctx, inOwn); !strings.Contains(got, "never sees Pods of namespace kqo-system") || !strings.Contains(got, "kqo-republisher") {
		t.Errorf("a Pod in an excluded namespace: %q", got)
	}
	inApps := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "app", Labels: map[string]string{kqv1.QueueLabel: "orders"}}}
	if got := r.outOfWebhookScope(ctx, inApps); got != "" {
		t.Errorf("a Pod the webhook sees was said to be out of its scope: %q", got)
	}
	if got := (&PodReconciler{APIReader: c}).outOfWebhookScope(ctx, inOwn); got != "" {
		t.Errorf("with the webhook off nothing can be said, got %q", got)
	}
}
