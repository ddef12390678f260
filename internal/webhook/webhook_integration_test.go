package webhook_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
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
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/webhook"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

func TestMain(m *testing.M) {
	// envtest and the webhook server log through controller-runtime's logger; unset, it prints
	// a stack trace that reads like a crash in the test output.
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

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

// Opting in is by label (the webhook configuration's objectSelector matches it): the label
// names the queue, or, left empty, hands over to the annotation (names over 63 characters); a
// Pod with only the annotation that reaches the webhook is handled as before. Every Pod that
// gets the sidecar is labelled kafkaqueues.io/republisher=injected.
func TestInjectsTheRepublisherIntoLabelledPods(t *testing.T) {
	t.Parallel()
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

	pod := func(ns, name string, labels, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}}}
	}
	queueLabel := map[string]string{kqv1.QueueLabel: "orders"}

	// A route that is not active (the group lacks the reserved attempt) gets no sidecar.
	p := pod("shop", "early", queueLabel, nil)
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

	// Labelled, in the queue's namespace: the sidecar is injected.
	p = pod("shop", "worker", queueLabel, nil)
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if w := warn.take(); len(w) != 0 {
		t.Errorf("warnings on a successful injection: %v", w)
	}
	if len(p.Spec.InitContainers) != 1 || p.Spec.InitContainers[0].Name != webhook.ContainerName {
		t.Fatalf("init containers %+v, want the republisher", p.Spec.InitContainers)
	}
	if p.Labels[kqv1.RepublisherLabel] != kqv1.RepublisherInjected || p.Labels[kqv1.QueueLabel] != "orders" {
		t.Errorf("labels %v, want %s=%s beside the Pod's own", p.Labels, kqv1.RepublisherLabel, kqv1.RepublisherInjected)
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
	if len(p.Spec.Volumes) != 0 || len(side.VolumeMounts) != 0 {
		t.Errorf("a plaintext cluster needs no volumes: %+v %+v", p.Spec.Volumes, side.VolumeMounts)
	}
	// The restricted profile on its own, and a startup probe on the metrics port.
	sc := side.SecurityContext
	if sc == nil || !ptr.Deref(sc.RunAsNonRoot, false) || ptr.Deref(sc.AllowPrivilegeEscalation, true) || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) ||
		sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 ||
		sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || ptr.Deref(sc.RunAsUser, 0) != webhook.SidecarUID ||
		ptr.Deref(sc.RunAsGroup, 0) != webhook.SidecarUID || sc.Privileged != nil {
		t.Errorf("sidecar securityContext %+v does not meet the restricted profile on its own", sc)
	}
	if pr := side.StartupProbe; pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Path != "/readyz" || pr.HTTPGet.Port.String() != webhook.MetricsPortName ||
		pr.PeriodSeconds != 1 || pr.FailureThreshold < 60 {
		t.Errorf("sidecar startupProbe %+v, want /readyz on %s every second", pr, webhook.MetricsPortName)
	}
	if len(side.Ports) != 1 || side.Ports[0].Name != webhook.MetricsPortName || side.Ports[0].ContainerPort != 9787 || env2["KQO_METRICS_BIND_ADDRESS"] != ":9787" {
		t.Errorf("sidecar ports %+v, metrics address %q", side.Ports, env2["KQO_METRICS_BIND_ADDRESS"])
	}

	// The label present but empty hands over to the annotation (a name longer than a label
	// value allows); a Pod with only the annotation is handled as before. Both are labelled
	// as injected.
	for _, tc := range []struct {
		name                string
		labels, annotations map[string]string
	}{
		{"label-empty", map[string]string{kqv1.QueueLabel: ""}, map[string]string{kqv1.QueueAnnotation: "orders"}},
		{"annotation-only", nil, map[string]string{kqv1.QueueAnnotation: "orders"}},
	} {
		p := pod("shop", tc.name, tc.labels, tc.annotations)
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if w := warn.take(); len(p.Spec.InitContainers) != 1 || p.Spec.InitContainers[0].Name != webhook.ContainerName || len(w) != 0 ||
			p.Labels[kqv1.RepublisherLabel] != kqv1.RepublisherInjected {
			t.Errorf("%s: init containers %d, labels %v, warnings %v; want the sidecar, the injected label and no warning", tc.name, len(p.Spec.InitContainers), p.Labels, w)
		}
	}
	// The label empty and no annotation: nothing names the queue; untouched, with a warning.
	p = pod("shop", "label-empty-alone", map[string]string{kqv1.QueueLabel: ""}, nil)
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(warn.take(), "\n"); len(p.Spec.InitContainers) != 0 || p.Labels[kqv1.RepublisherLabel] != "" || !strings.Contains(w, "is empty") {
		t.Errorf("empty label alone: init containers %d, labels %v, warning %q", len(p.Spec.InitContainers), p.Labels, w)
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
		p := pod("shop", "clash-"+tc.name, queueLabel, nil)
		tc.mut(p)
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		if w := strings.Join(warn.take(), "\n"); len(p.Spec.InitContainers) != 0 || !strings.Contains(w, tc.want) || p.Labels[kqv1.RepublisherLabel] != "" {
			t.Errorf("%s: init containers %d, labels %v, warning %q, want none and a warning with %q", tc.name, len(p.Spec.InitContainers), p.Labels, w, tc.want)
		}
	}

	// Labelled for a queue that does not exist in its namespace: admitted untouched, with a
	// warning that names the label and the namespace.
	p = pod("elsewhere", "stray", queueLabel, nil)
	if err := c.Create(ctx, p); err != nil {
		t.Fatalf("a Pod naming a missing queue must be admitted: %v", err)
	}
	if len(p.Spec.InitContainers) != 0 {
		t.Errorf("stray Pod got %+v", p.Spec.InitContainers)
	}
	w := strings.Join(warn.take(), "\n")
	if !strings.Contains(w, `label kafkaqueues.io/queue="orders" names no ShareQueue in namespace elsewhere`) {
		t.Errorf("warning %q does not explain the missing queue", w)
	}

	// A cluster with TLS and SASL: the Secrets are referenced, never copied. The CA's key
	// alone is mounted (as ca.crt), the client pair too, read-only and in the sidecar only;
	// the credentials are secretKeyRef variables.
	kc.Spec.TLS = &kqv1.KafkaClusterTLS{CASecretRef: &kqv1.SecretKeyReference{Name: "kafka-ca", Key: "bundle.pem"}, ClientCertSecretName: "kafka-client", ServerName: "kafka.internal"}
	kc.Spec.SASL = &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismScramSHA256, SecretName: "kafka-user"}
	if err := c.Update(ctx, kc); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		var got kqv1.KafkaCluster
		if err := cache.Get(ctx, client.ObjectKeyFromObject(kc), &got); err != nil || got.Spec.SASL == nil {
			return "cache has not seen the cluster's TLS and SASL"
		}
		return ""
	})
	p = pod("shop", "secure", queueLabel, nil)
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if w := warn.take(); len(w) != 0 || len(p.Spec.InitContainers) != 1 {
		t.Fatalf("TLS and SASL: init containers %d, warnings %v; want the sidecar and no warning", len(p.Spec.InitContainers), w)
	}
	side = p.Spec.InitContainers[0]
	vols := map[string]corev1.Volume{}
	for _, v := range p.Spec.Volumes {
		vols[v.Name] = v
	}
	if v := vols[webhook.VolumeKafkaCA].Secret; len(vols) != 2 || v == nil || v.SecretName != "kafka-ca" || len(v.Items) != 1 ||
		v.Items[0].Key != "bundle.pem" || v.Items[0].Path != webhook.CAFile {
		t.Errorf("volumes %+v: want %s with only bundle.pem of kafka-ca as %s", p.Spec.Volumes, webhook.VolumeKafkaCA, webhook.CAFile)
	}
	if v := vols[webhook.VolumeKafkaClientCert].Secret; v == nil || v.SecretName != "kafka-client" || len(v.Items) != 2 {
		t.Errorf("client certificate volume %+v", vols[webhook.VolumeKafkaClientCert])
	}
	mounts := map[string]string{}
	for _, m := range side.VolumeMounts {
		if !m.ReadOnly {
			t.Errorf("mount %s is writable", m.Name)
		}
		mounts[m.Name] = m.MountPath
	}
	if mounts[webhook.VolumeKafkaCA] != webhook.MountKafkaCA || mounts[webhook.VolumeKafkaClientCert] != webhook.MountKafkaClientCert {
		t.Errorf("sidecar mounts %+v", side.VolumeMounts)
	}
	if len(p.Spec.Containers[0].VolumeMounts) != 0 {
		t.Errorf("the app got the sidecar's mounts: %+v", p.Spec.Containers[0].VolumeMounts)
	}
	envs := map[string]corev1.EnvVar{}
	for _, e := range side.Env {
		envs[e.Name] = e
	}
	for k, v := range map[string]string{"KQO_TLS": "true", "KQO_TLS_CA_FILE": webhook.MountKafkaCA + "/ca.crt", "KQO_TLS_CERT_FILE": webhook.MountKafkaClientCert + "/tls.crt",
		"KQO_TLS_KEY_FILE": webhook.MountKafkaClientCert + "/tls.key", "KQO_TLS_SERVER_NAME": "kafka.internal", "KQO_SASL_MECHANISM": "SCRAM-SHA-256"} {
		if envs[k].Value != v {
			t.Errorf("sidecar env %s=%q, want %q", k, envs[k].Value, v)
		}
	}
	for k, key := range map[string]string{"KQO_SASL_USERNAME": "username", "KQO_SASL_PASSWORD": "password"} {
		if e := envs[k]; e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "kafka-user" || e.ValueFrom.SecretKeyRef.Key != key {
			t.Errorf("sidecar env %s %+v, want a secretKeyRef to kafka-user/%s", k, e, key)
		}
	}
	// An app volume with one of the sidecar's names is a clash.
	p = pod("shop", "clash-volume", queueLabel, nil)
	p.Spec.Volumes = []corev1.Volume{{Name: webhook.VolumeKafkaCA, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(warn.take(), "\n"); len(p.Spec.InitContainers) != 0 || len(p.Spec.Volumes) != 1 || !strings.Contains(w, `volume "kqo-kafka-ca" already exists`) {
		t.Errorf("volume clash: init containers %d, volumes %+v, warning %q", len(p.Spec.InitContainers), p.Spec.Volumes, w)
	}

	// Neither labelled nor annotated: untouched and silent.
	p = pod("shop", "plain", map[string]string{"app": "plain"}, nil)
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
	p = pod("shop", "native", queueLabel, nil)
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
	t.Parallel()
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
	port := freePort(t)
	certDir := t.TempDir()
	opts := webhook.Options{CertManagement: webhook.CertsSelf, Host: "127.0.0.1", Port: port, CertDir: certDir,
		Namespace: "kqo-system", ServiceName: "kqo-webhook", SecretName: "kqo-webhook-cert", ConfigName: "kqo-republisher",
		Injector: &webhook.PodInjector{Image: "example.com/kqo:test"}}
	startManager(t, cfg, opts)
	// The manager's readiness: not ready while no certificate is in CertDir (and the server,
	// added only once the rotator sees its files, does not run).
	ready := webhook.ReadyCheck(opts)
	if err := ready(nil); err == nil || !strings.Contains(err.Error(), "webhook certificate") {
		t.Errorf("ready check before any certificate: %v, want an error about the certificate", err)
	}

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
		// The manager writes the pair into CertDir itself (no Secret volume, no kubelet).
		for _, k := range []string{"tls.crt", "tls.key"} {
			b, err := os.ReadFile(filepath.Join(certDir, k))
			if err != nil || string(b) != string(s.Data[k]) {
				return fmt.Sprintf("%s in CertDir does not hold the Secret's yet (%v)", k, err)
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
	eventually(t, 30*time.Second, func() string {
		if err := ready(nil); err != nil {
			return "ready check once serving: " + err.Error()
		}
		return ""
	})

	// A new CA (the Secret emptied, as a rotation or a restore from scratch does): the rotator
	// writes it into the caBundle at once, and the served certificate must follow within
	// seconds (the Secret is watched), not at the next 30s poll — until it does, the apiserver
	// cannot call the webhook and Pods get no sidecar.
	var sec corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: "kqo-system", Name: "kqo-webhook-cert"}, &sec); err != nil {
		t.Fatal(err)
	}
	sec.Data = nil
	if err := c.Update(ctx, &sec); err != nil {
		t.Fatal(err)
	}
	emptied := time.Now()
	eventually(t, 20*time.Second, func() string {
		var got admissionregistrationv1.MutatingWebhookConfiguration
		if err := c.Get(ctx, client.ObjectKey{Name: "kqo-republisher"}, &got); err != nil {
			return err.Error()
		}
		bundle := got.Webhooks[0].ClientConfig.CABundle
		if len(bundle) == 0 || string(bundle) == string(ca) {
			return "caBundle still the old CA"
		}
		newPool := x509.NewCertPool()
		if !newPool.AppendCertsFromPEM(bundle) {
			return "caBundle is not PEM"
		}
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{RootCAs: newPool, ServerName: "kqo-webhook.kqo-system.svc"})
		if err != nil {
			return "the served certificate does not chain to the new caBundle: " + err.Error()
		}
		conn.Close()
		return ""
	})
	t.Logf("after a new CA, the served certificate chained to the new caBundle in %s", time.Since(emptied).Round(100*time.Millisecond))
}
