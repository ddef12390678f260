package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The SASL mechanisms SASLSettings understands (Kafka's names, as in a KafkaCluster's
// spec.sasl.mechanism and the republisher's --sasl-mechanism).
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// Errors of TLSSettings.TLSConfig and SASLSettings.Mechanism. They never carry the material
// itself; callers say where it came from (a Secret and key, a file).
var (
	// ErrNoPEMCertificate: CAPEM holds no PEM certificate.
	ErrNoPEMCertificate = errors.New("no PEM certificate")
	// ErrKeyPair: CertPEM and KeyPEM do not form a key pair (or only one of them is set).
	ErrKeyPair = errors.New("the certificate and key do not form a key pair")
	// ErrUnsupportedMechanism: the SASL mechanism is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	ErrUnsupportedMechanism = errors.New("unsupported SASL mechanism")
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
	// mutual TLS (tls.crt and tls.key of spec.tls.clientCertSecretName). Both or neither.
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

// SASLSettings are SASL credentials: Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
// (spec.sasl.mechanism), Username and Password come from the "username" and "password" keys of
// spec.sasl.secretName (the manager reads the Secret; the sidecar gets them as environment
// variables resolved by the kubelet).
type SASLSettings struct {
	Mechanism, Username, Password string
}

// SASLMechanism builds the franz-go mechanism. An unknown mechanism wraps
// ErrUnsupportedMechanism; the credentials never appear in an error.
func (s SASLSettings) SASLMechanism() (sasl.Mechanism, error) {
	switch s.Mechanism {
	case SASLPlain:
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism(), nil
	case SASLScramSHA256:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism(), nil
	case SASLScramSHA512:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism(), nil
	default:
		return nil, fmt.Errorf("%w %q (want %s, %s or %s)", ErrUnsupportedMechanism, s.Mechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512)
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
