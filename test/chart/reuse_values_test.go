package chart

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// releasedChart extracts the operator chart as it was at rev (from this repository's history)
// into a directory and returns its path.
func releasedChart(t *testing.T, rev string) string {
	t.Helper()
	dir := t.TempDir()
	archive := exec.Command("git", "-C", rig.RepoRoot(), "archive", "--format=tar", rev, "charts/kafka-queue-operator")
	untar := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	untar.Stdin = pipe
	if err := untar.Start(); err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	archive.Stderr = &stderr
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s (this test needs the repository's history): %v\n%s", rev, err, stderr.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "charts", "kafka-queue-operator")
}

// Issue 33: `helm upgrade --reuse-values` from the released charts 0.1.0 (its first layout,
// with the CRDs inside and crds.install set, as its docs offered, and its last) to this
// chart. Helm then renders with the old release's values in place of this chart's
// defaults: the schema used to refuse `crds`, a template hit a nil map, and the Deployment
// rendered --claims-topic=%!s(<nil>) and empty intervals. Now each upgrade succeeds and renders
// every flag with this chart's default.
func TestReuseValuesUpgradeFromReleasedCharts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, rev, set string }{
		{"first 0.1.0 layout, crds.install set", "8941a4a", "--set crds.install=true"},
		{"last 0.1.0", "d302613^", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg, admin := freshCluster(t)
			sh := newUserShell(t, cfg)
			old := releasedChart(t, c.rev)
			if b, err := os.ReadFile(filepath.Join(old, "Chart.yaml")); err != nil || !strings.Contains(string(b), "version: 0.1.0") {
				t.Fatalf("%s is not chart 0.1.0: %v\n%s", c.rev, err, b)
			}
			sh.Run(fmt.Sprintf("helm install kqo %s -n kqo-system --create-namespace %s", old, c.set))
			sh.Run("helm install kqo-crds charts/kafka-queue-operator-crds -n kqo-system --take-ownership")
			sh.Run("helm upgrade kqo charts/kafka-queue-operator -n kqo-system --reuse-values")
			var d appsv1.Deployment
			if err := admin.Get(context.Background(), client.ObjectKey{Namespace: "kqo-system", Name: "kqo-kafka-queue-operator"}, &d); err != nil {
				t.Fatal(err)
			}
			args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ")
			for _, want := range []string{"--claims-topic=kafkaqueues.claims", "--leader-election-id=", "--depth-interval="} {
				if !strings.Contains(args, want) {
					t.Errorf("after --reuse-values the manager's args lack %q: %s", want, args)
				}
			}
			for _, bad := range []string{"<nil>", "=''", "= ", "=\"\""} {
				if strings.Contains(args+" ", bad) {
					t.Errorf("after --reuse-values the manager's args hold %q: %s", bad, args)
				}
			}
			for _, a := range d.Spec.Template.Spec.Containers[0].Args {
				if strings.HasSuffix(a, "=") {
					t.Errorf("flag with no value after --reuse-values: %s", a)
				}
			}
		})
	}
}
