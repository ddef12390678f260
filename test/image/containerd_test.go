package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// The tarballs load into a real containerd with `ctr -n k8s.io images import`, as the test
// node loads them, and the pause image runs there as 65535 and exits 0 on SIGTERM. Needs
// containerd, ctr and runc on PATH and root; skipped without them and under -short. The
// containerd is a throwaway one (its own root, state and socket in a temporary directory,
// the CRI plugin off).
func TestContainerdImport(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs go build and a containerd")
	}
	// .ci/run installs containerd and runc (hack/install-node-deps.sh) and runs as root: there
	// (KQO_REQUIRE_RIG) a missing one fails the test instead of skipping it.
	skip := t.Skipf
	if rig.RigRequired() {
		skip = t.Fatalf
	}
	for _, tool := range []string{"containerd", "ctr", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			skip("no %s on PATH", tool)
		}
	}
	if os.Geteuid() != 0 {
		skip("containerd needs root")
	}
	repo, err := FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := t.TempDir()
	if err := BuildFixtures(ctx, repo, bin); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "kqo-ctrd-") // short: the socket path is at most 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	tars := map[string]string{"kqo.local/pause:1": filepath.Join(dir, "pause.tar"), "kqo.local/queueapp:1": filepath.Join(dir, "queueapp.tar")}
	if err := Write(PauseSpec(bin), "kqo.local/pause:1", tars["kqo.local/pause:1"]); err != nil {
		t.Fatal(err)
	}
	if err := Write(AppSpec(bin), "kqo.local/queueapp:1", tars["kqo.local/queueapp:1"]); err != nil {
		t.Fatal(err)
	}

	sock := filepath.Join(dir, "sock")
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, sock+".ttrpc")
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	ctrd := exec.Command("containerd", "--config", filepath.Join(dir, "config.toml"))
	ctrd.Stdout, ctrd.Stderr = logf, logf
	if err := ctrd.Start(); err != nil {
		t.Fatal(err)
	}
	ctl := func(args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, "ctr", append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...)
	}
	const container = "kqo-image-test-pause"
	t.Cleanup(func() {
		_ = ctl("task", "kill", "-s", "SIGKILL", container).Run()
		_ = ctl("task", "delete", container).Run()
		_ = ctl("container", "rm", container).Run()
		_ = ctrd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = ctrd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = ctrd.Process.Kill()
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "containerd.log"))
			t.Logf("containerd log:\n%s", b)
		}
	})
	for deadline := time.Now().Add(15 * time.Second); ctl("version").Run() != nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("containerd did not serve within 15s")
		}
	}

	for ref, p := range tars {
		if out, err := ctl("images", "import", p).CombinedOutput(); err != nil {
			t.Fatalf("ctr images import %s: %v\n%s", p, err, out)
		} else if !strings.Contains(string(out), ref) {
			t.Errorf("ctr images import %s said %q, want it to name %s", p, out, ref)
		}
	}
	out, err := ctl("images", "ls", "-q").CombinedOutput()
	if err != nil {
		t.Fatalf("ctr images ls: %v\n%s", err, out)
	}
	for ref := range tars {
		if !strings.Contains(string(out), ref+"\n") {
			t.Errorf("ctr images ls -q: %q lacks %s", out, ref)
		}
	}

	// Run the pause image: its first line says it waits, SIGTERM ends it with exit 0.
	runPause(t, ctl("run", "--rm", "kqo.local/pause:1", container), func() {
		tasks, err := ctl("task", "ls").Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(tasks), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == container {
				status, err := os.ReadFile("/proc/" + f[1] + "/status")
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(status), "\nUid:\t65535\t65535\t65535\t65535\n") {
					t.Errorf("the pause container does not run as 65535: %s", status)
				}
				return
			}
		}
		t.Errorf("ctr task ls does not list %s:\n%s", container, tasks)
	}, func(*exec.Cmd) error {
		if out, err := ctl("task", "kill", "-s", "SIGTERM", container).CombinedOutput(); err != nil {
			return fmt.Errorf("ctr task kill: %v\n%s", err, out)
		}
		return nil
	})
}
