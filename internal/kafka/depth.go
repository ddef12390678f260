package kafka

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DepthQuery names one queue whose depth Depth reads: its topic, its share group and the
// group's effective share.auto.offset.reset ("latest", "earliest" or
// "by_duration:<ISO-8601 duration>", KIP-932; "" means latest, the broker default), which
// says where the group would start on a partition it holds no state for yet.
type DepthQuery struct {
	Topic           string
	Group           string
	AutoOffsetReset string
}

// QueueDepth is one queue's depth as one Depth round read it.
type QueueDepth struct {
	// Partitions is the topic's partition count (from the same round's Metadata).
	Partitions int32
	// Backlog is the records not yet acknowledged, summed over the partitions that could be
	// read: per partition the broker's share-partition lag (DescribeShareGroupOffsets v1+,
	// KIP-1226) when it reports one, else end offset − share-partition start offset; on a
	// partition the group holds no state for, what the group would start with under
	// share.auto.offset.reset: 0 for latest, end − log start offset for earliest, end − the
	// offset at now − duration for by_duration. It counts records acquired by a consumer and
	// not yet acknowledged (in flight) as well as visible ones: Kafka does not report
	// in-flight counts in any admin response (4.4).
	Backlog int64
	// Unread lists the partitions whose backlog could not be read (their leader or the
	// group's coordinator answered with an error, or did not answer): Backlog is then a
	// partial sum. Empty when every partition was counted.
	Unread []int32
	// Oldest is the timestamp of the oldest unacknowledged record: the smallest, over the
	// partitions with a backlog, first timestamp of the record batch that holds the
	// share-partition start offset (or the offset the group would start at). A batch's
	// records are at most the producer's linger apart, so Oldest may be that much older
	// than the record itself; exact when the start offset begins a batch. Zero when there
	// is no backlog or no timestamp could be read; over the dated partitions only (a lower
	// bound of the age) when Undated is not empty.
	Oldest time.Time
	// Undated lists the partitions with a backlog whose oldest record's timestamp could not
	// be read this round (their leader did not answer the Fetch, or their batches did not
	// fit in the round's Fetch budget).
	Undated []int32
	// Err is set when nothing could be read for the queue (topic missing, group
	// unreadable, every request failed); the other fields are then meaningless.
	Err error
}

// Partial reports a depth that left partitions out.
func (d QueueDepth) Partial() bool { return len(d.Unread) > 0 }

// TopicRecords is a topic's record count: the sum over its partitions of end offset − log
// start offset (records deleted by retention or compaction not counted; a compacted topic's
// count is an upper bound).
type TopicRecords struct {
	Records int64
	// Unread lists partitions whose offsets could not be read (Records is then partial).
	Unread []int32
	// Err is set when the topic could not be read at all (e.g. it does not exist).
	Err error
}

// DepthReport is one Depth round: every queue by group id, every counted topic by name.
type DepthReport struct {
	Queues map[string]QueueDepth
	Topics map[string]TopicRecords
}

// batchHeaderLen is the bytes of a record batch (magic 2) up to and including maxTimestamp.
const batchHeaderLen = 43

// Depth's timestamp Fetch. Kafka (Fetch v3 and later) never returns part of a record batch: a
// partition whose first batch is larger than its PartitionMaxBytes answers with no records,
// except the first partition with data in the response, whose first batch comes whole
// (KIP-74). So each partition may return a whole ordinary batch, and a partition that came
// back empty is asked again in the next request to its leader, up to
// depthFetchRequestsPerLeader requests a round (each dates at least one partition).
const (
	depthFetchPartitionBytes    = 64 << 10
	depthFetchMaxBytes          = 1 << 20
	depthFetchRequestsPerLeader = 8
)

// Depth reads the depth of many queues and the record counts of many topics in one round of
// batched requests, whatever their number:
//   - one Metadata request for every topic (partitions, leaders, topic ids);
//   - one DescribeShareGroupOffsets per group coordinator for every group (kadm shards it;
//     FindCoordinator is batched and cached by franz-go);
//   - one ListOffsets (latest) per partition leader for every partition;
//   - one ListOffsets per leader for the partitions that need a start: the log start of
//     counted topics and of queues with earliest, now − duration for by_duration;
//   - one Fetch per leader of the partitions with a backlog whose oldest batch is not known
//     from an earlier round (the batch at an offset never changes, so an idle backlog costs
//     no Fetch after its first read), more when their batches do not fit in one response
//     (depthFetchRequestsPerLeader); a partition left undated is in QueueDepth.Undated.
//
// A request-level failure of Metadata is returned as the error; any other failure marks the
// partitions it covered unread (QueueDepth.Unread / Err). Needs share.version ≥ 1 for the
// groups (UNSUPPORTED_VERSION in each QueueDepth.Err otherwise) and DescribeShareGroupOffsets
// v1 (Kafka 4.2) for the broker's lag.
func (c *Client) Depth(ctx context.Context, queues []DepthQuery, countTopics []string) (DepthReport, error) {
	rep := DepthReport{Queues: make(map[string]QueueDepth, len(queues)), Topics: make(map[string]TopicRecords, len(countTopics))}
	topicSet := map[string]bool{}
	for _, q := range queues {
		topicSet[q.Topic] = true
	}
	for _, t := range countTopics {
		topicSet[t] = true
	}
	if len(topicSet) == 0 {
		return rep, nil
	}
	meta, err := c.depthMetadata(ctx, sortedKeys(topicSet))
	if err != nil {
		return rep, err
	}

	// Group offsets, one request per coordinator.
	groups := make([]string, 0, len(queues))
	for _, q := range queues {
		if meta[q.Topic].err == nil {
			groups = append(groups, q.Group)
		}
	}
	var shareOffs map[string]groupOffsets
	var groupsErr error
	if len(groups) > 0 {
		shareOffs, groupsErr = c.depthGroupOffsets(ctx, groups)
	}

	// End offsets of every partition.
	var all []tp
	for t, m := range meta {
		if m.err != nil {
			continue
		}
		for p := range m.leaders {
			all = append(all, tp{t, p})
		}
	}
	ends := c.depthListOffsets(ctx, all, func(tp) int64 { return -1 })

	r := depthRound{meta: meta, shareOffs: shareOffs, groupsErr: groupsErr, ends: ends, now: time.Now()}
	starts := r.startQueries(queues, countTopics)
	startTPs := make([]tp, 0, len(starts))
	for k := range starts {
		startTPs = append(startTPs, k)
	}
	r.starts = c.depthListOffsets(ctx, startTPs, func(k tp) int64 { return starts[k] })
	for _, t := range countTopics {
		rep.Topics[t] = r.topicRecords(t)
	}

	// Per queue: backlog per partition, and where to read the oldest timestamp.
	fetchAt := map[tpo]bool{}
	from := map[string]map[int32]int64{} // by group: partition → backlog start
	for _, q := range queues {
		d, qfrom := r.queueBacklog(q)
		rep.Queues[q.Group] = d
		if len(qfrom) > 0 {
			from[q.Group] = qfrom
		}
		for p, o := range qfrom {
			fetchAt[tpo{tp{q.Topic, p}, o}] = true
		}
	}

	// Oldest record: the first timestamp of the batch at each backlog's start.
	stamps := c.depthTimestamps(ctx, meta, fetchAt)
	for _, q := range queues {
		d := rep.Queues[q.Group]
		if d.Err != nil {
			continue
		}
		for p, o := range from[q.Group] {
			ts, ok := stamps[tpo{tp{q.Topic, p}, o}]
			switch {
			case !ok:
				d.Undated = append(d.Undated, p)
			case d.Oldest.IsZero() || ts.Before(d.Oldest):
				d.Oldest = ts
			}
		}
		slices.Sort(d.Undated)
		rep.Queues[q.Group] = d
	}
	return rep, nil
}

// depthRound is what one Depth call read: topic metadata, the groups' share-partition
// offsets, end offsets and the starts asked for.
type depthRound struct {
	meta         map[string]topicMeta
	shareOffs    map[string]groupOffsets
	groupsErr    error
	ends, starts map[tp]int64
	now          time.Time
}

// startQueries are the ListOffsets timestamps a round needs, by partition: the log start
// (-2) of counted topics, and a queue's reset where its group holds no state.
func (r *depthRound) startQueries(queues []DepthQuery, countTopics []string) map[tp]int64 {
	starts := map[tp]int64{}
	for _, t := range countTopics {
		for p := range r.meta[t].leaders {
			starts[tp{t, p}] = -2
		}
	}
	for _, q := range queues {
		m := r.meta[q.Topic]
		if m.err != nil || r.groupsErr != nil {
			continue
		}
		g := r.shareOffs[q.Group]
		if g.err != nil {
			continue
		}
		ts, ok := resetTimestamp(q.AutoOffsetReset, r.now)
		if !ok {
			continue // latest: no backlog where the group holds no state
		}
		for p := range m.leaders {
			if _, held := g.parts[tp{q.Topic, p}]; !held {
				starts[tp{q.Topic, p}] = ts
			}
		}
	}
	return starts
}

// topicRecords counts a topic's records, from log start to end.
func (r *depthRound) topicRecords(t string) TopicRecords {
	m := r.meta[t]
	if m.err != nil {
		return TopicRecords{Err: m.err}
	}
	var tr TopicRecords
	for _, p := range m.partitions() {
		e, eok := r.ends[tp{t, p}]
		s, sok := r.starts[tp{t, p}]
		if !eok || !sok {
			tr.Unread = append(tr.Unread, p)
			continue
		}
		tr.Records += max(e-s, 0)
	}
	return tr
}

// queueBacklog is a queue's backlog per partition (the broker's lag where it reports one, else
// end − start) and, by partition, the offset where each backlog starts (where to read the
// oldest record's time).
func (r *depthRound) queueBacklog(q DepthQuery) (QueueDepth, map[int32]int64) {
	m := r.meta[q.Topic]
	d := QueueDepth{Partitions: int32(len(m.leaders))}
	switch {
	case m.err != nil:
		d.Err = m.err
	case r.groupsErr != nil:
		d.Err = r.groupsErr
	case r.shareOffs[q.Group].err != nil:
		d.Err = r.shareOffs[q.Group].err
	}
	if d.Err != nil {
		return d, nil
	}
	g := r.shareOffs[q.Group]
	_, resets := resetTimestamp(q.AutoOffsetReset, r.now)
	fromAt := map[int32]int64{}
	for _, p := range m.partitions() {
		k := tp{q.Topic, p}
		end, eok := r.ends[k]
		held, isHeld := g.parts[k]
		var from int64
		var lag int64 = -1
		switch {
		case !eok, isHeld && held.err != nil:
			d.Unread = append(d.Unread, p)
			continue
		case isHeld:
			from, lag = held.start, held.lag
		case !resets:
			from = end
		default:
			s, ok := r.starts[k]
			if !ok {
				d.Unread = append(d.Unread, p)
				continue
			}
			from = s
		}
		n := max(end-from, 0)
		if lag >= 0 {
			n = lag
		}
		d.Backlog += n
		if n > 0 && from < end {
			fromAt[p] = from
		}
	}
	return d, fromAt
}

type tp struct {
	topic     string
	partition int32
}

type topicMeta struct {
	id      [16]byte
	leaders map[int32]int32 // partition → leader (-1: none)
	err     error
}

func (m topicMeta) partitions() []int32 {
	ps := make([]int32, 0, len(m.leaders))
	for p := range m.leaders {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

func (c *Client) depthMetadata(ctx context.Context, topics []string) (out_ map[string]topicMeta, err_ error) {
	start := time.Now()
	defer func() { c.record("Metadata", start, err_) }()
	resp, err := c.metadata(ctx, topics)
	if err != nil {
		return nil, err
	}
	out := make(map[string]topicMeta, len(topics))
	for _, t := range topics {
		out[t] = topicMeta{err: wrap("Metadata", "topic "+t, kerr.UnknownTopicOrPartition)}
	}
	for _, rt := range resp.Topics {
		if rt.Topic == nil {
			continue
		}
		m := topicMeta{id: rt.TopicID, leaders: map[int32]int32{}}
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			m.err = wrap("Metadata", "topic "+*rt.Topic, err)
		}
		for _, p := range rt.Partitions {
			m.leaders[p.Partition] = p.Leader
		}
		out[*rt.Topic] = m
	}
	return out, nil
}

type heldOffset struct {
	start, lag int64
	err        error
}

type groupOffsets struct {
	parts map[tp]heldOffset // partitions the group holds state for
	err   error
}

// depthGroupOffsets describes the share-partition start offsets of groups, one request per
// coordinator (kadm.DescribeShareGroupOffsets). A group that does not exist holds no state.
func (c *Client) depthGroupOffsets(ctx context.Context, groups []string) (out_ map[string]groupOffsets, err_ error) {
	start := time.Now()
	defer func() { c.record("DescribeShareGroupOffsets", start, err_) }()
	described, err := c.adm.DescribeShareGroupOffsets(ctx, groups...)
	out := make(map[string]groupOffsets, len(groups))
	for _, g := range groups {
		d, ok := described[g]
		switch {
		case !ok && err != nil:
			// The shard holding this group failed (coordinator down, timeout).
			out[g] = groupOffsets{err: wrap("DescribeShareGroupOffsets", "group "+g, err)}
		case !ok, d.Err != nil && IsNotFound(d.Err):
			out[g] = groupOffsets{parts: map[tp]heldOffset{}}
		case d.Err != nil:
			out[g] = groupOffsets{err: wrap("DescribeShareGroupOffsets", "group "+g, d.Err)}
		default:
			parts := map[tp]heldOffset{}
			for t, ps := range d.Offsets {
				for p, o := range ps {
					if o.Err == nil && o.StartOffset < 0 {
						continue // no state for this partition yet
					}
					parts[tp{t, p}] = heldOffset{start: o.StartOffset, lag: o.Lag, err: o.Err}
				}
			}
			out[g] = groupOffsets{parts: parts}
		}
	}
	if len(described) == 0 && err != nil {
		return out, wrap("DescribeShareGroupOffsets", "", err)
	}
	return out, nil
}

// depthListOffsets lists one offset per partition (timestamp -1 latest, -2 earliest, or a
// time in ms) in one ListOffsets per leader (kgo shards it). Partitions that failed are left
// out of the result.
func (c *Client) depthListOffsets(ctx context.Context, tps []tp, timestamp func(tp) int64) map[tp]int64 {
	out := make(map[tp]int64, len(tps))
	if len(tps) == 0 {
		return out
	}
	start := time.Now()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	byTopic := map[string]int{}
	for _, k := range tps {
		i, ok := byTopic[k.topic]
		if !ok {
			i = len(req.Topics)
			byTopic[k.topic] = i
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = k.topic
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = k.partition
		rp.Timestamp = timestamp(k)
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	var firstErr error
	for _, shard := range c.cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			firstErr = cmpErr(firstErr, shard.Err)
			continue
		}
		resp := shard.Resp.(*kmsg.ListOffsetsResponse)
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					firstErr = cmpErr(firstErr, err)
					continue
				}
				k := tp{rt.Topic, rp.Partition}
				off := rp.Offset
				if off < 0 && timestamp(k) >= 0 {
					// No record at or after the time: the group would start at the end
					// offset, so the caller counts no backlog there.
					off = 1<<63 - 1
				}
				out[k] = off
			}
		}
	}
	c.record("ListOffsets", start, firstErr)
	return out
}

func cmpErr(first, err error) error {
	if first == nil {
		return err
	}
	return first
}

// tpo is a partition and an offset in it.
type tpo struct {
	tp
	offset int64
}

// depthTimestamps reads, for each partition and offset of at, the first timestamp of the
// record batch holding the offset (log-append-time batches give their append time): from
// c.dates where an earlier round read that batch, else by Fetch, up to
// depthFetchRequestsPerLeader requests per leader (see depthFetchPartitionBytes). A partition
// asked at several offsets (queues sharing a topic) is asked at one offset per request.
// Partitions that fail or stay empty are left out.
func (c *Client) depthTimestamps(ctx context.Context, meta map[string]topicMeta, at map[tpo]bool) map[tpo]time.Time {
	now := time.Now()
	out := make(map[tpo]time.Time, len(at))
	byLeader := map[int32][]tpo{}
	for k := range at {
		m := meta[k.topic]
		if ts, ok := c.dates.lookup(m.id, k, now); ok {
			out[k] = ts
			continue
		}
		if leader, ok := m.leaders[k.partition]; ok && leader >= 0 {
			byLeader[leader] = append(byLeader[leader], k)
		}
	}
	names := map[[16]byte]string{}
	for t, m := range meta {
		names[m.id] = t
	}
	for leader, pending := range byLeader {
		slices.SortFunc(pending, func(a, b tpo) int {
			return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition), cmp.Compare(a.offset, b.offset))
		})
		for i := 0; i < depthFetchRequestsPerLeader && len(pending) > 0; i++ {
			req, asked := depthFetchRequest(meta, pending)
			start := time.Now()
			kr, err := c.cl.Broker(int(leader)).Request(ctx, req)
			c.record("Fetch", start, err)
			if err != nil {
				break
			}
			for _, rt := range kr.(*kmsg.FetchResponse).Topics {
				name := rt.Topic
				if n, ok := names[rt.TopicID]; ok && name == "" {
					name = n
				}
				for _, rp := range rt.Partitions {
					k, ok := asked[tp{name, rp.Partition}]
					if !ok || rp.ErrorCode != 0 {
						continue
					}
					if b, ok := firstBatch(rp.RecordBatches); ok {
						c.dates.store(meta[name].id, k.tp, b, now)
						out[k] = b.at
					}
				}
			}
			// Keep what is still undated; the same batch may date other offsets of a partition.
			rest := pending[:0]
			for _, k := range pending {
				if _, done := out[k]; done {
					continue
				}
				if ts, ok := c.dates.lookup(meta[k.topic].id, k, now); ok {
					out[k] = ts
					continue
				}
				rest = append(rest, k)
			}
			if len(rest) == len(pending) {
				break // nothing came back: the offsets are gone (retention) or answer errors
			}
			pending = rest
		}
	}
	c.dates.prune(now)
	return out
}

// depthFetchRequest asks for the first batch at each partition's first offset in pending
// (sorted), returning what it asked by partition.
func depthFetchRequest(meta map[string]topicMeta, pending []tpo) (*kmsg.FetchRequest, map[tp]tpo) {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = 0, 0, depthFetchMaxBytes
	asked := map[tp]tpo{}
	for _, k := range pending {
		if _, dup := asked[k.tp]; dup {
			continue
		}
		asked[k.tp] = k
		if n := len(req.Topics); n == 0 || req.Topics[n-1].Topic != k.topic {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = k.topic, meta[k.topic].id
			req.Topics = append(req.Topics, t)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = k.partition, k.offset, depthFetchPartitionBytes
		rt := &req.Topics[len(req.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return req, asked
}

// batchSpan is a record batch's offsets and first timestamp.
type batchSpan struct {
	base, last int64
	at         time.Time
}

// firstBatch decodes the header of the first record batch (magic 2) in b: its offsets and
// firstTimestamp, or maxTimestamp for log-append-time batches (attributes bit 3).
func firstBatch(b []byte) (batchSpan, bool) {
	if len(b) < batchHeaderLen || b[16] != 2 {
		return batchSpan{}, false
	}
	base := int64(binary.BigEndian.Uint64(b[0:8]))
	last := base + int64(int32(binary.BigEndian.Uint32(b[23:27])))
	attrs := binary.BigEndian.Uint16(b[21:23])
	ms := int64(binary.BigEndian.Uint64(b[27:35]))
	if attrs&0x08 != 0 {
		ms = int64(binary.BigEndian.Uint64(b[35:43]))
	}
	if ms < 0 {
		return batchSpan{}, false
	}
	return batchSpan{base: base, last: last, at: time.UnixMilli(ms)}, true
}

// batchDates remembers the batches Depth dated, by topic id and partition, so a backlog that
// has not moved is not fetched again: a batch's offsets and timestamp never change, and a
// topic made again under its name has a new id. Entries unused for batchDatesTTL go.
type batchDates struct {
	mu sync.Mutex
	m  map[batchDatesKey][]datedBatch
}

type batchDatesKey struct {
	id        [16]byte
	topic     string
	partition int32
}

type datedBatch struct {
	batchSpan
	used time.Time
}

const batchDatesTTL = 10 * time.Minute

func (d *batchDates) lookup(id [16]byte, k tpo, now time.Time) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	bs := d.m[batchDatesKey{id, k.topic, k.partition}]
	for i := range bs {
		if bs[i].base <= k.offset && k.offset <= bs[i].last {
			bs[i].used = now
			return bs[i].at, true
		}
	}
	return time.Time{}, false
}

func (d *batchDates) store(id [16]byte, k tp, b batchSpan, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[batchDatesKey][]datedBatch{}
	}
	key := batchDatesKey{id, k.topic, k.partition}
	d.m[key] = append(d.m[key], datedBatch{b, now})
}

func (d *batchDates) prune(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for k, bs := range d.m {
		kept := bs[:0]
		for _, b := range bs {
			if now.Sub(b.used) < batchDatesTTL {
				kept = append(kept, b)
			}
		}
		if len(kept) == 0 {
			delete(d.m, k)
		} else {
			d.m[k] = kept
		}
	}
}

// resetTimestamp is the ListOffsets timestamp of a share.auto.offset.reset value: -2 for
// earliest, now − d (ms, 0 when that is before 1970: see OffsetQuery.At) for by_duration:d; ok is false for latest ("" or unknown values),
// where a group without state has no backlog.
func resetTimestamp(reset string, now time.Time) (int64, bool) {
	switch {
	case reset == "earliest":
		return -2, true
	case strings.HasPrefix(reset, "by_duration:"):
		d, err := ParseISODuration(strings.TrimPrefix(reset, "by_duration:"))
		if err != nil {
			return 0, false
		}
		return timestampQuery(now.Add(-d)), true
	}
	return 0, false
}

var isoDuration = regexp.MustCompile(`^P(?:([0-9]+)D)?(?:T(?:([0-9]+)H)?(?:([0-9]+)M)?(?:([0-9]+(?:\.[0-9]+)?)S)?)?$`)

// ParseISODuration parses the ISO-8601 durations share.auto.offset.reset's by_duration
// accepts (Java's Duration.parse subset PnDTnHnMn.nS, the ShareQueue API's pattern). A
// duration beyond time.Duration's range (about 292 years, e.g. P1000000D, which Java
// accepts) is that range's maximum, never a wrapped-around negative.
func ParseISODuration(s string) (time.Duration, error) {
	m := isoDuration.FindStringSubmatch(s)
	if m == nil || s == "P" || strings.HasSuffix(s, "T") {
		return 0, fmt.Errorf("kafka: %q is not an ISO-8601 duration PnDTnHnMn.nS", s)
	}
	const maxDuration = time.Duration(math.MaxInt64)
	var d time.Duration
	add := func(n float64, unit time.Duration) {
		if n*float64(unit) >= float64(maxDuration-d) {
			d = maxDuration
			return
		}
		d += time.Duration(n * float64(unit))
	}
	for i, unit := range []time.Duration{24 * time.Hour, time.Hour, time.Minute, time.Second} {
		if m[i+1] != "" {
			n, err := strconv.ParseFloat(m[i+1], 64)
			if err != nil {
				return 0, err
			}
			add(n, unit)
		}
	}
	return d, nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
