//go:build nodee2e

package node

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kafkaqueues/kafka-queue-operator/test/image"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// childEnv makes the test binary, run again by TestNodeSweepAfterKill, start a node with a
// running Pod and a broker, print "UP", and wait to be killed.
const childEnv = "KQO_NODE_SWEEP_CHILD"

// TestNodeSweepAfterKill: a test run killed with SIGKILL while its node runs a Pod leaves
// containerd's shims and the Pod's processes behind (the daemons die with it). The next
// StartNode sweeps them, and its Stop leaves the host as it was: no process in the rig's
// network namespace or cgroups, no mount under its directories, no namespace, veth, cgroup or
// state directory, and the sysctls the kubelet changed back at their old values.
func TestNodeSweepAfterKill(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		sweepChild(t)
		return
	}
	if missing := rig.NodePrerequisites(); len(missing) > 0 {
		t.Fatalf("this host cannot run the node rig: it lacks %s", strings.Join(missing, ", "))
	}
	before := sysctls(t)
	// After a killed run the kubelet's values are in force; the originals are in the rig's
	// save file, which the next sweep restores.
	if b, err := os.ReadFile(rig.NodeStateDir + ".sysctls"); err == nil {
		before = strings.Join(strings.Fields(string(b)), " ")
	}
	// Shared with any containerd on the host: the rig may add nothing there that it leaves.
	shared := []string{"/run/containerd/s", "/run/containerd/runc/k8s.io", "/var/lib/cni/results"}
	sharedBefore := map[string]bool{}
	for _, d := range shared {
		es, _ := os.ReadDir(d)
		for _, e := range es {
			sharedBefore[filepath.Join(d, e.Name())] = true
		}
	}
	bin := t.TempDir()
	if err := image.BuildFixtures(context.Background(), rig.RepoRoot(), bin); err != nil {
		t.Fatal(err)
	}
	pauseTar := filepath.Join(bin, "pause.tar")
	if err := image.Write(image.PauseSpec(bin), rig.PauseImage, pauseTar); err != nil {
		t.Fatal(err)
	}

	child := exec.Command(os.Args[0], "-test.run=^TestNodeSweepAfterKill$", "-test.v")
	child.Env = append(os.Environ(), childEnv+"="+pauseTar)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	child.Stderr = child.Stdout
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	up := make(chan bool, 1)
	var childLog strings.Builder
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			childLog.WriteString(sc.Text() + "\n")
			if strings.TrimSpace(sc.Text()) == "UP" {
				up <- true
			}
		}
		close(up)
	}()
	select {
	case ok := <-up:
		if !ok {
			_ = child.Wait()
			t.Fatalf("the child run ended before its node was up:\n%s", childLog.String())
		}
	case <-time.After(5 * time.Minute):
		_ = child.Process.Kill()
		t.Fatalf("the child's node was not up in 5m:\n%s", childLog.String())
	}
	_ = child.Process.Kill() // SIGKILL: no Stop, no sweep
	_ = child.Wait()

	// What the killed run left: its Pod's processes and containerd's shims live on.
	left := processesUnder(t)
	if len(left) == 0 {
		t.Fatalf("a killed run left no process behind: the test cannot tell a sweep from nothing")
	}
	t.Logf("left by the killed run: %s", strings.Join(left, "; "))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	r, err := rig.StartNode(ctx, rig.NodeOptions{PauseImageTar: pauseTar, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	r.Stop()

	if left := processesUnder(t); len(left) > 0 {
		t.Errorf("processes left after the sweep and stop: %s", strings.Join(left, "; "))
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if strings.Contains(line, rig.NodeStateDir) || strings.Contains(line, rig.NodeRunDir) || strings.Contains(line, "/netns/"+rig.NodeNetNS) {
			t.Errorf("mount left: %s", line)
		}
	}
	for _, p := range []string{rig.NodeStateDir, rig.NodeRunDir, "/var/run/netns/" + rig.NodeNetNS, "/sys/class/net/" + rig.NodeHostVeth} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s left", p)
		}
	}
	cg, _ := filepath.Glob("/sys/fs/cgroup/*/" + rig.NodeCgroupRoot)
	if len(cg) > 0 {
		t.Errorf("cgroups left: %v", cg)
	}
	for _, d := range shared {
		es, _ := os.ReadDir(d)
		for _, e := range es {
			if p := filepath.Join(d, e.Name()); !sharedBefore[p] {
				t.Errorf("%s left (outside the rig's directories)", p)
			}
		}
	}
	if after := sysctls(t); after != before {
		t.Errorf("sysctls before the runs: %s; after: %s", before, after)
	}
}

// sweepChild is the run that gets killed: a node with a Pod running.
func sweepChild(t *testing.T) {
	ctx := context.Background()
	r, err := rig.StartNode(ctx, rig.NodeOptions{PauseImageTar: os.Getenv(childEnv), Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := rig.Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	apply := exec.Command(kubectl, "--kubeconfig", r.Kubeconfig, "apply", "-f", "-")
	apply.Stdin = strings.NewReader("apiVersion: v1\nkind: Pod\nmetadata: {name: sleeper, namespace: default}\n" +
		"spec:\n  containers: [{name: c, image: " + rig.PauseImage + ", imagePullPolicy: Never}]\n")
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	if out, err := exec.Command(kubectl, "--kubeconfig", r.Kubeconfig, "wait", "pod/sleeper", "--for=condition=Ready", "--timeout=2m").CombinedOutput(); err != nil {
		t.Fatalf("kubectl wait: %v\n%s", err, out)
	}
	os.Stdout.WriteString("UP\n")
	time.Sleep(time.Hour)
}

// processesUnder lists (pid and command) the processes whose network namespace is the rig's
// or whose cgroup is under the rig's cgroup root.
func processesUnder(t *testing.T) []string {
	t.Helper()
	var nsIno uint64
	var st syscall.Stat_t
	if syscall.Stat("/var/run/netns/"+rig.NodeNetNS, &st) == nil {
		nsIno = st.Ino
	}
	procs, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range procs {
		pid := e.Name()
		if pid[0] < '0' || pid[0] > '9' || pid == strconv.Itoa(os.Getpid()) {
			continue
		}
		cg, _ := os.ReadFile("/proc/" + pid + "/cgroup")
		var ps syscall.Stat_t
		inNS := nsIno != 0 && syscall.Stat("/proc/"+pid+"/ns/net", &ps) == nil && ps.Ino == nsIno
		if inNS || strings.Contains(string(cg), ":/"+rig.NodeCgroupRoot+"/") {
			cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
			out = append(out, pid+" "+strings.ReplaceAll(strings.TrimSpace(string(cmd)), "\x00", " "))
		}
	}
	return out
}

func sysctls(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, s := range rig.NodeSysctls {
		v, err := os.ReadFile("/proc/sys/" + strings.ReplaceAll(s, ".", "/"))
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(s + "=" + strings.TrimSpace(string(v)) + " ")
	}
	return strings.TrimSpace(b.String())
}
