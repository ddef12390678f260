package kafka_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// fakeSTS stands in for STS's Query API: it records each AssumeRoleWithWebIdentity form and
// answers with numbered credentials expiring after lifetime, or with an ErrorResponse.
type fakeSTS struct {
	*httptest.Server
	mu       sync.Mutex
	lifetime time.Duration
	errCode  string // set: answer 400 with this code
	calls    []fakeSTSCall
}

type fakeSTSCall struct {
	method, rawQuery string
	form             map[string]string
}

func startFakeSTS(t *testing.T, lifetime time.Duration) *fakeSTS {
	f := &fakeSTS{lifetime: lifetime}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		call := fakeSTSCall{method: r.Method, rawQuery: r.URL.RawQuery, form: map[string]string{}}
		for k := range r.PostForm {
			call.form[k] = r.PostForm.Get(k)
		}
		f.mu.Lock()
		f.calls = append(f.calls, call)
		n, lifetime, code := len(f.calls), f.lifetime, f.errCode
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/xml")
		if code != "" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <Error><Type>Sender</Type><Code>%s</Code><Message>Token rejected for this role</Message></Error>
  <RequestId>req-%d</RequestId>
</ErrorResponse>`, code, n)
			return
		}
		fmt.Fprintf(w, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>system:serviceaccount:shop:orders</SubjectFromWebIdentityToken>
    <AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/kqo/s</Arn><AssumedRoleId>AROA:s</AssumedRoleId></AssumedRoleUser>
    <Credentials>
      <SessionToken>sts-session-%d</SessionToken>
      <SecretAccessKey>sts-secret-%d</SecretAccessKey>
      <Expiration>%s</Expiration>
      <AccessKeyId>ASIAWEBID%d</AccessKeyId>
    </Credentials>
    <Audience>sts.amazonaws.com</Audience>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>req-%d</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>`, n, n, time.Now().Add(lifetime).UTC().Format(time.RFC3339), n, n)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeSTS) Calls() []fakeSTSCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeSTSCall(nil), f.calls...)
}

// irsaEnv sets the environment IRSA gives a Pod, pointing STS at f, and returns the token
// file's path.
func irsaEnv(t *testing.T, f *fakeSTS, token string) string {
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ROLE_SESSION_NAME",
		"AWS_ENDPOINT_URL", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_REGION", "AWS_DEFAULT_REGION"} {
		t.Setenv(v, "")
	}
	path := filepath.Join(t.TempDir(), "token")
	writeToken(t, path, token)
	t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/kqo")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", path)
	t.Setenv("AWS_ENDPOINT_URL_STS", f.URL)
	return path
}

func writeToken(t *testing.T, path, token string) {
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// mskFirstMessage authenticates m against an MSK broker host and returns the payload.
func mskFirstMessage(t *testing.T, settings kafka.SASLSettings) map[string]string {
	t.Helper()
	m, err := kafka.MechanismOf(settings)
	if err != nil {
		t.Fatal(err)
	}
	_, first, err := m.Authenticate(context.Background(), "b-1.orders.abc123.c2.kafka.eu-west-1.amazonaws.com:9098")
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]string
	if err := json.Unmarshal(first, &p); err != nil {
		t.Fatalf("payload %q: %v", first, err)
	}
	for _, v := range p {
		if strings.Contains(v, "sts-secret-") {
			t.Errorf("the payload carries the secret access key")
		}
	}
	return p
}

// IRSA: with AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE and no access key, the env chain
// posts AssumeRoleWithWebIdentity (Action, Version, RoleArn, the token file's content, a
// default session name) in the body, signs the MSK IAM payload with the returned temporary
// credentials, and reuses them: two authentications, one STS call.
func TestWebIdentityFromEnv(t *testing.T) {
	sts := startFakeSTS(t, time.Hour)
	irsaEnv(t, sts, "jwt-first")
	settings := kafka.SASLSettings{Mechanism: kafka.SASLAWSMSKIAM, AWS: kafka.AWSCredentialsFromEnv()}
	date := time.Now().UTC().Format("20060102")
	for i := 0; i < 2; i++ {
		p := mskFirstMessage(t, settings)
		if want := "ASIAWEBID1/" + date + "/eu-west-1/kafka-cluster/aws4_request"; p["x-amz-credential"] != want {
			t.Errorf("authentication %d: x-amz-credential %q, want %q", i, p["x-amz-credential"], want)
		}
		if p["x-amz-security-token"] != "sts-session-1" {
			t.Errorf("authentication %d: x-amz-security-token %q, want the STS session token", i, p["x-amz-security-token"])
		}
	}
	// A second AWSCredentialsFromEnv (the manager builds its settings again at each probe)
	// shares the cache.
	if c, err := kafka.AWSCredentialsFromEnv()(context.Background()); err != nil || c.AccessKeyID != "ASIAWEBID1" {
		t.Errorf("second function: %+v, %v", c, err)
	}
	calls := sts.Calls()
	if len(calls) != 1 {
		t.Fatalf("%d STS calls for three uses of credentials valid an hour, want 1", len(calls))
	}
	c := calls[0]
	if c.method != http.MethodPost || c.rawQuery != "" {
		t.Errorf("request %s with query %q, want a POST with the parameters in the body only", c.method, c.rawQuery)
	}
	for k, want := range map[string]string{"Action": "AssumeRoleWithWebIdentity", "Version": "2011-06-15",
		"RoleArn": "arn:aws:iam::123456789012:role/kqo", "WebIdentityToken": "jwt-first"} {
		if c.form[k] != want {
			t.Errorf("%s = %q, want %q", k, c.form[k], want)
		}
	}
	if !strings.HasPrefix(c.form["RoleSessionName"], "kafka-queue-operator-") {
		t.Errorf("RoleSessionName %q, want the default kafka-queue-operator-<unix time>", c.form["RoleSessionName"])
	}
	if _, ok := c.form["DurationSeconds"]; ok {
		t.Errorf("DurationSeconds sent without a duration: %q", c.form["DurationSeconds"])
	}
}

// Credentials expiring within WebIdentityRefreshMargin are fetched again, with the token file
// read again (the kubelet rotates the projected token) and AWS_ROLE_SESSION_NAME as the
// session name.
func TestWebIdentityRefresh(t *testing.T) {
	sts := startFakeSTS(t, kafka.WebIdentityRefreshMargin-time.Minute)
	path := irsaEnv(t, sts, "jwt-first")
	t.Setenv("AWS_ROLE_SESSION_NAME", "orders-sidecar")
	settings := kafka.SASLSettings{Mechanism: kafka.SASLAWSMSKIAM, AWS: kafka.AWSCredentialsFromEnv()}
	if p := mskFirstMessage(t, settings); p["x-amz-security-token"] != "sts-session-1" {
		t.Errorf("first session token %q", p["x-amz-security-token"])
	}
	writeToken(t, path, "jwt-rotated")
	p := mskFirstMessage(t, settings)
	if !strings.HasPrefix(p["x-amz-credential"], "ASIAWEBID2/") || p["x-amz-security-token"] != "sts-session-2" {
		t.Errorf("after expiry: credential %q, session token %q, want the second STS answer", p["x-amz-credential"], p["x-amz-security-token"])
	}
	calls := sts.Calls()
	if len(calls) != 2 {
		t.Fatalf("%d STS calls, want 2 (credentials inside the refresh margin are fetched again)", len(calls))
	}
	if calls[0].form["WebIdentityToken"] != "jwt-first" || calls[1].form["WebIdentityToken"] != "jwt-rotated" {
		t.Errorf("tokens sent %q then %q, want the file's content at each call", calls[0].form["WebIdentityToken"], calls[1].form["WebIdentityToken"])
	}
	for i, c := range calls {
		if c.form["RoleSessionName"] != "orders-sidecar" {
			t.Errorf("call %d: RoleSessionName %q, want AWS_ROLE_SESSION_NAME", i, c.form["RoleSessionName"])
		}
	}
}

// An STS ErrorResponse is an error naming its code and message, never the token; through the
// mechanism it fails the authentication.
func TestWebIdentitySTSError(t *testing.T) {
	sts := startFakeSTS(t, time.Hour)
	sts.mu.Lock()
	sts.errCode = "InvalidIdentityToken"
	sts.mu.Unlock()
	irsaEnv(t, sts, "jwt-secret-value-42")
	_, err := kafka.AWSCredentialsFromEnv()(context.Background())
	if err == nil || !strings.Contains(err.Error(), "InvalidIdentityToken") || !strings.Contains(err.Error(), "Token rejected for this role") ||
		!strings.Contains(err.Error(), "arn:aws:iam::123456789012:role/kqo") || strings.Contains(err.Error(), "jwt-secret-value-42") {
		t.Errorf("STS error: %v, want the code, message and role without the token", err)
	}
	m, _ := kafka.MechanismOf(kafka.SASLSettings{Mechanism: kafka.SASLAWSMSKIAM, AWS: kafka.AWSCredentialsFromEnv()})
	_, _, err = m.Authenticate(context.Background(), "b-1.orders.abc123.c2.kafka.eu-west-1.amazonaws.com:9098")
	if err == nil || !strings.Contains(err.Error(), "AWS_MSK_IAM credentials") || !strings.Contains(err.Error(), "InvalidIdentityToken") ||
		strings.Contains(err.Error(), "jwt-secret-value-42") {
		t.Errorf("authentication: %v", err)
	}
	// A missing token file names the file.
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", filepath.Join(t.TempDir(), "absent"))
	if _, err := kafka.AWSCredentialsFromEnv()(context.Background()); err == nil || !strings.Contains(err.Error(), "absent") {
		t.Errorf("missing token file: %v", err)
	}
	// Half of the web identity settings.
	t.Setenv("AWS_ROLE_ARN", "")
	if _, err := kafka.AWSCredentialsFromEnv()(context.Background()); err == nil || !strings.Contains(err.Error(), "AWS_ROLE_ARN") {
		t.Errorf("token file without role: %v", err)
	}
}

// WebIdentityCredentials sends DurationSeconds when asked and, when a refresh fails while the
// cached credentials have not yet expired, keeps using them.
func TestWebIdentityCredentials(t *testing.T) {
	sts := startFakeSTS(t, kafka.WebIdentityRefreshMargin-time.Minute)
	path := filepath.Join(t.TempDir(), "token")
	writeToken(t, path, "jwt-x")
	get := kafka.WebIdentityCredentials(kafka.WebIdentity{RoleARN: "arn:aws:iam::123456789012:role/kqo", TokenFile: path,
		SessionName: "s", Endpoint: sts.URL, Duration: 900 * time.Second})
	first, err := get(context.Background())
	if err != nil || first.AccessKeyID != "ASIAWEBID1" || first.SecretAccessKey != "sts-secret-1" || first.SessionToken != "sts-session-1" {
		t.Fatalf("credentials %+v, %v", first, err)
	}
	sts.mu.Lock()
	sts.errCode = "RegionDisabledException"
	sts.mu.Unlock()
	if again, err := get(context.Background()); err != nil || again != first {
		t.Errorf("failed refresh before expiry: %+v, %v; want the cached credentials", again, err)
	}
	calls := sts.Calls()
	if len(calls) != 2 || calls[0].form["DurationSeconds"] != "900" {
		t.Errorf("%d calls, DurationSeconds %q; want 2 calls and 900", len(calls), calls[0].form["DurationSeconds"])
	}
}

// The STS endpoint as the AWS SDKs resolve it: AWS_ENDPOINT_URL_STS, AWS_ENDPOINT_URL (unless
// ignored), the regional endpoint, the global one.
func TestSTSEndpointFromEnv(t *testing.T) {
	for _, v := range []string{"AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_REGION", "AWS_DEFAULT_REGION"} {
		t.Setenv(v, "")
	}
	check := func(want string) {
		t.Helper()
		if got := kafka.STSEndpointFromEnv(); got != want {
			t.Errorf("endpoint %q, want %q", got, want)
		}
	}
	check("https://sts.amazonaws.com")
	t.Setenv("AWS_DEFAULT_REGION", "us-east-2")
	check("https://sts.us-east-2.amazonaws.com")
	t.Setenv("AWS_REGION", "eu-west-1")
	check("https://sts.eu-west-1.amazonaws.com")
	t.Setenv("AWS_REGION", "cn-north-1")
	check("https://sts.cn-north-1.amazonaws.com.cn")
	t.Setenv("AWS_ENDPOINT_URL", "http://localstack:4566")
	check("http://localstack:4566")
	t.Setenv("AWS_ENDPOINT_URL_STS", "https://sts-vpce.example")
	check("https://sts-vpce.example")
	t.Setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
	check("https://sts.cn-north-1.amazonaws.com.cn")
}
