package kafka_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// redriveTopics creates a one-partition source and target and writes n records to the source
// whose values are their offsets ("0" … "n-1").
func redriveTopics(t *testing.T, c *kafka.Client, n int) (source, target string) {
	t.Helper()
	ctx := ctxT(t)
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	source, target = "redrive-src-"+suffix, "redrive-dst-"+suffix
	res, err := c.CreateTopics(ctx, []kafka.NewTopic{{Name: source, Partitions: 1, ReplicationFactor: -1}, {Name: target, Partitions: 1, ReplicationFactor: -1}})
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range res {
		if r.Err != nil {
			t.Fatalf("creating %s: %v", name, r.Err)
		}
	}
	cl := mustKgo(t)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: source, Partition: 0, Value: []byte(strconv.Itoa(i))}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return source, target
}

// readCommitted reads every committed record of topic's partition 0 (read_committed) and
// returns their values in order.
func readCommitted(t *testing.T, topic string) []string {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker.BootstrapServers()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []string
	quiet := 0
	for quiet < 4 {
		ctx, cancel := context.WithTimeout(ctxT(t), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		if fs.NumRecords() == 0 {
			quiet++
			continue
		}
		quiet = 0
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}

// Found by a new user's run of docs/dead-letter-redrive.md: a redrive whose bound starts deep
// in the topic (a second redrive, startFrom AfterPreviousRedrive) with a rate limit read from
// the topic's start, stepped over the earlier records in offsets-only transactions, and the
// session aborted every second one, so it moved nothing, ever. It now starts reading at its
// bound and retries an aborted transaction in place; and long runs of records it does not
// move (filtered: offsets-only transactions back to back) still end.
func TestRedriveStartsAtItsBoundAndOutlastsOffsetsOnlyTransactions(t *testing.T) {
	c := newClient(t)
	source, target := redriveTopics(t, c, 150)
	move := func([]kafka.Header) kafka.RedriveDecision { return kafka.RedriveMove }
	keep := func(hs []kafka.Header) []kafka.Header { return hs }

	prog, err := c.Redrive(ctxT(t), kafka.RedriveOptions{
		ID: "redrive-deep-" + source, Source: source, Target: target,
		Bound:     []kafka.RedriveBound{{Partition: 0, Start: 130, End: 150}},
		RateLimit: 10, Decide: move, Rewrite: keep,
	})
	if err != nil {
		t.Fatalf("redrive of offsets 130-149 at 10/s: %v (progress %+v)", err, prog)
	}
	if !prog.Done || prog.Moved != 20 || prog.Read != 20 {
		t.Fatalf("progress %+v, want done with 20 read and moved", prog)
	}
	got := readCommitted(t, target)
	want := make([]string, 0, 20)
	for i := 130; i < 150; i++ {
		want = append(want, strconv.Itoa(i))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("target holds %v, want exactly %v", got, want)
	}

	// Every record filtered, ten to a transaction: fifteen offsets-only transactions in a row.
	source2, target2 := redriveTopics(t, c, 150)
	prog, err = c.Redrive(ctxT(t), kafka.RedriveOptions{
		ID: "redrive-filtered-" + source2, Source: source2, Target: target2,
		Bound:   []kafka.RedriveBound{{Partition: 0, Start: 0, End: 150}},
		Decide:  func([]kafka.Header) kafka.RedriveDecision { return kafka.RedriveFilter },
		Rewrite: keep, MaxBatch: 10,
	})
	if err != nil {
		t.Fatalf("redrive filtering every record: %v (progress %+v)", err, prog)
	}
	if !prog.Done || prog.Filtered != 150 || prog.Moved != 0 {
		t.Fatalf("progress %+v, want done with 150 filtered", prog)
	}
	if got := readCommitted(t, target2); len(got) != 0 {
		t.Fatalf("target holds %d records, want none", len(got))
	}
	// The finished redrive's group goes; deleting a group that is gone is not an error (the
	// reconciler deletes it once more after a restart).
	for i := 0; i < 2; i++ {
		if err := c.DeleteRedriveGroup(ctxT(t), "redrive-filtered-"+source2); err != nil {
			t.Fatalf("deleting the redrive's group (%d): %v", i+1, err)
		}
	}
}
