package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// Issue 30, case 8: a KafkaCluster stayed Connected after its user's password was changed
// at the brokers, because the manager's pooled connections had authenticated before the
// change and Kafka does not authenticate them again. The probe authenticates a new
// connection each time: Connected turns False naming the refused authentication within a
// probe interval, and True again once the Secret holds the new password.
func TestClusterNoticesCredentialsThatStopWorking(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	k, _ := startKafka(t, rig.KafkaOptions{SASLUsers: map[string]string{"orders-app": "first-pw-Ka71"}})
	ns := r.newNamespace(t)
	ctx := ctxFor(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-app"}, StringData: map[string]string{"password": "first-pw-Ka71"}}
	if err := r.k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	kc := &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secured"}, Spec: kqv1.KafkaClusterSpec{
		BootstrapServers: k.SASLBootstrapServers(),
		SASL:             &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismScramSHA512, SecretName: "orders-app", Username: "orders-app"}}}
	if err := r.k8s.Create(ctx, kc); err != nil {
		t.Fatal(err)
	}
	r.waitCluster(t, kc, func(kc *kqv1.KafkaCluster) string {
		return condIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionTrue, "")
	})

	// The password changes at the brokers (as a Strimzi user operator or an admin does).
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.BootstrapServers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(context.Background(), nil, []kadm.UpsertSCRAM{{
		User: "orders-app", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "second-pw-Qm20"}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	r.waitCluster(t, kc, func(kc *kqv1.KafkaCluster) string {
		if s := condIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionFalse, kqv1.ReasonConnectionFailed); s != "" {
			return s
		}
		if c := findCondition(kc.Status.Conditions, kqv1.ConditionConnected); !strings.Contains(c.Message, "SASL_AUTHENTICATION_FAILED") {
			return "Connected message does not name the refused authentication: " + c.Message
		}
		return ""
	})
	t.Logf("Connected=False %s after the password changed (probe interval %s)", time.Since(changed).Round(time.Second), testOptions().ProbeInterval)

	// The Secret catches up: connected again.
	secret.StringData = map[string]string{"password": "second-pw-Qm20"}
	if err := r.k8s.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	r.waitCluster(t, kc, func(kc *kqv1.KafkaCluster) string {
		return condIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionTrue, "")
	})
}
