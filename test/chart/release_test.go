package chart

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// TestInstallFromReleaseArtifacts: hack/release (make release) for this platform, then
// docs/install.md's install-release block verbatim in a directory holding only the release's
// files (no checkout charts within reach): the checksums verify, both packaged charts install
// on a fresh cluster, and what they make is the checkout's (five CRDs, the Deployment, the
// KafkaCluster). The kubectl-kq archive holds the plugin and the LICENSE, and the plugin
// prints the release's version.
func TestInstallFromReleaseArtifacts(t *testing.T) {
	t.Parallel()
	cfg, admin := freshCluster(t)
	dist := filepath.Join(t.TempDir(), "dist")
	rel := exec.Command("go", "run", "./hack/release", "-o", dist, "-version", "v0.2.0-rc.test", "-commit", "test",
		"-platforms", "linux/amd64", "-skip-image", "-partial-krew")
	rel.Dir = rig.RepoRoot()
	if out, err := rel.CombinedOutput(); err != nil {
		t.Fatalf("hack/release: %v\n%s", err, out)
	}

	sh := newUserShell(t, cfg)
	work := sh.WorkDir()
	if err := os.Remove(filepath.Join(work, "charts")); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dist)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dist, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sh.RunBlock(block(t, "docs/install.md", "install-release"), nil)

	ctx := context.Background()
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := admin.List(ctx, &crds); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range crds.Items {
		if c.Spec.Group == kqv1.GroupVersion.Group {
			n++
		}
	}
	if n != 5 {
		t.Errorf("%d kafkaqueues.io CRDs after installing the packaged CRD chart, want 5", n)
	}
	var dep appsv1.Deployment
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "kqo-system", Name: "kqo-kafka-queue-operator"}, &dep); err != nil {
		t.Fatalf("the packaged operator chart made no Deployment: %v", err)
	}
	if img := dep.Spec.Template.Spec.Containers[0].Image; !strings.HasPrefix(img, "ghcr.io/kafkaqueues/kafka-queue-operator:") {
		t.Errorf("Deployment image %q", img)
	}
	var kc kqv1.KafkaCluster
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "kqo-system", Name: "kafka"}, &kc); err != nil {
		t.Fatalf("the packaged operator chart made no KafkaCluster: %v", err)
	}

	// The plugin archive: kubectl-kq and the LICENSE, and the version linked in.
	out := sh.Run("tar xzf kubectl-kq_v0.2.0-rc.test_linux_amd64.tar.gz && ls && ./kubectl-kq version")
	for _, want := range []string{"LICENSE", "kubectl-kq", "kqctl v0.2.0-rc.test (commit test,"} {
		if !strings.Contains(out, want) {
			t.Errorf("the plugin archive: output lacks %q:\n%s", want, out)
		}
	}
	krew, err := os.ReadFile(filepath.Join(dist, "kq.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(krew), "SHA256_LINUX_AMD64") || !strings.Contains(string(krew), "releases/download/v0.2.0-rc.test/kubectl-kq_v0.2.0-rc.test_linux_amd64.tar.gz") {
		t.Errorf("the krew manifest was not filled for linux/amd64:\n%s", krew)
	}
}
