package controllers

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/connection"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// clusterKey is the pool key of a KafkaCluster.
func clusterKey(kc *kqv1.KafkaCluster) string { return kc.Namespace + "/" + kc.Name }

// clientFor returns the pooled client of a KafkaCluster, rebuilding it when the connection
// settings or the content of a referenced Secret changed. Secret values never leave this
// function except inside the client's configuration (never in errors, logs or status).
func clientFor(ctx context.Context, secrets client.Reader, pool *kafka.Pool, kc *kqv1.KafkaCluster) (*kafka.Client, error) {
	cfg, fp, err := connection.Config(ctx, secrets, kc)
	if err != nil {
		return nil, err
	}
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

// withAuthError adds the client's last failure to obtain SASL credentials (kafka.Client
// AuthError: a token endpoint that did not answer) to err, a Kafka request's failure that
// reports only its deadline.
func withAuthError(cl *kafka.Client, err error) error {
	if err == nil || cl == nil {
		return err
	}
	if ae := cl.AuthError(); ae != nil && !strings.Contains(err.Error(), ae.Error()) {
		return fmt.Errorf("%w (last authentication attempt: %v)", err, ae)
	}
	return err
}

// unknownAuthority is how Go's TLS stack words a server certificate that no configured CA
// signed (x509.UnknownAuthorityError); it reaches us as text inside the client's error.
const unknownAuthority = "certificate signed by unknown authority"

// tlsTrustHint explains a broker certificate that the configured CA did not sign: which Secret
// and key the CA came from and, when that Secret is a Strimzi KafkaUser's (it holds user.crt
// and user.key, or user.p12), that its ca.crt is Strimzi's clients CA — the CA that signs
// users — while the brokers are signed by the cluster CA in <cluster>-cluster-ca-cert. It is
// "" for any other error. caSecret is the Secret spec.tls.caSecretRef names (nil: unread).
// Pure.
func tlsTrustHint(err error, kc *kqv1.KafkaCluster, caSecret *corev1.Secret) string {
	if err == nil || !strings.Contains(err.Error(), unknownAuthority) {
		return ""
	}
	t := kc.Spec.TLS
	if t == nil || t.CASecretRef == nil {
		return "the brokers' certificate is not signed by a CA of the system's roots; set spec.tls.caSecretRef to a Secret holding the CA that signed them"
	}
	ref := fmt.Sprintf("Secret %s/%s key %q (spec.tls.caSecretRef)", kc.Namespace, t.CASecretRef.Name, t.CASecretRef.Key)
	hint := "the brokers' certificate is not signed by the CA in " + ref
	if caSecret == nil {
		return hint
	}
	_, crt := caSecret.Data["user.crt"]
	_, key := caSecret.Data["user.key"]
	_, p12 := caSecret.Data["user.p12"]
	if !(crt && key) && !p12 {
		return hint
	}
	cluster := caSecret.Labels[strimziClusterLabel]
	if cluster == "" {
		cluster = "<cluster>"
	}
	return hint + fmt.Sprintf("; that Secret is a Strimzi KafkaUser's: its ca.crt is Strimzi's clients CA, which signs users, not brokers. "+
		"The brokers are signed by the cluster CA: point spec.tls.caSecretRef at Secret %s-cluster-ca-cert key \"ca.crt\" "+
		"(copied into namespace %s: a KafkaCluster reads Secrets of its own namespace only; docs/strimzi.md)", cluster, kc.Namespace)
}
