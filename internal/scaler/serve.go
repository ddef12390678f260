package scaler

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/kafkaqueues/kafka-queue-operator/internal/scaler/externalscaler"
)

// The files of a certificate directory (Kubernetes TLS Secret keys, cert-manager's too).
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
	// CAFile, when present, makes the server require client certificates signed by it
	// (KEDA's tlsClientCert/tlsClientKey).
	CAFile = "ca.crt"
)

// Runnable serves the scaler on the leader: a standby has no depth rounds to answer from.
// OnServing runs once the listener is bound (the manager labels its Pod so the scaler's
// Service selects the leader only).
type Runnable struct {
	Server      *Server
	BindAddress string
	// CertDir holds tls.crt and tls.key (reloaded when they change) and optionally ca.crt;
	// empty serves without TLS.
	CertDir   string
	OnServing func(context.Context) error
	// listening is closed once the listener is bound (tests).
	Listening chan net.Addr
}

// NeedLeaderElection: only the leader polls depth.
func (r *Runnable) NeedLeaderElection() bool { return true }

// Start serves until ctx ends.
func (r *Runnable) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("keda-scaler")
	var opts []grpc.ServerOption
	if r.CertDir != "" {
		cfg, err := r.tlsConfig(ctx)
		if err != nil {
			return err
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	lis, err := net.Listen("tcp", r.BindAddress)
	if err != nil {
		return fmt.Errorf("--keda-scaler-bind-address %s: %w", r.BindAddress, err)
	}
	srv := grpc.NewServer(opts...)
	externalscaler.RegisterExternalScalerServer(srv, r.Server)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	logger.Info("serving KEDA's external scaler API", "address", lis.Addr().String(), "tls", r.CertDir != "")
	if r.Listening != nil {
		r.Listening <- lis.Addr()
	}
	if r.OnServing != nil {
		// Retried until it takes: without the mark the scaler's Service selects no Pod.
		go func() {
			for delay := time.Second; ; delay = min(2*delay, 30*time.Second) {
				err := r.OnServing(ctx)
				if err == nil {
					return
				}
				logger.Error(err, "marking this manager as the scaler's endpoint; retrying", "in", delay)
				select {
				case <-ctx.Done():
					return
				case <-time.After(delay):
				}
			}
		}()
	}
	select {
	case <-ctx.Done():
		// Not GracefulStop: KEDA keeps StreamIsActive streams open, which would hold the
		// manager's shutdown (and its lease) for the whole grace period. KEDA reconnects.
		hs.Shutdown()
		srv.Stop()
		return nil
	case err := <-done:
		return err
	}
}

// CheckCertDir loads a certificate directory as Start will, so a manager with unusable
// files fails at start, not once it is elected (a standby would report ready and then exit).
func CheckCertDir(dir string) error {
	if _, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile)); err != nil {
		return fmt.Errorf("--keda-scaler-cert-dir %s: %w", dir, err)
	}
	ca, err := os.ReadFile(filepath.Join(dir, CAFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("--keda-scaler-cert-dir: %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(ca) {
		return fmt.Errorf("--keda-scaler-cert-dir: %s holds no PEM certificate", filepath.Join(dir, CAFile))
	}
	return nil
}

// tlsConfig serves tls.crt/tls.key from CertDir, reloaded on change, and requires client
// certificates signed by ca.crt when that file exists.
func (r *Runnable) tlsConfig(ctx context.Context) (*tls.Config, error) {
	w, err := certwatcher.New(filepath.Join(r.CertDir, CertFile), filepath.Join(r.CertDir, KeyFile))
	if err != nil {
		return nil, fmt.Errorf("--keda-scaler-cert-dir %s: %w", r.CertDir, err)
	}
	go func() {
		if err := w.Start(ctx); err != nil {
			log.FromContext(ctx).Error(err, "watching the KEDA scaler's certificate")
		}
	}()
	base := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: w.GetCertificate}
	caFile := filepath.Join(r.CertDir, CAFile)
	// ca.crt is read at every handshake (KEDA keeps its connections, so handshakes are few):
	// adding, rotating or removing it in the Secret takes effect without a restart.
	clientAuth := func() (*tls.Config, error) {
		ca, err := os.ReadFile(caFile)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return base, nil
		case err != nil:
			return nil, fmt.Errorf("--keda-scaler-cert-dir: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("--keda-scaler-cert-dir: %s holds no PEM certificate", caFile)
		}
		cfg := base.Clone()
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
		return cfg, nil
	}
	// A bad ca.crt at start is an error at once; later, it refuses the handshake.
	if _, err := clientAuth(); err != nil {
		return nil, err
	}
	cfg := base.Clone()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return clientAuth() }
	return cfg, nil
}
