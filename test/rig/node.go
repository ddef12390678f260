//go:build linux

package rig

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The node rig: a whole one-node Kubernetes cluster on this host, with no Docker and no VM.
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd (Debian's, with
// runc and the CNI plugins), the kubelet and a Kafka broker all run in one network namespace
// of the rig's own (NodeNetNS). A veth pair joins it to the host: the host side is
// NodeHostIP, the namespace side NodeIP, where the apiserver, the kubelet and the broker
// listen, so the test process and the Pods reach them at the same address. Pods get
// addresses in NodePodCIDR on a bridge inside the namespace; the `kubernetes` Service's
// ClusterIP is DNATed to the apiserver there (no kube-proxy), and the apiserver reaches
// webhook Pods by their IP (--enable-aggregator-routing). There is no cluster DNS: Pods
// address Kafka by IP. See docs/node-rig.md for the facts this rests on.
//
// One node rig runs per host (a lock); state lives under NodeStateDir and NodeRunDir, and
// the kubelet's cgroups under /<NodeCgroupRoot> in every v1 hierarchy. SweepNode removes
// everything a killed run left behind, and StartNode calls it first.
const (
	NodeNetNS      = "kqo-node"
	NodeHostVeth   = "kqo-host"
	NodeVeth       = "kqo-node0"
	NodeHostIP     = "10.201.0.1"
	NodeIP         = "10.201.0.2"
	NodePodCIDR    = "10.244.0.0/24"
	NodeServiceNet = "10.96.0.0/16"
	// NodeKubernetesServiceIP is the first address of NodeServiceNet, the `kubernetes`
	// Service's ClusterIP.
	NodeKubernetesServiceIP = "10.96.0.1"
	NodeName                = "kqo-node"
	NodeStateDir            = "/var/lib/kqo-node"
	NodeRunDir              = "/run/kqo-node"
	NodeCgroupRoot          = "kqo-node"
	// NodeAPIServerPort is the apiserver's secure port on NodeIP.
	NodeAPIServerPort = 6443
	// PauseImage is the sandbox image containerd is told to use; the rig imports it (a static
	// binary that sleeps until signalled) before the kubelet starts.
	PauseImage = "kqo.local/pause:1"
)

// NodeSysctls are the VM-wide sysctls the kubelet sets (protectKernelDefaults=false: the
// first three were seen changing here; the kubelet's source also sets the key quotas and
// vm.panic_on_oom, already at its values on this VM). The rig saves them before it starts the
// kubelet and puts them back at Stop or at the next sweep.
var NodeSysctls = []string{"vm.overcommit_memory", "kernel.panic", "kernel.panic_on_oops",
	"vm.panic_on_oom", "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes"}

// NodeOptions configures StartNode.
type NodeOptions struct {
	// PauseImageTar is a docker-save tarball holding PauseImage (test/image builds it).
	PauseImageTar string
	// Log receives progress lines (default: discarded).
	Log func(format string, args ...any)
}

// NodeRig is a running one-node cluster.
type NodeRig struct {
	// Config is an admin (system:masters) client config for the apiserver at NodeIP.
	Config *rest.Config
	// Kubeconfig is a kubeconfig file holding Config (for kubectl and helm).
	Kubeconfig string
	// LogDir holds each component's log (etcd.log, kube-apiserver.log, ..., kubelet.log).
	LogDir string

	opts   NodeOptions
	procs  []*nodeProc
	kmu    sync.Mutex // guards kafkas: tests start brokers from parallel subtests
	kafkas []*Kafka
	lock   *os.File
}

type nodeProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
}

// NodeBinaries returns the directory holding kubelet, kube-controller-manager and
// kube-scheduler, building them on first use (hack/build-node-bins.sh).
func NodeBinaries() (string, error) { return runScript("build-node-bins.sh") }

// NodePrerequisites says what this host lacks to run the node rig: root, containerd, runc,
// the CNI bridge plugin, iptables, nsenter, cgroup v1 hierarchies. Empty means nothing.
func NodePrerequisites() []string {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (network namespaces, mounts, cgroups)")
	}
	for _, b := range []string{"containerd", "ctr", "runc", "iptables", "nsenter", "ip"} {
		if _, err := exec.LookPath(b); err != nil {
			missing = append(missing, b)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		missing = append(missing, "/usr/lib/cni/bridge (containernetworking-plugins)")
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err != nil {
		missing = append(missing, "cgroup v1 memory hierarchy at /sys/fs/cgroup/memory")
	}
	return missing
}

// StartNode sweeps what an earlier run left, then starts the control plane, containerd, the
// kubelet in the rig's namespace, and returns once the node is Ready and the default
// ServiceAccount exists (StartKafka adds brokers). Stop undoes all of it.
func StartNode(ctx context.Context, opts NodeOptions) (_ *NodeRig, err error) {
	if opts.Log == nil {
		opts.Log = func(string, ...any) {}
	}
	if m := NodePrerequisites(); len(m) > 0 {
		return nil, fmt.Errorf("the node rig needs: %s (hack/install-node-deps.sh installs the packages)", strings.Join(m, ", "))
	}
	envDir, err := EnvtestBinaries()
	if err != nil {
		return nil, err
	}
	nodeDir, err := NodeBinaries()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(NodeRunDir), 0o755); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(NodeRunDir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	// One node rig per host: a second run waits for the first (up to ctx's deadline).
	for waited := false; ; waited = true {
		err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			lock.Close()
			return nil, fmt.Errorf("locking %s.lock: %w", NodeRunDir, err)
		}
		if !waited {
			opts.Log("node rig: another node rig runs on this host (%s.lock is held); waiting for it", NodeRunDir)
		}
		select {
		case <-ctx.Done():
			lock.Close()
			return nil, fmt.Errorf("another node rig runs on this host (%s.lock is held): %w", NodeRunDir, ctx.Err())
		case <-time.After(time.Second):
		}
	}
	r := &NodeRig{opts: opts, lock: lock}
	defer func() {
		if err != nil {
			r.Stop()
		}
	}()
	if err := SweepNode(opts.Log); err != nil {
		return nil, fmt.Errorf("sweeping an earlier node rig: %w", err)
	}
	for _, d := range []string{NodeStateDir, NodeRunDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	r.LogDir = filepath.Join(NodeStateDir, "logs")
	if err := os.MkdirAll(r.LogDir, 0o755); err != nil {
		return nil, err
	}
	if err := saveSysctls(); err != nil {
		return nil, err
	}
	if err := setupNodeNetwork(); err != nil {
		return nil, err
	}
	pki := filepath.Join(NodeStateDir, "pki")
	if err := writeNodePKI(pki); err != nil {
		return nil, err
	}
	r.Kubeconfig = filepath.Join(NodeStateDir, "admin.kubeconfig")
	if err := os.WriteFile(r.Kubeconfig, []byte(kubeconfigFor(fmt.Sprintf("https://%s:%d", NodeIP, NodeAPIServerPort), pki)), 0o600); err != nil {
		return nil, err
	}
	if r.Config, err = clientcmd.BuildConfigFromFlags("", r.Kubeconfig); err != nil {
		return nil, err
	}
	r.Config.QPS, r.Config.Burst = 50, 100

	start := time.Now()
	if err := r.start("etcd", filepath.Join(envDir, "etcd"),
		"--data-dir", filepath.Join(NodeStateDir, "etcd"),
		"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--unsafe-no-fsync"); err != nil {
		return nil, err
	}
	if err := r.start("kube-apiserver", filepath.Join(envDir, "kube-apiserver"),
		"--etcd-servers", "http://127.0.0.1:2379",
		"--secure-port", strconv.Itoa(NodeAPIServerPort), "--bind-address", "0.0.0.0", "--advertise-address", NodeIP,
		"--tls-cert-file", filepath.Join(pki, "apiserver.crt"), "--tls-private-key-file", filepath.Join(pki, "apiserver.key"),
		"--client-ca-file", filepath.Join(pki, "ca.crt"),
		"--service-account-key-file", filepath.Join(pki, "sa.pub"), "--service-account-signing-key-file", filepath.Join(pki, "sa.key"),
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-cluster-ip-range", NodeServiceNet,
		"--authorization-mode", "Node,RBAC",
		// No kube-proxy: the apiserver calls webhook Services at their endpoints' Pod IPs.
		"--enable-aggregator-routing=true",
		"--allow-privileged=true",
		"--kubelet-client-certificate", filepath.Join(pki, "admin.crt"), "--kubelet-client-key", filepath.Join(pki, "admin.key"),
		"--kubelet-certificate-authority", filepath.Join(pki, "ca.crt"), "--kubelet-preferred-address-types", "InternalIP"); err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(r.Config)
	if err != nil {
		return nil, err
	}
	if err := r.waitFor(ctx, "kube-apiserver /readyz", 90*time.Second, func() error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	opts.Log("node rig: apiserver ready at https://%s:%d after %s", NodeIP, NodeAPIServerPort, time.Since(start).Round(time.Millisecond))
	if err := r.start("kube-controller-manager", filepath.Join(nodeDir, "kube-controller-manager"),
		"--kubeconfig", r.Kubeconfig, "--leader-elect=false", "--bind-address", "127.0.0.1",
		"--service-account-private-key-file", filepath.Join(pki, "sa.key"), "--root-ca-file", filepath.Join(pki, "ca.crt"),
		"--use-service-account-credentials=false"); err != nil {
		return nil, err
	}
	if err := r.start("kube-scheduler", filepath.Join(nodeDir, "kube-scheduler"),
		"--kubeconfig", r.Kubeconfig, "--leader-elect=false", "--bind-address", "127.0.0.1"); err != nil {
		return nil, err
	}
	ctdConfig, err := writeContainerdConfig()
	if err != nil {
		return nil, err
	}
	if err := r.start("containerd", "containerd", "--config", ctdConfig); err != nil {
		return nil, err
	}
	if err := r.waitFor(ctx, "containerd", 30*time.Second, func() error {
		out, err := exec.CommandContext(ctx, "ctr", "--address", ContainerdSocket(), "version").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if opts.PauseImageTar != "" {
		if err := r.ImportImage(ctx, opts.PauseImageTar); err != nil {
			return nil, err
		}
	}
	kubeletConfig, err := writeKubeletConfig(pki)
	if err != nil {
		return nil, err
	}
	for _, c := range cgroupHierarchies() {
		if err := os.MkdirAll(filepath.Join(c, NodeCgroupRoot), 0o755); err != nil {
			return nil, fmt.Errorf("creating the kubelet's cgroup root: %w", err)
		}
	}
	if err := r.start("kubelet", filepath.Join(nodeDir, "kubelet"),
		"--config", kubeletConfig, "--kubeconfig", r.Kubeconfig,
		"--root-dir", filepath.Join(NodeStateDir, "kubelet"), "--cert-dir", filepath.Join(NodeStateDir, "kubelet", "pki"),
		"--hostname-override", NodeName, "--node-ip", NodeIP); err != nil {
		return nil, err
	}
	if err := r.waitFor(ctx, "node "+NodeName+" Ready", 2*time.Minute, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("Ready=%s: %s", c.Status, c.Message)
			}
		}
		return errors.New("no Ready condition yet")
	}); err != nil {
		return nil, err
	}
	if err := r.waitFor(ctx, "ServiceAccount default/default", time.Minute, func() error {
		_, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return nil, err
	}
	opts.Log("node rig: node %s Ready after %s", NodeName, time.Since(start).Round(time.Millisecond))

	return r, nil
}

// StartKafka starts a Kafka cluster inside the node's namespace, listening and advertising on
// NodeIP, so Pods and the test process reach it at the same address (opts.Host and
// opts.CommandPrefix are the rig's; opts.Dir defaults to one under NodeStateDir). Stop stops
// it.
func (r *NodeRig) StartKafka(ctx context.Context, opts KafkaOptions) (*Kafka, error) {
	opts.Host = NodeIP
	opts.CommandPrefix = []string{"nsenter", "--net=" + netnsPath()}
	if opts.Dir == "" {
		d, err := os.MkdirTemp(NodeStateDir, "kafka-")
		if err != nil {
			return nil, err
		}
		opts.Dir = d
	}
	if opts.Log == nil {
		opts.Log = r.opts.Log
	}
	// The namespace has no DNS: a broker's reverse lookup of a client's address (a SASL
	// handshake does one) hangs 10 s per connection there. Java resolves from this file alone
	// instead, and an address not in it fails at once.
	hosts := filepath.Join(opts.Dir, "hosts")
	if err := os.WriteFile(hosts, []byte(fmt.Sprintf("127.0.0.1 localhost\n%s kqo-node\n%s kqo-host\n", NodeIP, NodeHostIP)), 0o644); err != nil {
		return nil, err
	}
	opts.JVMArgs = append(opts.JVMArgs, "-Djdk.net.hosts.file="+hosts)
	k, err := StartKafka(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("starting a broker in the node's namespace: %w", err)
	}
	r.kmu.Lock()
	r.kafkas = append(r.kafkas, k)
	r.kmu.Unlock()
	return k, nil
}

// ContainerdSocket is the node's containerd address.
func ContainerdSocket() string { return filepath.Join(NodeRunDir, "containerd.sock") }

// ImportImage loads a docker-save tarball into containerd's k8s.io namespace, where the
// kubelet finds it (a Pod with imagePullPolicy IfNotPresent or Never then pulls nothing).
func (r *NodeRig) ImportImage(ctx context.Context, tar string) error {
	out, err := exec.CommandContext(ctx, "ctr", "--address", ContainerdSocket(), "-n", "k8s.io", "images", "import", tar).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s: %v\n%s", tar, err, out)
	}
	return nil
}

// Stop stops the broker and every component, removes the Pods' containers, mounts,
// cgroups and the namespace, and puts back the sysctls the kubelet changed. With
// KQO_KEEP_RIG set, the logs under NodeStateDir/logs stay for reading.
func (r *NodeRig) Stop() {
	r.kmu.Lock()
	kafkas := r.kafkas
	r.kafkas = nil
	r.kmu.Unlock()
	for _, k := range kafkas {
		k.Stop()
	}
	// The kubelet first, so it restarts nothing; then the rest in reverse start order.
	for i := len(r.procs) - 1; i >= 0; i-- {
		if r.procs[i].name == "kubelet" {
			r.procs[i].stop()
		}
	}
	for i := len(r.procs) - 1; i >= 0; i-- {
		r.procs[i].stop()
	}
	r.procs = nil
	if err := SweepNode(r.opts.Log); err != nil {
		r.opts.Log("node rig: sweep at stop: %v", err)
	}
	if r.lock != nil {
		r.lock.Close()
		r.lock = nil
	}
}

// LogTail returns the last n lines of a component's log (e.g. "kubelet").
func (r *NodeRig) LogTail(name string, n int) string {
	return tailFile(filepath.Join(r.LogDir, name+".log"), n)
}

func (r *NodeRig) start(name, bin string, args ...string) error {
	logf, err := os.OpenFile(filepath.Join(r.LogDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// nsenter execs the component in place, so it keeps the death signal: a killed test run
	// takes the daemons with it (containerd's shims survive by design; SweepNode kills them).
	cmd := exec.Command("nsenter", append([]string{"--net=" + netnsPath(), "--", bin}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &nodeProc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	r.procs = append(r.procs, p)
	return nil
}

func (p *nodeProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// waitFor polls check every 250ms until it passes; a component that exits fails the wait at
// once with the end of its log.
func (r *NodeRig) waitFor(ctx context.Context, what string, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = check(); last == nil {
			return nil
		}
		for _, p := range r.procs {
			select {
			case <-p.done:
				return fmt.Errorf("waiting for %s: %s exited (%v); its log ends:\n%s", what, p.name, p.cmd.ProcessState, r.LogTail(p.name, 30))
			default:
			}
		}
		if time.Now().After(deadline) {
			var logs strings.Builder
			for _, p := range r.procs {
				fmt.Fprintf(&logs, "--- %s:\n%s\n", p.name, r.LogTail(p.name, 8))
			}
			return fmt.Errorf("waiting %s for %s: %v\n%s", timeout, what, last, logs.String())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func netnsPath() string { return "/var/run/netns/" + NodeNetNS }

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// setupNodeNetwork makes the namespace, the veth pair between it and the host, and the DNAT
// rules that stand in for kube-proxy's for the `kubernetes` Service.
func setupNodeNetwork() error {
	ns := func(args ...string) error { return run("ip", append([]string{"netns", "exec", NodeNetNS}, args...)...) }
	dnat := []string{"-d", NodeKubernetesServiceIP + "/32", "-p", "tcp", "--dport", "443", "-j", "DNAT",
		"--to-destination", fmt.Sprintf("%s:%d", NodeIP, NodeAPIServerPort)}
	steps := [][]string{
		{"ip", "netns", "add", NodeNetNS},
		{"ip", "link", "add", NodeHostVeth, "type", "veth", "peer", "name", NodeVeth},
		{"ip", "link", "set", NodeVeth, "netns", NodeNetNS},
		{"ip", "addr", "add", NodeHostIP + "/30", "dev", NodeHostVeth},
		{"ip", "link", "set", NodeHostVeth, "up"},
	}
	for _, s := range steps {
		if err := run(s[0], s[1:]...); err != nil {
			return err
		}
	}
	for _, s := range [][]string{
		{"ip", "link", "set", "lo", "up"},
		{"ip", "addr", "add", NodeIP + "/30", "dev", NodeVeth},
		{"ip", "link", "set", NodeVeth, "up"},
		// The kubelet and cadvisor want a default route; nothing is forwarded by the host.
		{"ip", "route", "add", "default", "via", NodeHostIP},
		append([]string{"iptables", "-t", "nat", "-A", "PREROUTING"}, dnat...),
		append([]string{"iptables", "-t", "nat", "-A", "OUTPUT"}, dnat...),
	} {
		if err := ns(s...); err != nil {
			return err
		}
	}
	return nil
}

// SweepNode removes what a node rig leaves behind, whether it stopped or was killed: every
// process in the rig's cgroups or network namespace (containers, containerd's shims,
// daemons), mounts under NodeStateDir and NodeRunDir, the namespace (and with it the veth
// pair and its iptables rules), the kubelet's cgroups, the state directories; and it puts
// back the sysctls saved before the kubelet changed them. Nothing outside those is touched.
func SweepNode(logf func(string, ...any)) error {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	var errs []error
	for attempt := 0; attempt < 50; attempt++ {
		pids := nodePIDs()
		if len(pids) == 0 {
			break
		}
		if attempt == 0 {
			logf("node rig sweep: killing %d process(es) of the rig (containers and containerd's shims outlive the kubelet; expected)", len(pids))
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
		if attempt == 49 {
			errs = append(errs, fmt.Errorf("processes still alive after SIGKILL: %v", pids))
		}
	}
	mounts, err := mountsUnder(NodeStateDir, NodeRunDir)
	if err != nil {
		errs = append(errs, err)
	}
	for _, m := range mounts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", m, err))
		}
	}
	deletedNS := false
	if _, err := os.Stat(netnsPath()); err == nil {
		if err := run("ip", "netns", "delete", NodeNetNS); err != nil {
			errs = append(errs, err)
		} else {
			deletedNS = true
		}
	}
	// A host-side veth whose peer was in the namespace goes with it, but not at once: the
	// kernel tears a deleted namespace down asynchronously, so the veth may still be listed
	// for a moment and then vanish under `ip link delete` ("Cannot find device"). Wait for
	// it to go; one left by a half-made network (its peer never moved) is removed here.
	for i := 0; deletedNS && i < 50; i++ {
		if _, err := net.InterfaceByName(NodeHostVeth); err != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := net.InterfaceByName(NodeHostVeth); err == nil {
		if err := run("ip", "link", "delete", NodeHostVeth); err != nil {
			if _, still := net.InterfaceByName(NodeHostVeth); still == nil {
				errs = append(errs, err)
			}
		}
	}
	for _, c := range cgroupHierarchies() {
		if err := removeCgroupTree(filepath.Join(c, NodeCgroupRoot)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := restoreSysctls(); err != nil {
		errs = append(errs, err)
	}
	// containerd 1.6 keeps two things of each task outside its own directories: the shim's
	// socket in /run/containerd/s (named by a hash of containerd's address, the namespace
	// and the id; not configurable) and, for a sandbox, libcni's cached results in
	// /var/lib/cni/results. A shim killed before it deleted its task leaves both; remove
	// those of the rig's tasks (named in its containerd state dir), and nothing else there.
	if err := removeTaskLeftovers(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		keepLogs := os.Getenv("KQO_KEEP_RIG") != ""
		for _, d := range []string{NodeRunDir, NodeStateDir} {
			if keepLogs && d == NodeStateDir {
				entries, _ := os.ReadDir(d)
				for _, e := range entries {
					if e.Name() != "logs" {
						_ = os.RemoveAll(filepath.Join(d, e.Name()))
					}
				}
				continue
			}
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Where containerd 1.6 and libcni keep per-task files whatever containerd's root and state.
var (
	shimSocketDir  = "/run/containerd/s"
	cniResultsDir  = "/var/lib/cni/results"
	containerdTask = filepath.Join(NodeRunDir, "containerd", "io.containerd.runtime.v2.task")
)

// removeTaskLeftovers removes the shim sockets and cached CNI results of the tasks named
// under the rig's containerd state directory.
func removeTaskLeftovers() error {
	nss, err := os.ReadDir(containerdTask)
	if err != nil {
		return nil // no state dir: nothing of the rig's
	}
	var errs []error
	for _, ns := range nss {
		ids, _ := os.ReadDir(filepath.Join(containerdTask, ns.Name()))
		for _, id := range ids {
			sum := sha256.Sum256([]byte(filepath.Join(ContainerdSocket(), ns.Name(), id.Name())))
			sock := filepath.Join(shimSocketDir, hex.EncodeToString(sum[:]))
			if err := os.Remove(sock); err != nil && !os.IsNotExist(err) {
				errs = append(errs, err)
			}
			cached, _ := filepath.Glob(filepath.Join(cniResultsDir, "*-"+id.Name()+"-*"))
			for _, f := range cached {
				if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// nodePIDs lists the processes that belong to a node rig: those in its cgroups and those in
// its network namespace. The caller's own process is never listed.
func nodePIDs() []int {
	seen := map[int]bool{}
	for _, c := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(c, NodeCgroupRoot), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	var st syscall.Stat_t
	if err := syscall.Stat(netnsPath(), &st); err == nil {
		procs, _ := os.ReadDir("/proc")
		for _, e := range procs {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			var ps syscall.Stat_t
			if syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &ps) == nil && ps.Ino == st.Ino && ps.Dev == st.Dev {
				seen[pid] = true
			}
		}
	}
	delete(seen, os.Getpid())
	var pids []int
	for p := range seen {
		pids = append(pids, p)
	}
	sort.Ints(pids)
	return pids
}

// mountsUnder lists mount points below the given directories, deepest first.
func mountsUnder(dirs ...string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := strings.ReplaceAll(fields[4], `\040`, " ")
		for _, d := range dirs {
			if mp == d || strings.HasPrefix(mp, d+"/") {
				out = append(out, mp)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return strings.Count(out[i], "/") > strings.Count(out[j], "/") })
	return slices.Compact(out), sc.Err()
}

// cgroupHierarchies lists the mounted cgroup v1 hierarchies (/sys/fs/cgroup/<controller>).
func cgroupHierarchies() []string {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
			if _, err := os.Stat(filepath.Join(p, "cgroup.procs")); err == nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// removeCgroupTree removes a cgroup and its children, deepest first (rmdir, as cgroupfs
// allows no other removal).
func removeCgroupTree(root string) error {
	if _, err := os.Stat(root); err != nil {
		return nil
	}
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var errs []error
	for _, d := range dirs {
		var err error
		for i := 0; i < 20; i++ {
			if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
				err = nil
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

func sysctlPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

// The saved values live beside the state dir, so a sweep after a killed run finds them.
func sysctlsSaveFile() string { return NodeStateDir + ".sysctls" }

func saveSysctls() error {
	if _, err := os.Stat(sysctlsSaveFile()); err == nil {
		return nil // a sweep restores these first; never overwrite the originals
	}
	var b strings.Builder
	for _, s := range NodeSysctls {
		v, err := os.ReadFile(sysctlPath(s))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s=%s\n", s, strings.TrimSpace(string(v)))
	}
	return os.WriteFile(sysctlsSaveFile(), []byte(b.String()), 0o644)
}

func restoreSysctls() error {
	b, err := os.ReadFile(sysctlsSaveFile())
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		name, val, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if err := os.WriteFile(sysctlPath(name), []byte(val), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s=%s: %w", name, val, err))
		}
	}
	if len(errs) == 0 {
		return os.Remove(sysctlsSaveFile())
	}
	return errors.Join(errs...)
}

func writeContainerdConfig() (string, error) {
	dir := filepath.Join(NodeStateDir, "containerd")
	cniConf := filepath.Join(NodeStateDir, "cni")
	for _, d := range []string{dir, cniConf} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	conflist := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "kqo-node", "plugins": [
  {"type": "bridge", "bridge": "kqo-br0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": %q}},
  {"type": "loopback"}]}
`, NodePodCIDR, filepath.Join(NodeRunDir, "cni-ipam"))
	if err := os.WriteFile(filepath.Join(cniConf, "10-kqo-node.conflist"), []byte(conflist), 0o644); err != nil {
		return "", err
	}
	// restrict_oom_score_adj: the VM withholds CAP_SYS_RESOURCE even from root, and runc
	// fails to lower a container's oom_score_adj without it. Pod network namespaces are
	// mounted under the state dir, so the sweep finds them.
	cfg := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = %q
`, filepath.Join(dir, "root"), filepath.Join(NodeRunDir, "containerd"), ContainerdSocket(), PauseImage, cniConf, filepath.Join(NodeRunDir, "runc"))
	p := filepath.Join(dir, "config.toml")
	return p, os.WriteFile(p, []byte(cfg), 0o644)
}

func writeKubeletConfig(pki string) (string, error) {
	dir := filepath.Join(NodeStateDir, "kubelet")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// failCgroupV1 false: the host has cgroup v1 only. cgroupfs: containerd 1.6 has no
	// RuntimeConfig CRI call to tell the kubelet its driver. Eviction thresholds low, so a
	// busy shared disk does not evict the test's Pods. No cluster DNS (resolvConf "").
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%s
failSwapOn: false
containerRuntimeEndpoint: unix://%s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %s}
authorization: {mode: AlwaysAllow}
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %s
tlsPrivateKeyFile: %s
resolvConf: ""
clusterDomain: cluster.local
podLogsDir: %s
volumePluginDir: %s
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
protectKernelDefaults: false
serializeImagePulls: false
`, NodeCgroupRoot, ContainerdSocket(), filepath.Join(pki, "ca.crt"), NodeIP,
		filepath.Join(pki, "apiserver.crt"), filepath.Join(pki, "apiserver.key"),
		filepath.Join(NodeStateDir, "pod-logs"), filepath.Join(dir, "volume-plugins"))
	p := filepath.Join(dir, "config.yaml")
	return p, os.WriteFile(p, []byte(cfg), 0o644)
}

func kubeconfigFor(server, pki string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kqo-node
  cluster: {server: %q, certificate-authority: %q}
users:
- name: admin
  user: {client-certificate: %q, client-key: %q}
contexts:
- name: kqo-node
  context: {cluster: kqo-node, user: admin}
current-context: kqo-node
`, server, filepath.Join(pki, "ca.crt"), filepath.Join(pki, "admin.crt"), filepath.Join(pki, "admin.key"))
}

// writeNodePKI writes a CA, the apiserver's serving certificate (also the kubelet's: both
// serve on NodeIP), an admin client certificate in system:masters (used by every component
// and the test), and the service-account signing key pair.
func writeNodePKI(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kqo-node-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	issue := func(name string, tmpl *x509.Certificate) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl.SerialNumber = big.NewInt(now.UnixNano() + int64(len(name)))
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(7*24*time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		return writeKeyPair(dir, name, der, key)
	}
	if err := writeKeyPair(dir, "ca", caDER, caKey); err != nil {
		return err
	}
	if err := issue("apiserver", &x509.Certificate{Subject: pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", NodeName, "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP(NodeIP), net.ParseIP(NodeKubernetesServiceIP), net.ParseIP("127.0.0.1")}}); err != nil {
		return err
	}
	if err := issue("admin", &x509.Certificate{Subject: pkix.Name{CommonName: "kqo-node-admin", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saDER}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644)
}

func writeKeyPair(dir, name string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
}
