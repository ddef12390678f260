package kafka_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// TLSSettings and SASLSettings are the one place PEM bytes and credentials become a
// *tls.Config and a SASL mechanism (the manager and the republisher both use them); a bad
// input is a typed error that never quotes the material.
func TestTLSAndSASLSettings(t *testing.T) {
	ca, err := rig.NewTestCA()
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.ClientCert()
	if err != nil {
		t.Fatal(err)
	}
	other, err := ca.ClientCert()
	if err != nil {
		t.Fatal(err)
	}

	tc, err := kafka.TLSSettings{}.TLSConfig()
	if err != nil || tc.RootCAs != nil || len(tc.Certificates) != 0 || tc.MinVersion != tls.VersionTLS12 {
		t.Errorf("empty settings: %+v %v, want system roots, no client certificate, TLS 1.2+", tc, err)
	}
	tc, err = kafka.TLSSettings{CAPEM: []byte(ca.CertPEM), CertPEM: []byte(client.CertPEM), KeyPEM: []byte(client.KeyPEM), ServerName: "kafka.example.com"}.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "kafka.example.com" {
		t.Errorf("full settings: roots %v, %d certificates, server name %q", tc.RootCAs != nil, len(tc.Certificates), tc.ServerName)
	}

	for _, tc := range []struct {
		name string
		s    kafka.TLSSettings
		want error
	}{
		{"CA not PEM", kafka.TLSSettings{CAPEM: []byte("hello")}, kafka.ErrNoPEMCertificate},
		{"certificate without key", kafka.TLSSettings{CertPEM: []byte(client.CertPEM)}, kafka.ErrKeyPair},
		{"key without certificate", kafka.TLSSettings{KeyPEM: []byte(client.KeyPEM)}, kafka.ErrKeyPair},
		{"mismatched pair", kafka.TLSSettings{CertPEM: []byte(client.CertPEM), KeyPEM: []byte(other.KeyPEM)}, kafka.ErrKeyPair},
	} {
		_, err := tc.s.TLSConfig()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: error %v, want %v", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("%s: the error quotes the key: %v", tc.name, err)
		}
	}

	for _, mech := range []string{kafka.SASLPlain, kafka.SASLScramSHA256, kafka.SASLScramSHA512} {
		m, err := kafka.MechanismOf(kafka.SASLSettings{Mechanism: mech, Username: "alice", Password: "s3cret"})
		if err != nil || m.Name() != mech {
			t.Errorf("%s: mechanism %v, %v", mech, m, err)
		}
	}
	s := kafka.SASLSettings{Mechanism: "GSSAPI", Username: "alice", Password: "s3cret"}
	if _, err := kafka.MechanismOf(s); !errors.Is(err, kafka.ErrUnsupportedMechanism) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("GSSAPI: %v, want ErrUnsupportedMechanism without the password", err)
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(verb, s) + fmt.Sprintf(verb, &kafka.Config{SASL: &s}); strings.Contains(out, "s3cret") || strings.Contains(out, "alice") {
			t.Errorf("%s prints the credentials: %s", verb, out)
		}
		ts := kafka.TLSSettings{KeyPEM: []byte(client.KeyPEM)}
		if out := fmt.Sprintf(verb, ts); strings.Contains(out, "PRIVATE KEY") {
			t.Errorf("%s prints the key: %s", verb, out)
		}
	}
}

// A credential read from a Secret loses its trailing line breaks only (echo adds one).
func TestSecretCredential(t *testing.T) {
	for in, want := range map[string]string{"pw\n": "pw", "pw\r\n": "pw", " p w ": " p w ", "pw\n\n": "pw", "": "", "a\nb": "a\nb"} {
		if got := kafka.SecretCredential(in); got != want {
			t.Errorf("SecretCredential(%q) = %q, want %q", in, got, want)
		}
	}
}
