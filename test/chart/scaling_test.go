package chart

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/controllers"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// releaseManager is one manager Deployment of a release, run in-process as the chart
// configures it.
type releaseManager struct {
	deployment string
	counter    *kafka.RequestCounter
	stop       func()
}

// releases runs, for each helm release, one manager per Deployment the release renders: its
// --watch-namespaces, --watch-label-selector, --claims-topic, --leader-election-id and
// --leader-election-namespace from the Deployment's args, as its ServiceAccount (impersonated,
// so the chart's RBAC applies), each counting its own Kafka requests.
type releases struct {
	t    *testing.T
	cfg  *rest.Config
	sh   *userShell
	runs map[string][]*releaseManager
}

// restart stops release's managers and starts the ones its current manifest renders, as
// Kubernetes would roll the Deployments after helm install or upgrade.
func (r *releases) restart(release, ns string) {
	t := r.t
	t.Helper()
	for _, m := range r.runs[release] {
		m.stop()
	}
	r.runs[release] = nil
	manifest := r.sh.Run(fmt.Sprintf("helm get manifest %s -n %s", release, ns))
	for _, o := range objects(t, manifest) {
		if o.GetKind() != "Deployment" {
			continue
		}
		args, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		c := args[0].(map[string]any)
		flags := map[string]string{}
		for _, a := range c["args"].([]any) {
			k, v, _ := strings.Cut(strings.TrimPrefix(a.(string), "--"), "=")
			flags[k] = v
		}
		sa, _, _ := unstructured.NestedString(o.Object, "spec", "template", "spec", "serviceAccountName")
		var scope controllers.Scope
		for _, n := range strings.Split(flags["watch-namespaces"], ",") {
			if n != "" {
				scope.Namespaces = append(scope.Namespaces, n)
			}
		}
		if s := flags["watch-label-selector"]; s != "" {
			sel, err := labels.Parse(s)
			if err != nil {
				t.Fatalf("Deployment %s: --watch-label-selector %q: %v", o.GetName(), s, err)
			}
			scope.Selector = sel
		}
		counter := &kafka.RequestCounter{}
		stop := startManagerWith(t, r.cfg, managerRun{
			sa: o.GetNamespace() + ":" + sa, leaderID: flags["leader-election-id"], leaderNS: flags["leader-election-namespace"],
			opts: controllers.Options{ProbeInterval: time.Hour, ResyncInterval: time.Hour, Scope: scope,
				ClaimsTopic: flags["claims-topic"], ManagerName: ns + "/" + flags["leader-election-id"]},
			counter: counter,
		})
		r.runs[release] = append(r.runs[release], &releaseManager{deployment: o.GetName(), counter: counter, stop: stop})
	}
	if len(r.runs[release]) == 0 {
		t.Fatalf("release %s renders no Deployment", release)
	}
}

func (r *releases) manager(release, deployment string) *releaseManager {
	r.t.Helper()
	for _, m := range r.runs[release] {
		if m.deployment == deployment {
			return m
		}
	}
	r.t.Fatalf("release %s runs no Deployment %s", release, deployment)
	return nil
}

// writesOf is the Kafka writes a manager sent (kafka.WriteAPIs, claims records included).
func writesOf(m *releaseManager) map[string]int {
	out := map[string]int{}
	for api, n := range m.counter.Snapshot() {
		if kafka.WriteAPIs[api] {
			out[api] = n
		}
	}
	return out
}

// TestDocsScalingOut runs docs/scaling-out.md verbatim on a fresh cluster with a real broker:
// two releases with disjoint watchNamespaces and namespaced RBAC; a queue in one release's
// namespace that names the topic and group of a queue in the other's is refused (Conflict,
// naming the owner, known only from the claims topic) and takes over once the owner is
// deleted; a namespace moves from one release to the other, and a queue to a shard, with no
// Kafka write by the manager that takes it over.
func TestDocsScalingOut(t *testing.T) {
	t.Parallel()
	cfg, admin := freshCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	k, sh := startKafkaAndShell(t, ctx, cfg)
	sh.Replace["kafka-0.kafka:9092"] = k.Bootstrap()
	rels := &releases{t: t, cfg: cfg, sh: sh, runs: map[string][]*releaseManager{}}
	afterHelm := func(cmd string) {
		f := strings.Fields(cmd)
		if len(f) >= 3 && f[0] == "helm" && (f[1] == "install" || f[1] == "upgrade") && f[2] != "kqo-crds" {
			ns := ""
			for i, a := range f {
				if a == "-n" && i+1 < len(f) {
					ns = f[i+1]
				}
			}
			rels.restart(f[2], ns)
		}
	}
	sh.RunBlock(block(t, "docs/scaling-out.md", "tenants"), afterHelm)

	// Namespaced RBAC: release kqo-b may not read team-a's queues or any Secret outside its
	// namespaces; nothing cluster-wide but Namespaces and the webhook configuration.
	for _, c := range []struct{ verb, resource, ns, want string }{
		{"list", "sharequeues.kafkaqueues.io", "team-a", "no"},
		{"list", "sharequeues.kafkaqueues.io", "team-b", "yes"},
		{"get", "secrets", "team-a", "no"},
		{"get", "secrets", "team-c", "yes"},
		{"get", "secrets", "kube-system", "no"},
		{"list", "sharequeues.kafkaqueues.io", "", "no"},
	} {
		args := "-n " + c.ns
		if c.ns == "" {
			args = "--all-namespaces"
		}
		out, _ := sh.Try(fmt.Sprintf("kubectl auth can-i %s %s %s --as system:serviceaccount:kqo-b:kqo-b-kafka-queue-operator", c.verb, c.resource, args))
		if got := strings.TrimSpace(out); got != c.want {
			t.Errorf("kqo-b can-i %s %s %s: %q, want %q", c.verb, c.resource, args, got, c.want)
		}
	}

	sh.RunBlock(block(t, "docs/scaling-out.md", "tenant-queues"), nil)
	var orderB kqv1.ShareQueue
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "team-b", Name: "orders"}, &orderB); err != nil {
		t.Fatal(err)
	}
	ready := meta.FindStatusCondition(orderB.Status.Conditions, kqv1.ConditionReady)
	if ready == nil || ready.Reason != kqv1.ReasonConflict || !strings.Contains(ready.Message, "ShareQueue team-a/orders") || !strings.Contains(ready.Message, "claims topic") {
		t.Fatalf("team-b/orders Ready: %+v; want Conflict naming team-a/orders from the claims topic", ready)
	}
	// The claims topic holds two live claims (topic, group) for each Ready queue and none for
	// the refused one.
	claims := readClaims(t, ctx, k.BootstrapServers(), "kafkaqueues.claims")
	var orderA kqv1.ShareQueue
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "orders"}, &orderA); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"topic/orders/" + string(orderA.UID), "group/orders/" + string(orderA.UID)} {
		if !claims[want] {
			t.Errorf("claims topic lacks %s: %v", want, claims)
		}
	}
	for c := range claims {
		if strings.HasSuffix(c, "/"+string(orderB.UID)) {
			t.Errorf("the refused queue team-b/orders claimed %s", c)
		}
	}

	sh.RunBlock(block(t, "docs/scaling-out.md", "tenant-handover"), nil)
	claims = readClaims(t, ctx, k.BootstrapServers(), "kafkaqueues.claims")
	if claims["topic/orders/"+string(orderA.UID)] || !claims["topic/orders/"+string(orderB.UID)] {
		t.Errorf("after the handover the claims are %v: want team-a/orders released and team-b/orders claiming", claims)
	}

	// The move: from the command that adds team-c to kqo-a on, kqo-a's managers write nothing
	// to Kafka, yet they read team-c/payments (its claims view is started: Fetch).
	sh.RunBlock(block(t, "docs/scaling-out.md", "move-namespace"), afterHelm)
	main := rels.manager("kqo-a", "kqo-a-kafka-queue-operator")
	waitClaimsRead(t, main)
	if w := writesOf(main); len(w) > 0 {
		t.Errorf("kqo-a wrote to Kafka taking team-c over: %v", w)
	}
	waitReady(t, ctx, admin, "team-c", "payments")

	sh.RunBlock(block(t, "docs/scaling-out.md", "shards"), afterHelm)
	waitClaimsRead(t, rels.manager("kqo-a", "kqo-a-kafka-queue-operator-shard-s1"))
	for _, m := range rels.runs["kqo-a"] {
		if w := writesOf(m); len(w) > 0 {
			t.Errorf("%s wrote to Kafka after the relabel: %v", m.deployment, w)
		}
	}
	waitReady(t, ctx, admin, "team-c", "payments")
	var payments kqv1.ShareQueue
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "team-c", Name: "payments"}, &payments); err != nil {
		t.Fatal(err)
	}
	claims = readClaims(t, ctx, k.BootstrapServers(), "kafkaqueues.claims")
	if !claims["topic/"+payments.Status.TopicName+"/"+string(payments.UID)] {
		t.Errorf("team-c/payments' claim was lost in the moves: %v", claims)
	}
}

// waitClaimsRead waits until manager m has reconciled a queue — it reads the claims topic
// (Fetch) from its ownership step on — and the reconcile has finished (settle).
func waitClaimsRead(t *testing.T, m *releaseManager) {
	t.Helper()
	rig.Eventually(t, 60*time.Second, func() string {
		if m.counter.Snapshot()["Fetch"] == 0 {
			return m.deployment + " has not reconciled a queue yet (no claims read)"
		}
		return ""
	})
	settle(t, m.counter)
}

// settle waits until a manager's Kafka requests other than the claims reader's long polls
// have stopped for 2 s (the reconcile it started has finished).
func settle(t *testing.T, c *kafka.RequestCounter) {
	t.Helper()
	quiet := func(s map[string]int) string {
		delete(s, "Fetch")
		return fmt.Sprint(s)
	}
	last, since := quiet(c.Snapshot()), time.Now()
	rig.Eventually(t, 60*time.Second, func() string {
		if now := quiet(c.Snapshot()); now != last {
			last, since = now, time.Now()
		}
		if time.Since(since) < 2*time.Second {
			return "the manager is still sending requests: " + last
		}
		return ""
	})
}

func waitReady(t *testing.T, ctx context.Context, c client.Client, ns, name string) {
	t.Helper()
	rig.Eventually(t, 60*time.Second, func() string {
		var sq kqv1.ShareQueue
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sq); err != nil {
			return err.Error()
		}
		if !meta.IsStatusConditionTrue(sq.Status.Conditions, kqv1.ConditionReady) {
			return fmt.Sprintf("%s/%s not Ready: %+v", ns, name, sq.Status.Conditions)
		}
		return ""
	})
}

// readClaims reads the claims topic from the start with its own consumer and returns the
// live claims as "kind/name/uid".
func readClaims(t *testing.T, ctx context.Context, bootstrap []string, topic string) map[string]bool {
	t.Helper()
	live, err := kafka.ReadClaims(ctx, kafka.Config{BootstrapServers: bootstrap, ClientID: "test-claims-reader"}, topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, c := range live {
		out[string(c.Kind)+"/"+c.Name+"/"+c.UID] = true
	}
	return out
}
