package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/internal/republisher"
	"github.com/kafkaqueues/kafka-queue-operator/internal/webhook"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// envOf is the sidecar's variable name → its definition.
func envOf(c corev1.Container) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

// startSidecar runs the stored Pod's sidecar as the republisher binary (sidecarProcess) until
// the test ends, and returns its API client once its startup probe passes.
func startSidecar(t *testing.T, c client.Client, stored *corev1.Pod, bin string) (*republisher.Client, *bytes.Buffer) {
	t.Helper()
	side, exited, logs := launchSidecar(t, c, stored, bin)
	waitStartupProbe(t, side, exited, logs)
	return &republisher.Client{BaseURL: "http://" + envOf(side)["KQO_LISTEN"].Value}, logs
}

// launchSidecar runs the stored Pod's sidecar as the republisher binary until the test ends.
func launchSidecar(t *testing.T, c client.Client, stored *corev1.Pod, bin string) (corev1.Container, <-chan error, *bytes.Buffer) {
	t.Helper()
	cmd, side := sidecarProcess(t, c, stored, bin)
	logs := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
		}
		if t.Failed() || testing.Verbose() {
			t.Logf("sidecar output:\n%s", logs.String())
		}
	})
	return side, exited, logs
}

// roundTrip produces one record to q, receives it through the sidecar's API, rejects it and
// finds it in dlq (read over plaintext): the sidecar both consumed and produced with the
// credentials the webhook gave it.
func roundTrip(t *testing.T, k *rig.Kafka, api *republisher.Client, logs *bytes.Buffer, q, dlq string) {
	t.Helper()
	ctx := context.Background()
	producer, err := kafka.NewProducer(kafka.Config{BootstrapServers: k.BootstrapServers()})
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	if err := producer.Produce(ctx, q, []byte("k"), []byte(q+"-dead"), nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for rejected := false; !rejected; {
		if time.Now().After(deadline) {
			t.Fatalf("no record received through the sidecar in 2m\n%s", logs.String())
		}
		got, err := api.Receive(ctx, republisher.ReceiveRequest{MaxRecords: 10, WaitMs: 2000})
		if err != nil {
			t.Fatalf("receive: %v\n%s", err, logs.String())
		}
		for _, rec := range got.Records {
			out, err := api.Ack(ctx, republisher.AckRequest{Acks: []republisher.Ack{{ID: rec.ID, Type: "reject"}}})
			if err != nil || len(out.Results) != 1 || out.Results[0].Error != "" {
				t.Fatalf("reject: %v %+v", err, out)
			}
			rejected = true
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.BootstrapServers()...), kgo.ConsumeTopics(dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pollCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var dead []*kgo.Record
	for len(dead) == 0 && pollCtx.Err() == nil {
		dead = append(dead, cl.PollFetches(pollCtx).Records()...)
	}
	if len(dead) != 1 || string(dead[0].Value) != q+"-dead" {
		t.Fatalf("dead-letter topic %s holds %d records, want %s-dead", dlq, len(dead), q)
	}
}

// The sidecar has every mechanism the manager has, with the Secrets as users have them:
// Strimzi's KafkaUser Secrets over SCRAM-SHA-512 (username literal, password key "password")
// and mutual TLS (user.crt/user.key mounted as tls.crt/tls.key, the CA from
// <cluster>-cluster-ca-cert), OAUTHBEARER with a token mounted from a Secret and with the
// client-credentials grant (client secret by secretKeyRef) against a local token endpoint.
// Each sidecar, run as the republisher binary with exactly its Pod's environment and files,
// receives a record and dead-letters it. For AWS_MSK_IAM the Pod gets the standard AWS
// variables by secretKeyRef (the session token optional) and the binary starts with them;
// without a Secret the Pod is admitted with a warning naming the variables the sidecar needs.
// No stored Pod holds a Secret value.
func TestSidecarCredentialsAsUsersHaveThem(t *testing.T) {
	t.Parallel()
	rig.SkipWithoutRig(t, "a kube-apiserver and a Kafka broker")
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
	const password = "scram-pw-Hj27"
	ctx := context.Background()
	k, err := rig.StartKafka(ctx, rig.KafkaOptions{SASLUsers: map[string]string{"orders-app": password}, TLS: server, OAuthBearer: true, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	tokens := rig.StartTokenServer("kqo-sidecar", "client-secret-Qw48", "orders-app")
	t.Cleanup(tokens.Close)

	bin := filepath.Join(t.TempDir(), "republisher")
	build := exec.Command("go", "build", "-o", bin, "./cmd/republisher")
	build.Dir = rig.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the republisher: %v\n%s", err, out)
	}

	queues := []string{"scram", "mtls", "oauth-token", "oauth-cc", "msk"}
	const attempts = 3
	makeQueues(ctx, t, k.BootstrapServers(), attempts, queues...)

	r := startWebhookRig(t, &webhook.PodInjector{Image: "example.com/kqo:test", APIPort: freePort(t), MetricsPort: freePort(t)})
	const ns = "strimzi"
	if err := r.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	jwt := rig.UnsecuredJWT("orders-app", time.Hour)
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-cluster-cluster-ca-cert"}, Data: map[string][]byte{
			"ca.crt": []byte(ca.CertPEM), "ca.p12": {0x30, 0x82, 0x01}, "ca.password": []byte("p12-store-password")}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-app"}, Data: map[string][]byte{
			"password":         []byte(password),
			"sasl.jaas.config": []byte(`org.apache.kafka.common.security.scram.ScramLoginModule required username="orders-app" password="` + password + `";`)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-tls"}, Data: map[string][]byte{
			"ca.crt": []byte(ca.CertPEM), "user.crt": []byte(clientCert.CertPEM), "user.key": []byte(clientCert.KeyPEM),
			"user.p12": {0x30, 0x82, 0x02}, "user.password": []byte("p12-user-password")}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "oauth-token"}, StringData: map[string]string{"access-token": jwt}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "oauth-client"}, StringData: map[string]string{"secret": "client-secret-Qw48"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "msk-user"}, StringData: map[string]string{"accessKeyId": "AKIAEXAMPLEKQO000002", "secretAccessKey": "aws-secret-key-Lp63"}},
	} {
		if err := r.c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	specs := map[string]kqv1.KafkaClusterSpec{
		"scram": {BootstrapServers: k.SASLBootstrapServers(),
			SASL: &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismScramSHA512, SecretName: "orders-app", Username: "orders-app"}},
		"mtls": {BootstrapServers: k.TLSBootstrapServers(), TLS: &kqv1.KafkaClusterTLS{ServerName: "localhost",
			CASecretRef: &kqv1.SecretKeyReference{Name: "my-cluster-cluster-ca-cert", Key: "ca.crt"},
			ClientCert:  &kqv1.ClientCertificate{SecretName: "orders-tls", CertKey: "user.crt", KeyKey: "user.key"}}},
		"oauth-token": {BootstrapServers: k.OAuthBootstrapServers(), SASL: &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismOAuthBearer,
			OAuthBearer: &kqv1.OAuthBearer{TokenSecretRef: &kqv1.SecretKeyReference{Name: "oauth-token", Key: "access-token"}}}},
		"oauth-cc": {BootstrapServers: k.OAuthBootstrapServers(), SASL: &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismOAuthBearer,
			OAuthBearer: &kqv1.OAuthBearer{ClientCredentials: &kqv1.OAuthClientCredentials{TokenEndpoint: tokens.URL, ClientID: "kqo-sidecar", Scope: "kafka",
				ClientSecretRef: kqv1.SecretKeyReference{Name: "oauth-client", Key: "secret"}}}}},
		"msk": {BootstrapServers: k.SASLBootstrapServers(), SASL: &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismAWSMSKIAM,
			AWSMSKIAM: &kqv1.AWSMSKIAM{SecretName: "msk-user"}}},
	}
	for _, q := range queues {
		r.queue(t, &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: q}, Spec: specs[q]}, q, q, "dlq."+q, attempts)
	}
	pemBody := func(p string) string { return strings.Split(strings.TrimSpace(p), "\n")[1] }
	forbidden := map[string]string{"SCRAM password": password, "client key": pemBody(clientCert.KeyPEM), "CA": pemBody(ca.CertPEM),
		"token": jwt, "client secret": "client-secret-Qw48", "AWS secret key": "aws-secret-key-Lp63", "AWS key id": "AKIAEXAMPLEKQO000002"}

	for _, q := range queues {
		t.Run(q, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: q + "-worker", Labels: map[string]string{kqv1.QueueLabel: q}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}}}
			if err := r.c.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			if w := r.warn.take(); len(w) != 0 {
				t.Errorf("warnings: %v", w)
			}
			var stored corev1.Pod
			if err := r.c.Get(ctx, client.ObjectKeyFromObject(p), &stored); err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(&stored)
			for what, v := range forbidden {
				if strings.Contains(string(raw), v) {
					t.Errorf("the stored Pod contains the %s", what)
				}
			}
			env := envOf(sidecarOf(t, &stored))
			switch q {
			case "mtls":
				var items []corev1.KeyToPath
				for _, v := range stored.Spec.Volumes {
					if v.Name == webhook.VolumeKafkaClientCert {
						items = v.Secret.Items
					}
				}
				want := []corev1.KeyToPath{{Key: "user.crt", Path: "tls.crt"}, {Key: "user.key", Path: "tls.key"}}
				if len(items) != 2 || items[0] != want[0] || items[1] != want[1] {
					t.Errorf("client certificate volume items %+v, want %+v", items, want)
				}
			case "oauth-cc":
				if ref := env["KQO_SASL_OAUTH_CLIENT_SECRET"].ValueFrom; ref == nil || ref.SecretKeyRef == nil || ref.SecretKeyRef.Name != "oauth-client" || ref.SecretKeyRef.Key != "secret" {
					t.Errorf("KQO_SASL_OAUTH_CLIENT_SECRET %+v, want a secretKeyRef to oauth-client/secret", env["KQO_SASL_OAUTH_CLIENT_SECRET"])
				}
			case "msk":
				for name, key := range map[string]string{"AWS_ACCESS_KEY_ID": "accessKeyId", "AWS_SECRET_ACCESS_KEY": "secretAccessKey", "AWS_SESSION_TOKEN": "sessionToken"} {
					e := env[name]
					if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "msk-user" || e.ValueFrom.SecretKeyRef.Key != key {
						t.Errorf("%s %+v, want a secretKeyRef to msk-user/%s", name, e, key)
					}
				}
				if o := env["AWS_SESSION_TOKEN"].ValueFrom.SecretKeyRef.Optional; o == nil || !*o {
					t.Errorf("AWS_SESSION_TOKEN is not optional")
				}
				// The binary starts with the credentials the kubelet would resolve; the rig's
				// broker refuses the mechanism, so the sidecar is not ready and its startup
				// probe says why (issue 30, case 8: it used to pass, and the application saw
				// an empty queue).
				side, exited, logs := launchSidecar(t, r.c, &stored, bin)
				waitProbeRefuses(t, side, exited, logs, "UNSUPPORTED_SASL_MECHANISM")
				if !strings.Contains(logs.String(), "SASL AWS_MSK_IAM") {
					t.Errorf("start line does not name AWS_MSK_IAM:\n%s", logs.String())
				}
				return
			}
			api, logs := startSidecar(t, r.c, &stored, bin)
			roundTrip(t, k, api, logs, q, "dlq."+q)
			for what, v := range forbidden {
				if strings.Contains(logs.String(), v) {
					t.Errorf("the sidecar logged the %s", what)
				}
			}
		})
	}
	if n := tokens.Issued(); n < 1 {
		t.Errorf("the token endpoint issued no token")
	}

	// AWS_MSK_IAM without a Secret: the sidecar can only use its own environment, which the
	// webhook cannot fill; the Pod gets the sidecar and a warning saying what it needs.
	r.queue(t, &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "msk-env"}, Spec: kqv1.KafkaClusterSpec{
		BootstrapServers: []string{"b-1.orders.abc123.c2.kafka.eu-west-1.amazonaws.com:9098"}, TLS: &kqv1.KafkaClusterTLS{},
		SASL: &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismAWSMSKIAM}}}, "msk-env", "msk-env", "dlq.msk-env", attempts)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "msk-env-worker", Labels: map[string]string{kqv1.QueueLabel: "msk-env"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}}}
	if err := r.c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	env := envOf(sidecarOf(t, p))
	if env["KQO_SASL_MECHANISM"].Value != "AWS_MSK_IAM" || env["AWS_ACCESS_KEY_ID"].Name != "" {
		t.Errorf("sidecar environment %v, want the mechanism and no AWS_* variables", env)
	}
	if w := r.warn.take(); len(w) != 1 || !strings.Contains(w[0], "AWS credentials in its own environment") || !strings.Contains(w[0], "AWS_WEB_IDENTITY_TOKEN_FILE") {
		t.Errorf("warnings %v, want one naming the variables the sidecar needs", w)
	}
}
