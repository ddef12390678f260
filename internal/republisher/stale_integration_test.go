package republisher_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/internal/republisher"
)

// staleQueue makes a one-partition topic holding one record and a group whose brokers
// refuse renews (share.renew.acknowledge.enable=false, KIP-1222) with the 15s lock (the 4.4
// minimum) and the Republisher limit attempts + 1, on the setup's broker; it returns a
// republisher for it (lease 60s: longer than the lock, so the sidecar tries to renew it) and
// the URL of its HTTP API.
func staleQueue(t *testing.T, s *setup, name string, attempts int32) (*republisher.Republisher, string, *prometheus.Registry) {
	t.Helper()
	ctx := context.Background()
	res, err := s.admin.CreateTopics(ctx, []kafka.NewTopic{{Name: name, Partitions: 1, ReplicationFactor: 1}})
	if err != nil || res[name].Err != nil {
		t.Fatalf("topic %s: %v %v", name, err, res[name].Err)
	}
	key := kafka.ResourceKey{Type: kafka.GroupResource, Name: name}
	alt, err := s.admin.IncrementalAlterConfigs(ctx, []kafka.Alteration{{Resource: key, Configs: []kafka.AlterConfig{
		{Name: "share.auto.offset.reset", Op: kafka.OpSet, Value: "earliest"},
		{Name: "share.delivery.count.limit", Op: kafka.OpSet, Value: strconv.Itoa(int(attempts) + 1)},
		{Name: "share.record.lock.duration.ms", Op: kafka.OpSet, Value: "15000"},
		{Name: "share.renew.acknowledge.enable", Op: kafka.OpSet, Value: "false"},
	}}})
	if err != nil || alt[key] != nil {
		t.Fatalf("group configs: %v %v", err, alt)
	}
	prod, err := kafka.NewProducer(kafka.Config{BootstrapServers: s.bootstrapServer})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.Produce(ctx, name, []byte("only"), []byte("only"), nil); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	rp, _ := s.start(t, republisher.Options{Topic: name, Group: name, DeadLetterTopic: s.dlq, MaxDeliveryAttempts: attempts,
		Lease: 60 * time.Second, Members: 2, MaxRecords: 1, Registerer: reg})
	srv := httptest.NewServer(rp.Handler())
	t.Cleanup(srv.Close)
	return rp, srv.URL, reg
}

// counter is the value of the series of name with label type=typ in reg (0 when absent).
func counter(t *testing.T, reg *prometheus.Registry, name, typ string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "type" && l.GetValue() == typ {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// ackHTTP sends one acknowledgement over the API and returns its HTTP status and result.
func ackHTTP(t *testing.T, base, id, typ string) (int, republisher.AckResult) {
	t.Helper()
	c := &republisher.Client{BaseURL: base}
	out, err := c.Ack(context.Background(), republisher.AckRequest{Acks: []republisher.Ack{{ID: id, Type: typ}}})
	if len(out.Results) != 1 {
		t.Fatalf("%s %s: %v, results %+v", typ, id, err, out.Results)
	}
	code := http.StatusOK
	if err != nil {
		code = out.Results[0].Code
	}
	return code, out.Results[0]
}

func receiveHTTP(t *testing.T, base string, within time.Duration) []republisher.ReceivedRecord {
	t.Helper()
	c := &republisher.Client{BaseURL: base}
	for deadline := time.Now().Add(within); time.Now().Before(deadline); {
		got, err := c.Receive(context.Background(), republisher.ReceiveRequest{MaxRecords: 1, WaitMs: 2000})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Records) > 0 {
			return got.Records
		}
	}
	return nil
}

// Issue 19 case 2 (b), on the real broker: the sidecar never answers OK for an
// acknowledgement the brokers did not take. With renews refused by the brokers, an
// application's renew is answered 409 BrokerRefused (not 200); once the brokers' lock has
// ended a renew is 410 LockExpired; the record is handed out again (delivery count 2) and the
// first holder's accept of its stale delivery is 410, not 200; the current delivery's accept
// is taken, and the record is neither dead-lettered nor delivered a third time.
func TestRepublisherRefusesStaleAcknowledgements(t *testing.T) {
	t.Parallel()
	s := newSetup(t, "stale")
	dl := &deadLetters{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dl.follow(ctx, t, s.bootstrapServer, s.dlq)

	t.Run("below the last attempt", func(t *testing.T) {
		_, base, reg := staleQueue(t, s, "stale-a", 3)
		first := receiveHTTP(t, base, 60*time.Second)
		if len(first) != 1 || first[0].DeliveryCount != 1 {
			t.Fatalf("first receive %+v", first)
		}
		lockEnds := time.Now().Add(15 * time.Second)
		time.Sleep(2 * time.Second)
		if code, res := ackHTTP(t, base, first[0].ID, "renew"); code != http.StatusConflict || res.Reason != republisher.RefusalBrokerRefused {
			t.Errorf("renew the brokers refuse: %d %+v, want 409 %s", code, res, republisher.RefusalBrokerRefused)
		}
		time.Sleep(time.Until(lockEnds) + 2*time.Second)
		if code, res := ackHTTP(t, base, first[0].ID, "renew"); code != http.StatusGone || res.Reason != republisher.RefusalLockExpired {
			t.Errorf("renew after the lock ended: %d %+v, want 410 %s", code, res, republisher.RefusalLockExpired)
		}
		again := receiveHTTP(t, base, 30*time.Second)
		if len(again) != 1 || again[0].Offset != first[0].Offset || again[0].DeliveryCount != 2 {
			t.Fatalf("second receive %+v, want offset %d again with delivery count 2", again, first[0].Offset)
		}
		if code, res := ackHTTP(t, base, first[0].ID, "accept"); code != http.StatusGone {
			t.Errorf("accept of the stale delivery: %d %+v, want 410", code, res)
		}
		if code, res := ackHTTP(t, base, again[0].ID, "accept"); code != http.StatusOK || res.Error != "" {
			t.Errorf("accept of the current delivery: %d %+v, want 200", code, res)
		}
		if more := receiveHTTP(t, base, 5*time.Second); len(more) != 0 {
			t.Errorf("delivered again after its accept: %+v", more)
		}
		// Regression (issue 30, case 4): acks_total counted an acknowledgement before the
		// brokers answered, so a refused renew counted as a renew. It counts what they took:
		// no renew (the application's and the sidecar's own were refused, a later one answered
		// 410 without asking them), one accept (the stale delivery's was 410).
		for typ, want := range map[string]float64{"renew": 0, "accept": 1} {
			if got := counter(t, reg, "kafkaqueues_republisher_acks_total", typ); got != want {
				t.Errorf("kafkaqueues_republisher_acks_total{type=%q} = %v, want %v", typ, got, want)
			}
		}
		// The application's renew and the sidecar's own renewals of the held record.
		if got := counter(t, reg, "kafkaqueues_republisher_acks_refused_total", "renew"); got < 1 {
			t.Errorf("kafkaqueues_republisher_acks_refused_total{type=\"renew\"} = %v, want at least 1", got)
		}
	})

	// The dead-letter path: a reject after the brokers' lock ended must not write the record
	// to the dead-letter topic while the brokers hand it to another consumer — it is refused
	// (410) and the record comes back with delivery count 2.
	t.Run("reject after the lock ended", func(t *testing.T) {
		_, base, _ := staleQueue(t, s, "stale-c", 3)
		first := receiveHTTP(t, base, 60*time.Second)
		if len(first) != 1 || first[0].DeliveryCount != 1 {
			t.Fatalf("first receive %+v", first)
		}
		time.Sleep(17 * time.Second)
		if code, res := ackHTTP(t, base, first[0].ID, "reject"); code != http.StatusGone || res.Reason != republisher.RefusalLockExpired {
			t.Errorf("reject after the lock ended: %d %+v, want 410 %s", code, res, republisher.RefusalLockExpired)
		}
		again := receiveHTTP(t, base, 30*time.Second)
		if len(again) != 1 || again[0].DeliveryCount != 2 {
			t.Fatalf("second receive %+v, want the record again with delivery count 2", again)
		}
		time.Sleep(2 * time.Second) // a dead-letter write would have landed by now
		for _, r := range dl.byValue()["only"] {
			if header(r, republisher.HeaderSourceTopic) == "stale-c" {
				t.Errorf("dead-lettered although the brokers took the lock back: %s, and delivered again (count %d)", header(r, republisher.HeaderReason), again[0].DeliveryCount)
			}
		}
		if code, res := ackHTTP(t, base, again[0].ID, "accept"); code != http.StatusOK {
			t.Errorf("accept of the current delivery: %d %+v", code, res)
		}
	})

	// On the last attempt (attempts 1, group limit 2): the lock ends under the application,
	// the brokers hand the record out on the reserved attempt and the sidecar dead-letters
	// it; the first holder's later accept must not answer OK — the record is not both
	// dead-lettered and accepted.
	t.Run("on the last attempt", func(t *testing.T) {
		_, base, _ := staleQueue(t, s, "stale-b", 1)
		first := receiveHTTP(t, base, 60*time.Second)
		if len(first) != 1 || first[0].DeliveryCount != 1 {
			t.Fatalf("first receive %+v", first)
		}
		time.Sleep(17 * time.Second)
		if got := receiveHTTP(t, base, 10*time.Second); len(got) != 0 {
			t.Errorf("the reserved attempt was handed out: %+v", got)
		}
		var dead []*kgo.Record
		for deadline := time.Now().Add(30 * time.Second); len(dead) == 0 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			dead = nil
			for _, r := range dl.byValue()["only"] {
				if header(r, republisher.HeaderSourceTopic) == "stale-b" {
					dead = append(dead, r)
				}
			}
		}
		if len(dead) != 1 || header(dead[0], republisher.HeaderSourceTopic) != "stale-b" || header(dead[0], republisher.HeaderReason) != republisher.ReasonOverAttempted {
			t.Fatalf("dead letters of the record: %d, want 1 from stale-b (%s)", len(dead), republisher.ReasonOverAttempted)
		}
		if code, res := ackHTTP(t, base, first[0].ID, "accept"); code == http.StatusOK || res.Error == "" {
			t.Errorf("accept of a record already dead-lettered: %d %+v, want an error (410)", code, res)
		}
	})
}
