package chart

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	appsv1 "k8s.io/api/apps/v1"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// TestDocsInstallWithoutKafkaCluster: the install without kafka.bootstrapServers on a fresh
// cluster, then both ways docs/install.md gives to add a KafkaCluster; and the manager's Pod
// as the chart renders it passes the restricted Pod Security Standard.
func TestDocsInstallWithoutKafkaCluster(t *testing.T) {
	t.Parallel()
	cfg, admin := freshCluster(t)
	ctx := context.Background()
	sh := newUserShell(t, cfg)
	sh.RunBlock(block(t, "docs/install.md", "install-without-kafka"), nil)

	var kcs kqv1.KafkaClusterList
	if err := admin.List(ctx, &kcs); err != nil {
		t.Fatalf("KafkaClusters are not served after the install: %v", err)
	}
	if len(kcs.Items) != 0 {
		t.Fatalf("an install without kafka.bootstrapServers made %d KafkaClusters", len(kcs.Items))
	}

	// The manager's Pod, exactly as the Deployment would make it, is admitted by the
	// apiserver's PodSecurity admission at the restricted level.
	var dep appsv1.Deployment
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "kqo-system", Name: "kqo-kafka-queue-operator"}, &dep); err != nil {
		t.Fatal(err)
	}
	restricted := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restricted", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := admin.Create(ctx, restricted); err != nil {
		t.Fatal(err)
	}
	bad := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "restricted", Name: "root"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "x", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}}}
	if err := admin.Create(ctx, bad, client.DryRunAll); !apierrors.IsForbidden(err) {
		t.Fatalf("a privileged Pod in a restricted namespace was not refused (err %v): PodSecurity admission is off, the check below would prove nothing", err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "restricted", Name: "manager"}, Spec: dep.Spec.Template.Spec}
	pod.Spec.ServiceAccountName = ""
	if err := admin.Create(ctx, pod, client.DryRunAll); err != nil {
		t.Fatalf("the chart's manager Pod is refused at restricted Pod Security: %v", err)
	}

	sh.RunBlock(block(t, "docs/install.md", "add-kafka"), nil)
	var kc kqv1.KafkaCluster
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "kqo-system", Name: "kafka"}, &kc); err != nil {
		t.Fatalf("helm upgrade --set kafka.bootstrapServers made no KafkaCluster: %v", err)
	}
	if got := strings.Join(kc.Spec.BootstrapServers, ","); got != "kafka-0.kafka:9092" || kc.Annotations["meta.helm.sh/release-name"] != "kqo" {
		t.Fatalf("KafkaCluster bootstrapServers %q, release %q", got, kc.Annotations["meta.helm.sh/release-name"])
	}
	sh.RunBlock(block(t, "docs/install.md", "own-kafkacluster"), nil)
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "kqo-system", Name: "prod"}, &kc); err != nil {
		t.Fatalf("the docs' own KafkaCluster was not created: %v", err)
	}
}

// copyDir copies a chart directory.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.Walk(from, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if info.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// editCRD rewrites one CRD file of a copied chart through f.
func editCRD(t *testing.T, path string, f func(crd *apiextensionsv1.CustomResourceDefinition)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	f(&crd)
	out, err := yaml.Marshal(&crd)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// protectedQueue is a ShareQueue using spec.deletionProtection, created without client-side
// validation so an apiserver that does not know the field prunes it silently.
func protectedQueue(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kafkaqueues.io/v1alpha1", "kind": "ShareQueue",
		"metadata": map[string]any{"namespace": "kqo-system", "name": name},
		"spec":     map[string]any{"clusterRef": map[string]any{"name": "kafka"}, "deletionProtection": true},
	}}
	return u
}

// TestDocsUpgradeServesTheNewCRDSchema: a cluster whose CRDs come from an older chart (the
// ShareQueue schema without spec.deletionProtection, which the apiserver then prunes) runs the
// docs' upgrade verbatim, after which the field is served.
func TestDocsUpgradeServesTheNewCRDSchema(t *testing.T) {
	t.Parallel()
	cfg, admin := freshCluster(t)
	ctx := context.Background()
	sh := newUserShell(t, cfg)

	old := filepath.Join(t.TempDir(), "kafka-queue-operator-crds")
	copyDir(t, crdChartDir, old)
	editCRD(t, filepath.Join(old, "files", "crds", "kafkaqueues.io_sharequeues.yaml"), func(crd *apiextensionsv1.CustomResourceDefinition) {
		spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		if _, ok := spec.Properties["deletionProtection"]; !ok {
			t.Fatal("the ShareQueue CRD has no spec.deletionProtection to remove")
		}
		delete(spec.Properties, "deletionProtection")
		crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	})
	sh.Run("helm install kqo-crds " + old + " -n kqo-system --create-namespace")
	sh.Run("helm install kqo charts/kafka-queue-operator -n kqo-system")

	before := protectedQueue("before")
	if err := admin.Create(ctx, before); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedBool(before.Object, "spec", "deletionProtection"); found {
		t.Fatal("the old schema kept spec.deletionProtection: the test cannot tell old from new")
	}

	sh.RunBlock(block(t, "docs/install.md", "upgrade"), nil)
	rig.Eventually(t, 30*time.Second, func() string {
		after := protectedQueue("after-" + time.Now().Format("150405.000000"))
		after.SetName(strings.ReplaceAll(after.GetName(), ".", "-"))
		if err := admin.Create(ctx, after); err != nil {
			return err.Error()
		}
		if v, found, _ := unstructured.NestedBool(after.Object, "spec", "deletionProtection"); !found || !v {
			return "after helm upgrade the apiserver still prunes spec.deletionProtection"
		}
		return ""
	})
}

// chart01Crds is the CRD template of chart 0.1.0, where the CRDs were part of the operator's
// release.
const chart01Crds = `{{- range $path, $_ := .Files.Glob "files/crds/*.yaml" }}
{{- $crd := $.Files.Get $path | fromYaml }}
{{- $annotations := merge (dict "helm.sh/resource-policy" "keep") ($crd.metadata.annotations | default dict) }}
{{- $_ := set $crd.metadata "annotations" $annotations }}
{{- $_ := set $crd.metadata "labels" (include "kqo.labels" $ | fromYaml) }}
---
{{ toYaml $crd }}
{{- end }}
`

// TestDocsMigrateFromChart01: a release of the 0.1.0 layout (CRDs inside the operator chart)
// with a queue, migrated with the docs' commands: the CRDs change owner, nothing is deleted.
func TestDocsMigrateFromChart01(t *testing.T) {
	t.Parallel()
	cfg, admin := freshCluster(t)
	ctx := context.Background()
	sh := newUserShell(t, cfg)

	old := filepath.Join(t.TempDir(), "kafka-queue-operator")
	copyDir(t, chartDir, old)
	copyDir(t, filepath.Join(crdChartDir, "files", "crds"), filepath.Join(old, "files", "crds"))
	if err := os.WriteFile(filepath.Join(old, "templates", "crds.yaml"), []byte(chart01Crds), 0o644); err != nil {
		t.Fatal(err)
	}
	sh.Run("helm install kqo " + old + " -n kqo-system --create-namespace")
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "kqo-system", Name: "orders"}, Spec: kqv1.ShareQueueSpec{ClusterRef: kqv1.ClusterReference{Name: "kafka"}}}
	if err := admin.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := admin.Get(ctx, client.ObjectKey{Name: "sharequeues.kafkaqueues.io"}, &crd); err != nil || crd.Annotations["meta.helm.sh/release-name"] != "kqo" {
		t.Fatalf("the 0.1.0-layout release does not own the CRDs (err %v, annotations %v)", err, crd.Annotations)
	}
	uid := crd.UID

	sh.RunBlock(block(t, "docs/install.md", "migrate-from-0.1"), nil)
	if err := admin.Get(ctx, client.ObjectKey{Name: "sharequeues.kafkaqueues.io"}, &crd); err != nil {
		t.Fatal(err)
	}
	if crd.UID != uid || crd.Annotations["meta.helm.sh/release-name"] != "kqo-crds" {
		t.Fatalf("after migrating: CRD uid %s (was %s), owner %q, want the same CRD owned by kqo-crds", crd.UID, uid, crd.Annotations["meta.helm.sh/release-name"])
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(sq), sq); err != nil {
		t.Fatalf("the queue did not survive the migration: %v", err)
	}
	// And the next upgrade is the ordinary one.
	sh.RunBlock(block(t, "docs/install.md", "upgrade"), nil)
}

// TestDocsGitOpsRenderedManifests: the charts rendered with helm template and applied with
// kubectl, CRDs first, as docs/install.md shows for GitOps tools.
func TestDocsGitOpsRenderedManifests(t *testing.T) {
	t.Parallel()
	cfg, admin := freshCluster(t)
	ctx := context.Background()
	sh := newUserShell(t, cfg)
	sh.RunBlock(block(t, "docs/install.md", "gitops"), nil)
	var kc kqv1.KafkaCluster
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "kqo-system", Name: "kafka"}, &kc); err != nil {
		t.Fatalf("the rendered KafkaCluster was not applied: %v", err)
	}
	var dep appsv1.Deployment
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "kqo-system", Name: "kqo-kafka-queue-operator"}, &dep); err != nil {
		t.Fatalf("the rendered Deployment was not applied: %v", err)
	}
}
