package controllers

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// testRig is the real kube-apiserver + etcd, one real Kafka broker and the manager running
// the controllers in-process, started once (test/rig's Suite) for the integration tests of this
// package (unit tests of the plan never start it). Each test works in a namespace of its own
// with topics and groups of its own, so tests on it run in parallel; a test that stops
// brokers or changes broker settings starts a cluster of its own (startKafka).
type testRig struct {
	env     *envtest.Environment
	kafka   *rig.Kafka
	k8s     client.Client
	counter *kafka.RequestCounter
	admin   *kafka.Client // a separate client for checking Kafka from outside the operator
}

var (
	// counter counts the Kafka requests of the suite's manager.
	counter = &kafka.RequestCounter{}
	suite   = rig.NewSuite(rig.SuiteInput{Scheme: testScheme(), SetupManager: setupSuiteManager})

	rigOnce sync.Once
	rigVal  *testRig
	rigErr  error
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(os.Stderr), zap.Level(zapLevel())))
	afterResetApply = resetApplyHooks.run
	code := suite.Run(m)
	if testScaler.dir != "" {
		_ = os.RemoveAll(testScaler.dir)
	}
	if rigVal != nil {
		rigVal.admin.Close()
	}
	os.Exit(code)
}

func testScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = kqv1.AddToScheme(scheme)
	return scheme
}

// testOptions are the suite manager's options: intervals short enough that no test waits
// out a production default.
func testOptions() Options {
	return Options{ProbeInterval: 5 * time.Second, ResyncInterval: time.Hour, KafkaTimeout: 10 * time.Second, FinalizerTimeout: 20 * time.Second, TopicCheckInterval: 2 * time.Second,
		QueueConcurrency: 64, KafkaBatching: kafka.Batching{Enabled: true, Linger: 100 * time.Millisecond},
		// As the manager binary runs by default: every queue records its claims.
		ClaimsTopic: "kafkaqueues.claims", ManagerName: "test",
		DepthInterval: testDepthInterval, DepthStatusInterval: testDepthStatusInterval}
}

func setupSuiteManager(mgr ctrl.Manager, s *rig.Suite) error {
	opts := testOptions()
	scaler, err := suiteScaler(s)
	if err != nil {
		return err
	}
	opts.KEDAScaler = scaler
	return SetupAll(mgr, kafka.NewPool(counter.Observe), opts)
}

// startRig starts (once) and returns the shared rig; it fails the test if the rig cannot start.
func startRig(t *testing.T) *testRig {
	t.Helper()
	s := suite.Start(t)
	rigOnce.Do(func() {
		admin, err := kafka.NewClient(kafka.Config{BootstrapServers: s.Kafka.BootstrapServers(), ClientID: "test-admin"})
		rigVal, rigErr = &testRig{env: s.Env, kafka: s.Kafka, k8s: s.Client, counter: counter, admin: admin}, err
	})
	if rigErr != nil {
		t.Fatalf("starting the test rig: %v", rigErr)
	}
	return rigVal
}

func zapLevel() zapcore.Level {
	if os.Getenv("KQO_TEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}

// eventually polls cond until it returns "" or the timeout passes (rig.Eventually).
func eventually(t *testing.T, timeout time.Duration, cond func() string) {
	t.Helper()
	rig.Eventually(t, timeout, cond)
}

// ctxFor is a context for t's calls. Many tests take one at their start for all their calls:
// its bound is the whole test's, not one call's (a 2-minute bound failed
// TestDepthMetricsFollowTheBacklog with "context deadline exceeded" at 170 s on a loaded
// machine); each wait has its own timeout (eventually).
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newNamespace creates a fresh namespace for one test.
func (r *testRig) newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kqo-test-"}}
	if err := r.k8s.Create(ctxFor(t), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// newCluster creates a KafkaCluster pointing at the rig's broker and waits until it is Ready.
func (r *testRig) newCluster(t *testing.T, ns string) *kqv1.KafkaCluster {
	t.Helper()
	kc := &kqv1.KafkaCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "local"},
		Spec:       kqv1.KafkaClusterSpec{BootstrapServers: r.kafka.BootstrapServers()},
	}
	if err := r.k8s.Create(ctxFor(t), kc); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, func() string {
		if err := r.k8s.Get(ctxFor(t), client.ObjectKeyFromObject(kc), kc); err != nil {
			return err.Error()
		}
		if c := findCondition(kc.Status.Conditions, kqv1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Sprintf("KafkaCluster not Ready: %+v", kc.Status.Conditions)
		}
		return ""
	})
	return kc
}

// waitQueue waits until the ShareQueue's condition typ has status want (at the current
// generation) and returns the queue.
func (r *testRig) waitQueue(t *testing.T, sq *kqv1.ShareQueue, typ string, want metav1.ConditionStatus) *kqv1.ShareQueue {
	t.Helper()
	out := &kqv1.ShareQueue{}
	eventually(t, 60*time.Second, func() string {
		if err := r.k8s.Get(ctxFor(t), client.ObjectKeyFromObject(sq), out); err != nil {
			return err.Error()
		}
		c := findCondition(out.Status.Conditions, typ)
		if c == nil || c.Status != want || c.ObservedGeneration != out.Generation || out.Status.ObservedGeneration != out.Generation {
			return fmt.Sprintf("ShareQueue %s: want %s=%s at generation %d; conditions %+v", sq.Name, typ, want, out.Generation, out.Status.Conditions)
		}
		return ""
	})
	return out
}

// waitConfig polls one config of a topic or group (brokers serve DescribeConfigs from a
// metadata image that trails the controller's commit) until check returns "".
func waitConfig(t *testing.T, admin *kafka.Client, key kafka.ResourceKey, name string, check func(kafka.ConfigEntry) string) {
	t.Helper()
	eventually(t, 10*time.Second, func() string {
		cfgs, err := admin.DescribeConfigs(ctxFor(t), []kafka.ResourceKey{key})
		if err != nil {
			return err.Error()
		}
		return check(cfgs[key].Configs[name])
	})
}
