package controllers

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// strimziSecrets are Secrets of exactly the layout Strimzi's operators write: the cluster CA
// (<cluster>-cluster-ca-cert: ca.crt, ca.p12, ca.password), a KafkaUser with authentication
// scram-sha-512 (Secret named after the user: password, sasl.jaas.config) and one with
// authentication tls (ca.crt, user.crt, user.key, user.p12, user.password). The PKCS#12
// entries are opaque bytes here: nothing of ours reads them.
func strimziSecrets(ns, cluster, scramUser, password, tlsUser string, ca *rig.TestCA, client *rig.TLSMaterial) []*corev1.Secret {
	labels := func(kind string) map[string]string {
		return map[string]string{"strimzi.io/cluster": cluster, "strimzi.io/kind": kind, "app.kubernetes.io/managed-by": "strimzi-user-operator"}
	}
	return []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster + "-cluster-ca-cert", Labels: labels("Kafka")}, Data: map[string][]byte{
			"ca.crt": []byte(ca.CertPEM), "ca.p12": {0x30, 0x82, 0x01}, "ca.password": []byte("p12-store-password")}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: scramUser, Labels: labels("KafkaUser")}, Data: map[string][]byte{
			"password":         []byte(password),
			"sasl.jaas.config": []byte(`org.apache.kafka.common.security.scram.ScramLoginModule required username="` + scramUser + `" password="` + password + `";`)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tlsUser, Labels: labels("KafkaUser")}, Data: map[string][]byte{
			"ca.crt": []byte(ca.CertPEM), "user.crt": []byte(client.CertPEM), "user.key": []byte(client.KeyPEM),
			"user.p12": {0x30, 0x82, 0x02}, "user.password": []byte("p12-user-password")}},
	}
}

// Credentials as users have them, against one broker with SCRAM, mutual TLS and OAUTHBEARER
// listeners: Secrets of Strimzi's exact layout connect over SCRAM-SHA-512 (username literal,
// password from "password") and mutual TLS (user.crt/user.key, CA from
// <cluster>-cluster-ca-cert's ca.crt); OAUTHBEARER connects with a static token from a Secret
// and with the client-credentials grant against a local token endpoint (whose token is
// fetched once and reused); AWS_MSK_IAM reaches the broker's answer, a refusal of the
// mechanism. Wrong key names, a missing Secret and a refused client secret each give a
// condition naming the Secret and key or the endpoint's answer, never a value.
func TestCredentialsAsUsersHaveThem(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ca, err := rig.NewTestCA()
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.ServerCert()
	if err != nil {
		t.Fatal(err)
	}
	server.ClientCAPEM = ca.CertPEM
	clientCert, err := ca.ClientCert()
	if err != nil {
		t.Fatal(err)
	}
	const password = "scram-pw-Xq81"
	k, _ := startKafka(t, rig.KafkaOptions{SASLUsers: map[string]string{"orders-app": password}, TLS: server, OAuthBearer: true})
	tokens := rig.StartTokenServer("kqo-client", "client-secret-Zt93", "orders-app")
	t.Cleanup(tokens.Close)

	silentL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silentL.Close() })
	go func() {
		var held []net.Conn
		for {
			c, err := silentL.Accept()
			if err != nil {
				for _, c := range held {
					_ = c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	silent := "http://" + silentL.Addr().String() + "/token"

	ns := r.newNamespace(t)
	secrets := strimziSecrets(ns, "my-cluster", "orders-app", password, "orders-tls", ca, clientCert)
	secrets = append(secrets,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "oauth-token"}, StringData: map[string]string{"jwt": rig.UnsecuredJWT("orders-app", time.Hour),
			"expired": rig.UnsecuredJWT("orders-app", -time.Hour)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "oauth-client"}, StringData: map[string]string{"client-secret": "client-secret-Zt93", "wrong": "not-the-secret-Yy"}},
		// Made with `echo orders-app | base64` and the like: each value ends in a line break.
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echoed"}, StringData: map[string]string{"username": "orders-app\n", "password": password + "\r\n"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "msk-user"}, StringData: map[string]string{
			"accessKeyId": "AKIAEXAMPLEKQO000001", "secretAccessKey": "aws-secret-key-Vb52", "sessionToken": "aws-session-token-Nm07"}},
	)
	for _, s := range secrets {
		if err := r.k8s.Create(ctxFor(t), s); err != nil {
			t.Fatal(err)
		}
	}
	// No value of any Secret may appear in a status.
	values := []string{password, "client-secret-Zt93", "not-the-secret-Yy", "aws-secret-key-Vb52", "aws-session-token-Nm07", "PRIVATE KEY", "p12-user-password",
		strings.Split(strings.TrimSpace(clientCert.KeyPEM), "\n")[1]}
	noValues := func(kc *kqv1.KafkaCluster) {
		t.Helper()
		raw, _ := json.Marshal(kc.Status)
		for _, v := range values {
			if strings.Contains(string(raw), v) {
				t.Errorf("KafkaCluster %s: a Secret value (%.6s…) appears in its status", kc.Name, v)
			}
		}
	}
	connected := func(kc *kqv1.KafkaCluster) string {
		return condIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionTrue, "")
	}
	notConnected := func(reason string, msgs ...string) func(*kqv1.KafkaCluster) string {
		return func(kc *kqv1.KafkaCluster) string {
			if s := condIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionFalse, reason); s != "" {
				return s
			}
			c := findCondition(kc.Status.Conditions, kqv1.ConditionConnected)
			for _, m := range msgs {
				if !strings.Contains(c.Message, m) {
					return "Connected message " + c.Message + " does not contain " + m
				}
			}
			return ""
		}
	}
	strimziCA := &kqv1.SecretKeyReference{Name: "my-cluster-cluster-ca-cert", Key: "ca.crt"}

	for _, tc := range []struct {
		name  string
		mut   func(*kqv1.KafkaCluster)
		check func(*kqv1.KafkaCluster) string
	}{
		{"strimzi-scram", func(kc *kqv1.KafkaCluster) {
			kc.Spec.BootstrapServers = k.SASLBootstrapServers()
			kc.Spec.SASL = &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismScramSHA512, SecretName: "orders-app", Username: "orders-app"}
		}, connected},
		{"scram-trailing-newlines", func(kc *kqv1.KafkaCluster) {
			kc.Spec.BootstrapServers = k.SASLBootstrapServers()
			kc.Spec.SASL = &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismScramSHA512, SecretName: "echoed"}
		}, connected},
		{"strimzi-mtls", func(kc *kqv1.KafkaCluster) {
			kc.Spec.BootstrapServers = k.TLSBootstrapServers()
			kc.Spec.TLS = &kqv1.KafkaClusterTLS{CASecretRef: strimziCA, ServerName: "localhost",
				ClientCert: &kqv1.ClientCertificate{SecretName: "orders-tls", CertKey: "user.crt", KeyKey: "user.key"}}
		}, connected},
		{"oauth-static-token", func(kc *kqv1.KafkaCluster) {
			kc.Spec.BootstrapServers = k.OAuthBootstrapServers()
			kc.Spec.SASL = &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismOAuthBearer,
				OAuthBearer: &kqv1.OAuthBearer{TokenSecretRef: &kqv1.SecretKeyReference{Name: "oauth-token", Key: "jwt"}}}
		}, connected},
		{"oauth-client-credentials", func(kc *kqv1.KafkaCluster) {
			kc.Spec.BootstrapServers = k.OAuthBootstrapServers()
			kc.Spec.SASL = &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismOAuthBearer, OAuthBearer: &kqv1.OAuthBearer{
				ClientCredentials: &kqv1.OAuthClientCredentials{TokenEndpoint: tokens.URL, ClientID: "kqo-client", Scope: "kafka queues",
					ClientSecretRef: kqv1.SecretKeyReference{Name: "oauth-client", Key: "client-secret"}}}}
		}, connected},
		// The broker's SASL listener offers SCRAM and PLAIN: the client asks for AWS_MSK_IAM
		// in its SaslHandshake and the broker refuses the mechanism.
		{"aws-msk-iam-refused", func(kc *kqv1.KafkaCluster) {
			kc.Spec.BootstrapServers = k.SASLBootstrapServers()
			kc.Spec.SASL = &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismAWSMSKIAM, AWSMSKIAM: &kqv1.AWSMSKIAM{SecretName: "msk-user"}}
		}, notConnected(kqv1.ReasonConnectionFailed, "UNSUPPORTED_SASL_MECHANISM")},
		// Bad input: today's default key names on Strimzi's Secrets, a missing Secret, a
		// client secret the token endpoint refuses.
		{"strimzi-scram-default-username-key", func(kc *kqv1.KafkaCluster) {
			kc.Spec.BootstrapServers = k.SASLBootstrapServers()
			kc.Spec.SASL = &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismScramSHA512, SecretName: "orders-app"}
		}, notConnected(kqv1.ReasonSecretNotFound, "Secret "+ns+"/orders-app has no key \"username\"", "spec.sasl.usernameKey", "keys password, sasl.jaas.config")},
		{"strimzi-mtls-default-cert-keys", func(kc *kqv1.KafkaCluster) {
			kc.Spec.BootstrapServers = k.TLSBootstrapServers()
			kc.Spec.TLS = &kqv1.KafkaClusterTLS{CASecretRef: strimziCA, ClientCertSecretName: "orders-tls"}
		}, notConnected(kqv1.ReasonSecretNotFound, "Secret "+ns+"/orders-tls has no key \"tls.crt\"", "use clientCert.certKey", "user.crt")},
		{"mtls-cert-key-swapped", func(kc *kqv1.KafkaCluster) {
			kc.Spec.BootstrapServers = k.TLSBootstrapServers()
			kc.Spec.TLS = &kqv1.KafkaClusterTLS{CASecretRef: strimziCA,
				ClientCert: &kqv1.ClientCertificate{SecretName: "orders-tls", CertKey: "user.key", KeyKey: "user.crt"}}
		}, notConnected(kqv1.ReasonSecretInvalid, "Secret "+ns+"/orders-tls", `"user.key"`, `"user.crt"`)},
		{"oauth-token-secret-missing", func(kc *kqv1.KafkaCluster) {
			kc.Spec.BootstrapServers = k.OAuthBootstrapServers()
			kc.Spec.SASL = &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismOAuthBearer,
				OAuthBearer: &kqv1.OAuthBearer{TokenSecretRef: &kqv1.SecretKeyReference{Name: "no-such-token", Key: "jwt"}}}
		}, notConnected(kqv1.ReasonSecretNotFound, "Secret "+ns+"/no-such-token not found")},
		// The listener really validates: an expired token is refused by the broker.
		{"oauth-expired-token-refused", func(kc *kqv1.KafkaCluster) {
			kc.Spec.BootstrapServers = k.OAuthBootstrapServers()
			kc.Spec.SASL = &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismOAuthBearer,
				OAuthBearer: &kqv1.OAuthBearer{TokenSecretRef: &kqv1.SecretKeyReference{Name: "oauth-token", Key: "expired"}}}
		}, notConnected(kqv1.ReasonConnectionFailed, "SASL_AUTHENTICATION_FAILED")},
		{"oauth-client-secret-refused", func(kc *kqv1.KafkaCluster) {
			kc.Spec.BootstrapServers = k.OAuthBootstrapServers()
			kc.Spec.SASL = &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismOAuthBearer, OAuthBearer: &kqv1.OAuthBearer{
				ClientCredentials: &kqv1.OAuthClientCredentials{TokenEndpoint: tokens.URL, ClientID: "kqo-client",
					ClientSecretRef: kqv1.SecretKeyReference{Name: "oauth-client", Key: "wrong"}}}}
		}, notConnected(kqv1.ReasonConnectionFailed, "token endpoint "+tokens.URL+" answered 401", "invalid_client")},
		// A token endpoint that accepts connections and never answers: franz-go retries until
		// the probe's deadline and reports only that; the condition says why.
		{"oauth-token-endpoint-silent", func(kc *kqv1.KafkaCluster) {
			kc.Spec.BootstrapServers = k.OAuthBootstrapServers()
			kc.Spec.SASL = &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismOAuthBearer, OAuthBearer: &kqv1.OAuthBearer{
				ClientCredentials: &kqv1.OAuthClientCredentials{TokenEndpoint: silent, ClientID: "kqo-client",
					ClientSecretRef: kqv1.SecretKeyReference{Name: "oauth-client", Key: "client-secret"}}}}
		}, notConnected(kqv1.ReasonConnectionFailed, "last authentication attempt: OAUTHBEARER token: token endpoint "+silent, "Client.Timeout exceeded")},
		{"aws-key-missing", func(kc *kqv1.KafkaCluster) {
			kc.Spec.BootstrapServers = k.SASLBootstrapServers()
			kc.Spec.SASL = &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismAWSMSKIAM, AWSMSKIAM: &kqv1.AWSMSKIAM{SecretName: "msk-user", AccessKeyIDKey: "AWS_ACCESS_KEY_ID"}}
		}, notConnected(kqv1.ReasonSecretNotFound, "Secret "+ns+"/msk-user has no key \"AWS_ACCESS_KEY_ID\"", "spec.sasl.awsMskIam.accessKeyIdKey")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := r.createCluster(t, ns, tc.name, k, tc.mut, tc.check)
			noValues(kc)
		})
	}
	// The client-credentials token is fetched for the first connection and then reused (its
	// lifetime is 10 minutes): over another probe (5s here) no new token is requested.
	time.Sleep(6 * time.Second)
	if n := tokens.Issued(); n != 1 {
		t.Errorf("the token endpoint issued %d tokens, want 1 (fetched once, then reused)", n)
	}
	if s := tokens.LastScope(); s != "kafka queues" {
		t.Errorf("scope requested %q, want %q", s, "kafka queues")
	}
}

// The CEL rules of spec.tls and spec.sasl are the apiserver's: each bad combination is refused
// at admission with a message naming what to fix, and the defaults are applied.
func TestCredentialRulesAtAdmission(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	ref := &kqv1.SecretKeyReference{Name: "s", Key: "k"}
	for _, tc := range []struct {
		name string
		tls  *kqv1.KafkaClusterTLS
		sasl *kqv1.KafkaClusterSASL
		want string
	}{
		{"cert-both-forms", &kqv1.KafkaClusterTLS{ClientCertSecretName: "a", ClientCert: &kqv1.ClientCertificate{SecretName: "b"}}, nil, "not both"},
		{"username-both", nil, &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismScramSHA512, SecretName: "s", Username: "u", UsernameKey: "user"}, "set username or usernameKey, not both"},
		{"scram-without-secret", nil, &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismScramSHA256, Username: "u"}, "secretName is required for PLAIN and SCRAM"},
		{"oauth-without-settings", nil, &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismOAuthBearer}, "oauthBearer is required for OAUTHBEARER"},
		{"oauth-with-secret-name", nil, &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismOAuthBearer, SecretName: "s",
			OAuthBearer: &kqv1.OAuthBearer{TokenSecretRef: ref}}, "apply to PLAIN and SCRAM only"},
		{"oauth-both-sources", nil, &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismOAuthBearer, OAuthBearer: &kqv1.OAuthBearer{TokenSecretRef: ref,
			ClientCredentials: &kqv1.OAuthClientCredentials{TokenEndpoint: "https://idp.example.com/token", ClientID: "c", ClientSecretRef: *ref}}}, "exactly one of tokenSecretRef and clientCredentials"},
		{"oauth-endpoint-not-url", nil, &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismOAuthBearer, OAuthBearer: &kqv1.OAuthBearer{
			ClientCredentials: &kqv1.OAuthClientCredentials{TokenEndpoint: "idp.example.com/token", ClientID: "c", ClientSecretRef: *ref}}}, "tokenEndpoint"},
		{"aws-on-scram", nil, &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismScramSHA512, SecretName: "s", AWSMSKIAM: &kqv1.AWSMSKIAM{}}, "awsMskIam applies to AWS_MSK_IAM only"},
	} {
		kc := &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tc.name}, Spec: kqv1.KafkaClusterSpec{
			BootstrapServers: []string{"kafka:9092"}, TLS: tc.tls, SASL: tc.sasl}}
		err := r.k8s.Create(ctxFor(t), kc)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal containing %q", tc.name, err, tc.want)
		}
	}
	// Defaults: certKey/keyKey and the AWS key names are filled in; usernameKey is not (it is
	// "username" only when username is absent, which the code applies).
	kc := &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "defaults"}, Spec: kqv1.KafkaClusterSpec{
		BootstrapServers: []string{"kafka:9092"},
		TLS:              &kqv1.KafkaClusterTLS{ClientCert: &kqv1.ClientCertificate{SecretName: "c"}},
		SASL:             &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismAWSMSKIAM, AWSMSKIAM: &kqv1.AWSMSKIAM{SecretName: "aws"}},
	}}
	if err := r.k8s.Create(ctxFor(t), kc); err != nil {
		t.Fatal(err)
	}
	cc, a := kc.Spec.TLS.ClientCert, kc.Spec.SASL.AWSMSKIAM
	if cc.CertKey != "tls.crt" || cc.KeyKey != "tls.key" || a.AccessKeyIDKey != "accessKeyId" || a.SecretAccessKeyKey != "secretAccessKey" || a.SessionTokenKey != "sessionToken" {
		t.Errorf("defaults not applied: clientCert %+v, awsMskIam %+v", cc, a)
	}
	// An existing manifest with the deprecated clientCertSecretName and a SCRAM Secret with
	// username/password keys is still valid.
	old := &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "existing"}, Spec: kqv1.KafkaClusterSpec{
		BootstrapServers: []string{"kafka:9092"},
		TLS:              &kqv1.KafkaClusterTLS{CASecretRef: ref, ClientCertSecretName: "client"},
		SASL:             &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismScramSHA512, SecretName: "creds"},
	}}
	if err := r.k8s.Create(ctxFor(t), old); err != nil {
		t.Errorf("an existing manifest is refused: %v", err)
	}
}
