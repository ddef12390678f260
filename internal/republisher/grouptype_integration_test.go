package republisher_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/internal/republisher"
)

// Regression (issue 19, case 1): a republisher whose group id was a classic consumer group's
// sent ShareGroupHeartbeat thousands of times a second and its receives answered nothing,
// with no error anywhere. It now joins no member while the id is another type's: Problem and
// Receive name the group and its type, no heartbeat is sent, and once that group is gone the
// members join and records flow.
func TestRepublisherWaitsOutAGroupOfAnotherType(t *testing.T) {
	t.Parallel()
	s := newSetup(t, "rp-classic")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	group := "rp-classic-cg"
	// A classic group holds the id: a franz-go group consumer commits and leaves.
	cons, err := kgo.NewClient(kgo.SeedBrokers(s.bootstrapServer...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(s.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	for cons.PollFetches(ctx).NumRecords() == 0 {
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	cons.Close()

	var heartbeats atomic.Int64
	cfg := kafka.Config{BootstrapServers: s.bootstrapServer, BrokerWrites: []kafka.BrokerWriteFunc{func(api string, _ error) {
		if api == "ShareGroupHeartbeat" {
			heartbeats.Add(1)
		}
	}}}
	rp, err := republisher.New(cfg, republisher.Options{Topic: s.topic, Group: group, DeadLetterTopic: s.dlq, MaxDeliveryAttempts: maxAttempts, Members: 2, MaxRecords: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Shutdown(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for rp.Problem() == "" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if p, want := rp.Problem(), "group "+group+" is a classic group, not a share group"; p != want {
		t.Fatalf("Problem() = %q, want %q", p, want)
	}
	_, rerr := rp.Receive(ctx, 10, time.Second)
	if !errors.Is(rerr, republisher.ErrGroupNotShare) || !strings.Contains(rerr.Error(), "classic group") {
		t.Errorf("Receive error %v, want ErrGroupNotShare naming the classic group", rerr)
	}
	time.Sleep(3 * time.Second)
	if n := heartbeats.Load(); n != 0 {
		t.Errorf("%d ShareGroupHeartbeat requests while the id is a classic group's; want none", n)
	}

	// The classic group goes: the members join (after the next backoff) and records flow.
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.bootstrapServer...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if res, err := adm.DeleteGroup(ctx, group); err != nil || res.Err != nil {
		t.Fatalf("deleting the classic group: %v %v", err, res.Err)
	}
	key := kafka.ResourceKey{Type: kafka.GroupResource, Name: group}
	if res, err := s.admin.IncrementalAlterConfigs(ctx, []kafka.Alteration{{Resource: key, Configs: []kafka.AlterConfig{
		{Name: "share.auto.offset.reset", Op: kafka.OpSet, Value: "earliest"}}}}); err != nil || res[key] != nil {
		t.Fatalf("group config: %v %v", err, res[key])
	}
	var got []republisher.Delivery
	for len(got) == 0 && ctx.Err() == nil {
		got, err = rp.Receive(ctx, 10, 2*time.Second)
		if err != nil && !errors.Is(err, republisher.ErrGroupNotShare) {
			t.Fatal(err)
		}
	}
	if len(got) == 0 || rp.Problem() != "" {
		t.Fatalf("after the classic group was deleted: %d records, Problem %q", len(got), rp.Problem())
	}
	for _, d := range got {
		if err := rp.Ack(ctx, d.ID, kafka.AckAccept); err != nil {
			t.Error(err)
		}
	}
}
