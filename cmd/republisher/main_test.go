package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := rig.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// /readyz, which the injected sidecar's startupProbe calls, is 503 while the application API
// does not accept connections and 200 once it does; /healthz answers throughout.
func TestReadyzFollowsTheAPIListener(t *testing.T) {
	h := &health{}
	mux := http.NewServeMux()
	h.register(mux)
	probes := httptest.NewServer(mux)
	defer probes.Close()

	addr := freeAddr(t)
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("something listens on %s already", addr)
	}
	if code, body := get(t, probes.URL+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before the API listens: %d %q, want 503", code, body)
	}
	if code, _ := get(t, probes.URL+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d, want 200", code)
	}

	errc := make(chan error, 1)
	api, err := serveAPI(addr, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("api")) }), h, errc)
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	if code, body := get(t, probes.URL+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz once the API listens: %d %q, want 200", code, body)
	}
	// Ready means the API answers now, not eventually.
	if code, body := get(t, "http://"+addr+"/"); code != http.StatusOK || body != "api" {
		t.Errorf("the API right after /readyz said 200: %d %q", code, body)
	}

	// A taken address is an error and leaves /readyz at 503.
	h2 := &health{}
	if _, err := serveAPI(addr, http.NotFoundHandler(), h2, errc); err == nil || h2.ready.Load() {
		t.Errorf("serving on a taken address: %v, ready %v", err, h2.ready.Load())
	}
}

// /readyz is 503 with the reason while the republisher reports a problem (the queue's group
// id names a group of another type, issue 19 case 1), and 200 again once it clears.
func TestReadyzReportsTheRepublishersProblem(t *testing.T) {
	var problem atomic.Value
	problem.Store("group billing-cg is a classic group, not a share group")
	h := &health{problem: func() string { return problem.Load().(string) }}
	h.ready.Store(true)
	mux := http.NewServeMux()
	h.register(mux)
	probes := httptest.NewServer(mux)
	defer probes.Close()
	if code, body := get(t, probes.URL+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "classic group") {
		t.Errorf("/readyz with a problem: %d %q, want 503 naming it", code, body)
	}
	problem.Store("")
	if code, body := get(t, probes.URL+"/readyz"); code != http.StatusOK {
		t.Errorf("/readyz once the problem cleared: %d %q, want 200", code, body)
	}
}

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "republisher")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("building: %v\n%s", err, out)
	}
	return bin
}

// baseEnv configures a republisher whose brokers do not exist: it starts and serves anyway
// (the members connect in the background), and its /readyz says why it is not ready.
func baseEnv() []string {
	return []string{"KQO_BOOTSTRAP_SERVERS=127.0.0.1:1", "KQO_TOPIC=t", "KQO_GROUP=g", "KQO_DEAD_LETTER_TOPIC=dlq.t"}
}

// The binary serves the probes on the metrics listener (all interfaces in a Pod) while the
// API stays where --listen says; with metrics off, --health-bind-address serves them alone.
func TestBinaryServesProbes(t *testing.T) {
	bin := buildBinary(t)
	for _, tc := range []struct {
		name        string
		env         func(api, aux string) []string
		wantMetrics int
	}{
		{"on the metrics listener", func(api, aux string) []string {
			return []string{"KQO_LISTEN=" + api, "KQO_METRICS_BIND_ADDRESS=" + aux}
		}, http.StatusOK},
		{"metrics off, own listener", func(api, aux string) []string {
			return []string{"KQO_LISTEN=" + api, "KQO_METRICS_BIND_ADDRESS=0", "KQO_HEALTH_BIND_ADDRESS=" + aux}
		}, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, aux := freeAddr(t), freeAddr(t)
			cmd := exec.Command(bin)
			cmd.Env = append(baseEnv(), tc.env(api, aux)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			// Served, and not ready: nothing answers at the bootstrap address (issue 30, case 8:
			// it said 200 and the application started against an unreachable cluster).
			deadline := time.Now().Add(30 * time.Second)
			for {
				code, body := get(t, "http://"+aux+"/readyz")
				if code == http.StatusOK {
					t.Fatalf("/readyz 200 with no broker at the bootstrap address")
				}
				if code == http.StatusServiceUnavailable && strings.Contains(body, "connection refused") {
					break
				}
				if code != 0 && code != http.StatusServiceUnavailable {
					t.Fatalf("/readyz answered %d", code)
				}
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					t.Fatalf("/readyz never named the refused connection (last %d %q)\n%s", code, body, stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if code, body := get(t, "http://"+api+"/healthz"); code != http.StatusOK {
				t.Errorf("the API once ready: %d %q", code, body)
			}
			if code, _ := get(t, "http://"+aux+"/healthz"); code != http.StatusOK {
				t.Errorf("/healthz: %d", code)
			}
			if code, _ := get(t, "http://"+aux+"/metrics"); code != tc.wantMetrics {
				t.Errorf("/metrics: %d, want %d", code, tc.wantMetrics)
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("exit after SIGTERM: %v\n%s", err, stderr.String())
				}
			case <-time.After(40 * time.Second):
				_ = cmd.Process.Kill()
				t.Fatalf("no exit after SIGTERM\n%s", stderr.String())
			}
		})
	}
}

// Security settings that cannot work stop the start with a message naming the flag or file,
// never a credential or key.
func TestBinaryRefusesBadSecuritySettings(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(notPEM, []byte("s3cret-not-a-certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
		want string
		code int
	}{
		{"CA file without PEM", []string{"KQO_TLS=true", "KQO_TLS_CA_FILE=" + notPEM}, notPEM + " holds no PEM certificate", 1},
		{"CA file missing", []string{"KQO_TLS_CA_FILE=" + filepath.Join(dir, "absent")}, "--tls-ca-file", 1},
		{"cert without key", []string{"KQO_TLS=true", "KQO_TLS_CERT_FILE=" + notPEM}, "go together", 1},
		{"key pair not PEM", []string{"KQO_TLS=true", "KQO_TLS_CERT_FILE=" + notPEM, "KQO_TLS_KEY_FILE=" + notPEM}, "do not form a key pair", 1},
		{"TLS not a boolean", []string{"KQO_TLS=yes"}, `KQO_TLS="yes" is not a boolean`, 2},
		{"unknown mechanism", []string{"KQO_SASL_MECHANISM=GSSAPI", "KQO_SASL_USERNAME=alice", "KQO_SASL_PASSWORD=s3cret"}, "GSSAPI", 1},
		{"no password", []string{"KQO_SASL_MECHANISM=SCRAM-SHA-512", "KQO_SASL_USERNAME=alice"}, "KQO_SASL_PASSWORD", 1},
		{"credentials without mechanism", []string{"KQO_SASL_USERNAME=alice", "KQO_SASL_PASSWORD=s3cret"}, "KQO_SASL_MECHANISM", 1},
		{"OAUTHBEARER without a token source", []string{"KQO_SASL_MECHANISM=OAUTHBEARER"}, "--sasl-oauth-token-file", 1},
		{"OAUTHBEARER token file missing", []string{"KQO_SASL_MECHANISM=OAUTHBEARER", "KQO_SASL_OAUTH_TOKEN_FILE=" + filepath.Join(dir, "absent")}, "--sasl-oauth-token-file", 1},
		{"OAUTHBEARER token file and endpoint", []string{"KQO_SASL_MECHANISM=OAUTHBEARER", "KQO_SASL_OAUTH_TOKEN_FILE=" + notPEM,
			"KQO_SASL_OAUTH_TOKEN_ENDPOINT=http://127.0.0.1:1/token"}, "not both", 1},
		{"OAUTHBEARER endpoint without client secret", []string{"KQO_SASL_MECHANISM=OAUTHBEARER", "KQO_SASL_OAUTH_TOKEN_ENDPOINT=http://127.0.0.1:1/token",
			"KQO_SASL_OAUTH_CLIENT_ID=app"}, "KQO_SASL_OAUTH_CLIENT_SECRET", 1},
		{"OAUTHBEARER with a password", []string{"KQO_SASL_MECHANISM=OAUTHBEARER", "KQO_SASL_OAUTH_TOKEN_FILE=" + notPEM, "KQO_SASL_PASSWORD=s3cret"}, "do not apply", 1},
		{"OAuth settings on SCRAM", []string{"KQO_SASL_MECHANISM=SCRAM-SHA-512", "KQO_SASL_USERNAME=alice", "KQO_SASL_PASSWORD=s3cret",
			"KQO_SASL_OAUTH_CLIENT_SECRET=s3cret"}, "apply to OAUTHBEARER only", 1},
		{"AWS_MSK_IAM without credentials", []string{"KQO_SASL_MECHANISM=AWS_MSK_IAM"}, "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set", 1},
		{"AWS_MSK_IAM with web identity only", []string{"KQO_SASL_MECHANISM=AWS_MSK_IAM", "AWS_ROLE_ARN=arn:aws:iam::123456789012:role/kqo",
			"AWS_WEB_IDENTITY_TOKEN_FILE=" + notPEM, "AWS_ENDPOINT_URL_STS=http://127.0.0.1:1"}, "web identity", 1},
		{"AWS_MSK_IAM with a secret key only", []string{"KQO_SASL_MECHANISM=AWS_MSK_IAM", "AWS_SECRET_ACCESS_KEY=s3cret"}, "AWS_ACCESS_KEY_ID", 1},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, "--listen", freeAddr(t), "--metrics-bind-address=0")
		cmd.Env = append(baseEnv(), tc.env...)
		out, err := cmd.CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != tc.code {
			t.Errorf("%s: %v, want exit code %d\n%s", tc.name, err, tc.code, out)
			continue
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: output %q does not say %q", tc.name, out, tc.want)
		}
		if strings.Contains(string(out), "s3cret") {
			t.Errorf("%s: output shows a secret: %q", tc.name, out)
		}
	}
}

// Bug: bad settings were silently replaced (KQO_MAX_DELIVERY_ATTEMPTS=five ran with 5,
// KQO_LEASE=30 or -5s with 30s, KQO_MEMBERS=0 with 4, KQO_MAX_RECORDS likewise) and a
// dead-letter topic equal to the queue's topic was accepted. Each now stops the start with
// exit code 2 and a message naming the variable and what is wrong with its value.
func TestBinaryRefusesBadSettings(t *testing.T) {
	bin := buildBinary(t)
	for _, tc := range []struct {
		name string
		env  []string
		want []string
	}{
		{"attempts not a number", []string{"KQO_MAX_DELIVERY_ATTEMPTS=five"}, []string{`KQO_MAX_DELIVERY_ATTEMPTS="five" is not an integer`}},
		{"attempts zero", []string{"KQO_MAX_DELIVERY_ATTEMPTS=0"}, []string{"KQO_MAX_DELIVERY_ATTEMPTS", "is 0", "at least 1"}},
		{"attempts beyond int32", []string{"KQO_MAX_DELIVERY_ATTEMPTS=4294967297"}, []string{"KQO_MAX_DELIVERY_ATTEMPTS", "at most 2147483647"}},
		{"attempts beyond int", []string{"KQO_MAX_DELIVERY_ATTEMPTS=99999999999999999999"}, []string{`KQO_MAX_DELIVERY_ATTEMPTS="99999999999999999999" is out of range`}},
		{"lease without a unit", []string{"KQO_LEASE=30"}, []string{`KQO_LEASE="30" is not a duration`}},
		{"lease negative", []string{"KQO_LEASE=-5s"}, []string{"KQO_LEASE", "is -5s", "must be positive"}},
		{"lease zero", []string{"KQO_LEASE=0s"}, []string{"KQO_LEASE", "must be positive"}},
		{"members zero", []string{"KQO_MEMBERS=0"}, []string{"KQO_MEMBERS", "is 0", "at least 1"}},
		{"members not a number", []string{"KQO_MEMBERS=four"}, []string{`KQO_MEMBERS="four" is not an integer`}},
		{"members empty", []string{"KQO_MEMBERS="}, []string{`KQO_MEMBERS="" is not an integer`}},
		{"max records zero", []string{"KQO_MAX_RECORDS=0"}, []string{"KQO_MAX_RECORDS", "is 0", "between 1 and 10000"}},
		{"max records negative", []string{"KQO_MAX_RECORDS=-1"}, []string{"KQO_MAX_RECORDS", "between 1 and 10000"}},
		{"max records too many", []string{"KQO_MAX_RECORDS=10001"}, []string{"KQO_MAX_RECORDS", "between 1 and 10000"}},
		{"max records not a number", []string{"KQO_MAX_RECORDS=lots"}, []string{`KQO_MAX_RECORDS="lots" is not an integer`}},
		{"dead letters to the queue", []string{"KQO_DEAD_LETTER_TOPIC=t"}, []string{"KQO_DEAD_LETTER_TOPIC", "KQO_TOPIC", "another topic"}},
		{"all at once", []string{"KQO_MEMBERS=0", "KQO_LEASE=30", "KQO_MAX_DELIVERY_ATTEMPTS=five"}, []string{"KQO_MEMBERS", "KQO_LEASE", "KQO_MAX_DELIVERY_ATTEMPTS"}},
		{"flag zero", []string{"KQO_MEMBERS=2"}, nil}, // with --members=0 below
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		args := []string{"--listen", freeAddr(t), "--metrics-bind-address=0"}
		want := tc.want
		if tc.name == "flag zero" {
			args, want = append(args, "--members=0"), []string{"--members (KQO_MEMBERS) is 0"}
		}
		cmd := exec.CommandContext(ctx, bin, args...)
		// Credentials in the environment must never appear in a message.
		cmd.Env = append(append(baseEnv(), "KQO_SASL_MECHANISM=PLAIN", "KQO_SASL_USERNAME=alice", "KQO_SASL_PASSWORD=s3cret"), tc.env...)
		out, err := cmd.CombinedOutput()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%s: %v, want exit code 2\n%s", tc.name, err, out)
			continue
		}
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("%s: output %q does not say %q", tc.name, out, w)
			}
		}
		if strings.Contains(string(out), "s3cret") {
			t.Errorf("%s: output shows a secret: %q", tc.name, out)
		}
	}
}

// Bug: TLS without KQO_TLS_CA_FILE verifies the brokers against the system roots, which is
// right, but the start line said only "TLS". It now says what the certificates are verified
// against.
func TestStartLineNamesTheTLSRoots(t *testing.T) {
	for _, tc := range []struct {
		cfg  kafka.Config
		want string
	}{
		{kafka.Config{}, "plaintext"},
		{kafka.Config{TLS: &kafka.TLSSettings{}}, "TLS verified against the system roots"},
		{kafka.Config{TLS: &kafka.TLSSettings{CAPEM: []byte("ca"), CertPEM: []byte("c")}}, "mutual TLS verified against the --tls-ca-file bundle"},
		{kafka.Config{TLS: &kafka.TLSSettings{}, SASL: &kafka.SASLSettings{Mechanism: "PLAIN", Password: "s3cret"}}, "TLS verified against the system roots, SASL PLAIN"},
	} {
		if got := describe(tc.cfg); got != tc.want {
			t.Errorf("describe: %q, want %q", got, tc.want)
		}
	}
	// The binary says so on its start line: KQO_TLS=true and an empty KQO_TLS_CA_FILE.
	bin := buildBinary(t)
	cmd := exec.Command(bin, "--listen", freeAddr(t), "--metrics-bind-address=0")
	cmd.Env = append(baseEnv(), "KQO_TLS=true", "KQO_TLS_CA_FILE=")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "(TLS verified against the system roots)") {
		select {
		case err := <-exited:
			t.Fatalf("the binary exited: %v\n%s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no start line naming the system roots:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe to write from the process's copier and read from the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Every mechanism the manager has is built from the sidecar's flags, environment and files:
// SCRAM from the environment, OAUTHBEARER from a token file read at every authentication (a
// rotated token is used by the next connection) or the client-credentials grant, AWS_MSK_IAM
// from the standard AWS variables.
func TestConnectionBuildsEveryMechanism(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("first-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIATEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
	for _, tc := range []struct {
		name string
		sec  security
	}{
		{"SCRAM-SHA-512", security{SASLMechanism: "SCRAM-SHA-512", SASLUsername: "alice", SASLPassword: "pw"}},
		{"OAUTHBEARER", security{SASLMechanism: "OAUTHBEARER", OAuthTokenFile: tokenFile}},
		{"OAUTHBEARER", security{SASLMechanism: "OAUTHBEARER", OAuthTokenEndpoint: "http://127.0.0.1:1/token", OAuthClientID: "app", OAuthClientSecret: "cs", OAuthScope: "kafka"}},
		{"AWS_MSK_IAM", security{SASLMechanism: "AWS_MSK_IAM"}},
	} {
		cfg, err := connection("127.0.0.1:9092", tc.sec)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if err := cfg.SASL.Validate(); err != nil || cfg.SASL.Mechanism != tc.name {
			t.Errorf("%s: mechanism %q, %v", tc.name, cfg.SASL.Mechanism, err)
		}
	}
	cfg, err := connection("127.0.0.1:9092", security{SASLMechanism: "OAUTHBEARER", OAuthTokenFile: tokenFile})
	if err != nil {
		t.Fatal(err)
	}
	// The token source re-reads the file at every authentication.
	for _, tok := range []string{"first-token", "rotated-token"} {
		if tok == "rotated-token" {
			if err := os.WriteFile(tokenFile, []byte(tok), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		got, err := cfg.SASL.Token(context.Background())
		if err != nil || got != tok {
			t.Errorf("token %q, %v; want %s", got, err, tok)
		}
	}
}
