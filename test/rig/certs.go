package rig

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"time"
)

// TestCA is a throwaway certificate authority for TLS tests.
type TestCA struct {
	CertPEM string
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
}

// NewTestCA makes a CA valid for a day.
func NewTestCA() (*TestCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kqo test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	return &TestCA{CertPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), cert: cert, key: key}, nil
}

// ServerCert issues a server certificate for 127.0.0.1 and localhost.
func (ca *TestCA) ServerCert() (*TLSMaterial, error) { return ca.issue(x509.ExtKeyUsageServerAuth) }

// ClientCert issues a client certificate (for mutual TLS).
func (ca *TestCA) ClientCert() (*TLSMaterial, error) { return ca.issue(x509.ExtKeyUsageClientAuth) }

func (ca *TestCA) issue(usage x509.ExtKeyUsage) (*TLSMaterial, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &TLSMaterial{
		CertPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})) + ca.CertPEM,
		KeyPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk})),
	}, nil
}

// NewMutualTLS makes a CA, a server certificate whose listener requires client certificates
// signed by it (ClientCAPEM set, for KafkaOptions.TLS) and one such client certificate.
func NewMutualTLS() (ca *TestCA, server, client *TLSMaterial, err error) {
	if ca, err = NewTestCA(); err != nil {
		return nil, nil, nil, err
	}
	if server, err = ca.ServerCert(); err != nil {
		return nil, nil, nil, err
	}
	server.ClientCAPEM = ca.CertPEM
	if client, err = ca.ClientCert(); err != nil {
		return nil, nil, nil, err
	}
	return ca, server, client, nil
}
