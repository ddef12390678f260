package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// TestShareOffsetsOnTheBroker records what Kafka 4.4 does with AlterShareGroupOffsets and
// DescribeShareGroupOffsets in the cases OffsetReset depends on (docs/kafka-findings.md):
// a group that never had members or state, partitions the group holds no state for, and a
// group with a member.
func TestShareOffsetsOnTheBroker(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t)
	const topic, group = "offsets-findings", "offsets-findings-group"
	res, err := c.CreateTopics(ctx, []kafka.NewTopic{{Name: topic, Partitions: 3, ReplicationFactor: 1}})
	if err != nil || res[topic].Err != nil {
		t.Fatalf("create: %v %v", err, res[topic].Err)
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(broker.BootstrapServers()...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for p := int32(0); p < 3; p++ {
		for i := 0; i < 5; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	var end map[int32]int64
	eventually(t, func() string {
		if end, err = c.ListPartitionOffsets(ctx, topic, kafka.OffsetQuery{Latest: true}); err != nil {
			return err.Error()
		}
		if len(end) != 3 || end[0] != 5 || end[1] != 5 || end[2] != 5 {
			return fmt.Sprintf("end offsets %v, want 5 on each of 3 partitions", end)
		}
		return ""
	})

	// A group that never had a member: no state to describe. On a fresh broker the first
	// answer is COORDINATOR_NOT_AVAILABLE (the group coordinator's topic is created on first
	// use), a retriable error.
	eventually(t, func() string {
		before, err := c.ShareStartOffsets(ctx, group, topic)
		if err != nil || len(before) != 0 {
			return fmt.Sprintf("start offsets of a group that never existed: %v, %v; want none", before, err)
		}
		return ""
	})
	// Altering it on one partition of three is accepted and creates the group's state for
	// that partition only.
	if err := c.AlterShareStartOffsets(ctx, group, topic, map[int32]int64{1: 3}); err != nil {
		t.Fatalf("altering the offsets of a group that never had members: %v", err)
	}
	after, err := c.ShareStartOffsets(ctx, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := kadm.NewClient(prod).DescribeShareGroupOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("raw DescribeShareGroupOffsets after altering one partition: %+v", raw[group].Offsets)
	if len(after) != 1 || after[1] != 3 {
		t.Fatalf("start offsets after altering partition 1 to 3: %v; want only {1: 3}", after)
	}
	t.Logf("a never-used group: AlterShareGroupOffsets accepted, state only for the altered partition: %v", after)
	// The same offsets again: idempotent.
	if err := c.AlterShareStartOffsets(ctx, group, topic, map[int32]int64{0: 0, 1: 3, 2: 5}); err != nil {
		t.Fatalf("altering all three: %v", err)
	}
	if err := c.AlterShareStartOffsets(ctx, group, topic, map[int32]int64{0: 0, 1: 3, 2: 5}); err != nil {
		t.Fatalf("altering all three again: %v", err)
	}
	after, err = c.ShareStartOffsets(ctx, group, topic)
	if err != nil || len(after) != 3 || after[0] != 0 || after[1] != 3 || after[2] != 5 {
		t.Fatalf("start offsets after altering all three: %v, %v; want {0:0 1:3 2:5}", after, err)
	}
	// An offset beyond the log end is accepted as it is (no clamping to the end offset): the
	// operator must resolve offsets itself, never send guesses.
	if err := c.AlterShareStartOffsets(ctx, group, topic, map[int32]int64{0: 99}); err != nil {
		t.Fatalf("an offset beyond the log end: %v", err)
	}
	if got, err := c.ShareStartOffsets(ctx, group, topic); err != nil || got[0] != 99 {
		t.Fatalf("after setting partition 0 to 99 (end 5): %v, %v; want 99 as sent", got, err)
	}
	if err := c.AlterShareStartOffsets(ctx, group, topic, map[int32]int64{0: 0}); err != nil {
		t.Fatal(err)
	}

	// With a member: the brokers refuse the whole request.
	cons, err := kgo.NewClient(kgo.SeedBrokers(broker.BootstrapServers()...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	cons.PollFetches(pctx)
	cancel()
	var members int32
	eventually(t, func() string {
		gs, err := c.DescribeShareGroups(ctx, group)
		if err != nil {
			return err.Error()
		}
		members = gs[group].Members
		if members != 1 {
			return fmt.Sprintf("group %+v, want 1 member", gs[group])
		}
		return ""
	})
	err = c.AlterShareStartOffsets(ctx, group, topic, map[int32]int64{0: 5, 1: 5, 2: 5})
	if !errors.Is(err, kafka.ErrGroupNotEmpty) {
		t.Fatalf("altering with a member present: %v, want NON_EMPTY_GROUP", err)
	}
	t.Logf("with a member: %v", err)
	got, err := c.ShareStartOffsets(ctx, group, topic)
	if err != nil {
		t.Fatal(err)
	}
	for p, o := range got {
		if o == 5 && p != 2 {
			t.Errorf("partition %d moved to 5 although the request was refused: %v", p, got)
		}
	}
}
