package kafka

import (
	"context"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Provenance headers of the brokers' own dead letters (KIP-1191, measured on Kafka 4.4.0:
// docs/kafka-findings.md). The brokers copy key and value (errors.deadletterqueue.copy.record.enable)
// but not the original record's headers.
const (
	brokerDLQTopicHeader     = "__dlq.errors.topic"
	brokerDLQPartitionHeader = "__dlq.errors.partition"
	brokerDLQOffsetHeader    = "__dlq.errors.offset"
)

// originLookupTimeout bounds one batch's reading of the origin records.
const originLookupTimeout = 30 * time.Second

type originKey struct {
	partition int32
	offset    int64
}

// withOrigins returns, for every record of rs, the headers Decide and Rewrite see: the
// record's own, except for a broker-written dead letter of target (its __dlq.errors.topic is
// target), whose original headers the brokers dropped: those are read back from the origin
// record in target (__dlq.errors.partition / .offset) and put before the record's own
// __dlq.errors.* headers. An origin record no longer in target (retention) restores nothing.
func (c *Client) withOrigins(ctx context.Context, target string, rs []*kgo.Record) ([][]Header, error) {
	out := make([][]Header, len(rs))
	want := map[int32]map[int64]bool{}
	keys := make([]*originKey, len(rs))
	for i, r := range rs {
		hs := fromKgoHeaders(r.Headers)
		out[i] = hs
		k, ok := brokerOrigin(hs, target)
		if !ok {
			continue
		}
		keys[i] = &k
		if want[k.partition] == nil {
			want[k.partition] = map[int64]bool{}
		}
		want[k.partition][k.offset] = true
	}
	if len(want) == 0 {
		return out, nil
	}
	found, err := c.readOrigins(ctx, target, want)
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		if k == nil {
			continue
		}
		if orig, ok := found[*k]; ok {
			out[i] = append(append([]Header(nil), orig...), out[i]...)
		}
	}
	return out, nil
}

// brokerOrigin is where a broker-written dead letter of target came from.
func brokerOrigin(hs []Header, target string) (originKey, bool) {
	var topic, part, off string
	for _, h := range hs {
		switch h.Key {
		case brokerDLQTopicHeader:
			topic = string(h.Value)
		case brokerDLQPartitionHeader:
			part = string(h.Value)
		case brokerDLQOffsetHeader:
			off = string(h.Value)
		}
	}
	if topic != target {
		return originKey{}, false
	}
	p, err1 := strconv.ParseInt(part, 10, 32)
	o, err2 := strconv.ParseInt(off, 10, 64)
	if err1 != nil || err2 != nil {
		return originKey{}, false
	}
	return originKey{int32(p), o}, true
}

// readOrigins reads, per partition of topic, from the lowest to the highest wanted offset and
// returns the headers of the wanted records found. It stops a partition at its high watermark
// and gives up after originLookupTimeout (what was found by then is returned).
func (c *Client) readOrigins(ctx context.Context, topic string, want map[int32]map[int64]bool) (map[originKey][]Header, error) {
	from := map[int32]kgo.Offset{}
	last := map[int32]int64{}
	for p, offs := range want {
		lo, hi := int64(-1), int64(-1)
		for o := range offs {
			if lo < 0 || o < lo {
				lo = o
			}
			hi = max(hi, o)
		}
		from[p] = kgo.NewOffset().At(lo)
		last[p] = hi
	}
	opts, _, err := baseOpts(c.cfg)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		kgo.FetchMaxWait(200*time.Millisecond))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, originLookupTimeout)
	defer cancel()
	found := map[originKey][]Header{}
	left := len(from)
	done := map[int32]bool{}
	finish := func(p int32) {
		if !done[p] {
			done[p] = true
			left--
			cl.PauseFetchPartitions(map[string][]int32{topic: {p}})
		}
	}
	for left > 0 && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if done[fp.Partition] {
				return
			}
			for _, r := range fp.Records {
				if want[r.Partition][r.Offset] {
					found[originKey{r.Partition, r.Offset}] = fromKgoHeaders(r.Headers)
				}
				if r.Offset >= last[r.Partition] {
					finish(r.Partition)
					return
				}
			}
			if fp.Err == nil && fp.HighWatermark >= 0 && fp.HighWatermark <= last[fp.Partition] {
				finish(fp.Partition) // the wanted offsets are beyond what the partition holds
			} else if n := len(fp.Records); n > 0 && fp.Records[n-1].Offset+1 >= fp.HighWatermark {
				finish(fp.Partition)
			}
		})
	}
	return found, nil
}
