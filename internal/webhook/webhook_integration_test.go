package webhook_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/webhook"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// warnings collects the admission warnings the apiserver returns to a client.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warnings) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

func eventually(t *testing.T, timeout time.Duration, cond func() string) {
	t.Helper()
	rig.Eventually(t, timeout, cond)
}

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = kqv1.AddToScheme(s)
	return s
}

func startManager(t *testing.T, cfg *rest.Config, opts webhook.Options) client.Client {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if opts.Injector != nil {
		opts.Injector.Reader = mgr.GetClient()
	}
	if err := webhook.Setup(mgr, opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return mgr.GetClient()
}

func TestInjectsTheRepublisherIntoAnnotatedPods(t *testing.T) {
	rig.SkipWithoutRig(t, "a kube-apiserver")
	env, cfg, err := rig.StartAPIServerWithWebhooks(true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	wio := env.WebhookInstallOptions
	cache := startManager(t, cfg, webhook.Options{CertManagement: webhook.CertsExternal, Host: wio.LocalServingHost, Port: wio.LocalServingPort,
		CertDir: wio.LocalServingCertDir, Injector: &webhook.PodInjector{Image: "example.com/kqo:test"}})

	warn := &warnings{}
	ccfg := rest.CopyConfig(cfg)
	ccfg.WarningHandler = warn
	c, err := client.New(ccfg, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ns := range []string{"shop", "elsewhere"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	kc := &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "main"}, Spec: kqv1.KafkaClusterSpec{BootstrapServers: []string{"kafka-0:9092", "kafka-1:9092"}}}
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "main"}, Topic: kqv1.QueueTopicSpec{Name: "orders-v1"}, GroupID: "orders-workers",
		Delivery: kqv1.DeliverySpec{MaxDeliveryAttempts: ptr.To[int32](4), LockDuration: &metav1.Duration{Duration: 45 * time.Second}},
	}}
	route := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "orders-dead"}, Spec: kqv1.DeadLetterRouteSpec{
		QueueRef: kqv1.QueueReference{Name: "orders"}, Mode: kqv1.DeadLetterModeRepublisher,
		Republisher: &kqv1.RepublisherSpec{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m")}},
			Members: ptr.To[int32](8), MaxRecords: ptr.To[int32](10)},
	}}
	for _, o := range []client.Object{kc, sq, route} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// No controller runs here: give the route the status the DeadLetterRoute controller would.
	route.Status = kqv1.DeadLetterRouteStatus{EffectiveMode: kqv1.DeadLetterModeRepublisher, TopicName: "dlq.orders-v1", QueueName: "orders",
		Conditions: []metav1.Condition{{Type: kqv1.ConditionRouteActive, Status: metav1.ConditionFalse, Reason: kqv1.ReasonDeliveryLimitNotReserved,
			Message: "limit 4, want 5", LastTransitionTime: metav1.Now()}}}
	if err := c.Status().Update(ctx, route); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		var r kqv1.DeadLetterRoute
		if err := cache.Get(ctx, client.ObjectKeyFromObject(route), &r); err != nil || r.Status.TopicName == "" {
			return fmt.Sprintf("manager cache has not seen the route's status yet (%v)", err)
		}
		return ""
	})

	pod := func(ns, name string, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}}}
	}

	// A route that is not active (the group lacks the reserved attempt) gets no sidecar.
	p := pod("shop", "early", map[string]string{kqv1.QueueAnnotation: "orders"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(warn.take(), "\n"); len(p.Spec.InitContainers) != 0 || !strings.Contains(w, "DeliveryLimitNotReserved") {
		t.Errorf("inactive route: init containers %+v, warning %q", p.Spec.InitContainers, w)
	}
	route.Status.Conditions[0].Status, route.Status.Conditions[0].Reason = metav1.ConditionTrue, kqv1.ReasonRepublisher
	if err := c.Status().Update(ctx, route); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		var r kqv1.DeadLetterRoute
		if err := cache.Get(ctx, client.ObjectKeyFromObject(route), &r); err != nil || len(r.Status.Conditions) == 0 || r.Status.Conditions[0].Status != metav1.ConditionTrue {
			return "cache has not seen the active route"
		}
		return ""
	})

	// Annotated, in the queue's namespace: the sidecar is injected.
	p = pod("shop", "worker", map[string]string{kqv1.QueueAnnotation: "orders"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if w := warn.take(); len(w) != 0 {
		t.Errorf("warnings on a successful injection: %v", w)
	}
	if len(p.Spec.InitContainers) != 1 || p.Spec.InitContainers[0].Name != webhook.ContainerName {
		t.Fatalf("init containers %+v, want the republisher", p.Spec.InitContainers)
	}
	side := p.Spec.InitContainers[0]
	env2 := map[string]string{}
	for _, e := range side.Env {
		env2[e.Name] = e.Value
	}
	want := map[string]string{
		"KQO_BOOTSTRAP_SERVERS": "kafka-0:9092,kafka-1:9092", "KQO_TOPIC": "orders-v1", "KQO_GROUP": "orders-workers",
		"KQO_DEAD_LETTER_TOPIC": "dlq.orders-v1", "KQO_MAX_DELIVERY_ATTEMPTS": "4", "KQO_LEASE": "45s", "KQO_LISTEN": "127.0.0.1:8787",
		"KQO_MEMBERS": "8", "KQO_MAX_RECORDS": "10",
	}
	for k, v := range want {
		if env2[k] != v {
			t.Errorf("sidecar env %s=%q, want %q", k, env2[k], v)
		}
	}
	if side.Image != "example.com/kqo:test" || side.RestartPolicy == nil || *side.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("sidecar image %q restartPolicy %v, want the configured image as a native sidecar", side.Image, side.RestartPolicy)
	}
	if q := side.Resources.Requests[corev1.ResourceCPU]; q.String() != "20m" {
		t.Errorf("sidecar CPU request %s, want the route's 20m", q.String())
	}
	if len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Name != "app" {
		t.Errorf("the app's containers changed: %+v", p.Spec.Containers)
	}

	// A Pod the sidecar cannot join (a port of the sidecar's taken, host networking, an app
	// container with the sidecar's name): admitted untouched, with a warning saying why.
	for _, tc := range []struct {
		name string
		mut  func(*corev1.Pod)
		want string
	}{
		{"port", func(p *corev1.Pod) { p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9787}} }, "declares port 9787"},
		{"hostnet", func(p *corev1.Pod) { p.Spec.HostNetwork = true }, "hostNetwork"},
		{"named", func(p *corev1.Pod) { p.Spec.Containers[0].Name = webhook.ContainerName }, "already exists"},
	} {
		p := pod("shop", "clash-"+tc.name, map[string]string{kqv1.QueueAnnotation: "orders"})
		tc.mut(p)
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if w := strings.Join(warn.take(), "\n"); len(p.Spec.InitContainers) != 0 || !strings.Contains(w, tc.want) {
			t.Errorf("%s: init containers %d, warning %q, want none and a warning with %q", tc.name, len(p.Spec.InitContainers), w, tc.want)
		}
	}

	// Annotated for a queue that does not exist in its namespace: admitted untouched, with a
	// warning that names the annotation and the namespace.
	p = pod("elsewhere", "stray", map[string]string{kqv1.QueueAnnotation: "orders"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatalf("a Pod naming a missing queue must be admitted: %v", err)
	}
	if len(p.Spec.InitContainers) != 0 {
		t.Errorf("stray Pod got %+v", p.Spec.InitContainers)
	}
	w := strings.Join(warn.take(), "\n")
	if !strings.Contains(w, "names no ShareQueue in namespace elsewhere") {
		t.Errorf("warning %q does not explain the missing queue", w)
	}

	// Not annotated: untouched and silent.
	p = pod("shop", "plain", nil)
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.InitContainers) != 0 || len(warn.take()) != 0 {
		t.Errorf("an unannotated Pod was touched or warned about: %+v", p.Spec.InitContainers)
	}

	// A BrokerNative route needs no sidecar: untouched, with a warning saying so.
	route.Status.EffectiveMode = kqv1.DeadLetterModeBrokerNative
	if err := c.Status().Update(ctx, route); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		var r kqv1.DeadLetterRoute
		if err := cache.Get(ctx, client.ObjectKeyFromObject(route), &r); err != nil || r.Status.EffectiveMode != kqv1.DeadLetterModeBrokerNative {
			return "cache has not seen BrokerNative"
		}
		return ""
	})
	p = pod("shop", "native", map[string]string{kqv1.QueueAnnotation: "orders"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if len(p.Spec.InitContainers) != 0 || !strings.Contains(strings.Join(warn.take(), "\n"), "BrokerNative") {
		t.Errorf("BrokerNative: init containers %+v", p.Spec.InitContainers)
	}
}

// Without cert-manager the manager creates the Secret, fills it with its own CA and serving
// certificate and puts the CA in the webhook configuration; once the Secret's files appear in
// CertDir (in a cluster, the Secret is mounted there) the server answers TLS for the Service's
// DNS name.
func TestSelfManagedCertificates(t *testing.T) {
	rig.SkipWithoutRig(t, "a kube-apiserver")
	env, cfg, err := rig.StartAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	c, err := client.New(cfg, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kqo-system"}}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(rig.RepoRoot(), "config", "webhook", "manifests.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := yaml.Unmarshal([]byte(strings.TrimPrefix(string(raw), "---\n")), &mwc); err != nil {
		t.Fatal(err)
	}
	mwc.Name = "kqo-republisher"
	mwc.Webhooks[0].ClientConfig.Service.Namespace, mwc.Webhooks[0].ClientConfig.Service.Name = "kqo-system", "kqo-webhook"
	if err := c.Create(ctx, &mwc); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	certDir := t.TempDir()
	startManager(t, cfg, webhook.Options{CertManagement: webhook.CertsSelf, Host: "127.0.0.1", Port: port, CertDir: certDir,
		Namespace: "kqo-system", ServiceName: "kqo-webhook", SecretName: "kqo-webhook-cert", ConfigName: "kqo-republisher",
		Injector: &webhook.PodInjector{Image: "example.com/kqo:test"}})

	var ca []byte
	eventually(t, 60*time.Second, func() string {
		var s corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: "kqo-system", Name: "kqo-webhook-cert"}, &s); err != nil {
			return err.Error()
		}
		if len(s.Data["ca.crt"]) == 0 || len(s.Data["tls.crt"]) == 0 || len(s.Data["tls.key"]) == 0 {
			return fmt.Sprintf("secret keys %v", len(s.Data))
		}
		ca = s.Data["ca.crt"]
		// What the kubelet does for the Pod: the Secret is mounted as a volume at CertDir.
		for _, k := range []string{"tls.crt", "tls.key"} {
			if err := os.WriteFile(filepath.Join(certDir, k), s.Data[k], 0o600); err != nil {
				return err.Error()
			}
		}
		var got admissionregistrationv1.MutatingWebhookConfiguration
		if err := c.Get(ctx, client.ObjectKey{Name: "kqo-republisher"}, &got); err != nil {
			return err.Error()
		}
		if string(got.Webhooks[0].ClientConfig.CABundle) != string(ca) {
			return "caBundle not injected yet"
		}
		return ""
	})
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("ca.crt is not PEM")
	}
	eventually(t, 60*time.Second, func() string {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{RootCAs: pool, ServerName: "kqo-webhook.kqo-system.svc"})
		if err != nil {
			return "TLS to the webhook server: " + err.Error()
		}
		conn.Close()
		return ""
	})
}
