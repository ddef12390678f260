package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// OAUTHBEARER's first client message (RFC 7628 section 3.1) carries the token from Token as
// "auth=Bearer <token>"; a Token error fails the authentication without quoting a secret.
func TestOAuthBearerMechanism(t *testing.T) {
	m, err := kafka.MechanismOf(kafka.SASLSettings{Mechanism: kafka.SASLOAuthBearer, Token: kafka.StaticToken("tok-123")})
	if err != nil || m.Name() != "OAUTHBEARER" {
		t.Fatalf("mechanism %v, %v", m, err)
	}
	_, first, err := m.Authenticate(context.Background(), "127.0.0.1:9092")
	if err != nil {
		t.Fatal(err)
	}
	if want := "n,,\x01auth=Bearer tok-123\x01\x01"; string(first) != want {
		t.Errorf("client first message %q, want %q", first, want)
	}
	m, _ = kafka.MechanismOf(kafka.SASLSettings{Mechanism: kafka.SASLOAuthBearer, Token: func(context.Context) (string, error) { return "", errors.New("endpoint down") }})
	if _, _, err := m.Authenticate(context.Background(), "127.0.0.1:9092"); err == nil || !strings.Contains(err.Error(), "OAUTHBEARER token: endpoint down") {
		t.Errorf("token error: %v", err)
	}
	if _, err := kafka.MechanismOf(kafka.SASLSettings{Mechanism: kafka.SASLOAuthBearer}); !errors.Is(err, kafka.ErrMissingCredentials) {
		t.Errorf("OAUTHBEARER without a token source: %v, want ErrMissingCredentials", err)
	}
	if _, err := kafka.MechanismOf(kafka.SASLSettings{Mechanism: kafka.SASLScramSHA512, Username: "alice"}); !errors.Is(err, kafka.ErrMissingCredentials) {
		t.Errorf("SCRAM without a password: %v, want ErrMissingCredentials", err)
	}
}

// The client-credentials grant: HTTP Basic client authentication, grant_type and scope as
// RFC 6749 section 4.4 says; a token is reused until TokenRefreshMargin before it expires and
// fetched again after; a refused client secret is an error naming the endpoint's status and
// OAuth error code, never the secret.
func TestClientCredentialsToken(t *testing.T) {
	ts := rig.StartTokenServer("app", "s3cret-client", "orders-app")
	defer ts.Close()
	tok := kafka.ClientCredentialsToken(kafka.ClientCredentials{TokenEndpoint: ts.URL, ClientID: "app", ClientSecret: "s3cret-client", Scope: "a b"})
	ctx := context.Background()
	first, err := tok(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second, err := tok(ctx); err != nil || second != first || ts.Issued() != 1 {
		t.Errorf("second call: same token %v, err %v, issued %d; want the cached token", second == first, err, ts.Issued())
	}
	if ts.LastScope() != "a b" {
		t.Errorf("scope %q", ts.LastScope())
	}
	// The JWT is the token server's: header alg none, sub claim.
	parts := strings.Split(first, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a JWT", first)
	}

	// A token expiring within the margin is fetched again at every call.
	short := rig.StartTokenServer("app", "s3cret-client", "orders-app")
	defer short.Close()
	short.Lifetime = kafka.TokenRefreshMargin - 10*time.Second
	tok = kafka.ClientCredentialsToken(kafka.ClientCredentials{TokenEndpoint: short.URL, ClientID: "app", ClientSecret: "s3cret-client"})
	for i := 0; i < 3; i++ {
		if _, err := tok(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if short.Issued() != 3 {
		t.Errorf("a token inside the refresh margin was reused: %d fetches for 3 calls", short.Issued())
	}

	bad := kafka.ClientCredentialsToken(kafka.ClientCredentials{TokenEndpoint: ts.URL, ClientID: "app", ClientSecret: "wrong-secret-77"})
	_, err = bad(ctx)
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "invalid_client") || strings.Contains(err.Error(), "wrong-secret-77") {
		t.Errorf("refused secret: %v, want 401 invalid_client without the secret", err)
	}
	cc := kafka.ClientCredentials{TokenEndpoint: ts.URL, ClientID: "app", ClientSecret: "s3cret-client"}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(verb, cc); strings.Contains(out, "s3cret-client") {
			t.Errorf("%s prints the client secret: %s", verb, out)
		}
	}
}

// AWS_MSK_IAM's first client message is the signed JSON payload of the MSK IAM protocol
// (version 2020_10_22, action kafka-cluster:Connect, SigV4 query fields): the access key id
// and region in x-amz-credential, the session token in x-amz-security-token, a signature, and
// never the secret access key. The region comes from an MSK broker host.
func TestAWSMSKIAMPayload(t *testing.T) {
	creds := kafka.AWSCredentials{AccessKeyID: "AKIAEXAMPLE", SecretAccessKey: "aws-secret-key-1", SessionToken: "session-tok-1"}
	m, err := kafka.MechanismOf(kafka.SASLSettings{Mechanism: kafka.SASLAWSMSKIAM, AWS: kafka.StaticAWSCredentials(creds)})
	if err != nil || m.Name() != "AWS_MSK_IAM" {
		t.Fatalf("mechanism %v, %v", m, err)
	}
	const host = "b-1.orders.abc123.c2.kafka.eu-west-1.amazonaws.com"
	_, first, err := m.Authenticate(context.Background(), host+":9098")
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]string
	if err := json.Unmarshal(first, &p); err != nil {
		t.Fatalf("payload %q: %v", first, err)
	}
	if strings.Contains(string(first), "aws-secret-key-1") {
		t.Errorf("the payload carries the secret access key")
	}
	date := time.Now().UTC().Format("20060102")
	for k, want := range map[string]string{
		"version": "2020_10_22", "host": host, "action": "kafka-cluster:Connect", "x-amz-algorithm": "AWS4-HMAC-SHA256",
		"x-amz-credential": "AKIAEXAMPLE/" + date + "/eu-west-1/kafka-cluster/aws4_request", "x-amz-security-token": "session-tok-1",
		"x-amz-signedheaders": "host", "user-agent": "kafka-queue-operator",
	} {
		if p[k] != want {
			t.Errorf("payload %s = %q, want %q", k, p[k], want)
		}
	}
	if len(p["x-amz-signature"]) != 64 || p["x-amz-date"] == "" || p["x-amz-expires"] == "" {
		t.Errorf("payload signature %q, date %q, expires %q", p["x-amz-signature"], p["x-amz-date"], p["x-amz-expires"])
	}
	if _, err := kafka.MechanismOf(kafka.SASLSettings{Mechanism: kafka.SASLAWSMSKIAM}); !errors.Is(err, kafka.ErrMissingCredentials) {
		t.Errorf("AWS_MSK_IAM without credentials: %v, want ErrMissingCredentials", err)
	}
}

// AWSCredentialsFromEnv reads the standard variables at each call and says what is missing;
// with only web identity (IRSA) it goes to STS (webidentity_test.go), here to an endpoint that
// refuses connections, and says it was web identity that failed. An access key wins over web
// identity.
func TestAWSCredentialsFromEnv(t *testing.T) {
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ENDPOINT_URL"} {
		t.Setenv(v, "")
	}
	get := kafka.AWSCredentialsFromEnv()
	if _, err := get(context.Background()); err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set") {
		t.Errorf("empty environment: %v", err)
	}
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("jwt"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/kqo")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", token)
	t.Setenv("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:1")
	if _, err := get(context.Background()); err == nil || !strings.Contains(err.Error(), "web identity") || !strings.Contains(err.Error(), "AssumeRoleWithWebIdentity") {
		t.Errorf("IRSA only, STS unreachable: %v, want a web identity error", err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAENV")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
	t.Setenv("AWS_SESSION_TOKEN", "env-token")
	c, err := get(context.Background())
	if err != nil || c != (kafka.AWSCredentials{AccessKeyID: "AKIAENV", SecretAccessKey: "env-secret", SessionToken: "env-token"}) {
		t.Errorf("credentials %+v, %v", c, err)
	}
}
