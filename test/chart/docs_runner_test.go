package chart

import (
	"fmt"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// The docs runner lives in test/rig (rig.UserShell, rig.DocBlock): the node end-to-end test
// runs the same docs blocks against a real node.

type userShell = rig.UserShell

func block(t *testing.T, file, name string) string { t.Helper(); return rig.DocBlock(t, file, name) }

func newUserShell(t *testing.T, cfg *rest.Config) *userShell {
	t.Helper()
	return rig.NewUserShell(t, cfg)
}

func TestCommandsSplitLikeAShell(t *testing.T) {
	t.Parallel()
	got := rig.ShellCommands("# a comment\nhelm install a b \\\n  --set x=1\n\nkubectl apply -f - <<'YAML'\nkind: X\n  YAML: no\nYAML\nkubectl get sq\n")
	want := []string{"helm install a b \\\n  --set x=1", "kubectl apply -f - <<'YAML'\nkind: X\n  YAML: no\nYAML", "kubectl get sq"}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Fatalf("commands:\n got %q\nwant %q", got, want)
	}
}
