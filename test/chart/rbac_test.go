package chart

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// Issue 33, RBAC for app teams: with the chart's aggregated ClusterRoles, a user with a
// namespace's edit role creates ShareQueues, DeadLetterRoutes, OffsetResets and
// DeadLetterRedrives there and reads KafkaClusters but cannot write them; a view user reads
// all of them and writes none; an admin also writes KafkaClusters. On a real apiserver, with
// kube-controller-manager's clusterrole-aggregation controller filling Kubernetes' roles.
func TestAggregatedRolesLetNamespaceUsersWork(t *testing.T) {
	t.Parallel()
	rig.SkipWithoutRig(t, "the local apiserver")
	env, cfg, err := rig.StartAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	admin, err := client.New(cfg, client.Options{Scheme: scheme()})
	if err != nil {
		t.Fatal(err)
	}
	startAggregationController(t, cfg)
	ctx := context.Background()

	rendered, err := render("--set", "kafka.bootstrapServers={kafka:9092}", "--show-only", "templates/aggregate-roles.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objects(t, rendered) {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	const ns = "team-a"
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for user, role := range map[string]string{"alice": "edit", "bob": "view", "carol": "admin"} {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + role},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}}
		if err := admin.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
	}
	as := func(user string) client.Client {
		c := rest.CopyConfig(cfg)
		c.Impersonate.UserName = user
		cl, err := client.New(c, client.Options{Scheme: scheme()})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	alice, bob, carol := as("alice"), as("bob"), as("carol")
	objs := func(suffix string) []client.Object {
		return []client.Object{
			&kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders" + suffix}, Spec: kqv1.ShareQueueSpec{ClusterRef: kqv1.ClusterReference{Name: "local"}}},
			&kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-dlq" + suffix}, Spec: kqv1.DeadLetterRouteSpec{QueueRef: kqv1.QueueReference{Name: "orders" + suffix}}},
			&kqv1.OffsetReset{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "purge" + suffix}, Spec: kqv1.OffsetResetSpec{QueueRef: kqv1.QueueReference{Name: "orders" + suffix}, ToLatest: ptr.To(true)}},
			&kqv1.DeadLetterRedrive{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "again" + suffix}, Spec: kqv1.DeadLetterRedriveSpec{RouteRef: kqv1.RouteReference{Name: "orders-dlq" + suffix}}},
		}
	}
	cluster := func(name string) *kqv1.KafkaCluster {
		return &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kqv1.KafkaClusterSpec{BootstrapServers: []string{"kafka:9092"}}}
	}
	// The aggregation controller fills edit, view and admin shortly after the roles exist.
	rig.Eventually(t, 60*time.Second, func() string {
		for _, o := range objs("-probe") {
			if err := alice.Create(ctx, o, client.DryRunAll); err != nil {
				return fmt.Sprintf("edit user creating %T: %v", o, err)
			}
		}
		return ""
	})
	for _, o := range objs("") {
		if err := alice.Create(ctx, o); err != nil {
			t.Errorf("edit user creating %T %s: %v", o, o.GetName(), err)
		}
	}
	if err := alice.Create(ctx, cluster("alices")); !apierrors.IsForbidden(err) {
		t.Errorf("edit user creating a KafkaCluster: %v, want forbidden", err)
	}
	if err := carol.Create(ctx, cluster("local")); err != nil {
		t.Errorf("admin user creating a KafkaCluster: %v", err)
	}
	for _, l := range []client.ObjectList{&kqv1.KafkaClusterList{}, &kqv1.ShareQueueList{}, &kqv1.DeadLetterRouteList{}, &kqv1.OffsetResetList{}, &kqv1.DeadLetterRedriveList{}} {
		if err := bob.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Errorf("view user listing %T: %v", l, err)
		}
		if err := alice.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Errorf("edit user listing %T: %v", l, err)
		}
	}
	var got kqv1.ShareQueueList
	if err := bob.List(ctx, &got, client.InNamespace(ns)); err != nil || len(got.Items) != 1 {
		t.Errorf("view user sees %d ShareQueues (%v), want 1", len(got.Items), err)
	}
	for _, o := range objs("-bob") {
		if err := bob.Create(ctx, o); !apierrors.IsForbidden(err) {
			t.Errorf("view user creating %T: %v, want forbidden", o, err)
		}
	}
	// Nothing outside the namespace.
	if err := alice.Create(ctx, &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "elsewhere"},
		Spec: kqv1.ShareQueueSpec{ClusterRef: kqv1.ClusterReference{Name: "local"}}}); !apierrors.IsForbidden(err) {
		t.Errorf("edit user of %s creating in default: %v, want forbidden", ns, err)
	}
}

// startAggregationController runs kube-controller-manager (the node rig's build) with only
// the clusterrole-aggregation controller against cfg's apiserver until the test ends.
func startAggregationController(t *testing.T, cfg *rest.Config) {
	t.Helper()
	dir, err := rig.NodeBinaries()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := rig.WriteKubeconfig(cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	cmd := exec.Command(filepath.Join(dir, "kube-controller-manager"), "--kubeconfig", kubeconfig,
		"--controllers", "clusterrole-aggregation", "--leader-elect=false", "--secure-port=0")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("kube-controller-manager:\n%s", logs.String())
		}
	})
}
