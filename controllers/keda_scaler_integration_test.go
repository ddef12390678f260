package controllers

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/scaler"
	"github.com/kafkaqueues/kafka-queue-operator/internal/scaler/externalscaler"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// testScaler is the suite manager's KEDA scaler: mutual TLS, and a Pod object standing for
// the manager's own (no kubelet runs it) for the serving label.
var testScaler struct {
	dir, addr string
	ca        *rig.TestCA
	client    *rig.TLSMaterial
	pod       client.ObjectKey
}

// suiteScaler writes the scaler's certificates and its Pod for the suite manager.
func suiteScaler(s *rig.Suite) (KEDAScalerOptions, error) {
	ca, server, cl, err := rig.NewMutualTLS()
	if err != nil {
		return KEDAScalerOptions{}, err
	}
	dir, err := os.MkdirTemp("", "kqo-scaler-")
	if err != nil {
		return KEDAScalerOptions{}, err
	}
	for name, pem := range map[string]string{scaler.CertFile: server.CertPEM, scaler.KeyFile: server.KeyPEM, scaler.CAFile: ca.CertPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(pem), 0o600); err != nil {
			return KEDAScalerOptions{}, err
		}
	}
	addr, err := rig.FreeLoopbackAddr()
	if err != nil {
		return KEDAScalerOptions{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kqo-scaler"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "manager-0", Labels: map[string]string{ScalerLabel: "left-by-an-earlier-leader"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "kafka-queue-operator:test"}}}}
	for _, o := range []client.Object{ns, pod} {
		if err := s.Client.Create(ctx, o); err != nil {
			return KEDAScalerOptions{}, err
		}
	}
	testScaler.dir, testScaler.addr, testScaler.ca, testScaler.client, testScaler.pod = dir, addr, ca, cl, client.ObjectKeyFromObject(pod)
	return KEDAScalerOptions{BindAddress: addr, CertDir: dir, PodName: pod.Name, PodNamespace: pod.Namespace}, nil
}

// scalerClient dials the suite manager's scaler as KEDA does (caCert, and tlsClientCert and
// tlsClientKey when withCert).
func scalerClient(t *testing.T, withCert bool) externalscaler.ExternalScalerClient {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(testScaler.ca.CertPEM))
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if withCert {
		pair, err := tls.X509KeyPair([]byte(testScaler.client.CertPEM), []byte(testScaler.client.KeyPEM))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	conn, err := grpc.NewClient(testScaler.addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return externalscaler.NewExternalScalerClient(conn)
}

// docsTriggerMetadata is the external trigger's metadata of docs/autoscaling.md's ScaledObject.
func docsTriggerMetadata(t *testing.T) map[string]string {
	t.Helper()
	block := rig.YAMLBlocks(t, "docs/autoscaling.md")["keda-external"]
	var so struct {
		Kind string
		Spec struct {
			Triggers []struct {
				Type     string
				Metadata map[string]string
			}
		}
	}
	if err := yaml.Unmarshal([]byte(strings.Split(block, "\n---\n")[0]), &so); err != nil || so.Kind != "ScaledObject" || len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "external" {
		t.Fatalf("docs/autoscaling.md <!-- yaml:keda-external -->: want a ScaledObject first, with one external trigger (%v):\n%s", err, block)
	}
	md := so.Spec.Triggers[0].Metadata
	if md[scaler.MetaShareQueue] != "orders" || md[scaler.MetaBacklogPerReplica] != "100" {
		t.Fatalf("the docs' trigger scales queue %q at %q per replica; this test expects orders at 100", md[scaler.MetaShareQueue], md[scaler.MetaBacklogPerReplica])
	}
	return md
}

// hpaReplicas is the replica count KEDA and the HPA it makes settle on for one external
// trigger: minReplicaCount 0 while IsActive is false; else the HPA's AverageValue rule,
// ceil(metric / target), between 1 and maxReplicas.
func hpaReplicas(active bool, metric, target float64, maxReplicas int) int {
	if !active {
		return 0
	}
	return min(max(int(math.Ceil(metric/target)), 1), maxReplicas)
}

// KEDA's external scaler, served by the manager from the depth poller's rounds, takes a
// queue's consumers from 0 to N replicas when records wait and back to 0 once they are
// acknowledged, over mutual TLS, with a client generated from KEDA's proto.
func TestKEDAScalerScalesAQueueFromZeroToNAndBack(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	sq := r.newDepthQueue(t, ns, "orders", "earliest")
	c := scalerClient(t, true)
	// KEDA sends the trigger's metadata as written and the ScaledObject's own namespace: the
	// docs' ScaledObject (shop/orders-worker), here in the test's namespace.
	ref := &externalscaler.ScaledObjectRef{Name: "orders-worker", Namespace: ns, ScalerMetadata: docsTriggerMetadata(t)}

	spec, err := c.GetMetricSpec(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	wantName := "sharequeue-" + ns + "-orders-backlog"
	if len(spec.MetricSpecs) != 1 || spec.MetricSpecs[0].MetricName != wantName || spec.MetricSpecs[0].TargetSizeFloat != 100 || spec.MetricSpecs[0].TargetSize != 100 {
		t.Fatalf("GetMetricSpec: %v, want one metric %s with target 100", spec, wantName)
	}
	const maxReplicas = 20
	var history []int
	scaleTo := func(want int, backlog int64) {
		t.Helper()
		eventually(t, 3*testDepthInterval, func() string {
			act, err := c.IsActive(ctx, ref)
			if err != nil {
				return "IsActive: " + err.Error()
			}
			m, err := c.GetMetrics(ctx, &externalscaler.GetMetricsRequest{ScaledObjectRef: ref, MetricName: wantName})
			if err != nil {
				return "GetMetrics: " + err.Error()
			}
			if len(m.MetricValues) != 1 || m.MetricValues[0].MetricName != wantName {
				return fmt.Sprintf("GetMetrics: %v", m)
			}
			v := m.MetricValues[0]
			got := hpaReplicas(act.Result, v.MetricValueFloat, spec.MetricSpecs[0].TargetSizeFloat, maxReplicas)
			if got != want || v.MetricValue != backlog || v.MetricValueFloat != float64(backlog) {
				return fmt.Sprintf("active %v, backlog %v (%d): %d replicas; want backlog %d, %d replicas", act.Result, v.MetricValueFloat, v.MetricValue, got, backlog, want)
			}
			return ""
		})
		history = append(history, want)
	}
	scaleTo(0, 0)
	// Opened once the queue was read (before, the stream ends at once with NotFound).
	stream, err := c.StreamIsActive(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	expectPush := func(want bool) {
		t.Helper()
		got, err := stream.Recv()
		if err != nil || got.Result != want {
			t.Fatalf("StreamIsActive sent %v (%v), want %v", got, err, want)
		}
	}

	expectPush(false)
	r.produceTo(t, sq.Status.TopicName, 750)
	scaleTo(8, 750)
	expectPush(true)
	r.consumeAndAccept(t, ctx, sq, 750)
	scaleTo(0, 0)
	expectPush(false)
	t.Logf("replicas through the external scaler: %v", history)

	// What KEDA is told when it cannot have a number: the one cause that applies.
	held := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held", Annotations: map[string]string{kqv1.ReconcileAnnotation: string(kqv1.ReconcilePaused)}},
		Spec: kqv1.ShareQueueSpec{ClusterRef: kqv1.ClusterReference{Name: sq.Spec.ClusterRef.Name}, Topic: kqv1.QueueTopicSpec{Name: "held-" + ns, Partitions: 1}}}
	if err := r.k8s.Create(ctx, held); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		md   map[string]string
		code codes.Code
		want string
	}{
		{map[string]string{scaler.MetaShareQueue: "missing"}, codes.NotFound, "this manager holds no ShareQueue of that name"},
		{map[string]string{scaler.MetaShareQueue: "held"}, codes.NotFound, `it is held back by its annotation kafkaqueues.io/reconcile="Paused"`},
		{map[string]string{}, codes.InvalidArgument, "shareQueue is missing"},
		{map[string]string{scaler.MetaShareQueue: "orders", scaler.MetaBacklogPerReplica: "0"}, codes.InvalidArgument, "backlogPerReplica"},
		{map[string]string{scaler.MetaShareQueue: "orders", "backlogPerReplicas": "5"}, codes.InvalidArgument, "did you mean backlogPerReplica?"},
	} {
		eventually(t, 10*time.Second, func() string {
			_, err := c.IsActive(ctx, &externalscaler.ScaledObjectRef{Name: "x", Namespace: ns, ScalerMetadata: tc.md})
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.want) {
				return fmt.Sprintf("IsActive %v: %v, want code %s and a message containing %q", tc.md, err, tc.code, tc.want)
			}
			return ""
		})
	}
	// Mutual TLS: a client without a certificate is refused.
	if _, err := scalerClient(t, false).IsActive(ctx, ref); status.Code(err) != codes.Unavailable {
		t.Errorf("IsActive without a client certificate: %v, want the handshake refused (Unavailable)", err)
	}
	// The serving manager's Pod carries the label the chart's Service selects.
	var pod corev1.Pod
	if err := r.k8s.Get(ctx, testScaler.pod, &pod); err != nil || pod.Labels[ScalerLabel] != ScalerServing {
		t.Errorf("manager Pod labels %v (%v), want %s=%s", pod.Labels, err, ScalerLabel, ScalerServing)
	}
}
