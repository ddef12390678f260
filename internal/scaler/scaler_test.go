package scaler

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kafkaqueues/kafka-queue-operator/internal/scaler/externalscaler"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

func TestParseTrigger(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ns      string
		md      map[string]string
		want    trigger
		wantErr string
	}{
		{"defaults", "shop", map[string]string{"shareQueue": "orders"}, trigger{types.NamespacedName{Namespace: "shop", Name: "orders"}, 100, 0}, ""},
		{"all set", "shop", map[string]string{"shareQueue": " orders ", "namespace": "shop", "backlogPerReplica": "2.5", "activationBacklog": "10"},
			trigger{types.NamespacedName{Namespace: "shop", Name: "orders"}, 2.5, 10}, ""},
		{"another tenant's queue", "shop", map[string]string{"shareQueue": "orders", "namespace": "billing"}, trigger{},
			`scaler metadata namespace "billing": a ScaledObject in namespace shop may scale on the ShareQueues of its own namespace only`},
		{"no queue", "shop", map[string]string{}, trigger{}, "scaler metadata shareQueue is missing: set it to the ShareQueue's name"},
		{"no namespace anywhere", "", map[string]string{"shareQueue": "orders"}, trigger{}, "scaler metadata namespace is missing"},
		{"zero per replica", "shop", map[string]string{"shareQueue": "orders", "backlogPerReplica": "0"}, trigger{}, `scaler metadata backlogPerReplica "0": must be a number from 0.001 to 1e+15`},
		{"below a thousandth", "shop", map[string]string{"shareQueue": "orders", "backlogPerReplica": "0.0001"}, trigger{}, `backlogPerReplica "0.0001": must be a number from 0.001`},
		{"overflowing", "shop", map[string]string{"shareQueue": "orders", "backlogPerReplica": "1e300"}, trigger{}, `backlogPerReplica "1e300"`},
		{"text per replica", "shop", map[string]string{"shareQueue": "orders", "backlogPerReplica": "lots"}, trigger{}, `backlogPerReplica "lots": must be a number from`},
		{"NaN", "shop", map[string]string{"shareQueue": "orders", "backlogPerReplica": "NaN"}, trigger{}, `backlogPerReplica "NaN"`},
		{"negative activation", "shop", map[string]string{"shareQueue": "orders", "activationBacklog": "-1"}, trigger{}, `activationBacklog "-1": must be a number from 0 to 1e+15`},
		{"misspelt key", "shop", map[string]string{"shareQueue": "orders", "backlogPerReplicas": "5"}, trigger{}, `scaler metadata backlogPerReplicas is not a key this scaler reads: did you mean backlogPerReplica?`},
		{"FromEnv", "shop", map[string]string{"shareQueue": "orders", "backlogPerReplicaFromEnv": "TARGET"}, trigger{}, `scaler metadata backlogPerReplicaFromEnv: this scaler cannot read the workload's environment`},
		{"key in another case", "shop", map[string]string{"sharequeue": "orders"}, trigger{}, `did you mean shareQueue?`},
		{"KEDA's own keys and others pass", "shop", map[string]string{"shareQueue": "orders", "scalerAddress": "kqo:9090", "unsafeSsl": "false", "team": "payments"},
			trigger{queue: types.NamespacedName{Namespace: "shop", Name: "orders"}, backlogPerReplica: DefaultBacklogPerReplica}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTrigger(&externalscaler.ScaledObjectRef{Namespace: tc.ns, ScalerMetadata: tc.md})
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			case got != tc.want:
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// serve starts the scaler without TLS on a loopback port and returns a client of it.
func serve(t *testing.T, srv *Server) externalscaler.ExternalScalerClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- (&Runnable{Server: srv, BindAddress: "127.0.0.1:0", Listening: listening}).Start(ctx) }()
	var addr net.Addr
	select {
	case addr = <-listening:
	case err := <-done:
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return externalscaler.NewExternalScalerClient(conn)
}

// The server answers from the store's last round only, and says why when it cannot.
func TestServerAnswersFromTheLastRound(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	store := NewStore()
	c := serve(t, &Server{Store: store, MaxAge: 90 * time.Second, Now: func() time.Time { return now }})
	ctx := context.Background()
	orders := types.NamespacedName{Namespace: "shop", Name: "orders"}
	ref := &externalscaler.ScaledObjectRef{Name: "worker", Namespace: "shop", ScalerMetadata: map[string]string{"shareQueue": "orders", "activationBacklog": "5"}}
	code := func(err error) codes.Code { return status.Code(err) }

	if _, err := c.IsActive(ctx, ref); code(err) != codes.NotFound || !strings.Contains(err.Error(), "ShareQueue shop/orders is not read by this manager's depth poller") {
		t.Fatalf("before any round: %v, want NotFound naming the queue", err)
	}
	store.Replace(map[types.NamespacedName]Reading{orders: {Backlog: 5, At: now.Add(-10 * time.Second)}})
	if a, err := c.IsActive(ctx, ref); err != nil || a.Result {
		t.Fatalf("backlog 5 at activation 5: %v %v, want inactive", a, err)
	}
	m, err := c.GetMetrics(ctx, &externalscaler.GetMetricsRequest{ScaledObjectRef: ref, MetricName: "x"})
	if err != nil || len(m.MetricValues) != 1 || m.MetricValues[0].MetricValueFloat != 5 || m.MetricValues[0].MetricName != "sharequeue-shop-orders-backlog" {
		t.Fatalf("GetMetrics: %v %v", m, err)
	}
	stream, err := c.StreamIsActive(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	recv := func(want bool) {
		t.Helper()
		got, err := stream.Recv()
		if err != nil || got.Result != want {
			t.Fatalf("stream: %v %v, want %v", got, err, want)
		}
	}
	recv(false)
	// An unchanged verdict is not pushed again; a change is.
	store.Replace(map[types.NamespacedName]Reading{orders: {Backlog: 4, At: now}})
	store.Replace(map[types.NamespacedName]Reading{orders: {Backlog: 6, At: now}})
	recv(true)
	if a, err := c.IsActive(ctx, ref); err != nil || !a.Result {
		t.Fatalf("backlog 6 at activation 5: %v %v, want active", a, err)
	}

	// A failed read and a stale one are errors, never the last number.
	store.Replace(map[types.NamespacedName]Reading{orders: {Err: "KafkaCluster local is not connected", At: now}})
	if _, err := stream.Recv(); code(err) != codes.Unavailable {
		t.Fatalf("stream after a failed read: %v, want Unavailable", err)
	}
	if _, err := c.GetMetrics(ctx, &externalscaler.GetMetricsRequest{ScaledObjectRef: ref}); code(err) != codes.Unavailable || !strings.Contains(err.Error(), "KafkaCluster local is not connected") {
		t.Fatalf("failed read: %v, want Unavailable with the reason", err)
	}
	store.Replace(map[types.NamespacedName]Reading{orders: {Backlog: 0, Unread: 2, At: now}})
	if _, err := c.GetMetrics(ctx, &externalscaler.GetMetricsRequest{ScaledObjectRef: ref}); code(err) != codes.Unavailable || !strings.Contains(err.Error(), "2 partition(s) could not be read") {
		t.Fatalf("partial read: %v, want Unavailable, never the partial sum", err)
	}
	store.Replace(map[types.NamespacedName]Reading{orders: {Backlog: 9, At: now.Add(-91 * time.Second)}})
	if _, err := c.IsActive(ctx, ref); code(err) != codes.Unavailable || !strings.Contains(err.Error(), "depth last read 1m31s ago") {
		t.Fatalf("stale read: %v, want Unavailable naming its age", err)
	}
}

// ca.crt in the certificate directory turns on client certificates for new connections
// without a restart (a Secret gaining or rotating its CA).
func TestClientCAIsReadAtEveryHandshake(t *testing.T) {
	t.Parallel()
	ca, server, cl, err := rig.NewMutualTLS()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, pem := range map[string]string{CertFile: server.CertPEM, KeyFile: server.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(pem), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	listening := make(chan net.Addr, 1)
	store := NewStore()
	store.Replace(map[types.NamespacedName]Reading{{Namespace: "shop", Name: "orders"}: {Backlog: 3, At: time.Now()}})
	go func() {
		_ = (&Runnable{Server: &Server{Store: store}, BindAddress: "127.0.0.1:0", CertDir: dir, Listening: listening}).Start(ctx)
	}()
	addr := (<-listening).String()
	call := func(withCert bool) error {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM([]byte(ca.CertPEM))
		cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		if withCert {
			pair, err := tls.X509KeyPair([]byte(cl.CertPEM), []byte(cl.KeyPEM))
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, err = externalscaler.NewExternalScalerClient(conn).IsActive(context.Background(),
			&externalscaler.ScaledObjectRef{Namespace: "shop", ScalerMetadata: map[string]string{MetaShareQueue: "orders"}})
		return err
	}
	if err := call(false); err != nil {
		t.Fatalf("TLS without ca.crt, no client certificate: %v, want served", err)
	}
	if err := os.WriteFile(filepath.Join(dir, CAFile), []byte(ca.CertPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := call(false); status.Code(err) != codes.Unavailable {
		t.Fatalf("after ca.crt appeared, no client certificate: %v, want the handshake refused", err)
	}
	if err := call(true); err != nil {
		t.Fatalf("after ca.crt appeared, with a client certificate: %v", err)
	}
}

func TestCheckCertDirRefusesUnusableFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := CheckCertDir(dir); err == nil || !strings.Contains(err.Error(), "--keda-scaler-cert-dir") {
		t.Fatalf("empty directory: %v, want an error naming the flag", err)
	}
	_, server, _, err := rig.NewMutualTLS()
	if err != nil {
		t.Fatal(err)
	}
	for name, pem := range map[string]string{CertFile: server.CertPEM, KeyFile: server.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(pem), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := CheckCertDir(dir); err != nil {
		t.Fatalf("a serving pair: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, CAFile), []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckCertDir(dir); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Fatalf("garbage ca.crt: %v, want refused", err)
	}
}
