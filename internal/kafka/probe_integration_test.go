package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// JoinShareGroup joins with ShareGroupHeartbeat only: the member is assigned every partition
// of the topic, and no record is acquired — an application consuming next gets each record
// at its first delivery (count 1).
func TestJoinShareGroupAcquiresNothing(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t)
	topic := fmt.Sprintf("probe-%d", time.Now().UnixNano())
	group := topic + "-g"
	res, err := c.CreateTopics(ctx, []kafka.NewTopic{{Name: topic, Partitions: 2, ReplicationFactor: 1}})
	if err != nil || res[topic].Err != nil {
		t.Fatalf("creating %s: %v %v", topic, err, res[topic].Err)
	}
	g := kafka.ResourceKey{Type: kafka.GroupResource, Name: group}
	alt, err := c.IncrementalAlterConfigs(ctx, []kafka.Alteration{{Resource: g, Configs: []kafka.AlterConfig{{Name: "share.auto.offset.reset", Op: kafka.OpSet, Value: "earliest"}}}})
	if err != nil || alt[g] != nil {
		t.Fatalf("setting share.auto.offset.reset: %v %v", err, alt[g])
	}
	if err := rig.ProduceSpread(ctx, broker.BootstrapServers(), topic, 4); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // a first join, and one of a group that now exists (empty)
		j, err := c.JoinShareGroup(ctx, group, topic, 10*time.Second)
		if err != nil {
			t.Fatalf("join %d: %v", i, err)
		}
		if j.Partitions != 2 || j.MemberEpoch <= 0 {
			t.Errorf("join %d: %+v, want both partitions and an epoch", i, j)
		}
		t.Logf("join %d: %+v", i, j)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(broker.BootstrapServers()...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	counts := map[string]int32{}
	rig.Eventually(t, 30*time.Second, func() string {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		cons.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			counts[string(r.Value)] = r.DeliveryCount()
			r.Ack(kgo.AckAccept)
		})
		if len(counts) < 4 {
			return fmt.Sprintf("consumed %d of 4 records", len(counts))
		}
		return ""
	})
	for v, n := range counts {
		if n != 1 {
			t.Errorf("record %s at delivery %d after two joins, want 1: a join acquired it", v, n)
		}
	}
}
