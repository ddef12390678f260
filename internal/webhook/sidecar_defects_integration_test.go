package webhook_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/webhook"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// plainQueue is a namespace ns with a plaintext KafkaCluster and the active queue "orders"
// (whose route sets no resources), as the webhook's cache sees them.
func plainQueue(t *testing.T, r *webhookRig, ns string) {
	t.Helper()
	if err := r.c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	r.queue(t, &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"}, Spec: kqv1.KafkaClusterSpec{
		BootstrapServers: []string{"kafka-0:9092"}}}, "orders", "orders", "dlq.orders", 3)
}

func labelledPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{kqv1.QueueLabel: "orders"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}}}
}

// Bug: a Pod-level securityContext.runAsUser: 0 was inherited by the sidecar (runAsNonRoot
// without a runAsUser of its own), so the kubelet refused to start it and, as a native
// sidecar, it held the application back. The sidecar now runs as 65532 (user and group)
// whatever the Pod says, and the app keeps the Pod's settings.
func TestSidecarIgnoresPodLevelRunAsRoot(t *testing.T) {
	t.Parallel()
	rig.SkipWithoutRig(t, "a kube-apiserver")
	r := startWebhookRig(t, &webhook.PodInjector{Image: "example.com/kqo:test"})
	plainQueue(t, r, "shop")
	p := labelledPod("shop", "root")
	p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0), RunAsGroup: ptr.To[int64](0)}
	if err := r.c.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	side := sidecarOf(t, p)
	sc := side.SecurityContext
	if sc == nil || ptr.Deref(sc.RunAsUser, -1) != 65532 || ptr.Deref(sc.RunAsGroup, -1) != 65532 || !ptr.Deref(sc.RunAsNonRoot, false) {
		t.Errorf("sidecar securityContext %+v, want runAsUser and runAsGroup 65532 with runAsNonRoot", sc)
	}
	if ps := p.Spec.SecurityContext; ps == nil || ptr.Deref(ps.RunAsUser, -1) != 0 {
		t.Errorf("the Pod's own securityContext changed: %+v", ps)
	}
	if w := r.warn.take(); len(w) != 0 {
		t.Errorf("warnings %v", w)
	}
}

// Bug: in a namespace whose ResourceQuota covers limits.cpu and limits.memory, an injected Pod
// was refused because the sidecar had no resources unless the route set
// spec.republisher.resources. The sidecar now has default requests and limits, and
// GOMEMLIMIT from its own limits.memory through the downward API.
func TestSidecarHasResourcesForAQuota(t *testing.T) {
	t.Parallel()
	rig.SkipWithoutRig(t, "a kube-apiserver")
	r := startWebhookRig(t, &webhook.PodInjector{Image: "example.com/kqo:test"})
	ctx := context.Background()
	const ns = "quota"
	plainQueue(t, r, ns)
	hard := corev1.ResourceList{corev1.ResourceLimitsCPU: resource.MustParse("4"), corev1.ResourceLimitsMemory: resource.MustParse("4Gi")}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "limits"}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	if err := r.c.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	// No controller-manager runs here: give the quota the status its controller would, which
	// the apiserver's ResourceQuota admission needs before it admits anything.
	quota.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: corev1.ResourceList{
		corev1.ResourceLimitsCPU: resource.MustParse("0"), corev1.ResourceLimitsMemory: resource.MustParse("0")}}
	if err := r.c.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}

	// The quota is enforced: an app container without limits is refused.
	bad := labelledPod(ns, "no-limits")
	if err := r.c.Create(ctx, bad); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "must specify limits") {
		t.Fatalf("a Pod without limits under a limits quota: %v, want Forbidden (is the ResourceQuota admission plugin on?)", err)
	}
	r.warn.take()

	p := labelledPod(ns, "limited")
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("512Mi")}}
	if err := r.c.Create(ctx, p); err != nil {
		t.Fatalf("an injected Pod whose app has limits was refused: %v", err)
	}
	side := sidecarOf(t, p)
	want := map[string]map[corev1.ResourceName]string{
		"requests": {corev1.ResourceCPU: "50m", corev1.ResourceMemory: "64Mi"},
		"limits":   {corev1.ResourceCPU: "500m", corev1.ResourceMemory: "256Mi"},
	}
	for kind, list := range map[string]corev1.ResourceList{"requests": side.Resources.Requests, "limits": side.Resources.Limits} {
		for name, v := range want[kind] {
			if q, ok := list[name]; !ok || q.Cmp(resource.MustParse(v)) != 0 {
				t.Errorf("sidecar %s %s = %v, want %s", kind, name, list[name], v)
			}
		}
	}
	e, ok := envOf(side)["GOMEMLIMIT"]
	if !ok || e.Value != "" || e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil ||
		e.ValueFrom.ResourceFieldRef.ContainerName != webhook.ContainerName || e.ValueFrom.ResourceFieldRef.Resource != "limits.memory" {
		t.Errorf("sidecar GOMEMLIMIT %+v, want a resourceFieldRef to %s's limits.memory", e, webhook.ContainerName)
	}
	var got corev1.ResourceQuota
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(quota), &got); err != nil {
		t.Fatal(err)
	}
	// The app's limit plus the sidecar's (a native sidecar runs beside the app).
	if q := got.Status.Used[corev1.ResourceLimitsMemory]; q.Cmp(resource.MustParse("768Mi")) != 0 {
		t.Errorf("quota used limits.memory %s, want 768Mi (app 512Mi + sidecar 256Mi)", q.String())
	}
}

// Bug: a Windows Pod (spec.os.name: windows) got the sidecar and its Linux-only
// securityContext, so the apiserver refused the Pod. It is now admitted untouched, with a
// warning that the republisher runs on Linux nodes only.
func TestWindowsPodAdmittedWithoutSidecar(t *testing.T) {
	t.Parallel()
	rig.SkipWithoutRig(t, "a kube-apiserver")
	r := startWebhookRig(t, &webhook.PodInjector{Image: "example.com/kqo:test"})
	plainQueue(t, r, "shop")
	p := labelledPod("shop", "windows")
	p.Spec.OS = &corev1.PodOS{Name: corev1.Windows}
	if err := r.c.Create(context.Background(), p); err != nil {
		t.Fatalf("a labelled Windows Pod was refused: %v", err)
	}
	w := strings.Join(r.warn.take(), "\n")
	if len(p.Spec.InitContainers) != 0 || len(p.Spec.Volumes) != 0 || p.Labels[kqv1.RepublisherLabel] != "" || !strings.Contains(w, "Linux nodes only") {
		t.Errorf("Windows Pod: init containers %d, volumes %d, labels %v, warning %q; want it untouched with a warning about Linux nodes",
			len(p.Spec.InitContainers), len(p.Spec.Volumes), p.Labels, w)
	}
	// A Linux Pod beside it still gets the sidecar.
	p = labelledPod("shop", "linux")
	p.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
	if err := r.c.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	sidecarOf(t, p)
}

// Bug: an app container declaring UDP (or SCTP) port 9787 was refused as a clash with the
// sidecar's metrics port, though the sidecar listens on TCP only. Only TCP ports (an empty
// protocol is TCP) clash now.
func TestOnlyTCPPortsClashWithTheSidecar(t *testing.T) {
	t.Parallel()
	rig.SkipWithoutRig(t, "a kube-apiserver")
	r := startWebhookRig(t, &webhook.PodInjector{Image: "example.com/kqo:test"})
	plainQueue(t, r, "shop")
	for _, tc := range []struct {
		name     string
		ports    []corev1.ContainerPort
		injected bool
	}{
		{"udp", []corev1.ContainerPort{{ContainerPort: 9787, Protocol: corev1.ProtocolUDP}}, true},
		{"sctp", []corev1.ContainerPort{{ContainerPort: 8787, Protocol: corev1.ProtocolSCTP}}, true},
		{"tcp", []corev1.ContainerPort{{ContainerPort: 9787, Protocol: corev1.ProtocolTCP}}, false},
		{"default-tcp", []corev1.ContainerPort{{ContainerPort: 8787}}, false},
		{"udp-and-tcp", []corev1.ContainerPort{{ContainerPort: 9787, Protocol: corev1.ProtocolUDP}, {ContainerPort: 9787}}, false},
	} {
		p := labelledPod("shop", "port-"+tc.name)
		p.Spec.Containers[0].Ports = tc.ports
		if err := r.c.Create(context.Background(), p); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		w := strings.Join(r.warn.take(), "\n")
		switch {
		case tc.injected && (len(p.Spec.InitContainers) != 1 || w != ""):
			t.Errorf("%s: init containers %d, warning %q; want the sidecar and no warning", tc.name, len(p.Spec.InitContainers), w)
		case !tc.injected && (len(p.Spec.InitContainers) != 0 || !strings.Contains(w, "/TCP") || !strings.Contains(w, "which the sidecar uses")):
			t.Errorf("%s: init containers %d, warning %q; want no sidecar and a warning about the TCP port", tc.name, len(p.Spec.InitContainers), w)
		}
	}
}
