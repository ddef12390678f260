//go:build nodee2e

// Package node runs the user's path end to end on a real node (test/rig's NodeRig: a kubelet
// and containerd beside a real apiserver, controller-manager and scheduler, and a Kafka broker
// the Pods reach): README's `helm install` with the image built from this tree, the docs'
// application namespace with a Republisher route, and an application Pod whose injected
// sidecar dead-letters what it rejects. `make test-node` runs it (root, Linux, cgroup v1
// hierarchies, as this machine kind has); docs/node-rig.md describes the rig.
package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kafkaqueues/kafka-queue-operator/test/image"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		// TestNodeSweepAfterKill's child is killed with SIGKILL: it builds no tools it could
		// not remove (it runs kubectl only, from the rig's directory).
		os.Exit(m.Run())
	}
	if err := rig.SetupUserTools(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	rig.RemoveUserTools()
	os.Exit(code)
}

const (
	release   = "kqo"
	releaseNS = "kqo-system"
	appNS     = "shop"
	queue     = "orders"
	// records is how many the test produces; every 10th is rejected by the app.
	records = 1500
)

// operatorImage is the image the chart names by default: image.repository at the chart's
// appVersion. The test imports its build under that name, so README's install runs as is.
// releaseImage runs make release's program for this machine's platform and returns the path
// of the operator image tarball it wrote, tagged ref.
func releaseImage(ctx context.Context, t *testing.T, ref, version string) string {
	t.Helper()
	dist := filepath.Join(t.TempDir(), "dist")
	rel := exec.CommandContext(ctx, "go", "run", "./hack/release", "-o", dist, "-version", version, "-commit", "nodetest",
		"-platforms", "linux/"+runtime.GOARCH, "-partial-krew", "-image", ref)
	rel.Dir = rig.RepoRoot()
	if out, err := rel.CombinedOutput(); err != nil {
		t.Fatalf("hack/release: %v\n%s", err, out)
	}
	return filepath.Join(dist, "kafka-queue-operator-image.tar")
}

func operatorImage(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rig.RepoRoot(), "charts", "kafka-queue-operator", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^appVersion:\s*"?([^"\s]+)"?`).FindSubmatch(b)
	if m == nil {
		t.Fatal("Chart.yaml has no appVersion")
	}
	v, err := os.ReadFile(filepath.Join(rig.RepoRoot(), "charts", "kafka-queue-operator", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	repo := regexp.MustCompile(`(?m)^  repository:\s*(\S+)`).FindSubmatch(v)
	if repo == nil {
		t.Fatal("values.yaml has no image.repository")
	}
	return string(repo[1]) + ":" + string(m[1])
}

func TestNodeEndToEnd(t *testing.T) {
	if missing := rig.NodePrerequisites(); len(missing) > 0 {
		// Never a skip: make test-node exists to run this.
		t.Fatalf("this host cannot run the node rig: it lacks %s", strings.Join(missing, ", "))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	phase := phases(t)

	// Images, built without Docker from this tree: the operator's as a release ships it
	// (make release's image tarball, its version linked in), the test app's and pause.
	bin, imgs := t.TempDir(), t.TempDir()
	if err := image.BuildFixtures(ctx, rig.RepoRoot(), bin); err != nil {
		t.Fatal(err)
	}
	opImage, appImage := operatorImage(t), "kqo.local/queueapp:1"
	const relVersion = "v0.0.0-nodetest"
	tars := map[string]string{opImage: releaseImage(ctx, t, opImage, relVersion)}
	for ref, spec := range map[string]image.Spec{appImage: image.AppSpec(bin), rig.PauseImage: image.PauseSpec(bin)} {
		tars[ref] = filepath.Join(imgs, strings.NewReplacer("/", "_", ":", "_").Replace(ref)+".tar")
		if err := image.Write(spec, ref, tars[ref]); err != nil {
			t.Fatal(err)
		}
	}
	phase("images built")

	r, err := rig.StartNode(ctx, rig.NodeOptions{PauseImageTar: tars[rig.PauseImage], Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(r.Config)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpState(t, r, cs)
		}
		r.Stop()
	})
	for _, ref := range []string{opImage, appImage} {
		if err := r.ImportImage(ctx, tars[ref]); err != nil {
			t.Fatal(err)
		}
	}
	phase("node up, images imported")
	// Two Kafka clusters Pods reach: the release's KafkaCluster (README's install waits for it
	// to be Ready, so share groups must be on: 4.4's default share.version 2) and the app
	// namespace's, formatted at release 4.1 (share.version 0 until the operator finalizes 1,
	// so its route runs in Republisher mode).
	k44, err := r.StartKafka(ctx, rig.KafkaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Its SSL listener requires a client certificate (the secured sidecar below).
	ca, server, clientCert, err := rig.NewMutualTLS()
	if err != nil {
		t.Fatal(err)
	}
	k41, err := r.StartKafka(ctx, rig.KafkaOptions{ReleaseVersion: "4.1", TLS: server})
	if err != nil {
		t.Fatal(err)
	}
	phase("brokers up")

	sh := rig.NewUserShellWithKubeconfig(t, r.Kubeconfig)
	sh.Replace["kafka-0.kafka:9092"] = k44.Bootstrap()

	// README's install, verbatim: the kubectl wait in it passes only if the Deployment's Pod
	// runs the manager from the image.
	sh.RunBlock(rig.DocBlock(t, "README.md", "install"), nil)
	phase("README install: KafkaCluster Ready")
	deployName := release + "-kafka-queue-operator"
	waitDeploymentAvailable(ctx, t, cs, releaseNS, deployName)
	phase("operator Deployment Available (webhook serving)")
	opPod := onlyPod(ctx, t, cs, releaseNS, "app.kubernetes.io/instance="+release)
	checkRestrictedPod(t, opPod, "manager")
	// The released image's manager says which release it is.
	if out := sh.Run("kubectl -n " + releaseNS + " logs " + opPod.Name + " -c manager"); !strings.Contains(out, `"version":"`+relVersion+` (commit nodetest`) {
		t.Errorf("the operator Pod's log does not name release %s in its start line:\n%s", relVersion, head(strings.Split(out, "\n")))
	}
	checkProcessUser(t, "/manager", 65532)
	checkWebhookCABundle(ctx, t, cs)

	// The docs' application namespace: restricted Pod Security, a 4.1 cluster finalized to
	// share.version 1, a queue and a Republisher route.
	sh.Replace["kafka-0.kafka:9092"] = k41.Bootstrap()
	sh.RunBlock(rig.DocBlock(t, "docs/install.md", "republisher-app"), nil)
	phase("docs republisher-app: queue and route Ready")
	out := sh.Run("kubectl -n shop get dlr orders-dlq -o jsonpath='{.status.effectiveMode} {.status.topicName}'")
	mode, dlqTopic, _ := strings.Cut(strings.TrimSpace(out), " ")
	if mode != "Republisher" || dlqTopic == "" {
		t.Fatalf("route: mode %q topic %q, want Republisher and a topic", mode, dlqTopic)
	}
	queueTopic := strings.TrimSpace(sh.Run("kubectl -n shop get sq orders -o jsonpath='{.status.topicName}'"))
	if sv := strings.TrimSpace(sh.Run("kubectl -n shop get kqc kafka -o jsonpath='{.status.shareVersion}'")); sv != "1" {
		t.Fatalf("KafkaCluster status.shareVersion = %q, want 1 (finalized by the operator)", sv)
	}

	// The ledger: the app writes each record it accepted (and the brokers confirmed) there.
	cl, err := kgo.NewClient(kgo.SeedBrokers(k41.BootstrapServers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const ledgerTopic = "orders-ledger"
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, ledgerTopic); err != nil {
		t.Fatal(err)
	}
	watch := newLedgerWatch(ctx, t, k41.BootstrapServers(), ledgerTopic, dlqTopic)

	sh.Run(appDeployment("shop", "orders-worker", "orders", appImage, k41.Bootstrap(), ledgerTopic))
	appPod := waitAppPod(ctx, t, cs, "")
	checkSidecarFirst(ctx, t, cs, appPod)
	checkRestrictedPod(t, appPod, "app")
	phase("app Pod running with its sidecar")

	// Produce steadily, so the Pod deletions below land mid-stream.
	prodDone := make(chan error, 1)
	go func() {
		for i := 0; i < records; i++ {
			v := []byte(strconv.Itoa(i))
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: queueTopic, Key: v, Value: v}).FirstErr(); err != nil {
				prodDone <- fmt.Errorf("producing %d: %w", i, err)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		prodDone <- nil
	}()

	// The app Pod deleted mid-run: the sidecar drains, the Deployment's next Pod takes over.
	watch.waitSeen(t, records/4, 3*time.Minute)
	phase("a quarter of the records done")
	deletePod(ctx, t, cs, appNS, appPod.Name)
	appPod = waitAppPod(ctx, t, cs, appPod.Name)
	checkSidecarFirst(ctx, t, cs, appPod)
	phase("app Pod replaced")

	// The operator Pod deleted mid-run: the next one takes the lease, serves the webhook with
	// the same certificates and reconciles. A Pod created after that gets its sidecar from it.
	watch.waitSeen(t, records/2, 3*time.Minute)
	phase("half of the records done")
	deletePod(ctx, t, cs, releaseNS, opPod.Name)
	waitNewPod(ctx, t, cs, releaseNS, "app.kubernetes.io/instance="+release, opPod.Name)
	waitDeploymentAvailable(ctx, t, cs, releaseNS, deployName)
	sh.Run("kubectl -n shop wait sq/orders --for=condition=Ready --timeout=2m")
	sh.Run("kubectl -n shop scale deploy/orders-worker --replicas=2")
	waitDeploymentAvailable(ctx, t, cs, appNS, "orders-worker")
	for _, p := range podsOf(ctx, t, cs, appNS, "app=orders-worker") {
		checkSidecarFirst(ctx, t, cs, &p)
	}
	phase("operator Pod replaced; app scaled to 2 with sidecars")

	// A record whose accept the broker lost comes back only when its lock lapses: wait that
	// long after the last record is seen, or a late duplicate could not show.
	lock, err := time.ParseDuration(strings.TrimSpace(sh.Run("kubectl -n shop get sq orders -o jsonpath='{.spec.delivery.lockDuration}'")))
	if err != nil {
		t.Fatal(err)
	}
	// What follows is independent, so it runs side by side (issue 29: this test had grown to
	// six minutes end to end): the records' accounting, which mostly waits out a lock
	// duration; the secured sidecar (namespace shop-tls, the 4.1 brokers' SSL listener); and
	// the two not-ready scenarios, each in its own namespace with its own brokers. All of it
	// comes after the operator Pod's replacement, whose webhook injects every sidecar here.
	t.Run("after the operator restart", func(t *testing.T) {
		t.Run("every record accounted for", func(t *testing.T) {
			t.Parallel()
			if err := <-prodDone; err != nil {
				t.Fatal(err)
			}
			accepted, dead := watch.waitAll(t, records, 4*time.Minute, lock+5*time.Second)
			var dup, missing, wrong []string
			redelivered, byCount := 0, map[int]int{}
			for i := 0; i < records; i++ {
				v := strconv.Itoa(i)
				a, d := accepted[v], dead[v]
				switch {
				case i%10 == 0 && (len(a) != 0 || len(d) != 1):
					wrong = append(wrong, fmt.Sprintf("%s: accepted %d, dead-lettered %d (want 0, 1)", v, len(a), len(d)))
				case i%10 != 0 && (len(a) != 1 || len(d) != 0):
					if len(a) > 1 {
						dup = append(dup, v)
					} else if len(a) == 0 && len(d) == 0 {
						missing = append(missing, v)
					} else {
						wrong = append(wrong, fmt.Sprintf("%s: accepted %d, dead-lettered %d (want 1, 0)", v, len(a), len(d)))
					}
				}
				for _, rec := range a {
					n, _ := strconv.Atoi(header(rec, "delivery-count"))
					byCount[n]++
					if n > 1 {
						redelivered++
					}
				}
				for _, rec := range d {
					for _, h := range []string{"kqo.source.topic", "kqo.source.partition", "kqo.source.offset", "kqo.group", "kqo.delivery.count", "kqo.reason"} {
						if header(rec, h) == "" {
							wrong = append(wrong, fmt.Sprintf("%s: dead-letter record lacks header %s (has %v)", v, h, rec.Headers))
						}
					}
					if got := header(rec, "kqo.source.topic"); got != queueTopic {
						wrong = append(wrong, fmt.Sprintf("%s: kqo.source.topic %q, want %q", v, got, queueTopic))
					}
				}
			}
			if len(dup)+len(missing)+len(wrong) > 0 {
				t.Fatalf("%d accepted twice %v; %d lost %v; %d wrong:\n%s", len(dup), head(dup), len(missing), head(missing), len(wrong), strings.Join(head(wrong), "\n"))
			}
			// value%7==3 is abandoned on its first delivery, so those come back at least once.
			if redelivered < records/7/2 {
				t.Fatalf("only %d accepted records were delivered more than once; the app abandons ~%d first deliveries", redelivered, records/7)
			}
			t.Logf("%d records: %d accepted exactly once (%d after a redelivery; accepted at delivery count: %v), %d dead-lettered once with provenance", records, len(accepted), redelivered, byCount, len(dead))
		})
		t.Run("secured sidecar: mutual TLS from Secret volumes", func(t *testing.T) {
			t.Parallel()
			securedSidecar(ctx, t, sh, cs, k41, ca, clientCert, appImage)
		})
		// Issue 30 case 8, two independent scenarios (own namespaces, own brokers).
		t.Run("sidecar not ready", func(t *testing.T) {
			t.Parallel()
			t.Run("batch Job through a broker outage", func(t *testing.T) {
				t.Parallel()
				batchJobThroughAnOutage(ctx, t, r, rig.NewUserShellWithKubeconfig(t, r.Kubeconfig), cs, appImage)
			})
			t.Run("refused credentials", func(t *testing.T) {
				t.Parallel()
				refusedCredentials(ctx, t, r, rig.NewUserShellWithKubeconfig(t, r.Kubeconfig), cs, appImage)
			})
		})
	})
	if t.Failed() {
		t.FailNow()
	}
	phase("every record accounted for; secured sidecar; sidecar not ready: a Job through a broker outage, refused SASL credentials")

	// helm uninstall keeps the topics (and the CRDs, queues and routes).
	sh.Run("helm uninstall kqo -n kqo-system --wait")
	topics, err := adm.ListTopics(ctx, queueTopic, dlqTopic)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range []string{queueTopic, dlqTopic} {
		if !topics.Has(tp) {
			t.Fatalf("topic %s is gone after helm uninstall", tp)
		}
	}
	if out := sh.Run("kubectl -n shop get sq,dlr -o name"); !strings.Contains(out, "sharequeue") || !strings.Contains(out, "deadletterroute") {
		t.Fatalf("queues and routes after uninstall: %q", out)
	}
	phase("helm uninstall: topics, queue and route kept")
}

// appDeployment is the test application: the queueapp image (test/image/queueapp) in a
// Deployment labelled for the webhook, held to the restricted profile.
func appDeployment(ns, name, queue, img, bootstrap, ledger string) string {
	return fmt.Sprintf(`kubectl apply -n %[1]s -f - <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata: {name: %[2]s}
spec:
  replicas: 1
  selector: {matchLabels: {app: %[2]s}}
  template:
    metadata:
      labels: {app: %[2]s, kafkaqueues.io/queue: %[3]s}
    spec:
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      terminationGracePeriodSeconds: 30
      containers:
      - name: app
        image: %[4]s
        imagePullPolicy: IfNotPresent
        env:
        - {name: KQO_APP_BOOTSTRAP, value: "%[5]s"}
        - {name: KQO_APP_LEDGER_TOPIC, value: %[6]s}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          runAsUser: 65532
          capabilities: {drop: [ALL]}
        resources:
          requests: {cpu: 10m, memory: 32Mi}
          limits: {memory: 128Mi}
YAML`, ns, name, queue, img, bootstrap, ledger)
}

// phases logs the time each step took.
func phases(t *testing.T) func(string) {
	start, last := time.Now(), time.Now()
	return func(what string) {
		t.Logf("PHASE %-55s %7.1fs (total %6.1fs)", what, time.Since(last).Seconds(), time.Since(start).Seconds())
		last = time.Now()
	}
}

func waitDeploymentAvailable(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	rig.Eventually(t, 3*time.Minute, func() string {
		d, err := cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if d.Status.ObservedGeneration < d.Generation {
			return "deployment status not observed yet"
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue && d.Status.UpdatedReplicas == *d.Spec.Replicas && d.Status.AvailableReplicas == *d.Spec.Replicas && d.Status.Replicas == *d.Spec.Replicas {
				return ""
			}
		}
		return fmt.Sprintf("deployment %s/%s not Available: %+v", ns, name, d.Status)
	})
}

func podsOf(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, selector string) []corev1.Pod {
	t.Helper()
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

func onlyPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, selector string) *corev1.Pod {
	t.Helper()
	ps := podsOf(ctx, t, cs, ns, selector)
	if len(ps) != 1 {
		t.Fatalf("%d Pods in %s match %s, want 1", len(ps), ns, selector)
	}
	return &ps[0]
}

// waitNewPod waits for a running, ready Pod matching selector other than old.
func waitNewPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, selector, old string) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	rig.Eventually(t, 3*time.Minute, func() string {
		for _, p := range podsOf(ctx, t, cs, ns, selector) {
			if p.Name == old || p.Status.Phase != corev1.PodRunning {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					got = &p
					return ""
				}
			}
		}
		return fmt.Sprintf("no ready Pod for %s in %s besides %q", selector, ns, old)
	})
	return got
}

func waitAppPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, old string) *corev1.Pod {
	t.Helper()
	return waitNewPod(ctx, t, cs, appNS, "app=orders-worker", old)
}

// securedSidecar: in a second restricted namespace, a KafkaCluster on the brokers' mutual-TLS
// listener. The webhook gives the sidecar the CA and the client certificate as Secret volumes;
// the kubelet mounts them, the sidecar (uid 65532, read-only root) reads them, and records
// still land once: accepted, or in the dead-letter topic written over TLS.
func securedSidecar(ctx context.Context, t *testing.T, sh *rig.UserShell, cs kubernetes.Interface, k *rig.Kafka, ca *rig.TestCA, client *rig.TLSMaterial, appImage string) {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"ca.crt": ca.CertPEM, "tls.crt": client.CertPEM, "tls.key": client.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sh.Run("kubectl create namespace shop-tls")
	sh.Run("kubectl label namespace shop-tls pod-security.kubernetes.io/enforce=restricted")
	sh.Run("kubectl -n shop-tls create secret generic kafka-ca --from-file=ca.crt=" + filepath.Join(dir, "ca.crt"))
	sh.Run("kubectl -n shop-tls create secret tls kafka-client --cert=" + filepath.Join(dir, "tls.crt") + " --key=" + filepath.Join(dir, "tls.key"))
	sh.Run(fmt.Sprintf(`kubectl apply -n shop-tls -f - <<'YAML'
apiVersion: kafkaqueues.io/v1alpha1
kind: KafkaCluster
metadata: {name: kafka-tls}
spec:
  bootstrapServers: [%s]
  tls:
    caSecretRef: {name: kafka-ca, key: ca.crt}
    clientCert: {secretName: kafka-client}
    # the rig's broker certificate names localhost
    serverName: localhost
---
apiVersion: kafkaqueues.io/v1alpha1
kind: ShareQueue
metadata: {name: payments}
spec:
  clusterRef: {name: kafka-tls}
  delivery: {lockDuration: 15s, maxDeliveryAttempts: 3, autoOffsetReset: earliest}
---
apiVersion: kafkaqueues.io/v1alpha1
kind: DeadLetterRoute
metadata: {name: payments-dlq}
spec:
  queueRef: {name: payments}
  mode: Republisher
YAML`, strings.Join(k.TLSBootstrapServers(), ", ")))
	sh.Run("kubectl -n shop-tls wait kqc/kafka-tls sq/payments dlr/payments-dlq --for=condition=Ready --timeout=2m")
	topic := strings.TrimSpace(sh.Run("kubectl -n shop-tls get sq payments -o jsonpath='{.status.topicName}'"))
	dlq := strings.TrimSpace(sh.Run("kubectl -n shop-tls get dlr payments-dlq -o jsonpath='{.status.topicName}'"))

	cl, err := kgo.NewClient(kgo.SeedBrokers(k.BootstrapServers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const ledger, n = "payments-ledger", 200
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, ledger); err != nil {
		t.Fatal(err)
	}
	watch := newLedgerWatch(ctx, t, k.BootstrapServers(), ledger, dlq)
	sh.Run(appDeployment("shop-tls", "payments-worker", "payments", appImage, k.Bootstrap(), ledger))
	p := waitNewPod(ctx, t, cs, "shop-tls", "app=payments-worker", "")
	checkSidecarFirst(ctx, t, cs, p)
	mounted := map[string]bool{}
	for _, c := range p.Spec.InitContainers {
		if c.Name == "kqo-republisher" {
			for _, m := range c.VolumeMounts {
				mounted[m.Name] = true
			}
		}
	}
	if !mounted["kqo-kafka-ca"] || !mounted["kqo-kafka-client-cert"] {
		t.Fatalf("the secured sidecar mounts %v, want kqo-kafka-ca and kqo-kafka-client-cert", mounted)
	}
	for i := 0; i < n; i++ {
		v := []byte(strconv.Itoa(i))
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: v, Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	accepted, dead := watch.waitAll(t, n, 3*time.Minute, 20*time.Second)
	for i := 0; i < n; i++ {
		v := strconv.Itoa(i)
		want := [2]int{1, 0}
		if i%10 == 0 {
			want = [2]int{0, 1}
		}
		if got := [2]int{len(accepted[v]), len(dead[v])}; got != want {
			t.Errorf("secured: record %s accepted %d, dead-lettered %d; want %d, %d", v, got[0], got[1], want[0], want[1])
		}
	}
	t.Logf("secured sidecar (mutual TLS, Secret volumes): %d records, %d accepted once, %d dead-lettered once", n, len(accepted), len(dead))
}

// republisherQueue makes a restricted namespace with a KafkaCluster (bootstrap servers and
// extra spec lines), a ShareQueue named queue and a DeadLetterRoute in Republisher mode (so
// labelled Pods get the sidecar), waits until all three are Ready and returns the queue's
// and the route's topics.
func republisherQueue(t *testing.T, sh *rig.UserShell, ns string, bootstrap []string, clusterSpec, queue string) (topic, dlq string) {
	t.Helper()
	sh.Run("kubectl create namespace " + ns + " --dry-run=client -o yaml | kubectl apply -f -") // it may exist, with a Secret
	sh.Run("kubectl label namespace " + ns + " pod-security.kubernetes.io/enforce=restricted")
	sh.Run(fmt.Sprintf(`kubectl apply -n %[1]s -f - <<'YAML'
apiVersion: kafkaqueues.io/v1alpha1
kind: KafkaCluster
metadata: {name: kafka}
spec:
  bootstrapServers: [%[2]s]
%[3]s
---
apiVersion: kafkaqueues.io/v1alpha1
kind: ShareQueue
metadata: {name: %[4]s}
spec:
  clusterRef: {name: kafka}
  delivery: {lockDuration: 15s, maxDeliveryAttempts: 3, autoOffsetReset: earliest}
---
apiVersion: kafkaqueues.io/v1alpha1
kind: DeadLetterRoute
metadata: {name: %[4]s-dlq}
spec:
  queueRef: {name: %[4]s}
  mode: Republisher
YAML`, ns, strings.Join(bootstrap, ", "), clusterSpec, queue))
	sh.Run(fmt.Sprintf("kubectl -n %[1]s wait kqc/kafka sq/%[2]s dlr/%[2]s-dlq --for=condition=Ready --timeout=2m", ns, queue))
	topic = strings.TrimSpace(sh.Run(fmt.Sprintf("kubectl -n %s get sq %s -o jsonpath='{.status.topicName}'", ns, queue)))
	dlq = strings.TrimSpace(sh.Run(fmt.Sprintf("kubectl -n %s get dlr %s-dlq -o jsonpath='{.status.topicName}'", ns, queue)))
	return topic, dlq
}

// waitSidecarRunning waits for the one Pod of selector in ns to run its kqo-republisher
// sidecar (started or not: its startup probe decides that) and returns it.
func waitSidecarRunning(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, selector string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	rig.Eventually(t, 2*time.Minute, func() string {
		ps := podsOf(ctx, t, cs, ns, selector)
		if len(ps) != 1 {
			return fmt.Sprintf("%d Pods of %s", len(ps), selector)
		}
		pod = ps[0]
		for _, c := range pod.Status.InitContainerStatuses {
			if c.Name == "kqo-republisher" && c.State.Running != nil {
				return ""
			}
		}
		return fmt.Sprintf("Pod %s: no running kqo-republisher yet (init statuses %+v)", pod.Name, pod.Status.InitContainerStatuses)
	})
	return pod
}

// heldBack watches a Pod whose sidecar cannot fetch, for at least d and until more reports
// true (at most 90 s): its app container must not start, its sidecar must neither pass its
// startup probe nor restart, and the kubelet must be seen reporting the probe failing with
// 503 (an Unhealthy Event). A fixed wait on purpose: what it checks is that nothing happens
// within it.
func heldBack(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, pod, why string, d time.Duration, more func() bool) {
	t.Helper()
	var probeFailed bool
	for start := time.Now(); time.Since(start) < d || !probeFailed || !more(); time.Sleep(time.Second) {
		if time.Since(start) > 90*time.Second {
			t.Fatalf("%s: after 90 s, a 503 startup probe seen %v, and the other checks passed %v", why, probeFailed, more())
		}
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.Name == "app" && (c.State.Running != nil || c.State.Terminated != nil) {
				t.Fatalf("%s: the app started %s in (state %+v)", why, time.Since(start).Round(time.Second), c.State)
			}
		}
		for _, c := range p.Status.InitContainerStatuses {
			if c.Name == "kqo-republisher" && (c.RestartCount > 0 || (c.Started != nil && *c.Started)) {
				t.Fatalf("%s: the sidecar started %v, restarted %d times; want neither", why, c.Started != nil && *c.Started, c.RestartCount)
			}
		}
		if !probeFailed {
			evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs.Items {
				probeFailed = probeFailed || (e.Reason == "Unhealthy" && strings.Contains(e.Message, "Startup probe failed") && strings.Contains(e.Message, "503"))
			}
		}
	}
}

// produceValues produces each value (as key and value) to topic on k and waits for the
// brokers to confirm it.
func produceValues(ctx context.Context, t *testing.T, k *rig.Kafka, topic string, values []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.BootstrapServers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// ledgerTopic creates the app's ledger topic on k.
func ledgerTopic(ctx context.Context, t *testing.T, k *rig.Kafka, name string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.BootstrapServers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, name); err != nil {
		t.Fatal(err)
	}
}

// batchJobThroughAnOutage is issue 30 case 8 on the node. A batch Job (the app exits once its
// queue stays empty for 15 s) whose Pod gets the sidecar while the queue's only broker is
// down for 30 s: before, the sidecar's startup probe passed at once, the app started, every
// receive answered 200 with no records and the Job completed having read none. Now the
// sidecar is not ready while its members cannot reach the brokers (the kubelet's startup
// probe reads 503), so the app does not start; the outage is shorter than the probe's 120 s
// budget, so the sidecar is not restarted either. Once the broker is back, the app starts
// and the Job completes with every record accepted once.
func batchJobThroughAnOutage(ctx context.Context, t *testing.T, r *rig.NodeRig, sh *rig.UserShell, cs kubernetes.Interface, appImage string) {
	t.Helper()
	const ns, n, ledger = "batch", 40, "reports-ledger"
	k, err := r.StartKafka(ctx, rig.KafkaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	topic, dlq := republisherQueue(t, sh, ns, k.BootstrapServers(), "", "reports")
	ledgerTopic(ctx, t, k, ledger)
	// Values the app accepts on their first delivery (not %10 == 0, not %7 == 3).
	var values []string
	for v := 1; len(values) < n; v++ {
		if v%10 != 0 && v%7 != 3 {
			values = append(values, strconv.Itoa(v))
		}
	}
	produceValues(ctx, t, k, topic, values)

	node := k.Nodes[0]
	k.StopNode(node)
	down := time.Now()
	sh.Run(fmt.Sprintf(`kubectl apply -n %s -f - <<'YAML'
apiVersion: batch/v1
kind: Job
metadata: {name: nightly}
spec:
  backoffLimit: 0
  template:
    metadata:
      labels: {kafkaqueues.io/queue: reports}
    spec:
      restartPolicy: Never
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: app
        image: %s
        imagePullPolicy: IfNotPresent
        env:
        - {name: KQO_APP_BOOTSTRAP, value: "%s"}
        - {name: KQO_APP_LEDGER_TOPIC, value: %s}
        - {name: KQO_APP_EXIT_IDLE, value: 15s}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          runAsUser: 65532
          capabilities: {drop: [ALL]}
YAML`, ns, appImage, k.Bootstrap(), ledger))
	pod := waitSidecarRunning(ctx, t, cs, ns, "job-name=nightly")
	heldBack(ctx, t, cs, ns, pod.Name, "broker down", 30*time.Second-time.Since(down), func() bool { return true })
	if err := k.StartNode(ctx, node, nil); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	t.Logf("broker down %s; the Job's app did not start meanwhile", up.Sub(down).Round(time.Second))

	watch := newLedgerWatch(ctx, t, k.BootstrapServers(), ledger, dlq)
	sh.Run("kubectl -n " + ns + " wait job/nightly --for=condition=Complete --timeout=4m")
	watch.waitSeen(t, n, time.Minute)
	accepted, dead := watch.waitAll(t, 0, time.Minute, 2*time.Second)
	for _, v := range values {
		if len(accepted[v]) != 1 || len(dead[v]) != 0 {
			t.Errorf("record %s: accepted %d, dead-lettered %d; want 1, 0", v, len(accepted[v]), len(dead[v]))
		}
	}
	p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == "app" && (c.State.Terminated == nil || c.State.Terminated.ExitCode != 0 || c.State.Terminated.StartedAt.Time.Before(up.Add(-time.Second))) {
			t.Errorf("app container %+v: want exited 0, started after the broker came back at %s", c.State, up.Format(time.RFC3339))
		}
	}
	t.Logf("batch Job: %d of %d records accepted once, none before the broker was back", len(accepted), len(values))
}

// refusedCredentials is the second half of issue 30 case 8 on the node: a Pod whose
// KafkaCluster's Secret holds a password the brokers refuse (SCRAM-SHA-512). Before, the
// sidecar answered /readyz 200 for as long as it ran while it logged
// SASL_AUTHENTICATION_FAILED, so the app started on an empty queue. Now its startup probe
// fails (503), the app does not start, and the sidecar's log names the refusal. With the
// password corrected and the Pod replaced, the next Pod's sidecar starts and so does its app.
// (The broker's SASL listener runs in the node's namespace; the rig's hosts file keeps its
// reverse lookups from stalling there.)
func refusedCredentials(ctx context.Context, t *testing.T, r *rig.NodeRig, sh *rig.UserShell, cs kubernetes.Interface, appImage string) {
	t.Helper()
	const ns, ledger = "billing", "invoices-ledger"
	k, err := r.StartKafka(ctx, rig.KafkaOptions{SASLUsers: map[string]string{"alice": "alice-s3cret-pw"}})
	if err != nil {
		t.Fatal(err)
	}
	secret := func(password string) string {
		return "kubectl -n " + ns + " create secret generic kafka-user --from-literal=username=alice --from-literal=password=" + password + " --dry-run=client -o yaml | kubectl apply -f -"
	}
	sh.Run("kubectl create namespace " + ns)
	sh.Run(secret("alice-s3cret-pw"))
	topic, dlq := republisherQueue(t, sh, ns, k.SASLBootstrapServers(), "  sasl: {mechanism: SCRAM-SHA-512, secretName: kafka-user}", "invoices")
	ledgerTopic(ctx, t, k, ledger)

	// The password changes in the Secret only (the brokers still have the old one).
	sh.Run(secret("not-the-password"))
	sh.Run(appDeployment(ns, "invoices-worker", "invoices", appImage, k.Bootstrap(), ledger))
	pod := waitSidecarRunning(ctx, t, cs, ns, "app=invoices-worker")
	heldBack(ctx, t, cs, ns, pod.Name, "credentials refused", 25*time.Second, func() bool {
		b, err := cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "kqo-republisher"}).DoRaw(ctx)
		return err == nil && (strings.Contains(string(b), "SASL_AUTHENTICATION_FAILED") || strings.Contains(strings.ToLower(string(b)), "authentication failed"))
	})

	// The password put right, the Pod replaced: its sidecar starts, then its app, which
	// accepts what is produced.
	sh.Run(secret("alice-s3cret-pw"))
	sh.Run("kubectl -n " + ns + " delete pod " + pod.Name + " --wait=false")
	next := waitNewPod(ctx, t, cs, ns, "app=invoices-worker", pod.Name)
	checkSidecarFirst(ctx, t, cs, next)
	watch := newLedgerWatch(ctx, t, k.BootstrapServers(), ledger, dlq)
	const n = 20
	var values []string
	for i := 0; i < n; i++ {
		values = append(values, strconv.Itoa(i))
	}
	produceValues(ctx, t, k, topic, values)
	accepted, dead := watch.waitAll(t, n, 2*time.Minute, 0)
	t.Logf("refused credentials: the app was held while the brokers refused them; with the password right, %d accepted and %d dead-lettered of %d", len(accepted), len(dead), n)
}

// deletePod deletes a Pod as `kubectl delete pod` does (the default grace period) and
// watches it until it is gone: every container, the sidecar included, must have exited by
// itself with status 0 (it drained and stopped on SIGTERM), not been killed at the end of the
// grace period.
func deletePod(ctx context.Context, t *testing.T, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	w, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	start := time.Now()
	if err := cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Pod
	timeout := time.After(2 * time.Minute)
	for gone := false; !gone; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch on Pod %s/%s ended before it was deleted", ns, name)
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if !isPod {
				continue
			}
			last = p
			gone = ev.Type == watch.Deleted
		case <-timeout:
			t.Fatalf("Pod %s/%s still there 2m after its deletion", ns, name)
		}
	}
	elapsed := time.Since(start)
	var exits []string
	for _, s := range append(append([]corev1.ContainerStatus{}, last.Status.InitContainerStatuses...), last.Status.ContainerStatuses...) {
		term := s.State.Terminated
		if term == nil {
			t.Errorf("Pod %s/%s container %s: no terminated state before deletion: %+v", ns, name, s.Name, s.State)
			continue
		}
		exits = append(exits, fmt.Sprintf("%s exit %d after %s", s.Name, term.ExitCode, term.FinishedAt.Sub(start).Round(time.Second)))
		if term.ExitCode != 0 {
			t.Errorf("Pod %s/%s container %s exited %d (%s): it did not stop cleanly on SIGTERM", ns, name, s.Name, term.ExitCode, term.Reason)
		}
	}
	grace := int64(30)
	if last.Spec.TerminationGracePeriodSeconds != nil {
		grace = *last.Spec.TerminationGracePeriodSeconds
	}
	if elapsed >= time.Duration(grace)*time.Second {
		t.Errorf("Pod %s/%s took %s to go, the whole grace period (%ds)", ns, name, elapsed.Round(time.Second), grace)
	}
	t.Logf("deleted Pod %s/%s: gone after %s; %s", ns, name, elapsed.Round(100*time.Millisecond), strings.Join(exits, ", "))
}

// checkRestrictedPod checks what the restricted profile and the chart promise, on the Pod as
// the kubelet runs it: non-root, read-only root filesystem, no privilege escalation, all
// capabilities dropped, RuntimeDefault seccomp, and every container running.
func checkRestrictedPod(t *testing.T, p *corev1.Pod, want string) {
	t.Helper()
	found := false
	all := append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...)
	for _, c := range all {
		if c.Name == want {
			found = true
		}
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("Pod %s container %s: securityContext %+v is not read-only/no-escalation", p.Name, c.Name, sc)
			continue
		}
		psc := p.Spec.SecurityContext
		if !(sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) && !(psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot) {
			t.Errorf("Pod %s container %s: runAsNonRoot is not set", p.Name, c.Name)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("Pod %s container %s: capabilities %+v do not drop ALL", p.Name, c.Name, sc.Capabilities)
		}
		if !(sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault) && !(psc != nil && psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault) {
			t.Errorf("Pod %s container %s: no RuntimeDefault seccomp profile", p.Name, c.Name)
		}
	}
	if !found {
		t.Errorf("Pod %s has no container %s", p.Name, want)
	}
	for _, s := range append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		if s.State.Running == nil {
			t.Errorf("Pod %s container %s is not running: %+v", p.Name, s.Name, s.State)
		}
	}
}

// checkProcessUser finds the process running exe on this host (the node is this host) and
// checks its real and effective uid.
func checkProcessUser(t *testing.T, exe string, uid int) {
	t.Helper()
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.HasPrefix(string(cmd), exe+"\x00") {
			continue
		}
		st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		m := regexp.MustCompile(`(?m)^Uid:\s+(\d+)\s+(\d+)`).FindSubmatch(st)
		if m == nil || string(m[1]) != strconv.Itoa(uid) || string(m[2]) != strconv.Itoa(uid) {
			t.Fatalf("%s (pid %s) runs as %q, want uid %d", exe, e.Name(), m, uid)
		}
		if !regexp.MustCompile(`(?m)^CapEff:\s+0+$`).Match(st) {
			t.Fatalf("%s (pid %s) has effective capabilities:\n%s", exe, e.Name(), st)
		}
		return
	}
	t.Fatalf("no process runs %s on the node", exe)
}

func checkWebhookCABundle(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	rig.Eventually(t, time.Minute, func() string {
		l, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		for _, c := range l.Items {
			for _, w := range c.Webhooks {
				if w.ClientConfig.Service != nil && w.ClientConfig.Service.Namespace == releaseNS {
					if len(w.ClientConfig.CABundle) == 0 {
						return fmt.Sprintf("webhook %s has no caBundle yet", w.Name)
					}
					return ""
				}
			}
		}
		return "no MutatingWebhookConfiguration points at the release's Service"
	})
}

// checkSidecarFirst: the Pod got the republisher as a native sidecar (an init container that
// keeps running), and it was started, and passed its startup probe, before the app started.
func checkSidecarFirst(ctx context.Context, t *testing.T, cs kubernetes.Interface, p *corev1.Pod) {
	t.Helper()
	var side *corev1.ContainerStatus
	for i, s := range p.Status.InitContainerStatuses {
		if s.Name == "kqo-republisher" {
			side = &p.Status.InitContainerStatuses[i]
		}
	}
	if side == nil || side.State.Running == nil {
		t.Fatalf("Pod %s has no running kqo-republisher sidecar: init statuses %+v", p.Name, p.Status.InitContainerStatuses)
	}
	if side.Started == nil || !*side.Started {
		t.Fatalf("Pod %s: sidecar not started (startup probe)", p.Name)
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == "app" {
			if s.State.Running == nil {
				t.Fatalf("Pod %s: app not running: %+v", p.Name, s.State)
			}
			if s.State.Running.StartedAt.Before(&side.State.Running.StartedAt) {
				t.Fatalf("Pod %s: app started at %s, before its sidecar (%s)", p.Name, s.State.Running.StartedAt, side.State.Running.StartedAt)
			}
			// Timestamps have one-second resolution: the app's own log says whether the
			// sidecar's API answered its very first call (queueapp logs waiting-for-sidecar
			// for each failed one before "ready").
			// The container runs a moment before its first log line is written: read the log
			// until "ready" is in it, for up to 30 s.
			var b []byte
			var err error
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Second) {
				b, err = cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "app", LimitBytes: ptrInt64(8192)}).DoRaw(ctx)
				if err != nil {
					t.Fatalf("Pod %s: app log: %v", p.Name, err)
				}
				if strings.Contains(string(b), `"msg":"ready"`) || time.Now().After(deadline) {
					break
				}
			}
			head, _, found := strings.Cut(string(b), `"msg":"ready"`)
			if !found {
				t.Fatalf("Pod %s: the app never logged ready:\n%s", p.Name, b)
			}
			if strings.Contains(head, "waiting-for-sidecar") {
				t.Fatalf("Pod %s: the app started before its sidecar answered:\n%s", p.Name, head)
			}
			return
		}
	}
	t.Fatalf("Pod %s has no app container status", p.Name)
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func head(s []string) []string {
	if len(s) > 20 {
		return append(s[:20:20], fmt.Sprintf("... and %d more", len(s)-20))
	}
	return s
}

// ledgerWatch reads the ledger and the dead-letter topic from the start, by record value.
type ledgerWatch struct {
	mu             sync.Mutex
	accepted, dead map[string][]*kgo.Record
	ledger, dlq    string
}

func newLedgerWatch(ctx context.Context, t *testing.T, brokers []string, ledger, dlq string) *ledgerWatch {
	t.Helper()
	w := &ledgerWatch{accepted: map[string][]*kgo.Record{}, dead: map[string][]*kgo.Record{}, ledger: ledger, dlq: dlq}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(ledger, dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			w.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				if r.Topic == ledger {
					w.accepted[string(r.Value)] = append(w.accepted[string(r.Value)], r)
				} else {
					w.dead[string(r.Value)] = append(w.dead[string(r.Value)], r)
				}
			})
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *ledgerWatch) counts() (int, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.accepted), len(w.dead)
}

// waitSeen waits until n distinct values were accepted or dead-lettered.
func (w *ledgerWatch) waitSeen(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	rig.Eventually(t, timeout, func() string {
		a, d := w.counts()
		if a+d >= n {
			return ""
		}
		return fmt.Sprintf("%d accepted + %d dead-lettered, waiting for %d", a, d, n)
	})
}

// waitAll waits until every value below n is in the ledger or the dead-letter topic and
// then settle more (longer than the queue's lock, so a redelivery after a lost accept, a late
// duplicate, would show), and returns copies of both maps.
func (w *ledgerWatch) waitAll(t *testing.T, n int, timeout, settle time.Duration) (map[string][]*kgo.Record, map[string][]*kgo.Record) {
	t.Helper()
	rig.Eventually(t, timeout, func() string {
		w.mu.Lock()
		defer w.mu.Unlock()
		var missing []string
		for i := 0; i < n; i++ {
			v := strconv.Itoa(i)
			if len(w.accepted[v]) == 0 && len(w.dead[v]) == 0 {
				missing = append(missing, v)
			}
		}
		if len(missing) == 0 {
			return ""
		}
		sort.Strings(missing)
		return fmt.Sprintf("%d of %d records neither accepted nor dead-lettered, e.g. %v", len(missing), n, head(missing))
	})
	time.Sleep(settle)
	w.mu.Lock()
	defer w.mu.Unlock()
	a, d := map[string][]*kgo.Record{}, map[string][]*kgo.Record{}
	for k, v := range w.accepted {
		a[k] = append([]*kgo.Record(nil), v...)
	}
	for k, v := range w.dead {
		d[k] = append([]*kgo.Record(nil), v...)
	}
	return a, d
}

// dumpState logs what a failed run needs to be understood: Pods, events, the operator's and
// the app's logs, and the ends of the node's component logs.
func dumpState(t *testing.T, r *rig.NodeRig, cs kubernetes.Interface) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, ns := range []string{releaseNS, appNS} {
		pods, _ := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		for _, p := range pods.Items {
			t.Logf("Pod %s/%s phase %s conditions %+v", ns, p.Name, p.Status.Phase, p.Status.Conditions)
			for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
				b, err := cs.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: ptrInt64(40)}).DoRaw(ctx)
				t.Logf("--- logs %s/%s[%s] (%v):\n%s", ns, p.Name, c.Name, err, b)
			}
		}
		evs, _ := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		for _, e := range evs.Items {
			t.Logf("event %s %s/%s %s %s (x%d): %s", e.LastTimestamp.Format("15:04:05"), ns, e.InvolvedObject.Name, e.Type, e.Reason, e.Count, e.Message)
		}
	}
	for _, c := range []string{"kubelet", "containerd", "kube-controller-manager", "kube-scheduler", "kube-apiserver"} {
		t.Logf("--- %s log:\n%s", c, r.LogTail(c, 25))
	}
}

func ptrInt64(v int64) *int64 { return &v }
