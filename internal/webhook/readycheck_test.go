package webhook_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafkaqueues/kafka-queue-operator/internal/webhook"
)

// selfSigned writes a serving pair valid from notBefore to notAfter into dir.
func selfSigned(t *testing.T, dir string, notBefore, notAfter time.Time) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "kqo-webhook.kqo-system.svc"},
		DNSNames: []string{"kqo-webhook.kqo-system.svc"}, NotBefore: notBefore, NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk})
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(crt, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// serveTLS answers TLS handshakes on l with pair until the test ends.
func serveTLS(t *testing.T, l net.Listener, pair tls.Certificate) {
	t.Helper()
	tl := tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{pair}})
	t.Cleanup(func() { tl.Close() })
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
}

// The manager's readiness check for the webhook fails until a valid certificate is in CertDir
// and the server answers TLS with a certificate in date.
func TestReadyCheck(t *testing.T) {
	if err := webhook.ReadyCheck(webhook.Options{CertManagement: webhook.CertsOff})(nil); err != nil {
		t.Errorf("webhook off: %v, want ready", err)
	}
	dir := t.TempDir()
	port := freePort(t) // nothing listens until serveTLS below
	check := webhook.ReadyCheck(webhook.Options{CertManagement: webhook.CertsExternal, Host: "127.0.0.1", Port: port, CertDir: dir})
	expect := func(step, want string) {
		t.Helper()
		err := check(nil)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v, want ready", step, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want an error with %q", step, err, want)
		}
	}
	expect("no certificate", "webhook certificate in "+dir)

	now := time.Now()
	good := selfSigned(t, dir, now.Add(-time.Hour), now.Add(time.Hour))
	expect("certificate, nothing serving", "does not answer TLS")

	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	serveTLS(t, l, good)
	expect("serving a valid certificate", "")

	// The files rotated to an expired pair (the server still serves the old one).
	selfSigned(t, dir, now.Add(-2*time.Hour), now.Add(-time.Hour))
	expect("expired certificate in CertDir", "expired at")
	selfSigned(t, dir, now.Add(time.Hour), now.Add(2*time.Hour))
	expect("certificate not yet valid in CertDir", "is not valid before")

	// Valid files, but the server presents an expired certificate.
	l2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	expiredDir := t.TempDir()
	serveTLS(t, l2, selfSigned(t, expiredDir, now.Add(-2*time.Hour), now.Add(-time.Hour)))
	selfSigned(t, dir, now.Add(-time.Hour), now.Add(time.Hour))
	check = webhook.ReadyCheck(webhook.Options{CertManagement: webhook.CertsSelf, Host: "127.0.0.1", Port: l2.Addr().(*net.TCPAddr).Port, CertDir: dir})
	expect("server presents an expired certificate", "serves a certificate that expired at")
}
