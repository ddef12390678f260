package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// produceN writes n records spread over the topic's partitions (round robin).
func produceN(t *testing.T, bootstrap []string, topic string, n int) {
	t.Helper()
	if err := rig.ProduceSpread(ctxT(t), bootstrap, topic, n); err != nil {
		t.Fatal(err)
	}
}

// Issue 17: a queue whose group has never been assigned the partitions showed no lag at all,
// and partitions the brokers did not report were left out of the sum. Depth counts every
// partition of the topic from its offsets and the group's share.auto.offset.reset, reads the
// oldest record's timestamp, counts a topic's records, and does it all in one request per
// API per broker however many groups it reads.
func TestDepthCountsEveryPartitionFromTheReset(t *testing.T) {
	counter := &kafka.RequestCounter{}
	c := newClient(t, counter.Observe)
	ctx := ctxT(t)
	topic := "depth-" + fmt.Sprint(time.Now().UnixNano())
	if res, err := c.CreateTopics(ctx, []kafka.NewTopic{{Name: topic, Partitions: 3, ReplicationFactor: -1}}); err != nil || res[topic].Err != nil {
		t.Fatalf("create: %v %v", err, res[topic].Err)
	}
	before := time.Now().Add(-time.Second) // broker and test clocks are the same machine's
	produceN(t, broker.BootstrapServers(), topic, 5000)
	after := time.Now().Add(time.Second)

	// 40 groups that never had a member, half earliest, half latest.
	var qs []kafka.DepthQuery
	for i := 0; i < 40; i++ {
		reset := "earliest"
		if i%2 == 1 {
			reset = "latest"
		}
		qs = append(qs, kafka.DepthQuery{Topic: topic, Group: fmt.Sprintf("%s-g%d", topic, i), AutoOffsetReset: reset})
	}
	qs = append(qs, kafka.DepthQuery{Topic: topic, Group: topic + "-dur", AutoOffsetReset: "by_duration:PT1H"},
		kafka.DepthQuery{Topic: "no-such-topic-" + topic, Group: topic + "-missing", AutoOffsetReset: "earliest"})
	// Warm up franz-go's coordinator and metadata caches (on a fresh broker the group
	// coordinator answers COORDINATOR_NOT_AVAILABLE until __consumer_offsets is loaded), then
	// count one round.
	rig.Eventually(t, 60*time.Second, func() string {
		rep, err := c.Depth(ctx, qs, []string{topic})
		if err != nil {
			return err.Error()
		}
		if d := rep.Queues[qs[0].Group]; d.Err != nil {
			return d.Err.Error()
		}
		return ""
	})
	snap := counter.Snapshot()
	rep, err := c.Depth(ctx, qs, []string{topic})
	if err != nil {
		t.Fatal(err)
	}
	got := counter.Snapshot()
	for i, q := range qs[:40] {
		d := rep.Queues[q.Group]
		want := int64(5000)
		if i%2 == 1 {
			want = 0
		}
		if d.Err != nil || d.Backlog != want || d.Partial() || d.Partitions != 3 {
			t.Errorf("%s (%s): %+v, want backlog %d over 3 partitions, nothing unread", q.Group, q.AutoOffsetReset, d, want)
		}
		if want > 0 && (d.Oldest.Before(before) || d.Oldest.After(after)) {
			t.Errorf("%s: oldest %v, want within the produce window %v … %v", q.Group, d.Oldest, before, after)
		}
		if want == 0 && !d.Oldest.IsZero() {
			t.Errorf("%s: oldest %v with no backlog", q.Group, d.Oldest)
		}
	}
	if d := rep.Queues[topic+"-dur"]; d.Backlog != 5000 {
		t.Errorf("by_duration:PT1H: %+v, want 5000", d)
	}
	if d := rep.Queues[topic+"-missing"]; d.Err == nil || !kafka.IsNotFound(d.Err) {
		t.Errorf("missing topic: %+v, want a not-found error", d)
	}
	if tr := rep.Topics[topic]; tr.Err != nil || tr.Records != 5000 || len(tr.Unread) > 0 {
		t.Errorf("topic count %+v, want 5000", tr)
	}
	// One broker: one request of each API for 42 groups and 3 partitions; no Fetch, as the
	// warm-up rounds dated the batches at the start offsets, which have not moved.
	if n := got["DescribeShareGroupOffsets"] - snap["DescribeShareGroupOffsets"]; n != 1 {
		t.Errorf("DescribeShareGroupOffsets requests in one round: %d, want 1 (all groups batched)", n)
	}
	if n := got["Fetch"] - snap["Fetch"]; n != 0 {
		t.Errorf("Fetch requests in a round whose backlogs had not moved: %d, want 0", n)
	}
	if n := got["ListOffsets"] - snap["ListOffsets"]; n < 1 || n > 2 {
		t.Errorf("ListOffsets requests in one round: %d, want 1 (ends) + 1 (starts)", n)
	}

	// A share consumer that takes records moves the start offsets: the backlog of an earliest
	// group falls by what it acknowledged. The consumer's group must start at earliest.
	group := qs[0].Group
	key := kafka.ResourceKey{Type: kafka.GroupResource, Name: group}
	if res, err := c.IncrementalAlterConfigs(ctx, []kafka.Alteration{{Resource: key,
		Configs: []kafka.AlterConfig{{Name: "share.auto.offset.reset", Op: kafka.OpSet, Value: "earliest"}}}}); err != nil || res[key] != nil {
		t.Fatal(err, res[key])
	}
	m, err := kafka.NewShareMember(kafka.Config{BootstrapServers: broker.BootstrapServers()}, group, topic, 500, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	acked := 0
	for acked < 1000 && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		recs, _ := m.Poll(pctx, 1000-acked)
		cancel()
		for _, r := range recs {
			if err := m.Acknowledge(ctx, r, kafka.AckAccept); err != nil {
				t.Fatal(err)
			}
			acked++
		}
	}
	rig.Eventually(t, 30*time.Second, func() string {
		rep, err := c.Depth(ctx, qs[:1], nil)
		if err != nil {
			return err.Error()
		}
		if d := rep.Queues[group]; d.Backlog != int64(5000-acked) || d.Partial() {
			return fmt.Sprintf("after %d acknowledged: %+v, want backlog %d", acked, d, 5000-acked)
		}
		return ""
	})
}

// A partition whose leader is down is not counted as zero: it is listed in Unread and the
// rest of the topic is still counted (a partial answer says so).
func TestDepthMarksPartitionsOfADownBrokerUnread(t *testing.T) {
	rig.SkipWithoutRig(t, "a real Kafka cluster of two brokers")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	k, err := rig.StartKafka(ctx, rig.KafkaOptions{Brokers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop()
	c, err := kafka.NewClient(kafka.Config{BootstrapServers: k.BootstrapServers(), RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	topic := "depth-partial"
	if res, err := c.CreateTopics(ctx, []kafka.NewTopic{{Name: topic, Partitions: 4, ReplicationFactor: 1}}); err != nil || res[topic].Err != nil {
		t.Fatalf("create: %v %v", err, res[topic])
	}
	produceN(t, k.BootstrapServers(), topic, 400)
	kc, err := kgo.NewClient(kgo.SeedBrokers(k.BootstrapServers()...))
	if err != nil {
		t.Fatal(err)
	}
	defer kc.Close()
	adm := kadm.NewClient(kc)
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	// Stop broker 1 (a combined node: the quorum of two loses its majority, but broker 0
	// still serves the partitions it leads). The group's coordinator must live on broker 0.
	down := k.Nodes[1]
	var onDown []int32
	var upRecords int64
	for p, pd := range td[topic].Partitions {
		if pd.Leader == down.ID {
			onDown = append(onDown, p)
		} else {
			o, _ := ends.Lookup(topic, p)
			upRecords += o.Offset
		}
	}
	if len(onDown) == 0 || len(onDown) == 4 {
		t.Fatalf("want partitions on both brokers, leaders %+v", td[topic].Partitions)
	}
	// The coordinators answer once the brokers have made __consumer_offsets, which on a
	// loaded machine took longer than one pass over 50 names (every lookup failed): poll.
	group := ""
	var lastErr error
	rig.Eventually(t, 60*time.Second, func() string {
		for i := 0; group == "" && i < 50; i++ {
			g := fmt.Sprintf("partial-%d", i)
			co := adm.FindGroupCoordinators(ctx, g)
			if co[g].Err != nil {
				lastErr = co[g].Err
				continue
			}
			if co[g].NodeID != down.ID {
				group = g
			}
		}
		if group == "" {
			return fmt.Sprintf("no group id whose coordinator is on the broker that stays up (last lookup error: %v)", lastErr)
		}
		return ""
	})
	k.StopNode(down)
	q := []kafka.DepthQuery{{Topic: topic, Group: group, AutoOffsetReset: "earliest"}}
	rig.Eventually(t, 60*time.Second, func() string {
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		rep, err := c.Depth(rctx, q, nil)
		if err != nil {
			return err.Error()
		}
		d := rep.Queues[group]
		if d.Err != nil || len(d.Unread) != len(onDown) || d.Backlog != upRecords || d.Partitions != 4 {
			return fmt.Sprintf("depth %+v; want partitions %v unread and backlog %d from the others", d, onDown, upRecords)
		}
		return ""
	})
}

// Issue 30, case 3: the oldest-record age was 0 for queues with a backlog, and moved between
// queues from round to round, because the timestamp Fetch dated only the first partition
// with data in its response (Kafka returns no part of a batch for the others). Every queue's
// oldest record is dated in every round, whichever partition holds it and however large its
// batch; a backlog that has not moved is dated again without a Fetch.
func TestDepthDatesEveryPartition(t *testing.T) {
	t.Parallel()
	counter := &kafka.RequestCounter{}
	c := newClient(t, counter.Observe)
	ctx := ctxT(t)
	prefix := fmt.Sprintf("dates-%d", time.Now().UnixNano())
	const topics = 8
	now := time.Now().Truncate(time.Millisecond)
	var news []kafka.NewTopic
	for i := 0; i < topics; i++ {
		news = append(news, kafka.NewTopic{Name: fmt.Sprintf("%s-%d", prefix, i), Partitions: 3, ReplicationFactor: -1})
	}
	res, err := c.CreateTopics(ctx, news)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range news {
		if res[n.Name].Err != nil {
			t.Fatal(res[n.Name].Err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker.BootstrapServers()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Topic i: its oldest record (i+1 hours old) in partition i%3, fresh records in the
	// others; in topic 0 the fresh partitions' first batches are 200 KB (larger than a
	// partition's share of the Fetch).
	want := map[string]time.Time{}
	var recs []*kgo.Record
	for i, n := range news {
		old := now.Add(-time.Duration(i+1) * time.Hour)
		want[n.Name] = old
		for p := int32(0); p < 3; p++ {
			ts, value := now.Add(-time.Minute), []byte("fresh")
			if p == int32(i%3) {
				ts, value = old, []byte("old")
			} else if i == 0 {
				value = make([]byte, 200<<10)
			}
			recs = append(recs, &kgo.Record{Topic: n.Name, Partition: p, Timestamp: ts, Value: value})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var qs []kafka.DepthQuery
	for _, n := range news {
		qs = append(qs, kafka.DepthQuery{Topic: n.Name, Group: n.Name + "-g", AutoOffsetReset: "earliest"})
	}
	check := func(round string) {
		t.Helper()
		var rep kafka.DepthReport
		// A fresh broker may answer COORDINATOR_NOT_AVAILABLE for a while.
		rig.Eventually(t, 60*time.Second, func() string {
			var err error
			if rep, err = c.Depth(ctx, qs, nil); err != nil {
				return err.Error()
			}
			for _, q := range qs {
				if d := rep.Queues[q.Group]; d.Err != nil {
					return d.Err.Error()
				}
			}
			return ""
		})
		for _, q := range qs {
			d := rep.Queues[q.Group]
			if d.Backlog != 3 || len(d.Undated) > 0 || !d.Oldest.Equal(want[q.Topic]) {
				t.Errorf("%s round: %s: backlog %d, oldest %v, undated %v; want backlog 3, oldest %v", round, q.Topic, d.Backlog, d.Oldest, d.Undated, want[q.Topic])
			}
		}
	}
	check("first")
	before := counter.Snapshot()["Fetch"]
	check("second")
	if n := counter.Snapshot()["Fetch"] - before; n != 0 {
		t.Errorf("the second round sent %d Fetch requests for backlogs that had not moved, want 0", n)
	}
}
