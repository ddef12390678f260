package kafka_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// classicGroup makes group a classic consumer group with a committed offset, as an
// application's franz-go group consumer does, and returns the topic it consumed.
func classicGroup(t *testing.T, group string) string {
	t.Helper()
	ctx := ctxT(t)
	topic := group + "-src"
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker.BootstrapServers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(broker.BootstrapServers()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for cons.PollFetches(ctx).NumRecords() == 0 {
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	return topic
}

// OtherGroupTypes names a classic group's type and says nothing of share groups or unknown
// ids; DeleteShareGroups refuses to delete the classic group, which keeps its offsets
// (issue 19, case 1). Without the check DeleteGroups deletes any group type.
func TestOtherGroupTypesAndDeleteShareGroups(t *testing.T) {
	c := newClient(t)
	ctx := ctxT(t)
	suffix := time.Now().Format("150405.000")
	classic, share, none := "classic-"+suffix, "share-"+suffix, "none-"+suffix
	topic := classicGroup(t, classic)
	m, err := kafka.NewShareMember(kafka.Config{BootstrapServers: broker.BootstrapServers()}, share, topic, 10, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, _ = m.Poll(pctx, 10) // joins: the share group exists
	cancel()
	defer m.Close()

	got, err := c.OtherGroupTypes(ctx, classic, share, none)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[classic] != kafka.GroupTypeClassic {
		t.Errorf("OtherGroupTypes = %v, want only %s: classic", got, classic)
	}
	res, err := c.DeleteShareGroups(ctx, classic, none)
	if err != nil {
		t.Fatal(err)
	}
	if !kafka.IsNotShareGroup(res[classic]) || res[none] != nil {
		t.Errorf("DeleteShareGroups = %v, want ErrNotShareGroup for %s and nil for %s", res, classic, none)
	}
	offs, err := kadm.NewClient(mustKgo(t)).FetchOffsets(ctx, classic)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(topic, 0); !ok || o.Err != nil || o.At != 1 {
		t.Errorf("committed offset of %s after DeleteShareGroups: %+v (found %v), want 1", classic, o, ok)
	}
}

func mustKgo(t *testing.T) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker.BootstrapServers()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Measured (issue 19, case 1): a franz-go share member whose group id is a classic group's
// spins on ShareGroupHeartbeat (the broker answers GROUP_ID_NOT_FOUND "is not a share group")
// while Poll returns neither records nor an error, so the republisher checks the group type
// itself. This logs the rate and fails when the spin is gone (a franz-go that backs off by
// itself), so docs/kafka-findings.md is kept true.
func TestShareMemberOnAClassicGroupIDSpins(t *testing.T) {
	newClient(t)
	ctx := ctxT(t)
	classic := "spin-" + time.Now().Format("150405.000")
	topic := classicGroup(t, classic)
	var heartbeats atomic.Int64
	m, err := kafka.NewShareMember(kafka.Config{BootstrapServers: broker.BootstrapServers(), BrokerWrites: []kafka.BrokerWriteFunc{func(api string, _ error) {
		if api == "ShareGroupHeartbeat" {
			heartbeats.Add(1)
		}
	}}}, classic, topic, 10, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	recs, perr := m.Poll(pctx, 10)
	cancel()
	m.Close()
	n := heartbeats.Load()
	t.Logf("share member on classic group %s for 3s: %d ShareGroupHeartbeat requests (%.0f/s), %d records, poll error %v", classic, n, float64(n)/3, len(recs), perr)
	if n < 100 {
		t.Errorf("%d heartbeats in 3s: franz-go no longer spins on a group id of another type; update docs/kafka-findings.md (the republisher's group-type back-off may be redundant)", n)
	}
}
