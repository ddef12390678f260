package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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

// Ack acknowledges the record. Terminal types (accept, release, reject) are final; renew may
// be repeated before one of them. Acks are sent in the background; ShareMember.Flush waits
// for them.
func (r *ShareRecord) Ack(t AckType) { r.rec.Ack(t.kgo()) }

// ShareMember is one member of a share group consuming one topic (kgo share consumer,
// KIP-932). Records from a Poll must all get a terminal ack before the next Poll: the client
// accepts whatever is left when it polls again.
type ShareMember struct {
	cl *kgo.Client
}

// NewShareMember joins group as a new member consuming topic; each poll acquires at most
// maxRecords records, and a share fetch waits at most fetchWait at the broker for records
// (keep it at or below the callers' poll deadlines: a fetch still in flight when a poll gives
// up holds its records until the member's next poll).
func NewShareMember(cfg Config, group, topic string, maxRecords int32, fetchWait time.Duration) (*ShareMember, error) {
	opts, _, err := baseOpts(cfg)
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.ShareGroup(group), kgo.ConsumeTopics(topic), kgo.ShareMaxRecords(maxRecords), kgo.ShareMaxRecordsStrict(),
		kgo.FetchMaxWait(fetchWait))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: share member: %w", err)
	}
	return &ShareMember{cl: cl}, nil
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

// Flush sends every pending acknowledgement and waits for the brokers' answers.
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
