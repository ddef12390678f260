//go:build soak

package soak

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	corev1 "k8s.io/api/core/v1"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// soak is one run: the rig, the population, the traffic and the watchers.
type soak struct {
	t    *testing.T
	dir  string
	seed uint64
	flog *faultLog

	main, old *rig.Kafka
	env       *envtest.Environment
	apiMu     sync.Mutex // held while the apiserver restarts
	kubeconf  string
	c         client.Client

	managerBin, republisherBin string
	mgr                        *managerProc
	mgrMu                      sync.Mutex

	pop *population
	led *ledger
	ids *retainRecorder
	res *resourceSampler
	tr  *traffic

	mu            sync.Mutex
	settles       []time.Duration
	boundNarrowed bool
	deck          []string // fault kinds left to deal (runEpisode)
	mgrExits      int      // manager exits superviseManager restarted (under mgrMu)
	brokerDLQLost int      // poison ids the brokers archived without a dead letter (waitDrained)

	stopW   context.CancelFunc
	watchWG sync.WaitGroup
}

func startRig(t *testing.T, ctx context.Context, dir string, flog *faultLog, seed uint64) *soak {
	s := &soak{t: t, dir: dir, seed: seed, flog: flog}
	for _, b := range []struct {
		out *string
		pkg string
	}{{&s.managerBin, "./cmd/manager"}, {&s.republisherBin, "./cmd/republisher"}} {
		*b.out = filepath.Join(dir, filepath.Base(b.pkg))
		build := exec.Command("go", "build", "-o", *b.out, b.pkg)
		build.Dir = rig.RepoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	var err error
	logf := func(format string, args ...any) { flog.note("rig: "+format, args...) }
	s.main, err = rig.StartKafka(ctx, rig.KafkaOptions{Brokers: 3, Dir: mkdir(t, dir, "kafka-main"), Log: logf,
		BrokerProps: map[string]string{"replica.lag.time.max.ms": fmt.Sprint(mainLagMax.Milliseconds()), boundConfig: boundWide}})
	if err != nil {
		t.Fatal(err)
	}
	s.old, err = rig.StartKafka(ctx, rig.KafkaOptions{ReleaseVersion: "4.1", Dir: mkdir(t, dir, "kafka-old"), Log: logf})
	if err != nil {
		s.main.Stop()
		t.Fatal(err)
	}
	flog.note("kafka: main %s (4.4.0, 3 brokers), old %s (4.4.0 jars, formatted at release 4.1, 1 broker)", s.main.Bootstrap(), s.old.Bootstrap())

	// The apiserver keeps its certificates in a directory of ours, so stopping and starting
	// it again (the apiserver-restart fault) serves the same CA on the same port and every
	// kubeconfig stays valid.
	bins, err := rig.EnvtestBinaries()
	if err != nil {
		t.Fatal(err)
	}
	s.env = &envtest.Environment{BinaryAssetsDirectory: bins,
		CRDDirectoryPaths: []string{filepath.Join(rig.RepoRoot(), "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	s.env.ControlPlane.GetAPIServer().CertDir = mkdir(t, dir, "apiserver-certs")
	cfg, err := s.env.Start()
	if err != nil {
		t.Fatalf("starting kube-apiserver/etcd: %v", err)
	}
	s.kubeconf = filepath.Join(dir, "kubeconfig")
	if err := rig.WriteKubeconfig(cfg, s.kubeconf); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = kqv1.AddToScheme(scheme)
	ccfg := rest.CopyConfig(cfg)
	ccfg.QPS, ccfg.Burst = 500, 1000
	if s.c, err = client.New(ccfg, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	addr, err := rig.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	s.mgr = &managerProc{bin: s.managerBin, kubeconfig: s.kubeconf, metricsAddr: addr, logPath: filepath.Join(dir, "manager.log")}
	if err := s.mgr.start(); err != nil {
		t.Fatal(err)
	}

	// The clusters: main as it comes (share.version 2 at 4.4); old finalized to
	// share.version 1 by the operator (featurePolicy Finalize), as a user upgrading from 4.1
	// would, so share groups work there while broker-native dead-lettering does not.
	for _, kc := range []*kqv1.KafkaCluster{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "main"}, Spec: kqv1.KafkaClusterSpec{BootstrapServers: s.main.BootstrapServers()}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old"}, Spec: kqv1.KafkaClusterSpec{BootstrapServers: s.old.BootstrapServers(),
			FeaturePolicy: kqv1.FeaturePolicyFinalize, TargetShareVersion: ptr.To[int32](1)}},
	} {
		if err := s.c.Create(ctx, kc); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for _, name := range []string{"main", "old"} {
		for {
			var kc kqv1.KafkaCluster
			err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &kc)
			if err == nil && meta.IsStatusConditionTrue(kc.Status.Conditions, kqv1.ConditionReady) && meta.IsStatusConditionTrue(kc.Status.Conditions, kqv1.ConditionShareGroupsEnabled) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("KafkaCluster %s not Ready with share groups: %v %+v\nmanager log: %s", name, err, kc.Status.Conditions, s.mgr.logPath)
			}
			time.Sleep(2 * time.Second)
		}
	}
	s.led = newLedger()
	go s.superviseManager(ctx)
	return s
}

// superviseManager restarts the manager when it exits on its own, as the kubelet restarts a
// Deployment's container: a manager started while the apiserver is down (the manager-kill
// and apiserver-restart faults overlapping) exits at once ("building manager: failed to get
// server groups"). Each such exit is logged with the manager's last error line and counted.
func (s *soak) superviseManager(ctx context.Context) {
	for ctx.Err() == nil {
		time.Sleep(2 * time.Second)
		s.mgrMu.Lock()
		if s.mgr.exited() {
			s.mgr.cmd = nil
			s.mgrExits++
			err := s.mgr.start()
			s.flog.note("manager exited on its own (last error: %s); started again as a kubelet would (start error %v)", lastErrorLine(s.mgr.logPath), err)
		}
		s.mgrMu.Unlock()
	}
}

// lastErrorLine is the manager log's last error-level line, shortened.
func lastErrorLine(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], `"level":"error"`) {
			return lines[i][:min(300, len(lines[i]))]
		}
	}
	return "none logged"
}

func (s *soak) stop() {
	if s.tr != nil {
		s.stopProducers()
		s.stopConsumers()
	}
	s.stopWatchers()
	s.mgrMu.Lock()
	s.mgr.kill()
	s.mgrMu.Unlock()
	_ = s.env.Stop()
	s.main.Stop()
	s.old.Stop()
}

func mkdir(t *testing.T, parts ...string) string {
	p := filepath.Join(parts...)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// retryK8s retries f while the apiserver is restarting or refuses for a moment (conflicts
// included: f re-reads), for up to two minutes.
func (s *soak) retryK8s(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Second)
	}
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// managerProc is the manager binary run as its own process, as a Deployment runs it.
type managerProc struct {
	bin, kubeconfig, metricsAddr, logPath string
	cmd                                   *exec.Cmd
	done                                  chan struct{}
	starts                                int
}

func (m *managerProc) start() error {
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(m.bin, "--kubeconfig", m.kubeconfig, "--metrics-bind-address="+m.metricsAddr, "--health-probe-bind-address=0",
		"--cluster-probe-interval="+probeInterval.String(), "--queue-resync-interval="+resyncInterval.String())
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	m.cmd, m.done = cmd, make(chan struct{})
	m.starts++
	done := m.done
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	return nil
}

// kill sends SIGKILL and waits for the exit.
func (m *managerProc) kill() {
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	<-m.done
	m.cmd = nil
}

func (m *managerProc) pid() int {
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// exited reports whether the manager exited on its own (it must not).
func (m *managerProc) exited() bool {
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// faultLog writes every fault with its start and end, and notes, to a file and the test log.
type faultLog struct {
	path  string
	t     *testing.T
	start time.Time
	mu    sync.Mutex
	f     *os.File
	count map[string]int
}

func newFaultLog(path string, t *testing.T) (*faultLog, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &faultLog{path: path, t: t, start: time.Now(), f: f, count: map[string]int{}}, nil
}

func (l *faultLog) close() { l.f.Close() }

func (l *faultLog) note(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := fmt.Sprintf("%s T+%7.1fs %s", time.Now().UTC().Format("15:04:05.000"), time.Since(l.start).Seconds(), fmt.Sprintf(format, args...))
	fmt.Fprintln(l.f, line)
	l.t.Log(line)
}

// fault logs the start of one fault and returns the function that logs its end.
func (l *faultLog) fault(ep int, kind, detail string) func(err error) {
	l.mu.Lock()
	l.count[kind]++
	l.mu.Unlock()
	start := time.Now()
	l.note("episode %d FAULT START %s: %s", ep, kind, detail)
	return func(err error) {
		res := "ok"
		if err != nil {
			res = "error: " + err.Error()
		}
		l.note("episode %d FAULT END   %s after %s: %s", ep, kind, time.Since(start).Round(100*time.Millisecond), res)
	}
}

func (l *faultLog) counts() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ks []string
	total := 0
	for k, n := range l.count {
		ks = append(ks, fmt.Sprintf("%s=%d", k, n))
		total += n
	}
	sort.Strings(ks)
	return fmt.Sprintf("%d faults: %s", total, strings.Join(ks, " "))
}
