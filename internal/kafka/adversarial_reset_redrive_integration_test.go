package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// produceEach writes n records to each of partitions partitions of topic (created here).
func produceEach(t *testing.T, c *kafka.Client, topic string, partitions int32, n int) {
	t.Helper()
	ctx := ctxT(t)
	res, err := c.CreateTopics(ctx, []kafka.NewTopic{{Name: topic, Partitions: partitions, ReplicationFactor: 1}})
	if err != nil || res[topic].Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, res[topic].Err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(broker.BootstrapServers()...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < n; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// Regression: an instant before 1970 was sent to ListOffsets as a negative timestamp, and
// Kafka reads -1 as "latest" (and -2 earliest, -3 max timestamp): an OffsetReset toDatetime
// 1969-12-31T23:59:59.999Z, which asks for every record again, purged the queue instead.
// Every instant before the epoch must resolve like the epoch: the first record.
func TestListPartitionOffsetsBeforeTheEpoch(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t)
	const topic = "offsets-before-epoch"
	produceEach(t, c, topic, 2, 4)
	for _, at := range []time.Time{
		time.UnixMilli(-1), time.UnixMilli(-2), time.UnixMilli(-3), time.UnixMilli(-1000),
		time.Now().Add(-100 * 365 * 24 * time.Hour), // byDuration 100 years
		time.Unix(0, 0),
	} {
		got, err := c.ListPartitionOffsets(ctx, topic, kafka.OffsetQuery{At: at})
		if err != nil {
			t.Fatalf("at %s: %v", at.UTC(), err)
		}
		if len(got) != 2 || got[0] != 0 || got[1] != 0 {
			t.Errorf("offsets at %s (%d ms): %v; want the first record (0) of both partitions", at.UTC(), at.UnixMilli(), got)
		}
	}
}

// A redrive whose dead-letter topic is deleted while it runs must end with an error that says
// the topic is gone (the controller's fatal list turns it into Failed), not poll for ever
// with no records and no error. Measured on 4.4: the next transaction's offset commit fails
// with UNKNOWN_TOPIC_ID.
func TestRedriveSourceTopicDeletedWhileRunning(t *testing.T) {
	c := newClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	source, target := fmt.Sprintf("redrive-gone-src-%d", time.Now().UnixNano()), fmt.Sprintf("redrive-gone-dst-%d", time.Now().UnixNano())
	produceEach(t, c, source, 1, 50)
	if res, err := c.CreateTopics(ctx, []kafka.NewTopic{{Name: target, Partitions: 1, ReplicationFactor: 1}}); err != nil || res[target].Err != nil {
		t.Fatalf("create %s: %v %v", target, err, res[target].Err)
	}
	progressed := make(chan struct{}, 100)
	type result struct {
		p   kafka.RedriveProgress
		err error
	}
	done := make(chan result, 1)
	go func() {
		p, err := c.Redrive(ctx, kafka.RedriveOptions{
			ID: "kqo.redrive.adv-" + source, Source: source, Target: target,
			Bound: []kafka.RedriveBound{{Partition: 0, Start: 0, End: 50}}, RateLimit: 2,
			Decide:   func([]kafka.Header) kafka.RedriveDecision { return kafka.RedriveMove },
			Rewrite:  func(h []kafka.Header) []kafka.Header { return h },
			Progress: func(p kafka.RedriveProgress, _ float64) { progressed <- struct{}{} },
		})
		done <- result{p, err}
	}()
	// Wait for a committed transaction, then delete the dead-letter topic.
	for n := 0; n < 2; n++ {
		select {
		case <-progressed:
		case r := <-done:
			t.Fatalf("Redrive returned before the topic was deleted: %+v %v", r.p, r.err)
		}
	}
	if _, err := c.DeleteTopics(ctx, source); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		t.Logf("Redrive after its source was deleted: moved %d, err %v", r.p.Moved, r.err)
		if r.err == nil {
			t.Fatalf("Redrive returned no error after its source topic was deleted (progress %+v)", r.p)
		}
		if !kafka.IsNotFound(r.err) {
			t.Errorf("error %v does not say the topic is gone (IsNotFound)", r.err)
		}
	case <-ctx.Done():
		t.Fatal("Redrive still running 2 minutes after its source topic was deleted: the DeadLetterRedrive stays Running for ever")
	}
}
