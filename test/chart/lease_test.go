package chart

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// leaderIDOf is the --leader-election-id the release's main Deployment runs with.
func leaderIDOf(t *testing.T, sh *userShell, release, ns string) string {
	t.Helper()
	for _, o := range objects(t, sh.Run(fmt.Sprintf("helm get manifest %s -n %s", release, ns))) {
		if o.GetKind() != "Deployment" || strings.Contains(o.GetName(), "-shard-") {
			continue
		}
		cs, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, a := range cs[0].(map[string]any)["args"].([]any) {
			if v, ok := strings.CutPrefix(a.(string), "--leader-election-id="); ok {
				return v
			}
		}
	}
	t.Fatalf("release %s has no --leader-election-id", release)
	return ""
}

// Issue 33: two releases in one namespace (watchNamespaces mode) rendered the same Lease, so
// the second manager waited for ever and its namespace's objects never got a status. Each
// release now has a Lease of its own: both managers, run as the chart configures them (their
// args, their ServiceAccounts), lead and reconcile their own namespace's KafkaCluster.
func TestTwoReleasesInOneNamespaceBothLead(t *testing.T) {
	t.Parallel()
	cfg, admin := freshCluster(t)
	ctx := context.Background()
	sh := newUserShell(t, cfg)
	rels := &releases{t: t, cfg: cfg, sh: sh, runs: map[string][]*releaseManager{}}
	sh.Run("helm install kqo-crds charts/kafka-queue-operator-crds -n kqo-system --create-namespace")
	for _, team := range []string{"team-a", "team-b"} {
		sh.Run("kubectl create namespace " + team)
		release := "kqo-" + strings.TrimPrefix(team, "team-")
		sh.Run(fmt.Sprintf("helm install %s charts/kafka-queue-operator -n kqo-system --set 'watchNamespaces={%s}'", release, team))
		rels.restart(release, "kqo-system")
	}
	a, b := leaderIDOf(t, sh, "kqo-a", "kqo-system"), leaderIDOf(t, sh, "kqo-b", "kqo-system")
	if a == b {
		t.Fatalf("both releases elect on Lease %s", a)
	}
	for _, team := range []string{"team-a", "team-b"} {
		// Unreachable on purpose: a status (Connected=False) proves a manager reconciled it.
		kc := &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "kafka"}, Spec: kqv1.KafkaClusterSpec{BootstrapServers: []string{"127.0.0.1:1"}}}
		if err := admin.Create(ctx, kc); err != nil {
			t.Fatal(err)
		}
	}
	rig.Eventually(t, 90*time.Second, func() string {
		for _, team := range []string{"team-a", "team-b"} {
			var kc kqv1.KafkaCluster
			if err := admin.Get(ctx, client.ObjectKey{Namespace: team, Name: "kafka"}, &kc); err != nil {
				return err.Error()
			}
			if len(kc.Status.Conditions) == 0 {
				return fmt.Sprintf("KafkaCluster %s/kafka has no status: its release's manager does not lead", team)
			}
		}
		return ""
	})
	for _, id := range []string{a, b} {
		var l coordinationv1.Lease
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "kqo-system", Name: id}, &l); err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			t.Errorf("Lease kqo-system/%s: %v, holder %v", id, err, l.Spec.HolderIdentity)
		}
	}
}

// An upgrade from chart 0.2.0 keeps the Lease the release's Pods hold
// (kafka-queue-operator.kafkaqueues.io), so the old and the new Pod never lead at once;
// a release whose Pods do not hold it (another release's do) gets its own.
func TestUpgradeKeepsTheLeaseItsPodsHold(t *testing.T) {
	t.Parallel()
	cfg, admin := freshCluster(t)
	ctx := context.Background()
	sh := newUserShell(t, cfg)
	sh.Run("helm install kqo-crds charts/kafka-queue-operator-crds -n kqo-system --create-namespace")
	// What a 0.2.0 release's leader leaves: the legacy Lease held by one of its Pods.
	legacy := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kqo-system", Name: "kafka-queue-operator.kafkaqueues.io"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("kqo-kafka-queue-operator-6f7d9c8b5-x2k4p_1b7e4c1e-8a0f-4f55-9d8e-2a1f3c0b9d77"), LeaseDurationSeconds: ptr.To[int32](15)}}
	if err := admin.Create(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	sh.Run("helm install kqo charts/kafka-queue-operator -n kqo-system")
	if got := leaderIDOf(t, sh, "kqo", "kqo-system"); got != "kafka-queue-operator.kafkaqueues.io" {
		t.Errorf("release kqo, whose Pod holds the 0.2.0 Lease: --leader-election-id=%s, want it kept", got)
	}
	sh.Run("kubectl create namespace team-b")
	sh.Run("helm install kqo-b charts/kafka-queue-operator -n kqo-system --set 'watchNamespaces={team-b}'")
	if got := leaderIDOf(t, sh, "kqo-b", "kqo-system"); got != "kqo-b-kafka-queue-operator.kafkaqueues.io" {
		t.Errorf("release kqo-b, whose Pods do not hold the 0.2.0 Lease: --leader-election-id=%s, want its own", got)
	}
	sh.Run("helm upgrade kqo charts/kafka-queue-operator -n kqo-system --reset-then-reuse-values --set leaderElection.id=pinned.example.com")
	if got := leaderIDOf(t, sh, "kqo", "kqo-system"); got != "pinned.example.com" {
		t.Errorf("leaderElection.id set: --leader-election-id=%s", got)
	}
}
