package kafka

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/time/rate"
)

// RedriveBound is the part of one partition a redrive reads: offsets [Start, End).
type RedriveBound struct {
	Partition  int32
	Start, End int64
}

// RedriveBounds lists, per partition of topic, the log start offset and the end offset (high
// watermark) now (ListOffsets, earliest and latest). Errors: the request's, or the first
// partition's (IsUnknownTopic when the topic does not exist).
func (c *Client) RedriveBounds(ctx context.Context, topic string) ([]RedriveBound, error) {
	start := time.Now()
	starts, ends, err := c.startAndEndOffsets(ctx, topic)
	c.record("ListOffsets", start, err)
	if err != nil {
		return nil, err
	}
	var out []RedriveBound
	ends.Each(func(e kadm.ListedOffset) {
		b := RedriveBound{Partition: e.Partition, End: e.Offset}
		if s, ok := starts.Lookup(topic, e.Partition); ok {
			b.Start = s.Offset
		}
		out = append(out, b)
	})
	if len(out) == 0 {
		return nil, kerr.UnknownTopicOrPartition
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Partition < out[j].Partition })
	return out, nil
}

// startAndEndOffsets lists the log start and end offsets of topic's partitions (two
// ListOffsets requests); the error is the request's or the first partition's.
func (c *Client) startAndEndOffsets(ctx context.Context, topic string) (starts, ends kadm.ListedOffsets, err error) {
	starts, err = c.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err == nil {
		ends, err = c.adm.ListEndOffsets(ctx, topic)
	}
	if err == nil {
		err = ends.Error()
	}
	return starts, ends, err
}

// RedriveDecision is what a redrive does with one record.
type RedriveDecision int

const (
	// RedriveMove produces the record to the target topic.
	RedriveMove RedriveDecision = iota
	// RedriveFilter leaves the record in place: the filter does not select it.
	RedriveFilter
	// RedriveRefuse leaves the record in place: it was redriven too often already.
	RedriveRefuse
)

// RedriveProgress counts a redrive's records, all of them in committed transactions (or
// read and left in place before the last committed read position).
type RedriveProgress struct {
	Moved, Filtered, Refused int64
	// Read is Moved + Filtered + Refused.
	Read int64
	// Done is true once every partition's read position reached its bound's End.
	Done bool
	// Positions is, per partition of the bound, the committed read position (the next
	// offset to read) when Redrive returned.
	Positions map[int32]int64
}

func (p *RedriveProgress) add(d RedriveDecision) {
	p.Read++
	switch d {
	case RedriveMove:
		p.Moved++
	case RedriveFilter:
		p.Filtered++
	case RedriveRefuse:
		p.Refused++
	}
}

// RedriveOptions configure Client.Redrive.
type RedriveOptions struct {
	// ID is both the transactional.id of the producer and the consumer group id whose
	// committed offsets are the redrive's read position. It must be fixed for one redrive
	// and unique among redrives: a second process running the same ID fences the first.
	ID string
	// Source is the topic read (read_committed); Target the topic written.
	Source, Target string
	// Bound limits what is read, per Source partition; partitions not listed are not read.
	Bound []RedriveBound
	// RateLimit caps the records produced, in records per second; 0 is no limit.
	RateLimit int
	// Decide says, from a record's headers, whether it is moved, filtered or refused. Pure.
	Decide func(headers []Header) RedriveDecision
	// Rewrite returns the headers of a moved record (e.g. with a redrive counter). Pure.
	Rewrite func(headers []Header) []Header
	// Progress, when set, is called after every committed transaction with the totals so
	// far and the records per second moved since this call of Redrive began.
	Progress func(p RedriveProgress, perSecond float64)
	// Stop, when set, is checked between transactions; true ends Redrive with the progress
	// so far (Done false unless the bound was reached).
	Stop func() bool
	// MaxBatch bounds the records of one transaction; default 500.
	MaxBatch int
}

// maxRedriveAborts is how many transactions in a row Redrive lets the session abort (and
// retries, from the committed position) before it returns an error.
const maxRedriveAborts = 10

// Redrive moves the records of Source within Bound to Target exactly once: each batch is
// produced in a Kafka transaction (transactional.id ID) that also commits the read position
// to consumer group ID (a GroupTransactSession, KIP-98/KIP-447), so after a crash the next
// Redrive with the same ID fences the old producer, aborts its open transaction and goes on
// from the last committed position. Moved records keep key, value, timestamp and headers
// (as rewritten by Rewrite); their partition is chosen by key as a plain producer would.
// The counts of the already committed prefix are recomputed from the records themselves
// (Decide is pure), so the progress is exact across restarts.
//
// It needs Kafka's transaction coordinator (transaction.state.log.* configs the cluster can
// hold) and, with ACLs, WRITE and DESCRIBE on TransactionalId ID, READ on group ID, READ on
// Source and WRITE on Target. Errors: a failed transaction, fencing by another process with
// the same ID (IsFenced), one retrying cannot fix (IsFatalRedrive), ctx's error.
func (c *Client) Redrive(ctx context.Context, o RedriveOptions) (prog RedriveProgress, err error) {
	pos := map[int32]int64{}
	for _, b := range o.Bound {
		pos[b.Partition] = b.Start // raised below to the committed position
	}
	defer func() {
		prog.Positions = make(map[int32]int64, len(pos))
		for p, o := range pos {
			prog.Positions[p] = o
		}
	}()
	if o.MaxBatch <= 0 {
		o.MaxBatch = 500
	}
	if o.RateLimit > 0 && o.MaxBatch > o.RateLimit {
		o.MaxBatch = o.RateLimit // about one second of records per transaction
	}
	r := &redriveRun{c: c, o: o, pos: pos, bounds: map[int32]RedriveBound{}, startAt: map[int32]int64{}, startReady: make(chan struct{})}
	for _, b := range o.Bound {
		if b.End > b.Start {
			r.bounds[b.Partition] = b
		} else {
			r.empty = append(r.empty, b.Partition)
		}
	}
	if len(r.bounds) == 0 {
		prog.Done = true
		return prog, nil
	}
	if err := r.open(); err != nil {
		return prog, err
	}
	defer r.sess.Close()
	if err := r.resume(ctx); err != nil {
		return prog, err
	}
	if err := c.tallyPrefix(ctx, o, r.bounds, pos, &prog); err != nil {
		return prog, err
	}
	r.pauseDone()
	if o.Progress != nil {
		o.Progress(prog, 0)
	}
	if o.RateLimit > 0 {
		r.lim = rate.NewLimiter(rate.Limit(o.RateLimit), 1)
	}
	began := time.Now()
	var movedHere int64
	aborts := 0 // transactions aborted in a row
	for !r.done() {
		if o.Stop != nil && o.Stop() {
			return prog, nil
		}
		fs, err := r.poll(ctx)
		if err != nil {
			return prog, err
		}
		if fs.NumRecords() == 0 {
			continue
		}
		batch, newPos, passed, committed, err := r.transact(ctx, fs, prog)
		if err != nil {
			return prog, err
		}
		if !committed {
			// The session aborted the transaction (a rebalance, or the coordinator still
			// completing the previous one: CONCURRENT_TRANSACTIONS) and rewound the consumer to
			// the committed position; pos has not moved, so the same records are read again.
			aborts++
			if aborts >= maxRedriveAborts {
				return prog, fmt.Errorf("kafka: %d redrive transactions in a row were aborted (group rebalances or the transaction coordinator busy); restarting from the committed position", aborts)
			}
			select {
			case <-time.After(time.Duration(aborts) * 200 * time.Millisecond):
			case <-ctx.Done():
				return prog, ctx.Err()
			}
			continue
		}
		aborts = 0
		movedHere += batch.Moved - prog.Moved
		prog = batch
		for p, next := range newPos {
			pos[p] = next
		}
		for p := range passed {
			pos[p] = r.bounds[p].End
		}
		r.pauseDone()
		if o.Progress != nil {
			o.Progress(prog, float64(movedHere)/time.Since(began).Seconds())
		}
	}
	prog.Done = true
	return prog, nil
}

// redriveRun is one Redrive call: its transactional session and where it stands.
type redriveRun struct {
	c      *Client
	o      RedriveOptions
	sess   *kgo.GroupTransactSession
	cl     *kgo.Client
	bounds map[int32]RedriveBound
	empty  []int32 // partitions with nothing to move
	pos    map[int32]int64
	lim    *rate.Limiter
	// startAt is where consumption starts on each partition, set once the committed
	// position is known (startReady); the group's own committed offset wins where it is
	// further on.
	startAt    map[int32]int64
	startReady chan struct{}
}

// open builds the transactional session: producer to Target with transactional.id ID,
// read_committed consumer of Source in group ID, starting at the redrive's position.
func (r *redriveRun) open() error {
	o := r.o
	opts, _, err := baseOpts(r.c.cfg)
	if err != nil {
		return err
	}
	opts = append(opts,
		kgo.TransactionalID(o.ID),
		kgo.TransactionTimeout(30*time.Second),
		kgo.ConsumerGroup(o.ID),
		kgo.ConsumeTopics(o.Source),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.SessionTimeout(10*time.Second),
		kgo.RebalanceTimeout(30*time.Second),
		kgo.DisableAutoCommit(),
		kgo.DefaultProduceTopic(o.Target),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
		kgo.FetchMaxWait(500*time.Millisecond),
		// Consumption starts at the redrive's position (the bound's start, or the committed
		// position within it), not at the topic's start: the records before it are not this
		// redrive's, and stepping over them would take offsets-only transactions.
		kgo.AdjustFetchOffsetsFn(func(actx context.Context, fetched map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
			select {
			case <-r.startReady:
			case <-actx.Done():
				return nil, actx.Err()
			}
			for p, off := range fetched[o.Source] {
				start, ok := r.startAt[p]
				if !ok {
					continue
				}
				if off.EpochOffset().Offset < start {
					fetched[o.Source][p] = kgo.NewOffset().At(start).WithEpoch(-1)
				}
			}
			return fetched, nil
		}),
	)
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return fmt.Errorf("kafka: building redrive client: %w", err)
	}
	r.sess, r.cl = sess, sess.Client()
	return nil
}

// resume fences an earlier process with the same transactional.id (its open transaction,
// if any, is aborted, so the committed position read next is final), reads the committed
// position and starts consumption there.
func (r *redriveRun) resume(ctx context.Context) error {
	o := r.o
	if _, _, err := r.cl.ProducerID(ctx); err != nil {
		return fmt.Errorf("kafka: initializing transactional producer %s: %w", o.ID, err)
	}
	committed, err := kadm.NewClient(r.cl).FetchOffsets(kadm.RequireStable(ctx), o.ID)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return fmt.Errorf("kafka: reading redrive position of group %s: %w", o.ID, err)
	}
	for p, b := range r.bounds {
		r.pos[p] = b.Start
		// The committed offset may lie beyond End (records past the bound polled with the
		// last batch are committed, not moved): the position within the bound is capped.
		if c, ok := committed.Lookup(o.Source, p); ok && c.At > b.Start {
			r.pos[p] = min(c.At, b.End)
		}
	}
	for p, at := range r.pos {
		r.startAt[p] = at
	}
	close(r.startReady)
	return nil
}

func (r *redriveRun) done() bool {
	for p, b := range r.bounds {
		if r.pos[p] < b.End {
			return false
		}
	}
	return true
}

// pauseDone stops fetching the partitions with nothing left to move.
func (r *redriveRun) pauseDone() {
	r.cl.PauseFetchPartitions(map[string][]int32{r.o.Source: r.empty})
	for p, b := range r.bounds {
		if r.pos[p] >= b.End {
			r.cl.PauseFetchPartitions(map[string][]int32{r.o.Source: {p}})
		}
	}
}

// poll reads up to MaxBatch records (2 s at most); a fetch error ends the redrive.
func (r *redriveRun) poll(ctx context.Context) (kgo.Fetches, error) {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	fs := r.sess.PollRecords(pctx, r.o.MaxBatch)
	cancel()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	var fetchErr error
	fs.EachError(func(_ string, _ int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && fetchErr == nil {
			fetchErr = err
		}
	})
	if fetchErr != nil {
		return nil, fmt.Errorf("kafka: reading %s: %w", r.o.Source, fetchErr)
	}
	return fs, nil
}

// transact moves the polled records of the bound in one transaction that also commits the
// read position: batch is prog with this batch counted, newPos the next offset per partition
// read, passed the partitions read beyond End. committed is false when the session aborted
// the transaction (nothing moved; the consumer is rewound).
func (r *redriveRun) transact(ctx context.Context, fs kgo.Fetches, prog RedriveProgress) (batch RedriveProgress, newPos map[int32]int64, passed map[int32]bool, committed bool, err error) {
	o, sess := r.o, r.sess
	if err := sess.Begin(); err != nil {
		return prog, nil, nil, false, fmt.Errorf("kafka: beginning transaction: %w", err)
	}
	var rs []*kgo.Record
	passed = map[int32]bool{} // partitions read beyond End: nothing of the bound is left
	fs.EachRecord(func(rec *kgo.Record) {
		b, ok := r.bounds[rec.Partition]
		switch {
		case !ok || rec.Offset < r.pos[rec.Partition]:
		case rec.Offset < b.End:
			rs = append(rs, rec)
		default:
			// Offsets within the bound that were not read are gone (retention) or were
			// no records (transaction markers).
			passed[rec.Partition] = true
		}
	})
	headers, err := r.c.withOrigins(ctx, o.Target, rs)
	if err != nil {
		_, _ = sess.End(ctx, kgo.TryAbort)
		return prog, nil, nil, false, fmt.Errorf("kafka: reading the origin records of broker-written dead letters in %s: %w", o.Target, err)
	}
	batch = prog
	newPos = map[int32]int64{}
	var produceErr error
	for i, rec := range rs {
		if produceErr != nil {
			break
		}
		newPos[rec.Partition] = rec.Offset + 1
		hs := headers[i]
		d := o.Decide(hs)
		batch.add(d)
		if d != RedriveMove {
			continue
		}
		if r.lim != nil {
			if err := r.lim.Wait(ctx); err != nil {
				produceErr = err
				continue
			}
		}
		out := &kgo.Record{Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp, Headers: toKgoHeaders(o.Rewrite(hs))}
		sess.Produce(ctx, out, func(_ *kgo.Record, err error) {
			if err != nil && produceErr == nil {
				produceErr = err
			}
		})
	}
	committed, err = sess.End(ctx, produceErr == nil)
	if err == nil && produceErr != nil {
		err = produceErr
	}
	if err != nil {
		return prog, nil, nil, false, fmt.Errorf("kafka: redrive transaction: %w", err)
	}
	return batch, newPos, passed, committed, nil
}

// tallyPrefix counts the records of the already committed prefix [bound start, pos) with
// Decide, reading Source with a plain read_committed consumer.
func (c *Client) tallyPrefix(ctx context.Context, o RedriveOptions, bounds map[int32]RedriveBound, pos map[int32]int64, prog *RedriveProgress) error {
	parts := map[int32]kgo.Offset{}
	for p, b := range bounds {
		if pos[p] > b.Start {
			parts[p] = kgo.NewOffset().At(b.Start)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	opts, _, err := baseOpts(c.cfg)
	if err != nil {
		return err
	}
	opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.Source: parts}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(500*time.Millisecond))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka: building redrive reader: %w", err)
	}
	defer cl.Close()
	left := len(parts)
	seen := map[int32]bool{}
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return fmt.Errorf("kafka: reading %s: %w", o.Source, ferr)
		}
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			// The whole prefix is gone (retention): nothing to count.
			if !seen[fp.Partition] && fp.LogStartOffset >= pos[fp.Partition] {
				seen[fp.Partition] = true
				left--
				cl.PauseFetchPartitions(map[string][]int32{o.Source: {fp.Partition}})
			}
		})
		var rs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			if seen[r.Partition] {
				return
			}
			if r.Offset < pos[r.Partition] {
				rs = append(rs, r)
			}
			if r.Offset+1 >= pos[r.Partition] {
				seen[r.Partition] = true
				left--
				cl.PauseFetchPartitions(map[string][]int32{o.Source: {r.Partition}})
			}
		})
		headers, err := c.withOrigins(ctx, o.Target, rs)
		if err != nil {
			return fmt.Errorf("kafka: reading the origin records of broker-written dead letters in %s: %w", o.Target, err)
		}
		for _, hs := range headers {
			prog.add(o.Decide(hs))
		}
	}
	return nil
}

// DeleteRedriveGroup deletes the consumer group a finished redrive kept its position in.
// A group that does not exist is not an error.
func (c *Client) DeleteRedriveGroup(ctx context.Context, id string) error {
	start := time.Now()
	// kadm's DeleteGroup returns the group's own error as err too.
	_, err := c.adm.DeleteGroup(ctx, id)
	if errors.Is(err, kerr.GroupIDNotFound) {
		err = nil
	}
	c.record("DeleteGroups", start, err)
	return err
}

func fromKgoHeaders(hs []kgo.RecordHeader) []Header {
	out := make([]Header, len(hs))
	for i, h := range hs {
		out[i] = Header{Key: h.Key, Value: h.Value}
	}
	return out
}

func toKgoHeaders(hs []Header) []kgo.RecordHeader {
	out := make([]kgo.RecordHeader, len(hs))
	for i, h := range hs {
		out[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
	}
	return out
}
