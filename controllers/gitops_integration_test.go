package controllers

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// argoHealth runs docs/gitops/argocd-health.lua on obj (as Argo CD does) and returns
// hs.status and hs.message.
func argoHealth(t *testing.T, obj *unstructured.Unstructured) (string, string) {
	t.Helper()
	script, err := os.ReadFile(filepath.Join(rig.RepoRoot(), "docs", "gitops", "argocd-health.lua"))
	if err != nil {
		t.Fatal(err)
	}
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", toLua(L, obj.Object))
	if err := L.DoString("function health()\n" + string(script) + "\nend\nhs = health()"); err != nil {
		t.Fatalf("lua: %v", err)
	}
	hs := L.GetGlobal("hs").(*lua.LTable)
	return hs.RawGetString("status").String(), hs.RawGetString("message").String()
}

func toLua(L *lua.LState, v any) lua.LValue {
	switch x := v.(type) {
	case map[string]any:
		t := L.NewTable()
		for k, e := range x {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	case []any:
		t := L.NewTable()
		for _, e := range x {
			t.Append(toLua(L, e))
		}
		return t
	case string:
		return lua.LString(x)
	case bool:
		return lua.LBool(x)
	case int64:
		return lua.LNumber(x)
	case float64:
		return lua.LNumber(x)
	case nil:
		return lua.LNil
	default:
		return lua.LString("")
	}
}

func asUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// Real status objects the operator wrote, in each state, read by kstatus (Flux, kpt,
// cli-utils) and by the Argo CD health script from docs/gitops.
func TestGitOpsHealth(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	mk := func(name string, mut func(*kqv1.ShareQueue)) *kqv1.ShareQueue {
		sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-" + ns}, Spec: kqv1.ShareQueueSpec{ClusterRef: kqv1.ClusterReference{Name: "local"}}}
		if mut != nil {
			mut(sq)
		}
		if err := r.k8s.Create(ctx, sq); err != nil {
			t.Fatal(err)
		}
		return sq
	}
	ready := r.waitQueue(t, mk("healthy", nil), kqv1.ConditionReady, metav1.ConditionTrue)
	stalled := r.waitQueue(t, mk("stalled", func(sq *kqv1.ShareQueue) {
		sq.Spec.Delivery.LockDuration = &metav1.Duration{Duration: 5 * time.Minute}
	}), kqv1.ConditionStalled, metav1.ConditionTrue)
	waiting := r.waitQueue(t, mk("waiting", func(sq *kqv1.ShareQueue) { sq.Spec.ClusterRef.Name = "not-yet" }), kqv1.ConditionReconciling, metav1.ConditionTrue)
	paused := r.waitQueue(t, mk("paused", func(sq *kqv1.ShareQueue) {
		sq.Annotations = map[string]string{kqv1.ReconcileAnnotation: kqv1.ReconcilePaused}
		sq.Spec.Delivery.MaxDeliveryAttempts = ptr.To[int32](3)
	}), kqv1.ConditionReconciling, metav1.ConditionFalse)
	cases := []struct {
		obj        runtime.Object
		kstatus    status.Status
		argo       string
		argoReason string
	}{
		{ready, status.CurrentStatus, "Healthy", "configured"},
		{stalled, status.FailedStatus, "Degraded", "OutOfBrokerBounds"},
		{waiting, status.InProgressStatus, "Progressing", "ClusterNotFound"},
		{paused, status.CurrentStatus, "Suspended", "Paused"},
	}
	for _, tc := range cases {
		u := asUnstructured(t, tc.obj)
		res, err := status.Compute(u)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != tc.kstatus {
			t.Errorf("%s: kstatus %s (%s), want %s", u.GetName(), res.Status, res.Message, tc.kstatus)
		}
		hs, msg := argoHealth(t, u)
		if hs != tc.argo || !strings.Contains(msg, tc.argoReason) {
			t.Errorf("%s: Argo CD health %s %q, want %s containing %q", u.GetName(), hs, msg, tc.argo, tc.argoReason)
		}
	}
	// A spec change not yet observed is Progressing for both.
	u := asUnstructured(t, ready)
	u.SetGeneration(ready.Generation + 1)
	if res, _ := status.Compute(u); res.Status != status.InProgressStatus {
		t.Errorf("unobserved generation: kstatus %s", res.Status)
	}
	if hs, _ := argoHealth(t, u); hs != "Progressing" {
		t.Errorf("unobserved generation: Argo CD %s", hs)
	}
	// The KafkaCluster too.
	var kc kqv1.KafkaCluster
	if err := r.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "local"}, &kc); err != nil {
		t.Fatal(err)
	}
	if res, _ := status.Compute(asUnstructured(t, &kc)); res.Status != status.CurrentStatus {
		t.Errorf("KafkaCluster kstatus %s", res.Status)
	}
	if hs, _ := argoHealth(t, asUnstructured(t, &kc)); hs != "Healthy" {
		t.Errorf("KafkaCluster Argo CD %s", hs)
	}
}

// Server-side apply of the same manifest twice changes nothing and makes the operator do no
// Kafka writes and no status writes.
func TestServerSideApplyTwiceIsQuiet(t *testing.T) {
	// Not parallel: it counts the suite manager's Kafka writes, which parallel tests would add to.
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	manifest := func() *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kafkaqueues.io/v1alpha1", "kind": "ShareQueue",
			"metadata": map[string]any{"name": "ssa-" + ns, "namespace": ns},
			"spec": map[string]any{
				"clusterRef": map[string]any{"name": "local"},
				"topic":      map[string]any{"partitions": int64(2), "config": map[string]any{"retention.ms": "86400000"}},
				"delivery":   map[string]any{"lockDuration": "30s", "maxDeliveryAttempts": int64(4)},
			},
		}}
	}
	if err := r.k8s.Patch(ctx, manifest(), client.Apply, client.FieldOwner("gitops"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ssa-" + ns}}
	settled := r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
	eventually(t, 30*time.Second, func() string {
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), settled); err != nil {
			return err.Error()
		}
		if settled.Status.Group == nil {
			return "group state not read yet"
		}
		if settled.Status.Depth == nil {
			return "depth not written yet (the depth poller's first status write)"
		}
		return ""
	})
	time.Sleep(time.Second)
	if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), settled); err != nil {
		t.Fatal(err)
	}
	before := r.counter.Snapshot()
	second := manifest()
	if err := r.k8s.Patch(ctx, second, client.Apply, client.FieldOwner("gitops"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	if second.GetResourceVersion() != settled.ResourceVersion {
		t.Errorf("second apply changed the object: resourceVersion %s -> %s", settled.ResourceVersion, second.GetResourceVersion())
	}
	time.Sleep(2 * time.Second)
	var now kqv1.ShareQueue
	if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), &now); err != nil {
		t.Fatal(err)
	}
	if now.ResourceVersion != settled.ResourceVersion {
		t.Errorf("status churn after the second apply: resourceVersion %s -> %s", settled.ResourceVersion, now.ResourceVersion)
	}
	if w := kafka.Writes(kafka.Diff(before, r.counter.Snapshot())); w != 0 {
		t.Errorf("%d Kafka writes after a no-op apply", w)
	}
}

// Issue 19 case 3: Plan and ObserveOnly hold changes back on purpose. A queue (and its route)
// in either mode with pending changes reads as suspended to kstatus (Current), Argo CD
// (Suspended) and `kubectl wait --for=condition=Reconciling=false`, and no condition claims
// what Kafka does not hold: the missing topic and the unwritten group configs are False with
// reason Planned / ObserveOnly, and status.partitions is the live topic's (none).
func TestHeldBackModesReadAsSuspended(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	kubectl, err := rig.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := rig.WriteKubeconfig(r.env.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{kqv1.ReconcilePlan, kqv1.ReconcileObserveOnly} {
		name := strings.ToLower(mode) + "-" + ns
		reason := kqv1.ReasonPlanned
		if mode == kqv1.ReconcileObserveOnly {
			reason = kqv1.ReasonObserveOnly
		}
		sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{kqv1.ReconcileAnnotation: mode}},
			Spec: kqv1.ShareQueueSpec{ClusterRef: kqv1.ClusterReference{Name: "local"}, Delivery: kqv1.DeliverySpec{LockDuration: &metav1.Duration{Duration: 45 * time.Second}}}}
		if err := r.k8s.Create(ctx, sq); err != nil {
			t.Fatal(err)
		}
		dlr := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-dlq"}, Spec: kqv1.DeadLetterRouteSpec{QueueRef: kqv1.QueueReference{Name: name}}}
		if err := r.k8s.Create(ctx, dlr); err != nil {
			t.Fatal(err)
		}
		got := &kqv1.ShareQueue{}
		eventually(t, 60*time.Second, func() string {
			if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), got); err != nil {
				return err.Error()
			}
			// No Ready claim: kstatus reads a False Ready as InProgress, and nothing was applied.
			if c := findCondition(got.Status.Conditions, kqv1.ConditionReady); c != nil {
				return fmt.Sprintf("%s: Ready %+v, want none", mode, c)
			}
			for _, want := range []struct{ typ, status, reason, msg string }{
				{kqv1.ConditionReconciling, "False", reason, "none applied"},
				{kqv1.ConditionStalled, "False", reason, ""},
				{kqv1.ConditionTopicReady, "False", reason, "topic " + name + " does not exist"},
				{kqv1.ConditionGroupConfigured, "False", reason, "set share.record.lock.duration.ms=45000"},
			} {
				c := findCondition(got.Status.Conditions, want.typ)
				if c == nil || string(c.Status) != want.status || c.Reason != want.reason || !strings.Contains(c.Message, want.msg) {
					return fmt.Sprintf("%s: %s %+v, want %s/%s containing %q", mode, want.typ, c, want.status, want.reason, want.msg)
				}
			}
			return ""
		})
		if got.Status.Partitions != 0 {
			t.Errorf("%s: status.partitions %d for a topic that does not exist", mode, got.Status.Partitions)
		}
		route := &kqv1.DeadLetterRoute{}
		eventually(t, 60*time.Second, func() string {
			if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(dlr), route); err != nil {
				return err.Error()
			}
			for _, want := range []struct{ typ, status, reason string }{
				{kqv1.ConditionRouteActive, "False", reason}, {kqv1.ConditionTopicReady, "False", reason},
				{kqv1.ConditionReconciling, "False", reason}, {kqv1.ConditionStalled, "False", reason},
			} {
				if c := findCondition(route.Status.Conditions, want.typ); c == nil || string(c.Status) != want.status || c.Reason != want.reason {
					return fmt.Sprintf("%s route: %s %+v, want %s/%s", mode, want.typ, c, want.status, want.reason)
				}
			}
			return ""
		})
		for _, obj := range []runtime.Object{got, route} {
			u := asUnstructured(t, obj)
			if res, err := status.Compute(u); err != nil || res.Status != status.CurrentStatus {
				t.Errorf("%s %s: kstatus %v (%v), want Current", mode, u.GetName(), res, err)
			}
			if hs, msg := argoHealth(t, u); hs != "Suspended" || !strings.Contains(msg, mode) {
				t.Errorf("%s %s: Argo CD health %s %q, want Suspended", mode, u.GetName(), hs, msg)
			}
		}
		out, err := exec.Command(kubectl, "--kubeconfig", kubeconfig, "-n", ns, "wait", "--for=condition=Reconciling=false", "sq/"+name, "deadletterroute/"+name+"-dlq", "--timeout=15s").CombinedOutput()
		if err != nil {
			t.Errorf("%s: kubectl wait --for=condition=Reconciling=false: %v\n%s", mode, err, out)
		}
		topics, err := r.admin.DescribeTopics(ctx, name, "dlq."+name)
		if err != nil {
			t.Fatal(err)
		}
		for tn, tp := range topics {
			if !kafka.IsNotFound(tp.Err) {
				t.Errorf("%s: topic %s was created", mode, tn)
			}
		}
	}
}
