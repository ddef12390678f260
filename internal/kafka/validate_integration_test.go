package kafka_test

import (
	"strings"
	"testing"
	"time"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// The ValidateOnly variants ask the brokers and leave nothing behind: no topic is created, no
// partition added, no config changed; a bad value comes back as the broker's own refusal.
func TestValidateOnlyLeavesNothingBehind(t *testing.T) {
	var counter kafka.RequestCounter
	c := newClient(t, counter.Observe)
	ctx := ctxT(t)
	const fresh, bad, existing = "validate-fresh", "validate-bad", "validate-existing"

	res, err := c.ValidateCreateTopics(ctx, []kafka.NewTopic{
		{Name: fresh, Partitions: 2, ReplicationFactor: -1, Configs: map[string]string{"retention.ms": "3600000"}},
		{Name: bad, Partitions: 1, ReplicationFactor: -1, Configs: map[string]string{"cleanup.policy": "bogus"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if e := res[fresh].Err; e != nil {
		t.Errorf("valid topic refused: %v", e)
	}
	if e := res[bad].Err; !kafka.IsInvalidConfig(e) || !strings.Contains(e.Error(), "cleanup.policy") || !strings.Contains(e.Error(), "bogus") {
		t.Errorf("cleanup.policy=bogus: %v, want INVALID_CONFIG naming the config and value", e)
	}
	if counter.Snapshot()["CreateTopics"] == 0 {
		t.Errorf("no CreateTopics request reached a broker: %v", counter.Snapshot())
	}
	topics, err := c.DescribeTopics(ctx, fresh, bad)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{fresh, bad} {
		if !kafka.IsNotFound(topics[name].Err) {
			t.Errorf("validate-only created topic %s: %+v", name, topics[name])
		}
	}

	// An existing topic: growing and altering are checked, not made.
	if res, err := c.CreateTopics(ctx, []kafka.NewTopic{{Name: existing, Partitions: 1, ReplicationFactor: -1}}); err != nil || res[existing].Err != nil {
		t.Fatalf("creating %s: %v %v", existing, err, res[existing].Err)
	}
	t.Cleanup(func() { _, _ = c.DeleteTopics(ctxT(t), existing) })
	if res, err := c.ValidateCreateTopics(ctx, []kafka.NewTopic{{Name: existing, Partitions: 1, ReplicationFactor: -1}}); err != nil || !kafka.IsAlreadyExists(res[existing].Err) {
		t.Errorf("validate-only create of an existing topic: %v %v, want TOPIC_ALREADY_EXISTS", err, res[existing].Err)
	}
	grow, err := c.ValidateGrowPartitions(ctx, map[string]int32{existing: 4})
	if err != nil || grow[existing] != nil {
		t.Errorf("validate-only grow: %v %v", err, grow[existing])
	}
	key := kafka.ResourceKey{Type: kafka.TopicResource, Name: existing}
	alt, err := c.ValidateIncrementalAlterConfigs(ctx, []kafka.Alteration{{Resource: key, Configs: []kafka.AlterConfig{{Name: "retention.ms", Op: kafka.OpSet, Value: "7200000"}}}})
	if err != nil || alt[key] != nil {
		t.Errorf("validate-only alter: %v %v", err, alt[key])
	}
	alt, err = c.ValidateIncrementalAlterConfigs(ctx, []kafka.Alteration{{Resource: key, Configs: []kafka.AlterConfig{{Name: "retention.ms", Op: kafka.OpSet, Value: "abc"}}}})
	if err != nil || !kafka.IsInvalidConfig(alt[key]) || !strings.Contains(alt[key].Error(), "retention.ms") {
		t.Errorf("validate-only alter retention.ms=abc: %v %v, want INVALID_CONFIG naming retention.ms", err, alt[key])
	}
	// The topic was created a moment ago: the broker's metadata may not list it yet.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		topics, err = c.DescribeTopics(ctx, existing)
		if err != nil || topics[existing].Err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || topics[existing].Partitions != 1 {
		t.Errorf("validate-only grow changed %s: %v %+v", existing, err, topics[existing])
	}
	cfgs, err := c.DescribeConfigs(ctx, []kafka.ResourceKey{key})
	if err != nil {
		t.Fatal(err)
	}
	if e := cfgs[key].Configs["retention.ms"]; e.IsOverride() {
		t.Errorf("validate-only alter set retention.ms: %+v", e)
	}
}
