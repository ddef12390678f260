package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// secretError is a missing Secret or key; the KafkaCluster reports it as SecretNotFound.
type secretError struct {
	msg     string
	invalid bool // the Secret exists but its content is unusable
}

func (e *secretError) Error() string { return e.msg }

// clusterKey is the pool key of a KafkaCluster.
func clusterKey(kc *kqv1.KafkaCluster) string { return kc.Namespace + "/" + kc.Name }

// clientFor returns the pooled client of a KafkaCluster, rebuilding it when the connection
// settings or the content of a referenced Secret changed. Secret values never leave this
// function except inside the client's configuration (never in errors, logs or status).
func clientFor(ctx context.Context, secrets client.Reader, pool *kafka.Pool, kc *kqv1.KafkaCluster) (*kafka.Client, error) {
	h := sha256.New()
	fmt.Fprintf(h, "bootstrap=%s\n", strings.Join(kc.Spec.BootstrapServers, ","))
	cfg := kafka.Config{BootstrapServers: kc.Spec.BootstrapServers}

	getKey := func(name, key string) ([]byte, error) {
		var s corev1.Secret
		if err := secrets.Get(ctx, types.NamespacedName{Namespace: kc.Namespace, Name: name}, &s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, &secretError{msg: fmt.Sprintf("Secret %s/%s not found", kc.Namespace, name)}
			}
			return nil, fmt.Errorf("reading Secret %s/%s: %w", kc.Namespace, name, err)
		}
		v, ok := s.Data[key]
		if !ok {
			return nil, &secretError{msg: fmt.Sprintf("Secret %s/%s has no key %q", kc.Namespace, name, key)}
		}
		return v, nil
	}

	// The TLS and SASL settings are turned into a *tls.Config and a SASL mechanism by
	// internal/kafka (the republisher sidecar uses the same code); each part is checked as
	// soon as it is read, so the first problem found is the one reported.
	if t := kc.Spec.TLS; t != nil {
		ts := kafka.TLSSettings{ServerName: t.ServerName}
		fmt.Fprintf(h, "tls servername=%s\n", t.ServerName)
		if t.CASecretRef != nil {
			ca, err := getKey(t.CASecretRef.Name, t.CASecretRef.Key)
			if err != nil {
				return nil, err
			}
			if _, err := (kafka.TLSSettings{CAPEM: ca}).TLSConfig(); err != nil {
				return nil, &secretError{msg: fmt.Sprintf("Secret %s/%s key %q holds no PEM certificate", kc.Namespace, t.CASecretRef.Name, t.CASecretRef.Key), invalid: true}
			}
			ts.CAPEM = ca
			h.Write(ca)
		}
		if t.ClientCertSecretName != "" {
			crt, err := getKey(t.ClientCertSecretName, corev1.TLSCertKey)
			if err != nil {
				return nil, err
			}
			key, err := getKey(t.ClientCertSecretName, corev1.TLSPrivateKeyKey)
			if err != nil {
				return nil, err
			}
			ts.CertPEM, ts.KeyPEM = crt, key
			if _, err := ts.TLSConfig(); err != nil {
				return nil, &secretError{msg: fmt.Sprintf("Secret %s/%s: tls.crt/tls.key do not form a key pair", kc.Namespace, t.ClientCertSecretName), invalid: true}
			}
			h.Write(crt)
			h.Write(key)
		}
		cfg.TLS = &ts
	}
	if s := kc.Spec.SASL; s != nil {
		user, err := getKey(s.SecretName, "username")
		if err != nil {
			return nil, err
		}
		pass, err := getKey(s.SecretName, "password")
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(h, "sasl=%s\n", s.Mechanism)
		h.Write(user)
		h.Write(pass)
		ss := kafka.SASLSettings{Mechanism: string(s.Mechanism), Username: string(user), Password: string(pass)}
		if _, err := ss.SASLMechanism(); err != nil {
			return nil, fmt.Errorf("sasl.mechanism %q is not supported", s.Mechanism)
		}
		cfg.SASL = &ss
	}
	fp := hex.EncodeToString(h.Sum(nil))
	return pool.Get(clusterKey(kc), fp, func() (kafka.Config, error) { return cfg, nil })
}

// pooledClientFor returns the KafkaCluster's client from the pool, where the KafkaCluster
// reconciler keeps it current (rebuilt when settings or Secrets change). Only when the pool
// has none yet (the manager just started) is it built here, reading the Secrets; queue
// reconciles therefore do not re-read Secrets from the apiserver on every pass.
func pooledClientFor(ctx context.Context, secrets client.Reader, pool *kafka.Pool, kc *kqv1.KafkaCluster) (*kafka.Client, error) {
	if cl, ok := pool.Peek(clusterKey(kc)); ok {
		return cl, nil
	}
	return clientFor(ctx, secrets, pool, kc)
}
