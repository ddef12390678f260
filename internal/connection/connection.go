// Package connection builds the Kafka client configuration of a KafkaCluster from its spec
// and the Secrets it references: bootstrap servers, TLS and SASL (PLAIN, SCRAM, OAUTHBEARER,
// AWS_MSK_IAM). Secret values go only into the returned configuration, never into errors.
package connection

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// SecretError is a missing Secret or key, or (Invalid) a Secret whose content or settings
// cannot be used. Its message names the Secret, the key and the spec field that chose it,
// never a value.
type SecretError struct {
	msg     string
	invalid bool // the Secret exists but its content is unusable
}

func (e *SecretError) Error() string { return e.msg }

// Invalid reports a Secret that exists but cannot be used (as opposed to one missing).
func (e *SecretError) Invalid() bool { return e.invalid }

// KafkaConfig is Config without the fingerprint.
func KafkaConfig(ctx context.Context, secrets client.Reader, kc *kqv1.KafkaCluster) (kafka.Config, error) {
	cfg, _, err := Config(ctx, secrets, kc)
	return cfg, err
}

// Config is how the operator connects to a KafkaCluster: spec.bootstrapServers, and TLS and
// SASL settings (OAuth, AWS_MSK_IAM included) built from the Secrets spec.tls and spec.sasl
// reference, read with secrets; and a fingerprint of the settings and Secret contents it was
// built from (the client pool rebuilds a client when it changes). The manager, kqctl's
// previewer and the truth checker (kqctl verify) all reach Kafka through it. Errors name the
// Secret, key and spec field, never a value (*SecretError for a Secret's problems).
func Config(ctx context.Context, secrets client.Reader, kc *kqv1.KafkaCluster) (kafka.Config, string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "bootstrap=%s\n", strings.Join(kc.Spec.BootstrapServers, ","))
	cfg := kafka.Config{BootstrapServers: kc.Spec.BootstrapServers}

	// Each Secret is read once per pass; a key is looked up in what was read.
	read := map[string]*corev1.Secret{}
	getSecret := func(name string) (*corev1.Secret, error) {
		if s, ok := read[name]; ok {
			return s, nil
		}
		var s corev1.Secret
		if err := secrets.Get(ctx, types.NamespacedName{Namespace: kc.Namespace, Name: name}, &s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, &SecretError{msg: fmt.Sprintf("Secret %s/%s not found", kc.Namespace, name)}
			}
			return nil, fmt.Errorf("reading Secret %s/%s: %w", kc.Namespace, name, err)
		}
		read[name] = &s
		return &s, nil
	}
	// getKey reads one key; field names the spec field that chose the key, so the message
	// says what to change. optional keys that are absent give nil and no error.
	getKeyOpt := func(name, key, field string, optional bool) ([]byte, error) {
		s, err := getSecret(name)
		if err != nil {
			return nil, err
		}
		v, ok := s.Data[key]
		if !ok && !optional {
			return nil, &SecretError{msg: fmt.Sprintf("Secret %s/%s has no key %q (%s); it has %s", kc.Namespace, name, key, field, keysOf(s))}
		}
		if ok && len(v) == 0 && !optional {
			return nil, &SecretError{msg: fmt.Sprintf("Secret %s/%s key %q (%s) is empty", kc.Namespace, name, key, field), invalid: true}
		}
		h.Write([]byte(name + "/" + key + "\n"))
		h.Write(v)
		return v, nil
	}
	getKey := func(name, key, field string) ([]byte, error) { return getKeyOpt(name, key, field, false) }

	// The TLS and SASL settings are turned into a *tls.Config and a SASL mechanism by
	// internal/kafka (the republisher sidecar uses the same code); each part is checked as
	// soon as it is read, so the first problem found is the one reported.
	if t := kc.Spec.TLS; t != nil {
		ts := kafka.TLSSettings{ServerName: t.ServerName}
		spec, _ := json.Marshal(t)
		fmt.Fprintf(h, "tls=%s\n", spec)
		if t.CASecretRef != nil {
			ca, err := getKey(t.CASecretRef.Name, t.CASecretRef.Key, "spec.tls.caSecretRef.key")
			if err != nil {
				return kafka.Config{}, "", err
			}
			if _, err := (kafka.TLSSettings{CAPEM: ca}).TLSConfig(); err != nil {
				return kafka.Config{}, "", &SecretError{msg: fmt.Sprintf("Secret %s/%s key %q holds no PEM certificate", kc.Namespace, t.CASecretRef.Name, t.CASecretRef.Key), invalid: true}
			}
			ts.CAPEM = ca
		}
		if name, certKey, keyKey := t.ClientCertRef(); name != "" {
			certField, keyField := "spec.tls.clientCert.certKey", "spec.tls.clientCert.keyKey"
			if t.ClientCert == nil {
				certField, keyField = "spec.tls.clientCertSecretName takes tls.crt; use clientCert.certKey", "spec.tls.clientCertSecretName takes tls.key; use clientCert.keyKey"
			}
			crt, err := getKey(name, certKey, certField)
			if err != nil {
				return kafka.Config{}, "", err
			}
			key, err := getKey(name, keyKey, keyField)
			if err != nil {
				return kafka.Config{}, "", err
			}
			ts.CertPEM, ts.KeyPEM = crt, key
			if _, err := ts.TLSConfig(); err != nil {
				return kafka.Config{}, "", &SecretError{msg: fmt.Sprintf("Secret %s/%s: keys %q and %q do not form a PEM certificate and key pair", kc.Namespace, name, certKey, keyKey), invalid: true}
			}
		}
		cfg.TLS = &ts
	}
	if s := kc.Spec.SASL; s != nil {
		ss, err := saslFor(s, getKey, getKeyOpt)
		if err != nil {
			return kafka.Config{}, "", err
		}
		spec, _ := json.Marshal(s) // names and keys, no values
		fmt.Fprintf(h, "sasl=%s\n", spec)
		if err := ss.Validate(); err != nil {
			return kafka.Config{}, "", fmt.Errorf("sasl.mechanism %q: %w", s.Mechanism, err)
		}
		cfg.SASL = &ss
	}
	return cfg, hex.EncodeToString(h.Sum(nil)), nil
}

// saslFor reads the credentials of spec.sasl: PLAIN and SCRAM from secretName (the username
// literally or from usernameKey), OAUTHBEARER a token or a client secret, AWS_MSK_IAM an
// access key from a Secret or the manager's environment. What it reads goes into the
// fingerprint through getKey; the caller hashes spec.sasl itself.
func saslFor(s *kqv1.KafkaClusterSASL,
	getKey func(name, key, field string) ([]byte, error), getKeyOpt func(name, key, field string, optional bool) ([]byte, error)) (kafka.SASLSettings, error) {
	ss := kafka.SASLSettings{Mechanism: string(s.Mechanism)}
	switch s.Mechanism {
	case kqv1.SASLMechanismPlain, kqv1.SASLMechanismScramSHA256, kqv1.SASLMechanismScramSHA512:
		if s.SecretName == "" {
			return ss, &SecretError{msg: fmt.Sprintf("spec.sasl.secretName is required for %s", s.Mechanism), invalid: true}
		}
		ss.Username = s.Username
		if k := s.UsernameKeyOrDefault(); k != "" {
			user, err := getKey(s.SecretName, k, "spec.sasl.usernameKey")
			if err != nil {
				return ss, err
			}
			ss.Username = kafka.SecretCredential(string(user))
		}
		pass, err := getKey(s.SecretName, s.PasswordKeyOrDefault(), "spec.sasl.passwordKey")
		if err != nil {
			return ss, err
		}
		ss.Password = kafka.SecretCredential(string(pass))
	case kqv1.SASLMechanismOAuthBearer:
		o := s.OAuthBearer
		switch {
		case o != nil && o.TokenSecretRef != nil:
			tok, err := getKey(o.TokenSecretRef.Name, o.TokenSecretRef.Key, "spec.sasl.oauthBearer.tokenSecretRef.key")
			if err != nil {
				return ss, err
			}
			ss.Token = kafka.StaticToken(strings.TrimSpace(string(tok)))
		case o != nil && o.ClientCredentials != nil:
			cc := o.ClientCredentials
			secret, err := getKey(cc.ClientSecretRef.Name, cc.ClientSecretRef.Key, "spec.sasl.oauthBearer.clientCredentials.clientSecretRef.key")
			if err != nil {
				return ss, err
			}
			ss.Token = kafka.ClientCredentialsToken(kafka.ClientCredentials{TokenEndpoint: cc.TokenEndpoint, ClientID: cc.ClientID,
				ClientSecret: string(secret), Scope: cc.Scope})
		default:
			return ss, &SecretError{msg: "spec.sasl.oauthBearer needs tokenSecretRef or clientCredentials", invalid: true}
		}
	case kqv1.SASLMechanismAWSMSKIAM:
		a := s.AWSMSKIAM
		if a == nil || a.SecretName == "" {
			ss.AWS = kafka.AWSCredentialsFromEnv()
			break
		}
		idKey, secretKey, tokenKey := a.Keys()
		id, err := getKey(a.SecretName, idKey, "spec.sasl.awsMskIam.accessKeyIdKey")
		if err != nil {
			return ss, err
		}
		sk, err := getKey(a.SecretName, secretKey, "spec.sasl.awsMskIam.secretAccessKeyKey")
		if err != nil {
			return ss, err
		}
		st, err := getKeyOpt(a.SecretName, tokenKey, "spec.sasl.awsMskIam.sessionTokenKey", true)
		if err != nil {
			return ss, err
		}
		ss.AWS = kafka.StaticAWSCredentials(kafka.AWSCredentials{AccessKeyID: strings.TrimSpace(string(id)),
			SecretAccessKey: strings.TrimSpace(string(sk)), SessionToken: strings.TrimSpace(string(st))})
	}
	return ss, nil
}

// keysOf lists a Secret's key names (never values), sorted, for messages.
func keysOf(s *corev1.Secret) string {
	if len(s.Data) == 0 {
		return "no keys"
	}
	keys := slices.Sorted(maps.Keys(s.Data))
	return "keys " + strings.Join(keys, ", ")
}
