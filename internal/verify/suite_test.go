package verify

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/controllers"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// suite is the real kube-apiserver + etcd and one real 4.4 broker, started once; each test
// runs the manager in-process for as long as it needs it (startManager).
type suite struct {
	cfg    *rest.Config
	scheme *runtime.Scheme
	k8s    client.Client
	kafka  *rig.Kafka
	admin  *kafka.Client
	stop   func()
}

var (
	suiteOnce sync.Once
	suiteVal  *suite
	suiteErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if suiteVal != nil {
		suiteVal.stop()
	}
	os.Exit(code)
}

func startSuite(t *testing.T) *suite {
	t.Helper()
	rig.SkipWithoutRig(t, "the local apiserver and Kafka rig")
	suiteOnce.Do(func() { suiteVal, suiteErr = newSuite() })
	if suiteErr != nil {
		t.Fatalf("starting the rig: %v", suiteErr)
	}
	return suiteVal
}

func newSuite() (*suite, error) {
	ctrllog.SetLogger(logr.Discard())
	logf := func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }
	k, err := rig.StartKafka(context.Background(), rig.KafkaOptions{Log: logf})
	if err != nil {
		return nil, err
	}
	env, cfg, err := rig.StartAPIServer()
	if err != nil {
		k.Stop()
		return nil, err
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = kqv1.AddToScheme(scheme)
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	admin, err := kafka.NewClient(kafka.Config{BootstrapServers: k.BootstrapServers(), ClientID: "test-admin"})
	if err != nil {
		return nil, err
	}
	return &suite{cfg: cfg, scheme: scheme, k8s: k8s, kafka: k, admin: admin, stop: func() {
		admin.Close()
		_ = env.Stop()
		k.Stop()
	}}, nil
}

// startManager runs the controllers in-process until the returned function (also a
// cleanup) stops them.
func (s *suite) startManager(t *testing.T) (stop func()) {
	t.Helper()
	mgr, err := ctrl.NewManager(s.cfg, ctrl.Options{Scheme: s.scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	pool := kafka.NewPool()
	if err := controllers.SetupAll(mgr, pool, controllers.Options{ProbeInterval: 5 * time.Second, ResyncInterval: time.Hour,
		KafkaTimeout: 10 * time.Second, FinalizerTimeout: 20 * time.Second, TopicCheckInterval: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = mgr.Start(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			pool.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func (s *suite) namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "verify-"}}
	if err := s.k8s.Create(ctxFor(t), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func (s *suite) create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := s.k8s.Create(ctxFor(t), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
}

// waitTrue waits until obj's condition typ is True at its current generation.
func (s *suite) waitTrue(t *testing.T, obj client.Object, typ string) {
	t.Helper()
	rig.Eventually(t, 90*time.Second, func() string {
		if err := s.k8s.Get(ctxFor(t), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err.Error()
		}
		var conds []metav1.Condition
		switch o := obj.(type) {
		case *kqv1.KafkaCluster:
			conds = o.Status.Conditions
		case *kqv1.ShareQueue:
			conds = o.Status.Conditions
		case *kqv1.DeadLetterRoute:
			conds = o.Status.Conditions
		}
		if c := meta.FindStatusCondition(conds, typ); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != obj.GetGeneration() {
			return fmt.Sprintf("%T %s: want %s True; conditions %+v", obj, obj.GetName(), typ, conds)
		}
		return ""
	})
}

func cluster(ns, name string, bootstrap []string) *kqv1.KafkaCluster {
	return &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kqv1.KafkaClusterSpec{BootstrapServers: bootstrap}}
}

// queue is a ShareQueue on cluster with topic and group named name-ns (unique in the broker).
func queue(ns, name, cluster string, d kqv1.DeliverySpec) *kqv1.ShareQueue {
	return &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: cluster}, Topic: kqv1.QueueTopicSpec{Name: name + "-" + ns}, GroupID: name + "-" + ns, Delivery: d}}
}

func route(ns, name, queue string, mode kqv1.DeadLetterMode, topic string) *kqv1.DeadLetterRoute {
	return &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kqv1.DeadLetterRouteSpec{
		QueueRef: kqv1.QueueReference{Name: queue}, Mode: mode, Topic: kqv1.DeadLetterTopicSpec{Name: topic}}}
}
