package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/aws"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// The SASL mechanisms SASLSettings understands (Kafka's names, as in a KafkaCluster's
// spec.sasl.mechanism and the republisher's --sasl-mechanism).
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
	// SASLOAuthBearer is OAUTHBEARER (KIP-255, RFC 7628); SASLSettings.Token gives the token.
	SASLOAuthBearer = "OAUTHBEARER"
	// SASLAWSMSKIAM is Amazon MSK's IAM access control; SASLSettings.AWS gives the credentials.
	SASLAWSMSKIAM = "AWS_MSK_IAM"
)

// Errors of TLSSettings.TLSConfig and SASLSettings.Mechanism. They never carry the material
// itself; callers say where it came from (a Secret and key, a file).
var (
	// ErrNoPEMCertificate: CAPEM holds no PEM certificate.
	ErrNoPEMCertificate = errors.New("no PEM certificate")
	// ErrKeyPair: CertPEM and KeyPEM do not form a key pair (or only one of them is set).
	ErrKeyPair = errors.New("the certificate and key do not form a key pair")
	// ErrUnsupportedMechanism: the SASL mechanism is not one of the SASL* constants.
	ErrUnsupportedMechanism = errors.New("unsupported SASL mechanism")
	// ErrMissingCredentials: the mechanism's credentials are not all set (a username or
	// password for PLAIN and SCRAM, a token source for OAUTHBEARER, an access key for
	// AWS_MSK_IAM).
	ErrMissingCredentials = errors.New("missing SASL credentials")
)

// TLSSettings are the TLS parts of a connection as PEM bytes and strings, the way they are
// stored (Secrets, mounted files). The manager reads them from a KafkaCluster's
// spec.tls Secrets (controllers/connection.go), the republisher sidecar from the files the
// webhook mounts (cmd/republisher); both turn them into a *tls.Config here and nowhere else.
type TLSSettings struct {
	// CAPEM is a PEM bundle of CAs the brokers' certificates must chain to (spec.tls.caSecretRef).
	// Empty: the system roots.
	CAPEM []byte
	// CertPEM and KeyPEM are the client certificate (chain) and its private key presented for
	// mutual TLS (spec.tls.clientCert's certKey and keyKey, tls.crt and tls.key by default).
	// Both or neither.
	CertPEM, KeyPEM []byte
	// ServerName, when set, is the name checked against the brokers' certificates instead of
	// the host of each address (spec.tls.serverName).
	ServerName string
}

// TLSConfig builds the client configuration: TLS 1.2 or later, RootCAs from CAPEM (system
// roots when empty), the client pair when CertPEM or KeyPEM is set, ServerName. Errors wrap
// ErrNoPEMCertificate or ErrKeyPair and contain no key material.
func (s TLSSettings) TLSConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.ServerName}
	if len(s.CAPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(s.CAPEM) {
			return nil, fmt.Errorf("CA bundle: %w", ErrNoPEMCertificate)
		}
		tc.RootCAs = pool
	}
	if len(s.CertPEM) > 0 || len(s.KeyPEM) > 0 {
		pair, err := tls.X509KeyPair(s.CertPEM, s.KeyPEM)
		if err != nil {
			// tls.X509KeyPair's messages never quote the PEM, but keep ours fixed anyway.
			return nil, fmt.Errorf("client certificate: %w", ErrKeyPair)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// SASLSettings are SASL credentials. Mechanism is one of the SASL* constants
// (spec.sasl.mechanism). PLAIN and SCRAM use Username and Password (from spec.sasl.secretName,
// or a literal spec.sasl.username); OAUTHBEARER calls Token for every new connection and
// re-authentication; AWS_MSK_IAM calls AWS likewise. The manager reads the Secrets; the sidecar
// gets the same values as environment variables resolved by the kubelet or as mounted files.
type SASLSettings struct {
	Mechanism, Username, Password string
	// Token returns the OAUTHBEARER bearer token (see StaticToken, TokenFile and
	// ClientCredentialsToken). Its errors must not contain the token or a client secret.
	Token func(ctx context.Context) (string, error)
	// AWS returns AWS_MSK_IAM credentials (see StaticAWSCredentials, AWSCredentialsFromEnv
	// and WebIdentityCredentials).
	AWS func(ctx context.Context) (AWSCredentials, error)
}

// AWSCredentials are an AWS access key, with a session token for temporary credentials.
type AWSCredentials struct {
	AccessKeyID, SecretAccessKey, SessionToken string
}

// Validate checks that the settings name a supported mechanism with the credentials it needs:
// an unknown mechanism wraps ErrUnsupportedMechanism, missing credentials
// ErrMissingCredentials; the credentials never appear in an error. NewClient checks the same.
func (s SASLSettings) Validate() error {
	_, err := s.mechanism(nil)
	return err
}

// authFailures remembers the last failure to obtain SASL credentials (a token endpoint that
// does not answer, AWS credentials that cannot be read) until the next success: franz-go
// retries such a connection until the request's deadline and then reports only the deadline.
type authFailures struct {
	mu  sync.Mutex
	err error
}

// record notes one attempt's outcome (nil: success). A nil *authFailures records nothing.
func (a *authFailures) record(err error) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.err = err
}

func (a *authFailures) last() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// mechanism builds the franz-go mechanism (errors as Validate's).
func (s SASLSettings) mechanism(af *authFailures) (sasl.Mechanism, error) {
	switch s.Mechanism {
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if s.Username == "" || s.Password == "" {
			return nil, fmt.Errorf("%s needs a username and a password: %w", s.Mechanism, ErrMissingCredentials)
		}
	}
	switch s.Mechanism {
	case SASLPlain:
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism(), nil
	case SASLScramSHA256:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism(), nil
	case SASLScramSHA512:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism(), nil
	case SASLOAuthBearer:
		if s.Token == nil {
			return nil, fmt.Errorf("%s needs a token source: %w", s.Mechanism, ErrMissingCredentials)
		}
		token := s.Token
		return oauth.Oauth(func(ctx context.Context) (oauth.Auth, error) {
			t, err := token(ctx)
			if err != nil {
				err = fmt.Errorf("OAUTHBEARER token: %w", err)
			}
			af.record(err)
			return oauth.Auth{Token: t}, err
		}), nil
	case SASLAWSMSKIAM:
		if s.AWS == nil {
			return nil, fmt.Errorf("%s needs AWS credentials: %w", s.Mechanism, ErrMissingCredentials)
		}
		creds := s.AWS
		return aws.ManagedStreamingIAM(func(ctx context.Context) (aws.Auth, error) {
			c, err := creds(ctx)
			if err != nil {
				err = fmt.Errorf("AWS_MSK_IAM credentials: %w", err)
				af.record(err)
				return aws.Auth{}, err
			}
			af.record(nil)
			return aws.Auth{AccessKey: c.AccessKeyID, SecretKey: c.SecretAccessKey, SessionToken: c.SessionToken, UserAgent: "kafka-queue-operator"}, nil
		}), nil
	default:
		return nil, fmt.Errorf("%w %q (want %s, %s, %s, %s or %s)", ErrUnsupportedMechanism, s.Mechanism,
			SASLPlain, SASLScramSHA256, SASLScramSHA512, SASLOAuthBearer, SASLAWSMSKIAM)
	}
}

// SecretCredential is a SASL username or password as read from a Secret key (or the
// environment variable a Pod gets from one) with its trailing line breaks removed: a Secret
// made with `echo pw | base64` or `kubectl create secret --from-file` of a file ending in a
// newline carries one, and no PLAIN or SCRAM credential ends in one. Other whitespace is
// kept: it may be part of a password.
func SecretCredential(b string) string { return strings.TrimRight(b, "\r\n") }

// StaticToken is a Token function returning tok.
func StaticToken(tok string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) { return tok, nil }
}

// TokenFile is a Token function reading the token from path at every authentication, so a
// token rotated in a mounted Secret is picked up (surrounding whitespace is trimmed). An
// error names the path, never the content.
func TokenFile(path string) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", fmt.Errorf("token file %s is empty", path)
		}
		return t, nil
	}
}

// TokenRefreshMargin is how long before its expiry a client-credentials token is fetched
// again.
const TokenRefreshMargin = 30 * time.Second

// ClientCredentials is the OAuth 2.0 client-credentials grant (RFC 6749 section 4.4).
type ClientCredentials struct {
	// TokenEndpoint is the token endpoint's URL.
	TokenEndpoint string
	// ClientID and ClientSecret authenticate the client (HTTP Basic).
	ClientID, ClientSecret string
	// Scope is the space-separated scope requested; empty: none.
	Scope string
}

// String hides the client secret.
func (c ClientCredentials) String() string {
	return fmt.Sprintf("client credentials of %q at %s (secret hidden)", c.ClientID, c.TokenEndpoint)
}

// GoString hides the client secret from %#v too.
func (c ClientCredentials) GoString() string { return c.String() }

// ClientCredentialsToken is a Token function for the client-credentials grant: the first call
// fetches a token, later calls reuse it until TokenRefreshMargin before its expiry (the token
// response's expires_in; a token without one is fetched again each time). Calls are
// serialised by the token source. An error says what the endpoint answered (its status and
// OAuth error code), never the client secret.
func ClientCredentialsToken(cc ClientCredentials) func(context.Context) (string, error) {
	cfg := &clientcredentials.Config{ClientID: cc.ClientID, ClientSecret: cc.ClientSecret, TokenURL: cc.TokenEndpoint,
		Scopes: strings.Fields(cc.Scope), AuthStyle: oauth2.AuthStyleInHeader}
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, &http.Client{Timeout: 15 * time.Second})
	// cfg.Token fetches every time; the reuse source caches with our margin (cfg.TokenSource
	// would cache too, with oauth2's 10s margin, which would win).
	src := oauth2.ReuseTokenSourceWithExpiry(nil, fetchFunc(func() (*oauth2.Token, error) { return cfg.Token(ctx) }), TokenRefreshMargin)
	return func(context.Context) (string, error) {
		t, err := src.Token()
		if err != nil {
			var re *oauth2.RetrieveError
			if errors.As(err, &re) {
				msg := fmt.Sprintf("token endpoint %s answered %s", cc.TokenEndpoint, re.Response.Status)
				if re.ErrorCode != "" {
					msg += " (" + re.ErrorCode + ")"
				}
				return "", errors.New(msg)
			}
			return "", fmt.Errorf("token endpoint %s: %w", cc.TokenEndpoint, err)
		}
		if t.AccessToken == "" {
			return "", fmt.Errorf("token endpoint %s returned no access_token", cc.TokenEndpoint)
		}
		return t.AccessToken, nil
	}
}

type fetchFunc func() (*oauth2.Token, error)

func (f fetchFunc) Token() (*oauth2.Token, error) { return f() }

// StaticAWSCredentials is an AWS function returning c.
func StaticAWSCredentials(c AWSCredentials) func(context.Context) (AWSCredentials, error) {
	return func(context.Context) (AWSCredentials, error) { return c, nil }
}

// AWSCredentialsFromEnv is an AWS function following the AWS SDKs' environment credential
// chain at every authentication:
//
//   - AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN (optional) when the
//     first two are set;
//   - otherwise, when AWS_ACCESS_KEY_ID is absent and AWS_ROLE_ARN and
//     AWS_WEB_IDENTITY_TOKEN_FILE are set (what IRSA, EKS IAM roles for service accounts,
//     injects): STS AssumeRoleWithWebIdentity (see WebIdentityCredentials), with
//     AWS_ROLE_SESSION_NAME and the endpoint of STSEndpointFromEnv; the temporary
//     credentials are cached process-wide per role, token file, session name and endpoint,
//     and fetched again WebIdentityRefreshMargin before they expire, the token file being
//     read again each time.
//
// Without either it says what is missing. EKS Pod Identity
// (AWS_CONTAINER_CREDENTIALS_FULL_URI), profiles and instance metadata are not read.
func AWSCredentialsFromEnv() func(context.Context) (AWSCredentials, error) {
	return func(ctx context.Context) (AWSCredentials, error) {
		c := AWSCredentials{AccessKeyID: os.Getenv("AWS_ACCESS_KEY_ID"), SecretAccessKey: os.Getenv("AWS_SECRET_ACCESS_KEY"), SessionToken: os.Getenv("AWS_SESSION_TOKEN")}
		if c.AccessKeyID != "" && c.SecretAccessKey != "" {
			return c, nil
		}
		role, tokenFile := os.Getenv("AWS_ROLE_ARN"), os.Getenv("AWS_WEB_IDENTITY_TOKEN_FILE")
		if c.AccessKeyID == "" && (role != "" || tokenFile != "") {
			if role == "" || tokenFile == "" {
				return AWSCredentials{}, errors.New("AWS_ACCESS_KEY_ID is not set and web identity needs both AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE, one of them is not set")
			}
			creds, err := webIdentityFromEnv(role, tokenFile)(ctx)
			if err != nil {
				return AWSCredentials{}, fmt.Errorf("web identity (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE): %w", err)
			}
			return creds, nil
		}
		return AWSCredentials{}, errors.New("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set in the environment (nor AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE for web identity)")
	}
}

// String names the mechanism only: a logged SASLSettings never shows the credentials.
func (s SASLSettings) String() string { return "SASL " + s.Mechanism + " (credentials hidden)" }

// GoString hides the credentials from %#v too.
func (s SASLSettings) GoString() string { return s.String() }

// String says which parts are set: a logged TLSSettings never shows the key.
func (s TLSSettings) String() string {
	return fmt.Sprintf("TLS (CA %t, client certificate %t, server name %q)", len(s.CAPEM) > 0, len(s.CertPEM) > 0, s.ServerName)
}

// GoString hides the key from %#v too.
func (s TLSSettings) GoString() string { return s.String() }
