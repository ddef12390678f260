// Package chart tests the Helm chart: lint, the values schema (one rejected value per rule),
// and an install rendered by helm, applied to a real apiserver, with the manager running as
// the chart's ServiceAccount (impersonated, so missing RBAC fails) against a real broker.
package chart

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/controllers"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(m.Run())
}

var chartDir = filepath.Join(rig.RepoRoot(), "charts", "kafka-queue-operator")

// helm runs the helm pinned in hack/tools/go.mod (built from the Go module proxy).
func helm(args ...string) (string, error) {
	cmd := exec.Command("go", append([]string{"tool", "-modfile=hack/tools/go.mod", "helm"}, args...)...)
	cmd.Dir = rig.RepoRoot()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

func template(sets ...string) (string, error) {
	args := []string{"template", "kqo", chartDir, "--namespace", "kqo-system", "--kube-version", "1.37.2"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return helm(args...)
}

func TestChartLints(t *testing.T) {
	if _, err := helm("lint", chartDir, "--strict", "--set", "kafka.bootstrapServers={kafka:9092}"); err != nil {
		t.Fatal(err)
	}
}

func TestValuesSchemaRejectsBadValues(t *testing.T) {
	cases := []struct {
		set, want string
	}{
		{"replicaCount=0", "replicaCount"},
		{"image.pullPolicy=Sometimes", "pullPolicy"},
		{"image.repository=", "repository"},
		{"kafka.bootstrapServers={kafka}", "bootstrapServers"},
		{"kafka.featurePolicy=Upgrade", "featurePolicy"},
		{"kafka.targetShareVersion=3", "targetShareVersion"},
		{"kafka.shareStateTopicPolicy=Shrink", "shareStateTopicPolicy"},
		{"kafka.name=Bad_Name", "name"},
		{"manager.clusterProbeInterval=soon", "clusterProbeInterval"},
		{"manager.shareQueueConcurrency=0", "shareQueueConcurrency"},
		{"manager.logLevel=verbose", "logLevel"},
		{"metrics.port=8081", "port"},
		{"leaderElection.enabled=maybe", "enabled"},
		{"crds.install=yes", "install"},
		{"noSuchValue=1", "noSuchValue"},
		{"kafka.sasl.mechanism=GSSAPI", "sasl"},
		{"podLabels.app\\.kubernetes\\.io/name=x", "podLabels"},
	}
	for _, tc := range cases {
		t.Run(tc.set, func(t *testing.T) {
			_, err := template(tc.set)
			if err == nil {
				t.Fatalf("--set %s rendered; want a schema error naming %s", tc.set, tc.want)
			}
			if !strings.Contains(err.Error(), "values don't meet the specifications of the schema") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
	if _, err := template("kafka.bootstrapServers={a:9092,b:9093}", "kafka.featurePolicy=Finalize", "kafka.targetShareVersion=1"); err != nil {
		t.Errorf("valid values refused: %v", err)
	}
	// Regression: tls {} rendered no tls at all (plaintext), and empty strings rendered
	// fields the CRD refuses.
	out, err := helm("template", "kqo", chartDir, "--kube-version", "1.37.2", "--set", "kafka.bootstrapServers={a:9092}",
		"--set-json", `kafka.tls={"clientCertSecretName":"","serverName":""}`, "--set-string", "kafka.name=123")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "  tls: {}\n") || strings.Contains(out, `clientCertSecretName: ""`) || !strings.Contains(out, `name: "123"`) {
		t.Errorf("rendered KafkaCluster:\n%s", out[strings.Index(out, "kind: KafkaCluster"):])
	}
}

func TestChartInstallReconcilesAsItsServiceAccount(t *testing.T) {
	rig.SkipWithoutRig(t, "the local apiserver and Kafka rig")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	k, err := rig.StartKafka(ctx, rig.KafkaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop()
	env, cfg, err := rig.StartAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	rendered, err := template("kafka.bootstrapServers={"+strings.Join(k.BootstrapServers(), ",")+"}", "kafka.name=local")
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = kqv1.AddToScheme(scheme)
	admin, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "kqo-system"}}}
	if err := admin.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	// Apply everything helm rendered (the KafkaCluster last: it needs the CRDs).
	var objs, late []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(rendered), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			t.Fatal(err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if u.GetKind() == "KafkaCluster" {
			late = append(late, u)
		} else {
			objs = append(objs, u)
		}
	}
	kinds := map[string]int{}
	for _, u := range append(objs, late...) {
		kinds[u.GetKind()]++
		if err := admin.Patch(ctx, u, client.Apply, client.FieldOwner("helm-test"), client.ForceOwnership); err != nil {
			t.Fatalf("applying %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	for _, kind := range []string{"CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "Service", "KafkaCluster"} {
		if kinds[kind] == 0 {
			t.Errorf("chart rendered no %s (%v)", kind, kinds)
		}
	}

	// The manager, as the chart's ServiceAccount, with leader election in the release
	// namespace as the chart's Deployment runs it.
	// Impersonation is checked by the apiserver's RBAC: an account the chart did not bind is
	// refused, so the test below would fail on any permission the chart lacks.
	nobody := rest.CopyConfig(cfg)
	nobody.Impersonate.UserName = "system:serviceaccount:kqo-system:nobody"
	if nc, err := client.New(nobody, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	} else if err := nc.List(ctx, &kqv1.ShareQueueList{}); !apierrors.IsForbidden(err) {
		t.Fatalf("an unbound ServiceAccount listed ShareQueues (err %v): RBAC is not enforced, the test would prove nothing", err)
	}
	saCfg := rest.CopyConfig(cfg)
	saCfg.Impersonate.UserName = "system:serviceaccount:kqo-system:kqo-kafka-queue-operator"
	mgr, err := ctrl.NewManager(saCfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		LeaderElection: true, LeaderElectionID: "kafka-queue-operator.kafkaqueues.io", LeaderElectionNamespace: "kqo-system",
	})
	if err != nil {
		t.Fatal(err)
	}
	pool := kafka.NewPool()
	defer pool.Close()
	if err := controllers.SetupAll(mgr, pool, controllers.Options{ProbeInterval: 5 * time.Second, ResyncInterval: time.Hour}); err != nil {
		t.Fatal(err)
	}
	mctx, mcancel := context.WithCancel(ctx)
	defer mcancel()
	mgrErr := make(chan error, 1)
	go func() { mgrErr <- mgr.Start(mctx) }()

	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "kqo-system", Name: "orders"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, DeletionPolicy: kqv1.DeletionPolicyDelete,
		Delivery: kqv1.DeliverySpec{LockDuration: &metav1.Duration{Duration: 30 * time.Second}}}}
	if err := admin.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case err := <-mgrErr:
			t.Fatalf("manager stopped: %v", err)
		default:
		}
		_ = admin.Get(ctx, client.ObjectKeyFromObject(sq), sq)
		if meta.IsStatusConditionTrue(sq.Status.Conditions, kqv1.ConditionReady) && len(sq.Finalizers) == 1 {
			break
		}
		if time.Now().After(deadline) {
			var kc kqv1.KafkaCluster
			_ = admin.Get(ctx, client.ObjectKey{Namespace: "kqo-system", Name: "local"}, &kc)
			t.Fatalf("ShareQueue not Ready as the chart's ServiceAccount: %+v finalizers %v; KafkaCluster %+v", sq.Status.Conditions, sq.Finalizers, kc.Status.Conditions)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// Deletion through the finalizer works with the chart's RBAC too.
	if err := admin.Delete(ctx, sq); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(sq), sq); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ShareQueue not deleted: finalizers %v", sq.Finalizers)
		}
	}
}
