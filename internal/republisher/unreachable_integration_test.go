package republisher_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/internal/republisher"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// Issue 30, case 8: a sidecar started while its broker was down passed its startup probe at
// once, and every receive answered an empty queue, so the application saw nothing to do and
// exited. Not ready and a receive error naming the refused connection while the broker is
// down; ready, and every record delivered, once it is back.
func TestNotReadyWhileTheBrokerIsDown(t *testing.T) {
	t.Parallel()
	s := newSetup(t, "unreachable")
	node := s.kafka.Nodes[0]
	s.kafka.StopNode(node)
	rp, ctx := s.start(t, republisher.Options{MaxDeliveryAttempts: maxAttempts, Lease: 30 * time.Second, Members: 2, MaxRecords: 20})
	rig.Eventually(t, 30*time.Second, func() string {
		if p := rp.Unready(); !strings.Contains(p, "connection refused") {
			return fmt.Sprintf("Unready() %q, want the refused connection", p)
		}
		return ""
	})
	if ds, err := rp.Receive(ctx, 20, 2*time.Second); !errors.Is(err, republisher.ErrCannotFetch) || !strings.Contains(err.Error(), "connection refused") || len(ds) > 0 {
		t.Errorf("receive while the broker is down: %d records, %v; want ErrCannotFetch naming the refused connection", len(ds), err)
	}
	if err := s.kafka.StartNode(ctx, node, nil); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, 90*time.Second, func() string {
		if p := rp.Unready(); p != "" {
			return "Unready() " + p
		}
		return ""
	})
	got := map[string]bool{}
	rig.Eventually(t, 60*time.Second, func() string {
		ds, err := rp.Receive(ctx, 20, 2*time.Second)
		if err != nil {
			return err.Error()
		}
		for _, d := range ds {
			got[string(d.Record.Value)] = true
			if err := rp.Ack(ctx, d.ID, kafka.AckAccept); err != nil {
				return err.Error()
			}
		}
		if len(got) < records {
			return fmt.Sprintf("%d of %d records received", len(got), records)
		}
		return ""
	})
}

// The same with credentials the brokers refuse: not ready, and a receive error, naming the
// authentication failure (issue 30, case 8).
func TestNotReadyWhileTheBrokersRefuseTheCredentials(t *testing.T) {
	t.Parallel()
	rig.SkipWithoutRig(t, "a Kafka broker")
	ctx := context.Background()
	k, err := rig.StartKafka(ctx, rig.KafkaOptions{Log: t.Logf, SASLUsers: map[string]string{"app": "right"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	admin, err := kafka.NewClient(kafka.Config{BootstrapServers: k.BootstrapServers()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(admin.Close)
	if res, err := admin.CreateTopics(ctx, []kafka.NewTopic{{Name: "creds", Partitions: 1, ReplicationFactor: 1}}); err != nil || res["creds"].Err != nil {
		t.Fatal(err, res["creds"].Err)
	}
	cfg := kafka.Config{BootstrapServers: k.SASLBootstrapServers(), SASL: &kafka.SASLSettings{Mechanism: kafka.SASLScramSHA256, Username: "app", Password: "wrong"}}
	rp, err := republisher.New(cfg, republisher.Options{Topic: "creds", Group: "creds", DeadLetterTopic: "dlq.creds", MaxDeliveryAttempts: maxAttempts, Lease: 30 * time.Second, Members: 1, MaxRecords: 1})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	t.Cleanup(func() { rp.Shutdown(context.Background()) })
	go rp.Run(rctx)
	rig.Eventually(t, 60*time.Second, func() string {
		if p := rp.Unready(); !strings.Contains(p, "SASL_AUTHENTICATION_FAILED") && !strings.Contains(strings.ToLower(p), "authentication failed") {
			return fmt.Sprintf("Unready() %q, want the refused authentication", p)
		}
		return ""
	})
	if _, err := rp.Receive(rctx, 1, 2*time.Second); err == nil || !strings.Contains(strings.ToLower(err.Error()), "authentication") {
		t.Errorf("receive with refused credentials: %v, want an error naming the authentication", err)
	}
}
