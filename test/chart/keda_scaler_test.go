package chart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kafkaqueues/kafka-queue-operator/controllers"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// The KEDA external scaler in the chart and docs/autoscaling.md (issue 34): the docs' values
// turn it on for the main and shard managers (flags, POD_NAME, the TLS Secret mounted) with a
// Service per Deployment that selects only its leader's Pod, at the address the docs'
// ScaledObject names; values it cannot work with fail the render naming the fix; and the docs'
// ScaledObject and TriggerAuthentication are accepted, with strict field validation, by an
// apiserver holding KEDA's own CRDs. Installed with those values, a manager running as the
// chart's ServiceAccount, once elected, labels its own Pod so that its Service selects it.
func TestKEDAScalerDocsManifests(t *testing.T) {
	t.Parallel()
	blocks := rig.YAMLBlocks(t, "docs/autoscaling.md")
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(blocks["keda-scaler-values"]), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := render("-f", values, "--set", "shards={s0}")
	if err != nil {
		t.Fatal(err)
	}
	const certDir = "--keda-scaler-cert-dir=/etc/kafka-queue-operator/keda-scaler"
	pods := map[string]labels.Set{}
	for _, name := range []string{"kqo-kafka-queue-operator", "kqo-kafka-queue-operator-shard-s0"} {
		var d appsv1.Deployment
		find(t, out, "Deployment", name, &d)
		c := d.Spec.Template.Spec.Containers[0]
		if !slices.Contains(c.Args, "--keda-scaler-bind-address=:9090") || !slices.Contains(c.Args, certDir) {
			t.Errorf("%s args %v, want the scaler on :9090 with its certificates", name, c.Args)
		}
		podName := false
		for _, e := range c.Env {
			podName = podName || e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
		}
		mounted := false
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == "kqo-keda-scaler-tls" {
				for _, m := range c.VolumeMounts {
					mounted = mounted || m.Name == v.Name && "--keda-scaler-cert-dir="+m.MountPath == certDir
				}
			}
		}
		if !podName || !mounted {
			t.Errorf("%s: POD_NAME from the downward API %v, Secret kqo-keda-scaler-tls mounted at the cert dir %v", name, podName, mounted)
		}
		pods[name] = d.Spec.Template.Labels
	}
	for deployment, podLabels := range pods {
		var svc corev1.Service
		find(t, out, "Service", deployment+"-keda-scaler", &svc)
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		serving := labels.Merge(podLabels, labels.Set{"kafkaqueues.io/keda-scaler": "serving"})
		if sel.Matches(podLabels) || !sel.Matches(serving) {
			t.Errorf("Service %s-keda-scaler selects %v: want %s's Pods, the serving one only", deployment, svc.Spec.Selector, deployment)
		}
		for other, otherLabels := range pods {
			if other != deployment && sel.Matches(labels.Merge(otherLabels, labels.Set{"kafkaqueues.io/keda-scaler": "serving"})) {
				t.Errorf("Service %s-keda-scaler also selects %s's leader", deployment, other)
			}
		}
		if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 9090 || svc.Spec.Ports[0].TargetPort.StrVal != "keda-scaler" {
			t.Errorf("Service %s-keda-scaler ports %+v", deployment, svc.Spec.Ports)
		}
	}
	if !strings.Contains(blocks["keda-external"], "scalerAddress: kqo-kafka-queue-operator-keda-scaler.kqo-system.svc:9090\n") {
		t.Error("the docs' ScaledObject does not name the chart's scaler Service (kqo-kafka-queue-operator-keda-scaler.kqo-system.svc:9090) for the release kqo in kqo-system")
	}
	var role rbacv1.Role
	find(t, out, "Role", "kqo-kafka-queue-operator-keda-scaler", &role)
	if len(role.Rules) != 1 || !slices.Equal(role.Rules[0].Resources, []string{"pods"}) || !slices.Equal(role.Rules[0].Verbs, []string{"patch"}) || role.Namespace != "kqo-system" {
		t.Errorf("scaler Role %+v, want patch on pods in the release namespace", role)
	}
	for _, tc := range []struct{ args []string }{
		{[]string{"--set", "kedaScaler.enabled=true", "--set", "manager.depthInterval=0s"}},
		{[]string{"--set", "kedaScaler.enabled=true", "--set", "manager.depthInterval=0m0s"}},
		{[]string{"--set", "kedaScaler.enabled=true", "--set", "manager.depthInterval=0.0s"}},
		{[]string{"--set", "kedaScaler.enabled=true", "--set", "kedaScaler.port=8080"}},
		{[]string{"--set", "kedaScaler.enabled=true", "--set", "kedaScaler.port=9443"}},
	} {
		if _, err := render(tc.args...); err == nil || !strings.Contains(err.Error(), "kedaScaler") {
			t.Errorf("render %v: %v, want an error naming kedaScaler", tc.args, err)
		}
	}
	// Above 30 s the manager refuses to start (a breaker's finding: 1m rendered, then the
	// Pod crash-looped); the chart says so first.
	for _, v := range []string{"1m", "31s", "30.5s", "45000ms"} {
		if _, err := render("--set", "manager.depthInterval="+v); err == nil || !strings.Contains(err.Error(), "manager.depthInterval "+v+": the manager reads queue depth at most every 30s") {
			t.Errorf("render manager.depthInterval=%s: %v, want refused naming the 30s bound", v, err)
		}
	}
	// A disabled port clashes with nothing (a breaker's finding: metrics.enabled=false with
	// metrics.port 9090 refused kedaScaler.port 9090); an interval that is not zero is taken.
	for _, args := range [][]string{
		{"--set", "kedaScaler.enabled=true", "--set", "metrics.enabled=false", "--set", "metrics.port=9090"},
		{"--set", "kedaScaler.enabled=true", "--set", "manager.depthInterval=0m10s"},
		{"--set", "manager.depthInterval=30s"}, {"--set", "manager.depthInterval=500ms"}, {"--set", "manager.depthInterval=0s"},
	} {
		if _, err := render(args...); err != nil {
			t.Errorf("render %v: %v, want it rendered", args, err)
		}
	}

	// KEDA's CRDs take the docs' objects as written.
	crds, err := rig.KEDACRDDir()
	if err != nil {
		t.Fatal(err)
	}
	cfg, c := freshCluster(t)
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	shop := &corev1.Namespace{}
	shop.Name = "shop"
	if err := c.Create(ctx, shop); err != nil {
		t.Fatal(err)
	}
	objs, err := rig.DecodeManifests([]byte(blocks["keda-external"]))
	if err != nil || len(objs) != 2 {
		t.Fatalf("docs' keda-external block: %d objects (%v), want a ScaledObject and a TriggerAuthentication", len(objs), err)
	}
	// The check can fail: a misspelt field is refused.
	typo := objs[0].DeepCopy()
	typo.SetName("typo")
	if err := unstructured.SetNestedField(typo.Object, int64(1), "spec", "minReplicas"); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, typo, client.FieldValidation("Strict")); err == nil || !strings.Contains(err.Error(), "minReplicas") {
		t.Fatalf("a ScaledObject with spec.minReplicas (KEDA's field is minReplicaCount) was accepted: %v", err)
	}
	for _, o := range objs {
		if err := c.Create(ctx, o, client.FieldValidation("Strict")); err != nil {
			t.Errorf("KEDA %s CRD refuses the docs' %s: %v", rig.KEDAVersion, o.GetKind(), err)
		}
	}

	// The chart's RBAC lets the elected manager mark its Pod (no kubelet runs it here: the
	// Pod object stands for the Deployment's, with its labels and a mark a lost lease left).
	sh := newUserShell(t, cfg)
	sh.Run("helm install kqo-crds charts/kafka-queue-operator-crds -n kqo-system --create-namespace")
	sh.Run("helm install kqo charts/kafka-queue-operator -n kqo-system -f " + values)
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = "kqo-system", "kqo-kafka-queue-operator-7d9f-x2x4q"
	pod.Labels = labels.Merge(pods["kqo-kafka-queue-operator"], labels.Set{"kafkaqueues.io/keda-scaler": "left-by-an-earlier-leader"})
	pod.Spec.Containers = []corev1.Container{{Name: "manager", Image: "kafka-queue-operator:test"}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	addr, err := rig.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	startManagerWith(t, cfg, managerRun{sa: "kqo-system:kqo-kafka-queue-operator", leaderID: "kqo-kafka-queue-operator.kafkaqueues.io", leaderNS: "kqo-system",
		opts: controllers.Options{ProbeInterval: 5 * time.Second, ResyncInterval: time.Hour, DepthInterval: 10 * time.Second,
			KEDAScaler: controllers.KEDAScalerOptions{BindAddress: addr, PodName: pod.Name, PodNamespace: pod.Namespace}}})
	var svc corev1.Service
	if err := c.Get(ctx, client.ObjectKey{Namespace: "kqo-system", Name: "kqo-kafka-queue-operator-keda-scaler"}, &svc); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, time.Minute, func() string {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err.Error()
		}
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) {
			return fmt.Sprintf("the scaler Service (selector %v) does not select the leader's Pod (labels %v)", svc.Spec.Selector, pod.Labels)
		}
		return ""
	})
}
