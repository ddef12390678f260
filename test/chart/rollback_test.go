package chart

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestDocsRollback: issue 33 asked for rollback documented and tested, with what runs after
// it. An upgrade that changed a value, rolled back with the docs' commands: the release is
// deployed again and the Deployment has the first revision's flags.
func TestDocsRollback(t *testing.T) {
	t.Parallel()
	t.Run("values", func(t *testing.T) {
		t.Parallel()
		cfg, admin := freshCluster(t)
		sh := newUserShell(t, cfg)
		sh.Run("helm install kqo-crds charts/kafka-queue-operator-crds -n kqo-system --create-namespace")
		sh.Run("helm install kqo charts/kafka-queue-operator -n kqo-system")
		sh.Run("helm upgrade kqo charts/kafka-queue-operator -n kqo-system --reset-then-reuse-values --set manager.depthInterval=10s")
		if args := managerArgs(t, admin); !strings.Contains(args, "--depth-interval=10s") {
			t.Fatalf("after the upgrade the manager's args lack --depth-interval=10s: %s", args)
		}
		sh.RunBlock(block(t, "docs/install.md", "rollback"), nil)
		if args := managerArgs(t, admin); !strings.Contains(args, "--depth-interval=30s") {
			t.Errorf("after the rollback the manager's args are not the first revision's (--depth-interval=30s): %s", args)
		}
		if st := releaseStatus(t, sh, "kqo"); st != "deployed" {
			t.Errorf("release kqo is %q after the rollback, want deployed", st)
		}
	})
	// To a revision of a 0.1.0 chart (the real ones, from git history), after the docs'
	// migration. With the CRDs inside (its first layout, crds.install set) Helm refuses: it
	// cannot take back the CRDs the CRD chart owns, and the release is failed. Either way the
	// Deployment is back on the 0.1.0 image, and the CRDs stay the CRD chart's, new schema
	// and all: the docs say so, and that the upgrade repairs it.
	for _, c := range []struct {
		name, rev, set string
		refused        bool
	}{
		{"to chart 0.1.0 with the CRDs inside", "8941a4a", "--set crds.install=true", true},
		{"to the last chart 0.1.0", "d302613^", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg, admin := freshCluster(t)
			sh := newUserShell(t, cfg)
			old := releasedChart(t, c.rev)
			sh.Run("helm install kqo " + old + " -n kqo-system --create-namespace " + c.set)
			oldImage := managerImage(t, admin)
			sh.RunBlock(block(t, "docs/install.md", "migrate-from-0.1"), nil)
			newImage := managerImage(t, admin)
			out, err := sh.Try("helm rollback kqo 1 -n kqo-system")
			switch {
			case c.refused && (err == nil || !strings.Contains(out, "metadata.resourceVersion")):
				t.Errorf("helm rollback: %v, want it refused with the resourceVersion error docs/install.md quotes:\n%s", err, out)
			case !c.refused && err != nil:
				t.Errorf("helm rollback: %v, want it done:\n%s", err, out)
			}
			want := "deployed"
			if c.refused {
				want = "failed"
			}
			if st := releaseStatus(t, sh, "kqo"); st != want {
				t.Errorf("release kqo is %q after the rollback, want %s", st, want)
			}
			if got := managerImage(t, admin); got != oldImage || got == newImage {
				t.Errorf("after the rollback the Deployment runs %s, want the 0.1.0 revision's %s (docs/install.md says so)", got, oldImage)
			}
			var crd apiextensionsv1.CustomResourceDefinition
			if err := admin.Get(context.Background(), client.ObjectKey{Name: "offsetresets.kafkaqueues.io"}, &crd); err != nil {
				t.Fatal(err)
			}
			if _, ok := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties["topicId"]; !ok || crd.Annotations["meta.helm.sh/release-name"] != "kqo-crds" {
				t.Errorf("after the rollback the CRDs are owned by %q (new schema: %v), want kqo-crds's, unchanged", crd.Annotations["meta.helm.sh/release-name"], ok)
			}
			sh.RunBlock(block(t, "docs/install.md", "upgrade"), nil)
			if st := releaseStatus(t, sh, "kqo"); st != "deployed" {
				t.Errorf("release kqo is %q after the upgrade, want deployed", st)
			}
			if got := managerImage(t, admin); got != newImage {
				t.Errorf("after the upgrade the Deployment runs %s, want %s", got, newImage)
			}
		})
	}
}

func managerDeployment(t *testing.T, admin client.Client) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: "kqo-system", Name: "kqo-kafka-queue-operator"}, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

func managerArgs(t *testing.T, admin client.Client) string {
	t.Helper()
	return strings.Join(managerDeployment(t, admin).Spec.Template.Spec.Containers[0].Args, " ")
}

func managerImage(t *testing.T, admin client.Client) string {
	t.Helper()
	return managerDeployment(t, admin).Spec.Template.Spec.Containers[0].Image
}

// releaseStatus is helm status's info.status of release in kqo-system.
func releaseStatus(t *testing.T, sh *userShell, release string) string {
	t.Helper()
	var st struct {
		Info struct {
			Status string `json:"status"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(sh.Run("helm status "+release+" -n kqo-system -o json")), &st); err != nil {
		t.Fatal(err)
	}
	return st.Info.Status
}
