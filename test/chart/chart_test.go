// Package chart tests the Helm charts: lint, the values schemas (one rejected value per rule),
// what the templates render, and — against fresh real apiservers — every helm and kubectl
// command of README.md and docs/install.md run verbatim by the pinned helm and the rig's
// kubectl, with the manager running as the chart's ServiceAccount (impersonated, so missing
// RBAC fails) against a real broker.
package chart

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/controllers"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

func TestMain(m *testing.M) {
	flag.Parse()
	ctrllog.SetLogger(logr.Discard()) // envtest logs through it; unset, it prints a stack trace
	if err := rig.SetupUserTools(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	rig.RemoveUserTools()
	os.Exit(code)
}

var (
	chartDir    = filepath.Join(rig.RepoRoot(), "charts", "kafka-queue-operator")
	crdChartDir = filepath.Join(rig.RepoRoot(), "charts", "kafka-queue-operator-crds")
)

// helm runs the pinned helm.
func helm(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(rig.UserToolsDir(), "helm"), args...)
	cmd.Dir = rig.RepoRoot()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(rig.UserToolsDir(), "cache"), "HELM_CONFIG_HOME="+filepath.Join(rig.UserToolsDir(), "config"), "HELM_DATA_HOME="+filepath.Join(rig.UserToolsDir(), "data"))
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = kqv1.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	return s
}

// freshCluster starts a real apiserver with nothing installed, as a new cluster is.
func freshCluster(t *testing.T) (*rest.Config, client.Client) {
	t.Helper()
	rig.SkipWithoutRig(t, "the local apiserver")
	env, cfg, err := rig.StartBareAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c
}

// startManager runs the controllers as the ServiceAccount sa ("namespace:name"), with leader
// election in its namespace as the chart's Deployment runs them, until the returned stop.
func startManager(t *testing.T, cfg *rest.Config, sa string) (stop func()) {
	t.Helper()
	ns, _, _ := strings.Cut(sa, ":")
	return startManagerWith(t, cfg, managerRun{sa: sa, leaderID: "kafka-queue-operator.kafkaqueues.io", leaderNS: ns,
		opts: controllers.Options{ProbeInterval: 5 * time.Second, ResyncInterval: time.Hour}})
}

// managerRun is how one in-process manager runs: as ServiceAccount sa ("namespace:name"),
// with leader election on Lease leaderNS/leaderID, the reconcilers' options (opts.Scope also
// builds the cache) and, when set, a counter of its Kafka requests.
type managerRun struct {
	sa, leaderID, leaderNS string
	opts                   controllers.Options
	counter                *kafka.RequestCounter
}

func startManagerWith(t *testing.T, cfg *rest.Config, run managerRun) (stop func()) {
	t.Helper()
	ns, name, _ := strings.Cut(run.sa, ":")
	saCfg := rest.CopyConfig(cfg)
	saCfg.Impersonate.UserName = "system:serviceaccount:" + ns + ":" + name
	mgr, err := ctrl.NewManager(saCfg, ctrl.Options{
		Scheme: scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		LeaderElection: true, LeaderElectionID: run.leaderID, LeaderElectionNamespace: run.leaderNS,
		Cache: controllers.CacheOptions(run.opts.Scope),
		// A second manager in this process (the reinstalled release's) reuses the names.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	var pool *kafka.Pool
	if run.counter != nil {
		pool = kafka.NewPool(run.counter.Observe)
	} else {
		pool = kafka.NewPool()
	}
	if err := controllers.SetupAll(mgr, pool, run.opts); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		pool.Close()
	}
	t.Cleanup(stop)
	return stop
}

// startKafkaAndShell starts a broker (stopped by t.Cleanup, after the managers the test starts
// later) and a user shell on cfg's cluster whose kubectl and helm reach it.
func startKafkaAndShell(t *testing.T, ctx context.Context, cfg *rest.Config) (*rig.Kafka, *userShell) {
	t.Helper()
	k, err := rig.StartKafka(ctx, rig.KafkaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	return k, newUserShell(t, cfg)
}

func TestChartsLint(t *testing.T) {
	t.Parallel()
	if _, err := helm("lint", chartDir, "--strict", "--set", "kafka.bootstrapServers={kafka:9092}"); err != nil {
		t.Fatal(err)
	}
	if _, err := helm("lint", crdChartDir, "--strict"); err != nil {
		t.Fatal(err)
	}
}

// TestReadmeInstallIsTheDocsInstall: README's install block is the one docs/install.md has,
// so running one verifies both.
func TestReadmeInstallIsTheDocsInstall(t *testing.T) {
	t.Parallel()
	if a, b := block(t, "README.md", "install"), block(t, "docs/install.md", "install"); a != b {
		t.Fatalf("README.md and docs/install.md install blocks differ:\n%s\n---\n%s", a, b)
	}
	// Every marked block of docs/install.md is run by some test below.
	run := map[string]bool{"install": true, "install-without-kafka": true, "add-kafka": true, "own-kafkacluster": true,
		"queue": true, "upgrade": true, "rollback": true, "migrate-from-0.1": true, "uninstall": true, "reinstall": true, "gitops": true,
		// run by test/node (make test-node) on a real node, after README's install
		"republisher-app": true,
		// run by TestInstallFromReleaseArtifacts on the packaged charts
		"install-release": true}
	for name := range rig.DocBlocks(t, "docs/install.md") {
		if !run[name] {
			t.Errorf("docs/install.md block %q is run by no test", name)
		}
	}
}

// TestDocsInstallQueueUninstallReinstall follows README's install on a fresh cluster with a
// real broker, then docs/install.md: a queue, an upgrade, the uninstall (CRDs, the
// KafkaCluster, the queue and its topic stay), and an install under another name and
// namespace whose manager picks the queues up.
func TestDocsInstallQueueUninstallReinstall(t *testing.T) {
	t.Parallel()
	cfg, admin := freshCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	k, sh := startKafkaAndShell(t, ctx, cfg)
	sh.Replace["kafka-0.kafka:9092"] = k.Bootstrap()

	// The manager Pod would start once the release exists; here it starts after the command
	// that installs it.
	var stopManager func()
	sh.RunBlock(block(t, "README.md", "install"), func(cmd string) {
		if strings.HasPrefix(cmd, "helm install kqo ") {
			// RBAC is enforced: an account the chart did not bind is refused.
			nobody := rest.CopyConfig(cfg)
			nobody.Impersonate.UserName = "system:serviceaccount:kqo-system:nobody"
			nc, err := client.New(nobody, client.Options{Scheme: scheme()})
			if err != nil {
				t.Fatal(err)
			}
			if err := nc.List(ctx, &kqv1.ShareQueueList{}); !apierrors.IsForbidden(err) {
				t.Fatalf("an unbound ServiceAccount listed ShareQueues (err %v): RBAC is not enforced, the test would prove nothing", err)
			}
			stopManager = startManager(t, cfg, "kqo-system:kqo-kafka-queue-operator")
		}
	})
	if stopManager == nil {
		t.Fatal("README's install block has no `helm install kqo` command")
	}
	sh.RunBlock(block(t, "docs/install.md", "queue"), nil)

	// Deletion through the finalizer works with the chart's RBAC too.
	doomed := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "kqo-system", Name: "doomed"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "kafka"}, DeletionPolicy: kqv1.DeletionPolicyDelete}}
	if err := admin.Create(ctx, doomed); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, 90*time.Second, func() string {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(doomed), doomed); err != nil {
			return err.Error()
		}
		if !meta.IsStatusConditionTrue(doomed.Status.Conditions, kqv1.ConditionReady) || len(doomed.Finalizers) != 1 {
			return fmt.Sprintf("queue doomed not Ready with its finalizer: %+v %v", doomed.Status.Conditions, doomed.Finalizers)
		}
		return ""
	})
	if err := admin.Delete(ctx, doomed); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, 60*time.Second, func() string {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(doomed), doomed); apierrors.IsNotFound(err) {
			return ""
		}
		return fmt.Sprintf("queue doomed not deleted: finalizers %v", doomed.Finalizers)
	})

	sh.RunBlock(block(t, "docs/install.md", "upgrade"), nil)
	if out := sh.Run("helm history kqo -n kqo-system"); !strings.Contains(out, "Upgrade complete") {
		t.Fatalf("helm history shows no upgrade:\n%s", out)
	}

	out := ""
	sh.RunBlock(block(t, "docs/install.md", "uninstall"), func(cmd string) {
		if strings.HasPrefix(cmd, "helm uninstall") {
			stopManager()
		}
		if strings.HasPrefix(cmd, "kubectl get sq") {
			out = sh.Run(cmd)
		}
	})
	if !strings.Contains(out, "orders") {
		t.Fatalf("after uninstall, kubectl get sq -A does not list orders:\n%s", out)
	}
	var crds apiextensionsv1.CustomResourceDefinitionList
	// Every CRD the chart carries stays.
	files, _ := filepath.Glob(filepath.Join(rig.RepoRoot(), "charts", "kafka-queue-operator-crds", "files", "crds", "*.yaml"))
	if err := admin.List(ctx, &crds, client.MatchingLabels{"app.kubernetes.io/part-of": "kafka-queue-operator"}); err != nil || len(crds.Items) != len(files) || len(files) < 5 {
		t.Fatalf("after uninstall: %d CRDs (err %v), want the chart's %d", len(crds.Items), err, len(files))
	}
	var kc kqv1.KafkaCluster
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "kqo-system", Name: "kafka"}, &kc); err != nil {
		t.Fatalf("after uninstall the chart's KafkaCluster is gone: %v", err)
	}
	var dep metav1.PartialObjectMetadata
	dep.SetGroupVersionKind(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "kqo-system", Name: "kqo-kafka-queue-operator"}, &dep); !apierrors.IsNotFound(err) {
		t.Fatalf("after uninstall the manager Deployment is still there (err %v)", err)
	}
	adm, err := kgo.NewClient(kgo.SeedBrokers(k.BootstrapServers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	topics, err := kadm.NewClient(adm).ListTopics(ctx, "orders")
	if err != nil || !topics.Has("orders") || topics["orders"].Err != nil {
		t.Fatalf("after uninstall topic orders is not in Kafka: %v %v", topics, err)
	}

	sh.RunBlock(block(t, "docs/install.md", "reinstall"), nil)
	if err := admin.Get(ctx, client.ObjectKey{Name: "sharequeues.kafkaqueues.io"}, &crds.Items[0]); err != nil {
		t.Fatal(err)
	}
	if owner := crds.Items[0].Annotations["meta.helm.sh/release-name"]; owner != "kqo-crds" {
		t.Fatalf("after reinstall the CRDs belong to release %q, want kqo-crds", owner)
	}
	// The new install's manager works the queues the old one left.
	startManager(t, cfg, "queues:queues-kafka-queue-operator")
	late := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "kqo-system", Name: "after-reinstall"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "kafka"}}}
	if err := admin.Create(ctx, late); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, 90*time.Second, func() string {
		_ = admin.Get(ctx, client.ObjectKeyFromObject(late), late)
		if !meta.IsStatusConditionTrue(late.Status.Conditions, kqv1.ConditionReady) {
			return fmt.Sprintf("queue after-reinstall not Ready under the reinstalled manager: %+v", late.Status.Conditions)
		}
		return ""
	})
}
