// Package delivery is the table of a ShareQueue's delivery settings: each spec.delivery
// field, the Kafka share-group config it is written as (KIP-932), the broker bounds that hold
// it (KIP-1240, group.share.min/max.*) and the rule that checks a value against them. The
// ShareQueue controller plans with it; kqctl, the SQS importer and the truth checker check
// with the same table. It is pure (no client, context or clock; test/layout holds that).
package delivery

import (
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// Kind is how a delivery setting's value is written.
type Kind int

const (
	KindDurationMs Kind = iota
	KindInt
	KindString
	KindBool
)

// Setting maps one DeliverySpec field to its Kafka group config and broker bound.
type Setting struct {
	Field  string // JSON path in the spec
	Config string // Kafka group config (KIP-932 / KIP-1240)
	Kind   Kind
	// BrokerPrefix is the broker config family: group.share.<x>, group.share.min.<x>,
	// group.share.max.<x>; empty when the setting has no broker bound.
	BrokerPrefix string
	Bound        func(*kqv1.ShareBounds) kqv1.Bound
	Desired      func(*kqv1.DeliverySpec) (string, bool)
	Effective    func(*kqv1.EffectiveDelivery) **kqv1.EffectiveValue
}

// Settings lists every delivery field in a fixed order (status and messages follow it).
var Settings = []Setting{
	{
		Field: "delivery.lockDuration", Config: "share.record.lock.duration.ms", Kind: KindDurationMs,
		BrokerPrefix: "record.lock.duration.ms",
		Bound:        func(b *kqv1.ShareBounds) kqv1.Bound { return b.RecordLockDurationMs },
		Desired:      func(d *kqv1.DeliverySpec) (string, bool) { return durationMs(d.LockDuration) },
		Effective:    func(e *kqv1.EffectiveDelivery) **kqv1.EffectiveValue { return &e.LockDuration },
	},
	{
		Field: "delivery.maxDeliveryAttempts", Config: "share.delivery.count.limit", Kind: KindInt,
		BrokerPrefix: "delivery.count.limit",
		Bound:        func(b *kqv1.ShareBounds) kqv1.Bound { return b.DeliveryCountLimit },
		Desired:      func(d *kqv1.DeliverySpec) (string, bool) { return int32Text(d.MaxDeliveryAttempts) },
		Effective:    func(e *kqv1.EffectiveDelivery) **kqv1.EffectiveValue { return &e.MaxDeliveryAttempts },
	},
	{
		Field: "delivery.maxInFlightPerPartition", Config: "share.partition.max.record.locks", Kind: KindInt,
		BrokerPrefix: "partition.max.record.locks",
		Bound:        func(b *kqv1.ShareBounds) kqv1.Bound { return b.PartitionMaxRecordLocks },
		Desired:      func(d *kqv1.DeliverySpec) (string, bool) { return int32Text(d.MaxInFlightPerPartition) },
		Effective:    func(e *kqv1.EffectiveDelivery) **kqv1.EffectiveValue { return &e.MaxInFlightPerPartition },
	},
	{
		Field: "delivery.sessionTimeout", Config: "share.session.timeout.ms", Kind: KindDurationMs,
		BrokerPrefix: "session.timeout.ms",
		Bound:        func(b *kqv1.ShareBounds) kqv1.Bound { return b.SessionTimeoutMs },
		Desired:      func(d *kqv1.DeliverySpec) (string, bool) { return durationMs(d.SessionTimeout) },
		Effective:    func(e *kqv1.EffectiveDelivery) **kqv1.EffectiveValue { return &e.SessionTimeout },
	},
	{
		Field: "delivery.heartbeatInterval", Config: "share.heartbeat.interval.ms", Kind: KindDurationMs,
		BrokerPrefix: "heartbeat.interval.ms",
		Bound:        func(b *kqv1.ShareBounds) kqv1.Bound { return b.HeartbeatIntervalMs },
		Desired:      func(d *kqv1.DeliverySpec) (string, bool) { return durationMs(d.HeartbeatInterval) },
		Effective:    func(e *kqv1.EffectiveDelivery) **kqv1.EffectiveValue { return &e.HeartbeatInterval },
	},
	{
		Field: "delivery.autoOffsetReset", Config: "share.auto.offset.reset", Kind: KindString,
		Desired:   func(d *kqv1.DeliverySpec) (string, bool) { return strText(d.AutoOffsetReset) },
		Effective: func(e *kqv1.EffectiveDelivery) **kqv1.EffectiveValue { return &e.AutoOffsetReset },
	},
	{
		Field: "delivery.isolationLevel", Config: "share.isolation.level", Kind: KindString,
		Desired:   func(d *kqv1.DeliverySpec) (string, bool) { return strText(d.IsolationLevel) },
		Effective: func(e *kqv1.EffectiveDelivery) **kqv1.EffectiveValue { return &e.IsolationLevel },
	},
	{
		Field: "delivery.renewAcknowledge", Config: "share.renew.acknowledge.enable", Kind: KindBool,
		Desired: func(d *kqv1.DeliverySpec) (string, bool) {
			if d.RenewAcknowledge == nil {
				return "", false
			}
			return strconv.FormatBool(*d.RenewAcknowledge), true
		},
		Effective: func(e *kqv1.EffectiveDelivery) **kqv1.EffectiveValue { return &e.RenewAcknowledge },
	},
}

func durationMs(d *metav1.Duration) (string, bool) {
	if d == nil {
		return "", false
	}
	return strconv.FormatInt(d.Duration.Milliseconds(), 10), true
}

func int32Text(v *int32) (string, bool) {
	if v == nil {
		return "", false
	}
	return strconv.FormatInt(int64(*v), 10), true
}

func strText(v *string) (string, bool) {
	if v == nil {
		return "", false
	}
	return *v, true
}

// DisplayValue renders a Kafka value for status: durations as Go durations ("30s").
func DisplayValue(kind Kind, kafkaValue string) string {
	if kind == KindDurationMs {
		if ms, err := strconv.ParseInt(kafkaValue, 10, 64); err == nil {
			return (time.Duration(ms) * time.Millisecond).String()
		}
	}
	return kafkaValue
}

// OutOfBounds checks the Kafka value want of setting s against bound: when it is a number
// outside the bound, side is "min." or "max." (the broker config family it crosses) and
// clamped is the bound; side is "" otherwise.
func (s Setting) OutOfBounds(want string, bound kqv1.Bound) (n, clamped int64, side string) {
	if s.Kind == KindString || s.Kind == KindBool {
		return 0, 0, ""
	}
	n, err := strconv.ParseInt(want, 10, 64)
	if err != nil {
		return 0, 0, ""
	}
	clamped, side = ClampToBound(n, bound)
	return n, clamped, side
}

// BoundViolation is a declared delivery value outside the brokers' KIP-1240 bounds.
type BoundViolation struct {
	// Field is the spec path ("spec.delivery.lockDuration").
	Field string
	// Value is the value as Kafka takes it (milliseconds for durations); Unit is "ms" for
	// durations, else empty.
	Value int64
	Unit  string
	// Above is true when Value exceeds the maximum, false when it is below the minimum.
	Above bool
	// BrokerConfig is the bound crossed (group.share.max.record.lock.duration.ms) and Bound
	// its value.
	BrokerConfig string
	Bound        int64
}

// BoundViolations checks every declared delivery value against bounds with the
// table and rule the ShareQueue controller applies (Settings), in the table's order.
func BoundViolations(d *kqv1.DeliverySpec, bounds kqv1.ShareBounds) []BoundViolation {
	var out []BoundViolation
	for _, s := range Settings {
		want, declared := s.Desired(d)
		if !declared || s.Bound == nil {
			continue
		}
		n, clamped, side := s.OutOfBounds(want, s.Bound(&bounds))
		if side == "" {
			continue
		}
		v := BoundViolation{Field: "spec." + s.Field, Value: n, Above: side == "max.", BrokerConfig: "group.share." + side + s.BrokerPrefix, Bound: clamped}
		if s.Kind == KindDurationMs {
			v.Unit = "ms"
		}
		out = append(out, v)
	}
	return out
}

// ClampToBound returns v clamped to b and which side clamped it ("" when inside).
func ClampToBound(v int64, b kqv1.Bound) (int64, string) {
	if b.Min != nil && v < *b.Min {
		return *b.Min, "min."
	}
	if b.Max != nil && v > *b.Max {
		return *b.Max, "max."
	}
	return v, ""
}
