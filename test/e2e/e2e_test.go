// Package e2e runs the manager binary as a separate process against the local rig (real
// kube-apiserver, real Kafka broker) and kills it mid-reconcile.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(m.Run())
}

type manager struct {
	cmd  *exec.Cmd
	done chan error
}

func startManager(t *testing.T, bin, kubeconfig, logPath string) *manager {
	t.Helper()
	return startManagerWith(t, bin, kubeconfig, logPath, "--cluster-probe-interval=10s", "--sharequeue-concurrency=2")
}

// startManagerWith starts the manager with its listeners off fixed ports and args, logging
// (appending) to logPath; it is killed when the test ends.
func startManagerWith(t *testing.T, bin, kubeconfig, logPath string, args ...string) *manager {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0"}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m := &manager{cmd: cmd, done: make(chan error, 1)}
	go func() { m.done <- cmd.Wait(); logf.Close() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return m
}

// The manager is killed (SIGKILL) while it creates 30 queues and started again: every queue
// converges, each topic is created once and recognised as the queue's own, no queue reports
// someone else's topic, and a SIGTERM then stops the manager cleanly.
// e2eRig is one test's rig: the manager binary built from this tree, a Kafka broker, a real
// apiserver with a kubeconfig file for manager processes, and a client for the test (not
// rate-limited: it must not be what paces a thousand creates). t.Cleanup stops it after
// the managers the test started, which registered their cleanups later.
type e2eRig struct {
	dir, bin, kubeconfig string
	kafka                *rig.Kafka
	c                    client.Client
}

func newE2ERig(t *testing.T, ctx context.Context, kopts rig.KafkaOptions) *e2eRig {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "manager")
	build := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	build.Dir = rig.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	k, err := rig.StartKafka(ctx, kopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	env, cfg, err := rig.StartAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := rig.WriteKubeconfig(cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = kqv1.AddToScheme(scheme)
	ccfg := rest.CopyConfig(cfg)
	ccfg.QPS, ccfg.Burst = 1000, 2000
	c, err := client.New(ccfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return &e2eRig{dir: dir, bin: bin, kubeconfig: kubeconfig, kafka: k, c: c}
}

func TestManagerKilledMidReconcileConverges(t *testing.T) {
	t.Parallel()
	rig.SkipWithoutRig(t, "the local apiserver and Kafka rig")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r := newE2ERig(t, ctx, rig.KafkaOptions{})
	dir, bin, k, kubeconfig, c := r.dir, r.bin, r.kafka, r.kubeconfig, r.c
	logPath := filepath.Join(dir, "manager.log")
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("manager log (tail):\n%s", tail(string(b), 4000))
		}
	}()

	m := startManager(t, bin, kubeconfig, logPath)
	kc := &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "local"}, Spec: kqv1.KafkaClusterSpec{BootstrapServers: k.BootstrapServers()}}
	if err := c.Create(ctx, kc); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, func() string {
		if err := c.Get(ctx, client.ObjectKeyFromObject(kc), kc); err != nil {
			return err.Error()
		}
		if !meta.IsStatusConditionTrue(kc.Status.Conditions, kqv1.ConditionReady) {
			return "KafkaCluster not Ready"
		}
		return ""
	})

	const n = 30
	for i := 0; i < n; i++ {
		sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("q-%02d", i)}, Spec: kqv1.ShareQueueSpec{
			ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Partitions: 3},
			Delivery:       kqv1.DeliverySpec{MaxDeliveryAttempts: ptr.To[int32](4)},
			AdoptionPolicy: kqv1.AdoptionPolicyCreate,
		}}
		if err := c.Create(ctx, sq); err != nil {
			t.Fatal(err)
		}
	}
	// Kill it while it is working through them.
	admin, err := kafka.NewClient(kafka.Config{BootstrapServers: k.BootstrapServers(), ClientID: "e2e-admin"})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	waitFor(t, 60*time.Second, func() string {
		names, err := admin.ListTopicNames(ctx)
		if err != nil {
			return err.Error()
		}
		created := 0
		for _, name := range names {
			if strings.HasPrefix(name, "q-") {
				created++
			}
		}
		if created == 0 {
			return "no topic created yet"
		}
		return ""
	})
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.done
	var list kqv1.ShareQueueList
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, q := range list.Items {
		if meta.IsStatusConditionTrue(q.Status.Conditions, kqv1.ConditionReady) {
			ready++
		}
	}
	t.Logf("killed the manager with %d of %d queues Ready", ready, n)
	if ready == n {
		t.Log("warning: the kill came after every queue was done; the restart path was not exercised")
	}

	m = startManager(t, bin, kubeconfig, logPath)
	waitFor(t, 120*time.Second, func() string {
		if err := c.List(ctx, &list); err != nil {
			return err.Error()
		}
		for _, q := range list.Items {
			if !meta.IsStatusConditionTrue(q.Status.Conditions, kqv1.ConditionReady) {
				return fmt.Sprintf("%s not Ready: %+v", q.Name, q.Status.Conditions)
			}
		}
		return ""
	})
	topics, err := admin.DescribeTopics(ctx, names(list.Items)...)
	if err != nil {
		t.Fatal(err)
	}
	var groups []kafka.ResourceKey
	for _, q := range list.Items {
		live := topics[q.Status.TopicName]
		if live.Err != nil || live.ID != q.Status.TopicID || !q.Status.TopicCreated || live.Partitions != 3 {
			t.Errorf("%s: topic %+v, status id %q created %v", q.Name, live, q.Status.TopicID, q.Status.TopicCreated)
		}
		groups = append(groups, kafka.ResourceKey{Type: kafka.GroupResource, Name: q.Status.GroupID})
	}
	// The brokers answer DescribeConfigs from a metadata image that trails the controller's
	// commit by up to a second or so (docs/kafka-findings.md): a group written just before
	// the last queue turned Ready may read as the default for that long. Poll, bounded.
	var wrong map[kafka.ResourceKey]kafka.ConfigEntry
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		cfgs, err := admin.DescribeConfigs(ctx, groups)
		if err != nil {
			t.Fatal(err)
		}
		wrong = map[kafka.ResourceKey]kafka.ConfigEntry{}
		for k, rc := range cfgs {
			if e := rc.Configs["share.delivery.count.limit"]; e.Value != "4" || !e.IsOverride() {
				wrong[k] = e
			}
		}
		if len(wrong) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for k, e := range wrong {
		t.Errorf("%s: share.delivery.count.limit %+v 15 s after every queue was Ready\n%s", k, e, queueDiagnosis(ctx, c, list.Items, k.Name, logPath))
	}
	var evs eventsv1.EventList
	if err := c.List(ctx, &evs, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if e.Reason == kqv1.ReasonTopicExists || e.Reason == kqv1.ReasonKafkaRejected {
			t.Errorf("event %s on %s: %s", e.Reason, e.Regarding.Name, e.Note)
		}
	}

	// Graceful stop.
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-m.done:
		if err != nil {
			t.Errorf("manager exited with %v after SIGTERM", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("manager did not stop within 30s of SIGTERM")
	}
}

// queueDiagnosis gathers what explains a queue's state after a failure: its conditions as
// stored (with generations and transition times, to tell which manager run wrote them), its
// events, and every manager log line that names it.
func queueDiagnosis(ctx context.Context, c client.Client, qs []kqv1.ShareQueue, name, logPath string) string {
	var b strings.Builder
	for _, q := range qs {
		if q.Name != name {
			continue
		}
		fmt.Fprintf(&b, "queue %s generation %d status.topicCreated=%v topicCreationStarted=%v\n", q.Name, q.Generation, q.Status.TopicCreated, q.Status.TopicCreationStarted)
		for _, cond := range q.Status.Conditions {
			fmt.Fprintf(&b, "  %s=%s %s gen=%d at %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.ObservedGeneration, cond.LastTransitionTime.Format(time.RFC3339Nano), cond.Message)
		}
	}
	var evs eventsv1.EventList
	if err := c.List(ctx, &evs, client.InNamespace("default")); err == nil {
		for _, e := range evs.Items {
			if e.Regarding.Name == name {
				fmt.Fprintf(&b, "  event %s %s at %s: %s\n", e.Type, e.Reason, e.EventTime.Format(time.RFC3339Nano), e.Note)
			}
		}
	}
	if data, err := os.ReadFile(logPath); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, `"`+name+`"`) {
				fmt.Fprintf(&b, "  log: %s\n", tail(line, 600))
			}
		}
	}
	return b.String()
}

func names(qs []kqv1.ShareQueue) []string {
	out := make([]string, 0, len(qs))
	for _, q := range qs {
		out = append(out, q.Status.TopicName)
	}
	return out
}

func waitFor(t *testing.T, timeout time.Duration, cond func() string) {
	t.Helper()
	rig.Eventually(t, timeout, cond)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
