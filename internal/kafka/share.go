package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AckType is how a share-group record is acknowledged (KIP-932 AcknowledgeType, plus
// KIP-1222's renew).
type AckType int

const (
	// AckAccept: processed; the record is done.
	AckAccept AckType = iota + 1
	// AckRelease: give it back for another delivery (counts as an attempt).
	AckRelease
	// AckReject: unprocessable; the brokers archive it (or dead-letter it, KIP-1191).
	AckReject
	// AckRenew: extend the acquisition lock by the group's share.record.lock.duration.ms
	// without completing the record (Kafka 4.2+).
	AckRenew
)

func (a AckType) kgo() kgo.AckStatus {
	switch a {
	case AckAccept:
		return kgo.AckAccept
	case AckRelease:
		return kgo.AckRelease
	case AckReject:
		return kgo.AckReject
	default:
		return kgo.AckRenew
	}
}

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// ShareRecord is one record acquired by a ShareMember, with its delivery attempt.
type ShareRecord struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []Header
	Timestamp time.Time
	// DeliveryCount is this acquisition's attempt number (first delivery = 1).
	DeliveryCount int32
	// LockDeadline is when the brokers take the record back unless it is acknowledged or
	// renewed (the acquisition lock, share.record.lock.duration.ms).
	LockDeadline time.Time
	rec          *kgo.Record
}

// Ack acknowledges the record without waiting for, or learning, the brokers' answer
// (ShareMember.Acknowledge reports it). Terminal types (accept, release, reject) are final;
// renew may be repeated before one of them. Acks are sent in the background;
// ShareMember.Flush waits for them.
func (r *ShareRecord) Ack(t AckType) { r.rec.Ack(t.kgo()) }

// ShareMember is one member of a share group consuming one topic (kgo share consumer,
// KIP-932). Records from a Poll must all get a terminal ack before the next Poll: the client
// accepts whatever is left when it polls again.
type ShareMember struct {
	cl     *kgo.Client
	health *memberHealth

	// mu guards the ack-result log and the waiters of Acknowledge. log holds the brokers'
	// per-partition answers (kgo.ShareAckCallback) in arrival order; logBase is the absolute
	// index of log[0].
	mu       sync.Mutex
	log      []kgo.ShareAckResult
	logBase  int
	waiters  []*ackWaiter
	flushing bool
}

type ackWaiter struct {
	rec  *ShareRecord
	seq  int // absolute log index when the ack was marked
	done chan error
}

// ErrAckUnconfirmed is returned (wrapped) by Acknowledge when no answer from the brokers
// covered the acknowledgement (the flush failed or ctx ended first): it may or may not have
// been taken.
var ErrAckUnconfirmed = errors.New("kafka: acknowledgement not confirmed by the brokers")

// AckError is the brokers' refusal of the acknowledgements of one partition in one
// ShareAcknowledge (or ShareFetch) request. The brokers answer per partition, not per record,
// and a refusal covers every acknowledgement of that partition in the request (measured on
// Kafka 4.4: a valid accept sent beside a stale one was not applied and the record was
// delivered again). Err is the Kafka error, e.g. INVALID_RECORD_STATE: the acquisition lock
// had ended, the record is held by another member, or renew acknowledgements are disabled
// for the group (share.renew.acknowledge.enable=false, KIP-1222).
type AckError struct {
	Topic     string
	Partition int32
	Err       error
}

func (e *AckError) Error() string {
	return fmt.Sprintf("the brokers refused the acknowledgement on %s/%d: %v", e.Topic, e.Partition, e.Err)
}

func (e *AckError) Unwrap() error { return e.Err }

// ackFlushTimeout bounds one flush of a member's acknowledgements.
const ackFlushTimeout = 15 * time.Second

// ackFlushResignal is how often a flush that has not drained signals kgo to send again.
const ackFlushResignal = 20 * time.Millisecond

// ackLogMax bounds the ack-result log; a waiter whose window was trimmed away is unconfirmed.
const ackLogMax = 4096

// NewShareMember joins group as a new member consuming topic; each poll acquires at most
// maxRecords records, and a share fetch waits at most fetchWait at the broker for records
// (keep it at or below the callers' poll deadlines: a fetch still in flight when a poll gives
// up holds its records until the member's next poll).
func NewShareMember(cfg Config, group, topic string, maxRecords int32, fetchWait time.Duration) (*ShareMember, error) {
	opts, _, err := baseOpts(cfg)
	if err != nil {
		return nil, err
	}
	m := &ShareMember{health: &memberHealth{}}
	opts = append(opts, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ShareMaxRecords(maxRecords), kgo.ShareMaxRecordsStrict(),
		kgo.FetchMaxWait(fetchWait), kgo.ShareAckCallback(m.onAckResults), kgo.WithHooks(m.health))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: share member: %w", err)
	}
	m.cl = cl
	return m, nil
}

func (m *ShareMember) onAckResults(_ *kgo.Client, rs kgo.ShareAckResults) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.log = append(m.log, rs...)
	if over := len(m.log) - ackLogMax; over > 0 {
		m.log = append(m.log[:0:0], m.log[over:]...)
		m.logBase += over
	}
}

// Acknowledge acknowledges rec and waits for the brokers' answer: nil when they took it, an
// *AckError when they refused its partition's acknowledgements, ErrAckUnconfirmed (wrapped)
// when no answer came before ctx ended. The ack is marked on the record before Acknowledge
// waits, so a later Poll never accepts the record in its place. Concurrent calls share
// flushes.
func (m *ShareMember) Acknowledge(ctx context.Context, rec *ShareRecord, t AckType) error {
	done := m.AcknowledgeAsync(rec, t)
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrAckUnconfirmed, ctx.Err())
	}
}

// AcknowledgeAsync marks the ack on rec now and returns a channel that receives the
// brokers' answer (as Acknowledge returns it) once a flush covered it.
func (m *ShareMember) AcknowledgeAsync(rec *ShareRecord, t AckType) <-chan error {
	w := &ackWaiter{rec: rec, done: make(chan error, 1)}
	m.mu.Lock()
	w.seq = m.logBase + len(m.log)
	rec.rec.Ack(t.kgo())
	m.waiters = append(m.waiters, w)
	if !m.flushing {
		m.flushing = true
		go m.flushLoop()
	}
	m.mu.Unlock()
	return w.done
}

// flushLoop flushes the marked acks and answers their waiters from the results that
// arrived since each was marked: any refusal of the waiter's partition in that window is
// its refusal (the brokers answer per partition).
func (m *ShareMember) flushLoop() {
	for {
		m.mu.Lock()
		batch := m.waiters
		m.waiters = nil
		if len(batch) == 0 {
			m.flushing = false
			m.log, m.logBase = nil, m.logBase+len(m.log)
			m.mu.Unlock()
			return
		}
		m.mu.Unlock()
		// FlushAcks sends what is pending when it is called and then waits for every pending
		// ack, including ones marked after that request went out, which kgo otherwise sends
		// only when its 1s ack timer fires (measured: half a second added per batch). Calling
		// it again every ackFlushResignal sends those at once.
		var err error
		for deadline := time.Now().Add(ackFlushTimeout); ; {
			ctx, cancel := context.WithTimeout(context.Background(), ackFlushResignal)
			err = m.cl.FlushAcks(ctx)
			cancel()
			if err == nil || !time.Now().Before(deadline) {
				break
			}
		}
		m.mu.Lock()
		for _, w := range batch {
			w.done <- m.outcomeLocked(w, err)
		}
		if len(m.waiters) == 0 {
			m.log, m.logBase = nil, m.logBase+len(m.log)
		} else if min := m.waiters[0].seq; min > m.logBase {
			drop := min - m.logBase
			m.log, m.logBase = append(m.log[:0:0], m.log[drop:]...), min
		}
		m.mu.Unlock()
	}
}

func (m *ShareMember) outcomeLocked(w *ackWaiter, flushErr error) error {
	if w.seq < m.logBase {
		return fmt.Errorf("%w: its answer was not kept", ErrAckUnconfirmed)
	}
	found := false
	for _, r := range m.log[w.seq-m.logBase:] {
		if r.Topic != w.rec.Topic || r.Partition != w.rec.Partition {
			continue
		}
		found = true
		if r.Err != nil {
			return &AckError{Topic: r.Topic, Partition: r.Partition, Err: r.Err}
		}
	}
	switch {
	case flushErr != nil:
		return fmt.Errorf("%w: %w", ErrAckUnconfirmed, flushErr)
	case !found:
		return fmt.Errorf("%w: no answer for %s/%d", ErrAckUnconfirmed, w.rec.Topic, w.rec.Partition)
	}
	return nil
}

// Poll waits until records are acquired or ctx ends, and returns at most max of them. A ctx
// that ends without records is not an error.
func (m *ShareMember) Poll(ctx context.Context, max int) ([]*ShareRecord, error) {
	fs := m.cl.PollRecords(ctx, max)
	if fs.IsClientClosed() {
		return nil, kgo.ErrClientClosed
	}
	var errs []error
	fs.EachError(func(t string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("%s/%d: %w", t, p, err))
		}
	})
	var out []*ShareRecord
	fs.EachRecord(func(r *kgo.Record) {
		sr := &ShareRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value,
			Timestamp: r.Timestamp, DeliveryCount: r.DeliveryCount(), LockDeadline: r.AcquisitionDeadline(), rec: r}
		for _, h := range r.Headers {
			sr.Headers = append(sr.Headers, Header{Key: h.Key, Value: h.Value})
		}
		out = append(out, sr)
	})
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// Connected reports whether the member reaches its brokers: they answered one of its share
// group heartbeats or fetches after its last failure to reach them, and the group reported
// no management error in the last groupErrorHold. When it does not, problem is the failure
// (a refused or failed connection, SASL authentication refused, a request without an answer,
// a group management error such as GROUP_AUTHORIZATION_FAILED), or nil while nothing has
// failed and nothing was answered yet (joining). franz-go retries such failures quietly, and
// its polls meanwhile return no records, which looks like an empty queue. (A share member
// fetches only when polled, so a fetch cannot be awaited before the application polls.)
func (m *ShareMember) Connected() (ok bool, problem error) {
	return m.health.state(time.Now())
}

// groupErrorHold is how long a group management error keeps a member from counting as
// connected: the heartbeat that carried it was answered, so answers alone cannot clear it.
const groupErrorHold = 15 * time.Second

// memberHealth follows, through franz-go's hooks, whether a share member reaches the brokers.
type memberHealth struct {
	mu                  sync.Mutex
	answered            time.Time // the last heartbeat or fetch the brokers answered
	failed, groupFailed time.Time
	failure, groupErr   error
}

var (
	_ kgo.HookBrokerConnect    = (*memberHealth)(nil)
	_ kgo.HookBrokerE2E        = (*memberHealth)(nil)
	_ kgo.HookGroupManageError = (*memberHealth)(nil)
)

// OnBrokerConnect implements kgo.HookBrokerConnect: err covers the dial and the connection's
// initialization, SASL included.
func (h *memberHealth) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil && !closing(err) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.failed, h.failure = time.Now(), fmt.Errorf("connecting to broker %s:%d: %w", meta.Host, meta.Port, err)
	}
}

// OnBrokerE2E implements kgo.HookBrokerE2E.
func (h *memberHealth) OnBrokerE2E(meta kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case e.Err() != nil && !closing(e.Err()):
		h.failed, h.failure = time.Now(), fmt.Errorf("%s to broker %s:%d: %w", kmsg.NameForKey(key), meta.Host, meta.Port, e.Err())
	case e.Err() == nil && (key == kmsg.ShareGroupHeartbeat.Int16() || key == kmsg.ShareFetch.Int16()):
		h.answered = time.Now()
	}
}

// OnGroupManageError implements kgo.HookGroupManageError.
func (h *memberHealth) OnGroupManageError(err error) {
	if closing(err) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.groupFailed, h.groupErr = time.Now(), fmt.Errorf("share group heartbeat: %w", err)
}

// closing reports an error of the member's own shutdown.
func closing(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, kgo.ErrClientClosed)
}

func (h *memberHealth) state(now time.Time) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.groupErr != nil && now.Sub(h.groupFailed) < groupErrorHold:
		return false, h.groupErr
	case !h.answered.IsZero() && !h.answered.Before(h.failed):
		return true, nil
	}
	return false, h.failure
}

// Flush sends every pending acknowledgement and waits for the brokers' answers (their
// outcomes are reported to Acknowledge's callers only).
func (m *ShareMember) Flush(ctx context.Context) error { return m.cl.FlushAcks(ctx) }

// Close leaves the group; records still held are released by the client.
func (m *ShareMember) Close() { m.cl.Close() }

// Producer writes records with acks=all and idempotence (franz-go's defaults, kept explicit).
type Producer struct {
	cl *kgo.Client
}

// NewProducer builds a producer.
func NewProducer(cfg Config) (*Producer, error) {
	opts, _, err := baseOpts(cfg)
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: producer: %w", err)
	}
	return &Producer{cl: cl}, nil
}

// Produce writes one record and returns once every in-sync replica has it, or the error.
func (p *Producer) Produce(ctx context.Context, topic string, key, value []byte, headers []Header) error {
	rec := &kgo.Record{Topic: topic, Key: key, Value: value}
	for _, h := range headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return p.cl.ProduceSync(ctx, rec).FirstErr()
}

// Close flushes nothing further and closes the connections.
func (p *Producer) Close() { p.cl.Close() }
