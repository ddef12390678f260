package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// markedBlock returns the ```sh block that follows <!-- test:name --> in a docs file.
func markedBlock(t *testing.T, file, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rig.RepoRoot(), file))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- test:"+name+" -->\n```sh\n")
	if !ok {
		t.Fatalf("%s has no ```sh block marked test:%s", file, name)
	}
	body, _, ok := strings.Cut(rest, "\n```")
	if !ok {
		t.Fatalf("%s: block %s is not closed", file, name)
	}
	var cmds []string
	for _, line := range strings.Split(body, "\n") {
		if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
			cmds = append(cmds, line)
		}
	}
	return cmds
}

// The SQS walkthrough of docs/sqs-migration.md (steps 2 and 4), verbatim, from the repository
// root as the page assumes, against the rig's cluster "local" (step 3's run-local is replaced
// by the rig this package starts). orders.json is the testdata file step 1 suggests.
func TestSQSMigrationCommands(t *testing.T) {
	skipShort(t)
	root := rig.RepoRoot()
	for _, f := range []string{"orders.json", "orders.yaml"} {
		if _, err := os.Stat(filepath.Join(root, f)); err == nil {
			t.Fatalf("%s already exists in the repository root; the walkthrough would overwrite it", f)
		}
		t.Cleanup(func() { _ = os.Remove(filepath.Join(root, f)) })
	}
	data, err := os.ReadFile(filepath.Join(root, "internal", "sqsimport", "testdata", "standard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "orders.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(cmd string) string {
		t.Helper()
		c := exec.Command("bash", "-euo", "pipefail", "-c", cmd)
		c.Dir = root
		c.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("$ %s\n%s\n%v", cmd, out, err)
		}
		return string(out)
	}
	for _, cmd := range markedBlock(t, "docs/sqs-migration.md", "sqs-convert") {
		run(cmd)
	}
	yaml, err := os.ReadFile(filepath.Join(root, "orders.yaml"))
	if err != nil || !strings.Contains(string(yaml), "kind: ShareQueue") || !strings.Contains(string(yaml), "name: orders-from-sqs") {
		t.Fatalf("step 2 wrote no orders-from-sqs ShareQueue (err %v):\n%s", err, yaml)
	}
	cmds := markedBlock(t, "docs/sqs-migration.md", "sqs-rig")
	if len(cmds) != 3 {
		t.Fatalf("step 4 has %d commands, want import, status, plan", len(cmds))
	}
	run(cmds[0])
	if out := run(cmds[1]); !strings.Contains(out, "NAME") {
		t.Errorf("kqctl status printed no table:\n%s", out)
	}
	if out := run(cmds[2]); !strings.Contains(out, "orders-from-sqs") {
		t.Errorf("kqctl plan does not name the queue:\n%s", out)
	}
}
