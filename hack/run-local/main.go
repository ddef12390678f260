// Command run-local is the operator's main job on an embedded default: it starts a real
// kube-apiserver + etcd and a real Kafka broker on loopback (no Docker), installs the CRDs,
// runs the manager binary against them, applies config/samples, waits, and prints every
// resource's conditions plus the topic and group configs read back from Kafka.
//
//	go run ./hack/run-local            # exits 0 when the samples reach their expected state
//	go run ./hack/run-local --keep     # then keeps everything running until Ctrl-C
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

func main() {
	// The manager runs as its own process with its own log; this program prints what it
	// checks. controller-runtime's packages used here (envtest) log nothing useful, and
	// without a logger they print a stack trace warning about the missing one.
	ctrllog.SetLogger(logr.Discard())
	keep := flag.Bool("keep", false, "keep the rig and the manager running after the check, until Ctrl-C")
	timeout := flag.Duration("timeout", 3*time.Minute, "how long to wait for the samples to settle")
	kafkaVersion := flag.String("kafka-version", rig.DefaultKafkaVersion, "Apache Kafka release to run")
	var extra stringList
	flag.Var(&extra, "apply", "extra manifest file to create after the samples (repeatable), e.g. the output of kqctl import sqs")
	flag.Parse()
	if err := run(*keep, *timeout, *kafkaVersion, extra); err != nil {
		fmt.Fprintln(os.Stderr, "run-local:", err)
		os.Exit(1)
	}
}

func say(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func run(keep bool, timeout time.Duration, kafkaVersion string, extra []string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// After the first signal the rig stops in order; a second one ends the process at once
	// (the default action again), and the rig's processes die with it (Pdeathsig).
	go func() { <-ctx.Done(); stop() }()
	root := rig.RepoRoot()
	work := filepath.Join(root, "tmp", "run-local")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	// One rig at a time: a second run would overwrite the first one's kubeconfig and log.
	lock, err := os.OpenFile(filepath.Join(work, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("another run-local is using %s (stop it first; to add manifests, start with --keep --apply FILE): %w", work, err)
	}

	say("building the manager")
	managerBin := filepath.Join(work, "manager")
	build := exec.CommandContext(ctx, "go", "build", "-o", managerBin, "./cmd/manager")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("go build ./cmd/manager: %w", err)
	}

	say("starting Kafka %s (1 KRaft broker on loopback)", kafkaVersion)
	k, err := rig.StartKafka(ctx, rig.KafkaOptions{Version: kafkaVersion, Log: func(f string, a ...any) { say(f, a...) }})
	if err != nil {
		return err
	}
	defer k.Stop()

	say("starting kube-apiserver + etcd with the CRDs from config/crd/bases")
	env, cfg, err := rig.StartAPIServer()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := rig.WriteKubeconfig(cfg, kubeconfig); err != nil {
		return err
	}

	say("running the manager (log: %s)", filepath.Join(work, "manager.log"))
	logf, err := os.Create(filepath.Join(work, "manager.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	mgrArgs := []string{"--kubeconfig", kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--cluster-probe-interval=15s", "--queue-resync-interval=1m"}
	mgr := exec.Command(managerBin, mgrArgs...)
	mgr.Stdout, mgr.Stderr = logf, logf
	mgr.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := mgr.Start(); err != nil {
		return err
	}
	// mgrDone is closed when the manager exits; mgrErr is then how.
	mgrDone := make(chan struct{})
	var mgrErr error
	go func() { mgrErr = mgr.Wait(); close(mgrDone) }()
	defer func() {
		_ = mgr.Process.Signal(syscall.SIGTERM)
		select {
		case <-mgrDone:
		case <-time.After(15 * time.Second):
			_ = mgr.Process.Kill()
		}
	}()

	scheme := runtime.NewScheme()
	_ = kqv1.AddToScheme(scheme)
	kc, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	say("applying config/samples (KafkaCluster bootstrapServers -> %s)", k.Bootstrap())
	if err := applySamples(ctx, kc, filepath.Join(root, "config", "samples"), k.BootstrapServers()); err != nil {
		return err
	}
	for _, f := range extra {
		say("applying %s", f)
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := applyManifests(ctx, kc, f, data, k.BootstrapServers()); err != nil {
			return err
		}
	}

	say("waiting up to %s: orders Ready=True, long-jobs ConfigValid=False", timeout)
	deadline := time.Now().Add(timeout)
	var settled bool
	for time.Now().Before(deadline) {
		select {
		case <-mgrDone:
			return fmt.Errorf("manager exited: %v (see %s)", mgrErr, logf.Name())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		if settled = checkExpected(ctx, kc) == nil; settled {
			break
		}
	}

	// Give every other queue (e.g. from --apply) a moment to reach a verdict too.
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		var qs kqv1.ShareQueueList
		if err := kc.List(ctx, &qs); err != nil {
			break
		}
		pending := 0
		for _, q := range qs.Items {
			if c := meta.FindStatusCondition(q.Status.Conditions, kqv1.ConditionReady); c == nil || c.ObservedGeneration != q.Generation || (c.Status != metav1.ConditionTrue && c.Reason == kqv1.ReasonProgressing) {
				pending++
			}
		}
		if pending == 0 {
			break
		}
	}
	if err := report(ctx, kc, k); err != nil {
		return err
	}
	if err := checkExpected(ctx, kc); err != nil {
		return fmt.Errorf("samples did not reach the expected state: %w", err)
	}
	say("OK: orders is Ready with its DeadLetterRoute (BrokerNative); long-jobs is ConfigValid=False naming the broker bound")
	if keep {
		say("still running; kubeconfig: %s   (Ctrl-C to stop)", kubeconfig)
		select {
		case <-ctx.Done():
		case <-mgrDone:
			// Someone stopped the manager, say to try a restart: the apiserver and Kafka stay
			// up, with every object, until Ctrl-C; this is how to start it again.
			say("the manager exited (%v); the apiserver and Kafka keep running. To start it again:\n  %s %s >>%s 2>&1",
				mgrErr, managerBin, strings.Join(mgrArgs, " "), logf.Name())
			<-ctx.Done()
		}
	}
	return nil
}

// applySamples creates every object of config/samples listed in its kustomization.yaml.
func applySamples(ctx context.Context, c client.Client, dir string, bootstrap []string) error {
	var kust struct {
		Resources []string `json:"resources"`
	}
	if err := readYAML(filepath.Join(dir, "kustomization.yaml"), &kust); err != nil {
		return err
	}
	for _, f := range kust.Resources {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		if err := applyManifests(ctx, c, f, data, bootstrap); err != nil {
			return err
		}
	}
	return nil
}

// applyManifests creates every object in data (YAML, multi-document); a KafkaCluster's
// bootstrapServers are pointed at the local broker and a ShareQueue's clusterRef at "local".
func applyManifests(ctx context.Context, c client.Client, f string, data []byte, bootstrap []string) error {
	objs, err := rig.DecodeManifests(data)
	if err != nil {
		return fmt.Errorf("%s: %w", f, err)
	}
	for _, u := range objs {
		{
			if u.GetNamespace() == "" || !strings.HasPrefix(f, "kafkaqueues_") {
				u.SetNamespace("default") // the rig has one namespace worth using
			}
			if u.GetKind() == "KafkaCluster" {
				servers := make([]any, len(bootstrap))
				for i, s := range bootstrap {
					servers[i] = s
				}
				_ = unstructured.SetNestedSlice(u.Object, servers, "spec", "bootstrapServers")
			}
			if u.GetKind() == "ShareQueue" && !strings.HasPrefix(f, "kafkaqueues_") {
				_ = unstructured.SetNestedField(u.Object, "local", "spec", "clusterRef", "name")
			}
			if err := c.Create(ctx, u); err != nil {
				return fmt.Errorf("creating %s %s from %s: %w", u.GetKind(), u.GetName(), f, err)
			}
			fmt.Printf("    created %s/%s\n", strings.ToLower(u.GetKind()), u.GetName())
		}
	}
	return nil
}

func readYAML(path string, into any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return utilyaml.NewYAMLOrJSONDecoder(f, 4096).Decode(into)
}

func checkExpected(ctx context.Context, c client.Client) error {
	var ok, bad kqv1.ShareQueue
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "orders"}, &ok); err != nil {
		return err
	}
	if !meta.IsStatusConditionTrue(ok.Status.Conditions, kqv1.ConditionReady) {
		return fmt.Errorf("orders is not Ready")
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "long-jobs"}, &bad); err != nil {
		return err
	}
	cv := meta.FindStatusCondition(bad.Status.Conditions, kqv1.ConditionConfigValid)
	if cv == nil || cv.Status != metav1.ConditionFalse || cv.Reason != kqv1.ReasonOutOfBrokerBounds ||
		!strings.Contains(cv.Message, "group.share.max.record.lock.duration.ms") {
		return fmt.Errorf("long-jobs does not report ConfigValid=False/OutOfBrokerBounds naming the bound")
	}
	var route kqv1.DeadLetterRoute
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "orders-dlq"}, &route); err != nil {
		return err
	}
	if !meta.IsStatusConditionTrue(route.Status.Conditions, kqv1.ConditionReady) || route.Status.EffectiveMode != kqv1.DeadLetterModeBrokerNative {
		return fmt.Errorf("DeadLetterRoute orders-dlq is not Ready in BrokerNative mode (Kafka 4.4 formats at share.version 2)")
	}
	return nil
}

func report(ctx context.Context, c client.Client, k *rig.Kafka) error {
	fmt.Println()
	var clusters kqv1.KafkaClusterList
	if err := c.List(ctx, &clusters); err != nil {
		return err
	}
	for _, kc := range clusters.Items {
		s := kc.Status
		fmt.Printf("KafkaCluster %s/%s  brokers=%d  clusterID=%s  share.version=%d  brokerNativeDLQ=%v\n", kc.Namespace, kc.Name, s.BrokerCount, s.ClusterID, s.ShareVersion, s.BrokerNativeDLQ)
		var feats []string
		for _, f := range s.FinalizedFeatures {
			feats = append(feats, fmt.Sprintf("%s=%d", f.Name, f.Level))
		}
		fmt.Printf("  finalized features: %s\n", strings.Join(feats, " "))
		if b := s.ShareBounds; b != nil {
			fmt.Printf("  share bounds (min/default/max): lock ms %s, delivery count %s, record locks %s, session ms %s, heartbeat ms %s\n",
				bnd(b.RecordLockDurationMs), bnd(b.DeliveryCountLimit), bnd(b.PartitionMaxRecordLocks), bnd(b.SessionTimeoutMs), bnd(b.HeartbeatIntervalMs))
		}
		printConditions(kc.Status.Conditions)
	}
	var queues kqv1.ShareQueueList
	if err := c.List(ctx, &queues); err != nil {
		return err
	}
	admin, err := kafka.NewClient(kafka.Config{BootstrapServers: k.BootstrapServers(), ClientID: "run-local-report"})
	if err != nil {
		return err
	}
	defer admin.Close()
	for _, q := range queues.Items {
		s := q.Status
		fmt.Printf("\nShareQueue %s/%s  topic=%s  group=%s  partitions=%d  topicId=%s\n", q.Namespace, q.Name, s.TopicName, s.GroupID, s.Partitions, s.TopicID)
		if e := s.Effective; e != nil {
			fmt.Printf("  effective: lease=%s (%s)  maxDeliveryAttempts=%s (%s)  maxInFlightPerPartition=%s (%s)\n",
				e.LockDuration.Value, e.LockDuration.Source, e.MaxDeliveryAttempts.Value, e.MaxDeliveryAttempts.Source,
				e.MaxInFlightPerPartition.Value, e.MaxInFlightPerPartition.Source)
		}
		if cp := s.Capacity; cp != nil {
			fmt.Printf("  capacity: maxInFlightRecords=%d  inFlightStateBytes=%d\n", cp.MaxInFlightRecords, cp.InFlightStateBytes)
		}
		printConditions(q.Status.Conditions)
		if err := printKafka(ctx, admin, s.TopicName, s.GroupID); err != nil {
			fmt.Printf("  reading Kafka: %v\n", err)
		}
	}
	var routes kqv1.DeadLetterRouteList
	if err := c.List(ctx, &routes); err != nil {
		return err
	}
	for _, r := range routes.Items {
		fmt.Printf("\nDeadLetterRoute %s/%s  queue=%s  mode=%s (spec %s)  topic=%s\n", r.Namespace, r.Name, r.Spec.QueueRef.Name, r.Status.EffectiveMode, r.Spec.Mode, r.Status.TopicName)
		printConditions(r.Status.Conditions)
	}
	fmt.Println()
	return nil
}

func bnd(b kqv1.Bound) string {
	f := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	return f(b.Min) + "/" + f(b.Default) + "/" + f(b.Max)
}

func printConditions(conds []metav1.Condition) {
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  CONDITION\tSTATUS\tREASON\tMESSAGE")
	for _, c := range conds {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	_ = tw.Flush()
}

// printKafka reads the topic and group back from the broker with a separate client.
func printKafka(ctx context.Context, admin *kafka.Client, topic, group string) error {
	ts, err := admin.DescribeTopics(ctx, topic)
	if err != nil {
		return err
	}
	t := ts[topic]
	if t.Err != nil {
		fmt.Printf("  kafka topic %s: %v\n", topic, t.Err)
	} else {
		fmt.Printf("  kafka topic %s: partitions=%d replicationFactor=%d id=%s\n", topic, t.Partitions, t.ReplicationFactor, t.ID)
	}
	tk := kafka.ResourceKey{Type: kafka.TopicResource, Name: topic}
	gk := kafka.ResourceKey{Type: kafka.GroupResource, Name: group}
	keys := []kafka.ResourceKey{gk}
	if t.Err == nil {
		keys = append(keys, tk)
	}
	cfgs, err := admin.DescribeConfigs(ctx, keys)
	if err != nil {
		return err
	}
	for _, k := range keys {
		rc := cfgs[k]
		if rc.Err != nil {
			fmt.Printf("  kafka %s configs: %v\n", k, rc.Err)
			continue
		}
		var set []string
		for name, e := range rc.Configs {
			if e.IsOverride() {
				set = append(set, name+"="+e.Value)
			}
		}
		sort.Strings(set)
		if len(set) == 0 {
			set = []string{"(none: broker defaults)"}
		}
		fmt.Printf("  kafka %s configs: %s\n", k, strings.Join(set, " "))
	}
	return nil
}
