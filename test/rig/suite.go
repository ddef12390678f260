package rig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// SuiteInput says what one test package's integration tests share: a real kube-apiserver
// with the operator's CRDs, one Kafka cluster and, optionally, one manager running the
// package's reconcilers (cluster-api's envtest.RunInput is the model). Tests that change
// something shared — stop a broker, narrow broker bounds, watch a global metric — start a
// cluster of their own with StartKafka instead.
type SuiteInput struct {
	// Scheme holds every kind the package's tests use (required).
	Scheme *runtime.Scheme
	// Kafka configures the shared brokers; Log defaults to stderr.
	Kafka KafkaOptions
	// Webhooks installs the operator's webhook configurations (StartAPIServerWithWebhooks).
	Webhooks bool
	// SetupManager, when set, registers the package's reconcilers with the suite's one
	// manager, which then runs until the package's tests end. Without it no manager runs
	// (tests start their own with StartManager).
	SetupManager func(mgr ctrl.Manager, s *Suite) error
	// AfterStart runs once everything is up (e.g. create objects every test reads).
	AfterStart func(ctx context.Context, s *Suite) error
}

// Suite is a package's started rig. Start it from each integration test (the first call
// starts it; -short skips the test) and stop it from TestMain through Run.
type Suite struct {
	in SuiteInput

	once sync.Once
	err  error
	// mu keeps a signal's stop and the end of Run from running stop twice.
	mu sync.Mutex

	// Kafka is the shared cluster; Env and Config the apiserver; Client a client on it
	// (the suite's Scheme); Kubeconfig a kubeconfig file for out-of-process users (kubectl,
	// kqctl, the manager binary).
	Kafka      *Kafka
	Env        *envtest.Environment
	Config     *rest.Config
	Scheme     *runtime.Scheme
	Client     client.Client
	Kubeconfig string

	stops []func()
}

// NewSuite returns a suite that starts on first use.
func NewSuite(in SuiteInput) *Suite {
	return &Suite{in: in, Scheme: in.Scheme}
}

// Run is TestMain's body: it runs the package's tests, then stops whatever they started. On
// SIGINT or SIGTERM it stops the suite's rig and exits at once (tests' own clusters die with
// the process; their directories go at the next rig start, isolateTemp).
func (s *Suite) Run(m *testing.M) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case got := <-sig:
			fmt.Fprintf(os.Stderr, "rig: %v: stopping the suite's apiserver and brokers (again to exit at once)\n", got)
			go func() {
				// A second signal does not wait for the stop (a frozen broker holds it for
				// StopNode's grace): every process the rig started dies with this one (Pdeathsig).
				<-sig
				os.Exit(2)
			}()
			s.mu.Lock()
			s.stop()
			removeOwnTemp()
			os.Exit(2)
		case <-done:
		}
	}()
	code := m.Run()
	close(done)
	signal.Stop(sig)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stop()
	removeOwnTemp()
	return code
}

// Start starts the suite on its first call and returns it; under -short it skips t (fails it
// when KQO_REQUIRE_RIG is set), and it fails t when the rig could not start.
func (s *Suite) Start(t testing.TB) *Suite {
	t.Helper()
	SkipWithoutRig(t, "the local apiserver and Kafka rig")
	s.once.Do(func() { s.err = s.start() })
	if s.err != nil {
		t.Fatalf("starting the test rig: %v", s.err)
	}
	return s
}

func (s *Suite) start() error {
	isolateTemp()
	if s.in.Scheme == nil {
		return errors.New("rig.SuiteInput.Scheme is required")
	}
	logf := func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	kopts := s.in.Kafka
	if kopts.Log == nil {
		kopts.Log = logf
	}
	// The brokers' JVM and the apiserver start at the same time.
	var (
		wg       sync.WaitGroup
		kafkaErr error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.Kafka, kafkaErr = StartKafka(context.Background(), kopts)
	}()
	env, cfg, apiErr := StartAPIServerWithWebhooks(s.in.Webhooks)
	wg.Wait()
	if s.Kafka != nil {
		s.stops = append(s.stops, s.Kafka.Stop)
	}
	if env != nil {
		s.stops = append(s.stops, func() { _ = env.Stop() })
	}
	if err := errors.Join(kafkaErr, apiErr); err != nil {
		s.stop()
		return err
	}
	s.Env, s.Config = env, cfg
	var err error
	if s.Client, err = client.New(cfg, client.Options{Scheme: s.Scheme}); err != nil {
		s.stop()
		return err
	}
	dir, err := os.MkdirTemp("", "kqo-suite-")
	if err != nil {
		s.stop()
		return err
	}
	s.stops = append(s.stops, func() { _ = os.RemoveAll(dir) })
	s.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := WriteKubeconfig(cfg, s.Kubeconfig); err != nil {
		s.stop()
		return err
	}
	if s.in.SetupManager != nil {
		stop, err := s.runManager(ManagerOptions{}, func(mgr ctrl.Manager) error { return s.in.SetupManager(mgr, s) })
		if err != nil {
			s.stop()
			return err
		}
		s.stops = append(s.stops, stop)
	}
	if s.in.AfterStart != nil {
		if err := s.in.AfterStart(context.Background(), s); err != nil {
			s.stop()
			return err
		}
	}
	return nil
}

// stop runs the stop functions in reverse start order (the manager before the apiserver).
func (s *Suite) stop() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
}

// ManagerOptions shapes a manager StartManager runs.
type ManagerOptions struct {
	// Namespaces, when set, limits the manager's cache to these namespaces, so managers of
	// tests running in parallel never reconcile each other's objects.
	Namespaces []string
	// Mutate changes the controller-runtime options last (e.g. leader election).
	Mutate func(*ctrl.Options)
}

// StartManager runs a manager on the suite's apiserver with the reconcilers setup registers,
// until the returned stop (also a cleanup of t) is called. Metrics and probes bind nothing;
// controller names may repeat across managers.
func (s *Suite) StartManager(t testing.TB, opts ManagerOptions, setup func(ctrl.Manager) error) (stop func()) {
	t.Helper()
	stop, err := s.runManager(opts, setup)
	if err != nil {
		t.Fatalf("starting a manager: %v", err)
	}
	t.Cleanup(stop)
	return stop
}

func (s *Suite) runManager(opts ManagerOptions, setup func(ctrl.Manager) error) (func(), error) {
	copts := ctrl.Options{
		Scheme:                 s.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if len(opts.Namespaces) > 0 {
		copts.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range opts.Namespaces {
			copts.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	if opts.Mutate != nil {
		opts.Mutate(&copts)
	}
	mgr, err := ctrl.NewManager(s.Config, copts)
	if err != nil {
		return nil, err
	}
	if err := setup(mgr); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}, nil
}

// defaultCallTimeout bounds one apiserver call the suite makes for a test.
const defaultCallTimeout = time.Minute

// Namespace creates a namespace of its own for one test (name prefix, then random letters).
func (s *Suite) Namespace(t testing.TB, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	ctx, cancel := context.WithTimeout(context.Background(), defaultCallTimeout)
	defer cancel()
	if err := s.Client.Create(ctx, ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	return ns.Name
}
