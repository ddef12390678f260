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
	"syscall"
	"testing"
	"time"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
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
// (the members connect in the background), which is all the probes need.
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
			deadline := time.Now().Add(30 * time.Second)
			for {
				code, _ := get(t, "http://"+aux+"/readyz")
				if code == http.StatusOK {
					break
				}
				if code != 0 && code != http.StatusServiceUnavailable {
					t.Fatalf("/readyz answered %d", code)
				}
				if time.Now().After(deadline) {
					_ = cmd.Process.Kill()
					t.Fatalf("/readyz never 200 (last %d)\n%s", code, stderr.String())
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
