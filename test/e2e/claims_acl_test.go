package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// On a broker with an authorizer where the manager's principal may do everything but use the
// claims topic (an upgrade before the ACLs were granted), queues still become Ready — with
// ownership checked among the watched queues only — and each says why in a Warning Event
// ClaimsUnavailable naming the topic and the ACLs to grant. No claim is written.
func TestClaimsTopicDeniedByACLs(t *testing.T) {
	t.Parallel()
	rig.SkipWithoutRig(t, "the local apiserver and Kafka rig")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const password = "op-password-Qw81"
	r := newE2ERig(t, ctx, rig.KafkaOptions{SASLUsers: map[string]string{"op": password}, BrokerProps: map[string]string{
		"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		// The PLAINTEXT listeners (brokers, controllers and this test's admin) are ANONYMOUS.
		"super.users": "User:ANONYMOUS",
	}})
	dir, bin, k, kubeconfig, c := r.dir, r.bin, r.kafka, r.kubeconfig, r.c
	super, err := kgo.NewClient(kgo.SeedBrokers(k.BootstrapServers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer super.Close()
	adm := kadm.NewClient(super)
	allow := kadm.NewACLs().Allow("User:op").AllowHosts("*").Topics("*").Groups("*").Clusters().
		Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral)
	deny := kadm.NewACLs().Deny("User:op").DenyHosts("*").Topics("kafkaqueues.claims").
		Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral)
	for _, b := range []*kadm.ACLBuilder{allow, deny} {
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatalf("creating ACL %+v: %v", r, r.Err)
			}
		}
	}

	logPath := filepath.Join(dir, "manager.log")
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("manager log (tail):\n%s", tail(string(b), 4000))
		}
	}()
	startManager(t, bin, kubeconfig, logPath)

	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "op"}, StringData: map[string]string{"password": password}}); err != nil {
		t.Fatal(err)
	}
	kc := &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "secured"}, Spec: kqv1.KafkaClusterSpec{
		BootstrapServers: k.SASLBootstrapServers(),
		SASL:             &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismScramSHA512, SecretName: "op", Username: "op"},
	}}
	if err := c.Create(ctx, kc); err != nil {
		t.Fatal(err)
	}
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orders"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "secured"}, Topic: kqv1.QueueTopicSpec{Partitions: 1}}}
	if err := c.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2*time.Minute, func() string {
		if err := c.Get(ctx, client.ObjectKeyFromObject(sq), sq); err != nil {
			return err.Error()
		}
		if !meta.IsStatusConditionTrue(sq.Status.Conditions, kqv1.ConditionReady) {
			return "queue not Ready: " + conditionsOf(sq.Status.Conditions)
		}
		return ""
	})
	waitFor(t, 30*time.Second, func() string {
		var evs eventsv1.EventList
		if err := c.List(ctx, &evs, client.InNamespace("default")); err != nil {
			return err.Error()
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == "orders" && e.Reason == "ClaimsUnavailable" && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Note, "kafkaqueues.claims") && strings.Contains(e.Note, "Create, Describe, Read and Write") && strings.Contains(e.Note, "TOPIC_AUTHORIZATION_FAILED") {
				return ""
			}
		}
		return "no Warning Event ClaimsUnavailable naming the claims topic, the ACLs and the broker's refusal"
	})
	// Ready rests on the controller's answer to CreateTopics; the broker's metadata image,
	// which answers Metadata, trails it by a moment on a loaded machine: poll for the topic.
	var topics kadm.TopicDetails
	waitFor(t, 10*time.Second, func() string {
		var err error
		if topics, err = adm.ListTopics(ctx); err != nil {
			return err.Error()
		}
		if !topics.Has(sq.Status.TopicName) {
			return fmt.Sprintf("the queue's topic %s is missing: %v", sq.Status.TopicName, topics.Names())
		}
		return ""
	})
	// CREATE on the cluster lets the principal create any topic, this one included (the
	// broker checks the cluster before the topic's own ACLs), but nothing can be written to it.
	if topics.Has("kafkaqueues.claims") {
		ends, err := adm.ListEndOffsets(ctx, "kafkaqueues.claims")
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := ends.Lookup("kafkaqueues.claims", 0); o.Offset != 0 {
			t.Errorf("%d claim records were written though the principal may not", o.Offset)
		}
	}
}

func conditionsOf(cs []metav1.Condition) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.Type + "=" + string(c.Status) + " (" + c.Reason + ": " + c.Message + ") ")
	}
	return b.String()
}
