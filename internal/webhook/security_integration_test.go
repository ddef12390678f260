package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/internal/republisher"
	"github.com/kafkaqueues/kafka-queue-operator/internal/webhook"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// webhookRig is a real apiserver calling the webhook served by a manager in this process.
type webhookRig struct {
	env   *envtest.Environment
	c     client.Client // the test's client, which collects admission warnings
	cache client.Client // the manager's cache, which the webhook reads
	warn  *warnings
}

func startWebhookRig(t *testing.T, inj *webhook.PodInjector) *webhookRig {
	t.Helper()
	env, cfg, err := rig.StartAPIServerWithWebhooks(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	wio := env.WebhookInstallOptions
	cache := startManager(t, cfg, webhook.Options{CertManagement: webhook.CertsExternal, Host: wio.LocalServingHost, Port: wio.LocalServingPort,
		CertDir: wio.LocalServingCertDir, Injector: inj})
	warn := &warnings{}
	ccfg := rest.CopyConfig(cfg)
	ccfg.WarningHandler = warn
	c, err := client.New(ccfg, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return &webhookRig{env: env, c: c, cache: cache, warn: warn}
}

// queue creates kc, a ShareQueue on it and an active Republisher-mode DeadLetterRoute (with
// the status the DeadLetterRoute controller would give it; no controller runs here), and
// waits until the webhook's cache has them.
func (r *webhookRig) queue(t *testing.T, kc *kqv1.KafkaCluster, name, topic, dlq string, attempts int32) {
	t.Helper()
	ctx := context.Background()
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: kc.Namespace, Name: name}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: kc.Name}, Topic: kqv1.QueueTopicSpec{Name: topic}, GroupID: topic,
		Delivery: kqv1.DeliverySpec{MaxDeliveryAttempts: ptr.To(attempts), LockDuration: &metav1.Duration{Duration: 30 * time.Second}},
	}}
	route := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: kc.Namespace, Name: name + "-dead"}, Spec: kqv1.DeadLetterRouteSpec{
		QueueRef: kqv1.QueueReference{Name: name}, Mode: kqv1.DeadLetterModeRepublisher,
		Republisher: &kqv1.RepublisherSpec{Members: ptr.To[int32](2)},
	}}
	for _, o := range []client.Object{kc, sq, route} {
		if err := r.c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	route.Status = kqv1.DeadLetterRouteStatus{EffectiveMode: kqv1.DeadLetterModeRepublisher, TopicName: dlq, QueueName: name,
		Conditions: []metav1.Condition{{Type: kqv1.ConditionRouteActive, Status: metav1.ConditionTrue, Reason: kqv1.ReasonRepublisher,
			Message: "active", LastTransitionTime: metav1.Now()}}}
	if err := r.c.Status().Update(ctx, route); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		var rt kqv1.DeadLetterRoute
		var q kqv1.ShareQueue
		var k kqv1.KafkaCluster
		if err := r.cache.Get(ctx, client.ObjectKeyFromObject(route), &rt); err != nil || rt.Status.TopicName == "" {
			return fmt.Sprintf("cache has not seen route %s active (%v)", route.Name, err)
		}
		if err := r.cache.Get(ctx, client.ObjectKeyFromObject(sq), &q); err != nil {
			return err.Error()
		}
		if err := r.cache.Get(ctx, client.ObjectKeyFromObject(kc), &k); err != nil {
			return err.Error()
		}
		return ""
	})
}

func sidecarOf(t *testing.T, p *corev1.Pod) corev1.Container {
	t.Helper()
	for _, c := range p.Spec.InitContainers {
		if c.Name == webhook.ContainerName {
			return c
		}
	}
	t.Fatalf("Pod %s has no %s init container: %+v", p.Name, webhook.ContainerName, p.Spec.InitContainers)
	return corev1.Container{}
}

// sidecarProcess turns the sidecar of the stored Pod into a process of the republisher binary
// the kubelet would run: exactly the container's environment, with secretKeyRef variables
// resolved from their Secrets, and its secret volumes written as files (the volume's items,
// keeping their file names) under a temporary root that stands in for "/"; values naming a
// path under a mount are rewritten to that root.
func sidecarProcess(t *testing.T, c client.Client, p *corev1.Pod, bin string) (*exec.Cmd, corev1.Container) {
	t.Helper()
	ctx := context.Background()
	side := sidecarOf(t, p)
	secret := func(name string) *corev1.Secret {
		var s corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, &s); err != nil {
			t.Fatalf("Secret %s the sidecar refers to: %v", name, err)
		}
		return &s
	}
	root := t.TempDir()
	var mounts []string
	for _, m := range side.VolumeMounts {
		var vol *corev1.Volume
		for i := range p.Spec.Volumes {
			if p.Spec.Volumes[i].Name == m.Name {
				vol = &p.Spec.Volumes[i]
			}
		}
		if vol == nil || vol.Secret == nil {
			t.Fatalf("mount %s names no secret volume of the Pod: %+v", m.Name, vol)
		}
		if !m.ReadOnly {
			t.Errorf("mount %s is writable", m.Name)
		}
		s := secret(vol.Secret.SecretName)
		dir := filepath.Join(root, m.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		items := vol.Secret.Items
		if len(items) == 0 {
			for k := range s.Data {
				items = append(items, corev1.KeyToPath{Key: k, Path: k})
			}
		}
		for _, it := range items {
			v, ok := s.Data[it.Key]
			if !ok {
				t.Fatalf("Secret %s has no key %s", s.Name, it.Key)
			}
			if err := os.WriteFile(filepath.Join(dir, it.Path), v, 0o400); err != nil {
				t.Fatal(err)
			}
		}
		mounts = append(mounts, m.MountPath)
	}
	var env []string
	for _, e := range side.Env {
		v := e.Value
		switch {
		case e.ValueFrom == nil:
			for _, m := range mounts {
				if v == m || strings.HasPrefix(v, m+"/") {
					v = filepath.Join(root, v)
				}
			}
		case e.ValueFrom.SecretKeyRef != nil:
			s := secret(e.ValueFrom.SecretKeyRef.Name)
			b, ok := s.Data[e.ValueFrom.SecretKeyRef.Key]
			if !ok && e.ValueFrom.SecretKeyRef.Optional != nil && *e.ValueFrom.SecretKeyRef.Optional {
				continue // the kubelet leaves an optional variable of a missing key unset
			}
			if !ok {
				t.Fatalf("env %s: Secret %s has no key %s", e.Name, s.Name, e.ValueFrom.SecretKeyRef.Key)
			}
			v = string(b)
		case e.ValueFrom.ResourceFieldRef != nil:
			// The downward API: the named container's resource, in units of the divisor (1).
			rf := e.ValueFrom.ResourceFieldRef
			var q resource.Quantity
			found := false
			for _, ct := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
				if ct.Name != rf.ContainerName {
					continue
				}
				kind, name, _ := strings.Cut(rf.Resource, ".")
				list := ct.Resources.Limits
				if kind == "requests" {
					list = ct.Resources.Requests
				}
				q, found = list[corev1.ResourceName(name)]
			}
			if !found || !rf.Divisor.IsZero() && rf.Divisor.Cmp(resource.MustParse("1")) != 0 {
				t.Fatalf("env %s: resourceFieldRef %+v names no resource this test resolves", e.Name, rf)
			}
			v = strconv.FormatInt(q.Value(), 10)
		default:
			t.Fatalf("env %s: unexpected source %+v", e.Name, e.ValueFrom)
		}
		env = append(env, e.Name+"="+v)
	}
	if len(side.Command) == 0 || side.Command[0] != "/republisher" {
		t.Fatalf("sidecar command %v", side.Command)
	}
	cmd := exec.Command(bin, append(append([]string{}, side.Command[1:]...), side.Args...)...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd, side
}

// startupProbeURL is the URL the sidecar's startupProbe calls, on loopback.
func startupProbeURL(t *testing.T, side corev1.Container) (*corev1.Probe, string) {
	t.Helper()
	pr := side.StartupProbe
	if pr == nil || pr.HTTPGet == nil {
		t.Fatalf("sidecar has no HTTP startupProbe: %+v", pr)
	}
	port := pr.HTTPGet.Port.IntValue()
	for _, p := range side.Ports {
		if p.Name == pr.HTTPGet.Port.String() {
			port = int(p.ContainerPort)
		}
	}
	return pr, fmt.Sprintf("http://127.0.0.1:%d%s", port, pr.HTTPGet.Path)
}

// waitProbeRefuses waits until the sidecar's startup probe answers 503 naming want, failing
// the test if it ever passes or the sidecar exits.
func waitProbeRefuses(t *testing.T, side corev1.Container, exited <-chan error, logs *bytes.Buffer, want string) {
	t.Helper()
	_, url := startupProbeURL(t, side)
	deadline := time.Now().Add(60 * time.Second)
	for last := ""; ; time.Sleep(200 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("the sidecar exited: %v\n%s", err, logs.String())
		default:
		}
		if resp, err := http.Get(url); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Fatalf("startup probe %s passed; want 503 naming %s\n%s", url, want, logs.String())
			}
			if last = string(body); resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(last, want) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("startup probe %s never named %s (last %q)\n%s", url, want, last, logs.String())
		}
	}
}

// waitStartupProbe polls the container's startupProbe the way the kubelet does (HTTP GET on
// the named port, on the Pod's address, here loopback) until it succeeds.
func waitStartupProbe(t *testing.T, side corev1.Container, exited <-chan error, logs *bytes.Buffer) {
	t.Helper()
	pr, url := startupProbeURL(t, side)
	deadline := time.Now().Add(time.Duration(pr.PeriodSeconds*pr.FailureThreshold) * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("the sidecar exited before its startup probe passed: %v\n%s", err, logs.String())
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("startup probe %s never passed (%v)\n%s", url, err, logs.String())
		}
		time.Sleep(time.Duration(pr.PeriodSeconds) * time.Second / 10)
	}
}

// freePort is a port for a process the test starts (rig.FreePort: outside the kernel's
// ephemeral range, reserved for this test process).
func freePort(t *testing.T) int {
	t.Helper()
	p, err := rig.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A Pod of a KafkaCluster with SASL (SCRAM-SHA-512) and one with mutual TLS get sidecars that
// really connect: the sidecar of the Pod the apiserver stored is run as the republisher binary
// with exactly its environment (Secrets resolved as the kubelet would) and its secret volumes
// as files; through its HTTP API the test receives records produced to the queue's topic,
// accepts one, rejects one, and finds the rejected one in the dead-letter topic. The stored
// Pod holds no Secret value.
func TestSidecarConnectsWithSASLAndTLS(t *testing.T) {
	t.Parallel()
	rig.SkipWithoutRig(t, "a kube-apiserver and a Kafka broker")
	ca, err := rig.NewTestCA()
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.ServerCert()
	if err != nil {
		t.Fatal(err)
	}
	server.ClientCAPEM = ca.CertPEM // the TLS listener requires a client certificate
	clientCert, err := ca.ClientCert()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	k, err := rig.StartKafka(ctx, rig.KafkaOptions{SASLUsers: map[string]string{"alice": "alice-s3cret-pw"}, TLS: server, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)

	bin := filepath.Join(t.TempDir(), "republisher")
	build := exec.Command("go", "build", "-o", bin, "./cmd/republisher")
	build.Dir = rig.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the republisher: %v\n%s", err, out)
	}

	// The queues' topics and group configs, made over the plaintext listener as the operator
	// would (the delivery limit one above the application's attempts).
	const attempts = 3
	makeQueues(ctx, t, k.BootstrapServers(), attempts, "sasl-orders", "tls-orders")

	// The sidecar's ports are free ones here, as this machine is not a Pod.
	r := startWebhookRig(t, &webhook.PodInjector{Image: "example.com/kqo:test", APIPort: freePort(t), MetricsPort: freePort(t)})
	const ns = "shop"
	if err := r.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kafka-user"}, StringData: map[string]string{"username": "alice", "password": "alice-s3cret-pw"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kafka-ca"}, StringData: map[string]string{"bundle.pem": ca.CertPEM, "unrelated": "not-mounted"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kafka-client"}, Type: corev1.SecretTypeTLS,
			StringData: map[string]string{"tls.crt": clientCert.CertPEM, "tls.key": clientCert.KeyPEM}},
	} {
		if err := r.c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	r.queue(t, &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sasl"}, Spec: kqv1.KafkaClusterSpec{
		BootstrapServers: k.SASLBootstrapServers(),
		SASL:             &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismScramSHA512, SecretName: "kafka-user"},
	}}, "sasl-orders", "sasl-orders", "dlq.sasl-orders", attempts)
	r.queue(t, &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls"}, Spec: kqv1.KafkaClusterSpec{
		BootstrapServers: k.TLSBootstrapServers(),
		TLS: &kqv1.KafkaClusterTLS{CASecretRef: &kqv1.SecretKeyReference{Name: "kafka-ca", Key: "bundle.pem"}, ClientCertSecretName: "kafka-client",
			ServerName: "localhost"},
	}}, "tls-orders", "tls-orders", "dlq.tls-orders", attempts)

	// Values that must never be in a Pod: the password, the username, the PEM bodies.
	pemBody := func(p string) string { return strings.Split(strings.TrimSpace(p), "\n")[1] }
	forbidden := map[string]string{"password": "alice-s3cret-pw", "CA": pemBody(ca.CertPEM), "client certificate": pemBody(clientCert.CertPEM),
		"client key": pemBody(clientCert.KeyPEM), "key header": "PRIVATE KEY"}

	producer, err := kafka.NewProducer(kafka.Config{BootstrapServers: k.BootstrapServers()})
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()

	for _, q := range []string{"sasl-orders", "tls-orders"} {
		t.Run(q, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: q + "-worker", Labels: map[string]string{kqv1.QueueLabel: q}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}}}
			if err := r.c.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			if w := r.warn.take(); len(w) != 0 {
				t.Errorf("warnings: %v", w)
			}
			// What the apiserver stored, read back.
			var stored corev1.Pod
			if err := r.c.Get(ctx, client.ObjectKeyFromObject(p), &stored); err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(&stored)
			if err != nil {
				t.Fatal(err)
			}
			for what, v := range forbidden {
				if strings.Contains(string(raw), v) {
					t.Errorf("the stored Pod contains the %s", what)
				}
			}
			if strings.Contains(string(raw), `"alice"`) {
				t.Errorf("the stored Pod contains the SASL username")
			}
			if stored.Labels[kqv1.RepublisherLabel] != kqv1.RepublisherInjected {
				t.Errorf("labels %v", stored.Labels)
			}

			cmd, side := sidecarProcess(t, r.c, &stored, bin)
			var logs bytes.Buffer
			cmd.Stdout, cmd.Stderr = &logs, &logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer func() {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-exited:
				case <-time.After(40 * time.Second):
					_ = cmd.Process.Kill()
				}
				if t.Failed() || testing.Verbose() {
					t.Logf("sidecar output:\n%s", logs.String())
				}
			}()
			waitStartupProbe(t, side, exited, &logs)
			var listen string
			for _, e := range side.Env {
				if e.Name == "KQO_LISTEN" {
					listen = e.Value
				}
			}

			for _, v := range []string{"keep", "dead"} {
				if err := producer.Produce(ctx, q, []byte(v), []byte(q+"-"+v), nil); err != nil {
					t.Fatal(err)
				}
			}
			api := &republisher.Client{BaseURL: "http://" + listen}
			acked := map[string]bool{}
			deadline := time.Now().Add(2 * time.Minute)
			for len(acked) < 2 {
				if time.Now().After(deadline) {
					t.Fatalf("received and acked %v of keep and dead in 2m\n%s", acked, logs.String())
				}
				got, err := api.Receive(ctx, republisher.ReceiveRequest{MaxRecords: 10, WaitMs: 2000})
				if err != nil {
					t.Fatalf("receive: %v\n%s", err, logs.String())
				}
				var acks []republisher.Ack
				for _, rec := range got.Records {
					switch string(rec.Value) {
					case q + "-keep":
						acks = append(acks, republisher.Ack{ID: rec.ID, Type: "accept"})
					case q + "-dead":
						acks = append(acks, republisher.Ack{ID: rec.ID, Type: "reject"})
					default:
						t.Errorf("unexpected record %q", rec.Value)
					}
				}
				if len(acks) == 0 {
					continue
				}
				out, err := api.Ack(ctx, republisher.AckRequest{Acks: acks})
				if err != nil {
					t.Fatalf("ack: %v", err)
				}
				for i, res := range out.Results {
					if res.Error != "" {
						t.Fatalf("ack %s of %s: %s", acks[i].Type, res.ID, res.Error)
					}
					acked[acks[i].Type] = true
				}
			}

			// The rejected record is in the dead-letter topic (read over plaintext), with its
			// provenance; the accepted one is not.
			cl, err := kgo.NewClient(kgo.SeedBrokers(k.BootstrapServers()...), kgo.ConsumeTopics("dlq."+q), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			var dead []*kgo.Record
			pollCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			for len(dead) == 0 && pollCtx.Err() == nil {
				dead = append(dead, cl.PollFetches(pollCtx).Records()...)
			}
			if len(dead) != 1 || string(dead[0].Value) != q+"-dead" {
				var vals []string
				for _, d := range dead {
					vals = append(vals, string(d.Value))
				}
				t.Fatalf("dead-letter topic holds %v, want exactly %s-dead", vals, q)
			}
			hdr := map[string]string{}
			for _, h := range dead[0].Headers {
				hdr[h.Key] = string(h.Value)
			}
			if hdr[republisher.HeaderReason] != republisher.ReasonRejected || hdr[republisher.HeaderSourceTopic] != q || hdr[republisher.HeaderGroup] != q {
				t.Errorf("dead letter headers %v", hdr)
			}
			if strings.Contains(logs.String(), "alice-s3cret-pw") {
				t.Errorf("the sidecar logged the password")
			}
		})
	}
}

// The sidecar meets Pod Security "restricted" on its own: in a namespace that enforces it
// (the apiserver's own PodSecurity admission, shown to reject a non-compliant Pod first), a
// labelled Pod whose containers comply is admitted with the sidecar, its secret volumes and
// probe, whether the Pod sets seccompProfile and runAsNonRoot for all containers or each app
// container sets them itself.
func TestSidecarPassesPodSecurityRestricted(t *testing.T) {
	t.Parallel()
	rig.SkipWithoutRig(t, "a kube-apiserver")
	r := startWebhookRig(t, &webhook.PodInjector{Image: "example.com/kqo:test"})
	ctx := context.Background()
	const ns = "restricted"
	if err := r.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}); err != nil {
		t.Fatal(err)
	}
	// TLS and SASL, so that the sidecar brings secret volumes and secretKeyRef variables.
	r.queue(t, &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"}, Spec: kqv1.KafkaClusterSpec{
		BootstrapServers: []string{"kafka-0:9093"},
		TLS:              &kqv1.KafkaClusterTLS{CASecretRef: &kqv1.SecretKeyReference{Name: "kafka-ca", Key: "ca.crt"}, ClientCertSecretName: "kafka-client"},
		SASL:             &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismScramSHA512, SecretName: "kafka-user"},
	}}, "orders", "orders", "dlq.orders", 3)

	app := func(sc *corev1.SecurityContext) []corev1.Container {
		return []corev1.Container{{Name: "app", Image: "example.com/app:1", SecurityContext: sc}}
	}
	// The apiserver enforces the profile: a Pod without any securityContext is rejected.
	bad := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "non-compliant"}, Spec: corev1.PodSpec{Containers: app(nil)}}
	if err := r.c.Create(ctx, bad); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Fatalf("a non-compliant Pod in a restricted namespace: %v, want Forbidden by PodSecurity (is the admission plugin on?)", err)
	}

	runtimeDefault := &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
	dropAll := &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	for _, tc := range []struct {
		name string
		spec corev1.PodSpec
	}{
		{"pod-level", corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: runtimeDefault},
			Containers:      app(&corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: dropAll}),
		}},
		{"container-level", corev1.PodSpec{
			Containers: app(&corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: dropAll, RunAsNonRoot: ptr.To(true), SeccompProfile: runtimeDefault}),
		}},
	} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name, Labels: map[string]string{kqv1.QueueLabel: "orders"}}, Spec: tc.spec}
		if err := r.c.Create(ctx, p); err != nil {
			t.Errorf("%s: a compliant Pod with the sidecar was refused: %v", tc.name, err)
			continue
		}
		side := sidecarOf(t, p)
		if len(p.Spec.Volumes) != 2 || len(side.VolumeMounts) != 2 || side.StartupProbe == nil || p.Labels[kqv1.RepublisherLabel] != kqv1.RepublisherInjected {
			t.Errorf("%s: volumes %d, mounts %d, probe %v, labels %v", tc.name, len(p.Spec.Volumes), len(side.VolumeMounts), side.StartupProbe, p.Labels)
		}
		if w := r.warn.take(); len(w) != 0 {
			t.Errorf("%s: warnings %v", tc.name, w)
		}
	}
}

// makeQueues creates each queue's topic and its "dlq." dead-letter topic (one partition) and
// sets its share group to start at the earliest offset with a delivery limit one above the
// application's attempts, as the operator would for a Republisher route.
func makeQueues(ctx context.Context, t *testing.T, bootstrap []string, attempts int, queues ...string) {
	t.Helper()
	admin, err := kafka.NewClient(kafka.Config{BootstrapServers: bootstrap})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var topics []kafka.NewTopic
	var alts []kafka.Alteration
	for _, q := range queues {
		topics = append(topics, kafka.NewTopic{Name: q, Partitions: 1, ReplicationFactor: 1}, kafka.NewTopic{Name: "dlq." + q, Partitions: 1, ReplicationFactor: 1})
		alts = append(alts, kafka.Alteration{Resource: kafka.ResourceKey{Type: kafka.GroupResource, Name: q}, Configs: []kafka.AlterConfig{
			{Name: "share.auto.offset.reset", Op: kafka.OpSet, Value: "earliest"},
			{Name: "share.delivery.count.limit", Op: kafka.OpSet, Value: strconv.Itoa(attempts + 1)},
		}})
	}
	res, err := admin.CreateTopics(ctx, topics)
	if err != nil {
		t.Fatal(err)
	}
	for n, r := range res {
		if r.Err != nil {
			t.Fatalf("creating %s: %v", n, r.Err)
		}
	}
	altRes, err := admin.IncrementalAlterConfigs(ctx, alts)
	if err != nil {
		t.Fatal(err)
	}
	for key, err := range altRes {
		if err != nil {
			t.Fatalf("group configs of %s: %v", key.Name, err)
		}
	}
}
