package verify

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/controllers"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// suite is the real kube-apiserver + etcd and one real 4.4 broker, started once (test/rig's
// Suite); each test runs a manager of its own, limited to the test's namespace, for as long as
// it needs it (startManager), so tests run in parallel without reconciling each other's objects.
type suite struct {
	*rig.Suite
	k8s   client.Client
	kafka *rig.Kafka
	admin *kafka.Client
}

var (
	shared = rig.NewSuite(rig.SuiteInput{Scheme: testScheme()})

	suiteOnce sync.Once
	suiteVal  *suite
	suiteErr  error
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	code := shared.Run(m)
	if suiteVal != nil {
		suiteVal.admin.Close()
	}
	os.Exit(code)
}

func testScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = kqv1.AddToScheme(scheme)
	return scheme
}

func startSuite(t *testing.T) *suite {
	t.Helper()
	s := shared.Start(t)
	suiteOnce.Do(func() {
		admin, err := kafka.NewClient(kafka.Config{BootstrapServers: s.Kafka.BootstrapServers(), ClientID: "test-admin"})
		suiteVal, suiteErr = &suite{Suite: s, k8s: s.Client, kafka: s.Kafka, admin: admin}, err
	})
	if suiteErr != nil {
		t.Fatalf("starting the rig: %v", suiteErr)
	}
	return suiteVal
}

// startManager runs the controllers in-process, watching only namespace ns, until the
// returned function (also a cleanup) stops them.
func (s *suite) startManager(t *testing.T, ns string) (stop func()) {
	t.Helper()
	pool := kafka.NewPool()
	stopMgr := s.StartManager(t, rig.ManagerOptions{Namespaces: []string{ns}}, func(mgr ctrl.Manager) error {
		return controllers.SetupAll(mgr, pool, controllers.Options{ProbeInterval: 5 * time.Second, ResyncInterval: time.Hour,
			KafkaTimeout: 10 * time.Second, FinalizerTimeout: 20 * time.Second, TopicCheckInterval: 2 * time.Second})
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			stopMgr()
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
	return s.Namespace(t, "verify-")
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
