package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/delivery"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// bounds43 are the Kafka 4.3/4.4 broker defaults and KIP-1240 bounds.
func bounds43() *kqv1.ShareBounds {
	b := func(min, def, max int64) kqv1.Bound { return kqv1.Bound{Min: &min, Default: &def, Max: &max} }
	return &kqv1.ShareBounds{
		DeliveryCountLimit:      b(2, 5, 10),
		RecordLockDurationMs:    b(15000, 30000, 60000),
		PartitionMaxRecordLocks: b(100, 2000, 4000),
		SessionTimeoutMs:        b(45000, 45000, 60000),
		HeartbeatIntervalMs:     b(5000, 5000, 15000),
	}
}

// bounds42 are what a 4.2 broker reports: defaults, and no min/max for delivery count and
// record locks (no group-level delivery count or record locks either).
func bounds42() *kqv1.ShareBounds {
	def := func(v int64) kqv1.Bound { return kqv1.Bound{Default: &v} }
	b := func(min, def, max int64) kqv1.Bound { return kqv1.Bound{Min: &min, Default: &def, Max: &max} }
	return &kqv1.ShareBounds{
		DeliveryCountLimit:      def(5),
		RecordLockDurationMs:    b(15000, 30000, 60000),
		PartitionMaxRecordLocks: def(2000),
		SessionTimeoutMs:        b(45000, 45000, 60000),
		HeartbeatIntervalMs:     b(5000, 5000, 15000),
	}
}

// defaultGroupConfigs is what DescribeConfigs on a GROUP returns before any override (4.3+).
func defaultGroupConfigs() map[string]kafka.ConfigEntry {
	d := func(v string) kafka.ConfigEntry {
		return kafka.ConfigEntry{Value: v, Source: kafka.ConfigSourceDefault}
	}
	return map[string]kafka.ConfigEntry{
		"share.record.lock.duration.ms":    d("30000"),
		"share.delivery.count.limit":       d("5"),
		"share.partition.max.record.locks": d("2000"),
		"share.session.timeout.ms":         d("45000"),
		"share.heartbeat.interval.ms":      d("5000"),
		"share.auto.offset.reset":          d("latest"),
		"share.isolation.level":            d("read_uncommitted"),
		"share.renew.acknowledge.enable":   d("true"),
	}
}

func override(v string) kafka.ConfigEntry {
	return kafka.ConfigEntry{Value: v, Source: kafka.ConfigSourceGroup}
}

func topicOverride(v string) kafka.ConfigEntry {
	return kafka.ConfigEntry{Value: v, Source: kafka.ConfigSourceDynamicTopic}
}

func queue(mut func(*kqv1.ShareQueue)) *kqv1.ShareQueue {
	sq := &kqv1.ShareQueue{
		ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns", Generation: 1},
		Spec: kqv1.ShareQueueSpec{
			ClusterRef:   kqv1.ClusterReference{Name: "c"},
			Topic:        kqv1.QueueTopicSpec{Partitions: 3},
			BoundsPolicy: kqv1.BoundsPolicyReject, DeletionPolicy: kqv1.DeletionPolicyRetain,
			AdoptionPolicy: kqv1.AdoptionPolicyAdoptOrCreate, DriftPolicy: kqv1.DriftPolicyEnforce,
		},
	}
	if mut != nil {
		mut(sq)
	}
	return sq
}

func liveTopic(partitions, rf int32, id string) kafka.Topic {
	return kafka.Topic{Name: "q", ID: id, Partitions: partitions, ReplicationFactor: rf}
}

func missingTopic() kafka.Topic {
	return kafka.Topic{Name: "q", Err: &kafka.Error{Op: "Metadata", Err: kafka.ErrUnknownTopicOrPartition}}
}

func obsWith(topic kafka.Topic, topicCfg map[string]kafka.ConfigEntry, group map[string]kafka.ConfigEntry, bounds *kqv1.ShareBounds) queueObservation {
	return queueObservation{
		Cluster:      kqv1.KafkaClusterStatus{ShareVersion: 1, ShareBounds: bounds},
		Topic:        topic,
		TopicConfigs: topicCfg,
		GroupConfigs: group,
	}
}

func TestPlanCreatesMissingTopicWithConfigs(t *testing.T) {
	sq := queue(func(sq *kqv1.ShareQueue) {
		sq.Spec.Topic.Config = kqv1.TopicConfigs{"retention.ms": " 3600000 ", "cleanup.policy": "delete"}
		sq.Spec.Topic.ReplicationFactor = ptr.To[int32](2)
	})
	p := planQueue(sq, obsWith(missingTopic(), nil, defaultGroupConfigs(), bounds43()))
	want := &kafka.NewTopic{Name: "q", Partitions: 3, ReplicationFactor: 2, Configs: map[string]string{"retention.ms": "3600000", "cleanup.policy": "delete"}}
	if d := cmp.Diff(want, p.CreateTopic); d != "" {
		t.Errorf("CreateTopic (-want +got):\n%s", d)
	}
	if p.TopicReady.Status != metav1.ConditionTrue || len(p.GroupConfigs) != 0 {
		t.Errorf("TopicReady %+v group changes %v", p.TopicReady, p.GroupConfigs)
	}
}

func TestPlanTopicDecisions(t *testing.T) {
	cases := []struct {
		name       string
		sq         *kqv1.ShareQueue
		topic      kafka.Topic
		cfg        map[string]kafka.ConfigEntry
		wantReason string
		wantGrow   int32
		wantCreate bool
		wantAlter  []kafka.AlterConfig
	}{
		{name: "grow partitions", sq: queue(nil), topic: liveTopic(2, 1, "A"), wantReason: kqv1.ReasonReady, wantGrow: 3},
		{name: "more live partitions than declared", sq: queue(nil), topic: liveTopic(5, 1, "A"), wantReason: kqv1.ReasonPartitionCountMismatch},
		{name: "replication factor differs", sq: queue(func(sq *kqv1.ShareQueue) { sq.Spec.Topic.ReplicationFactor = ptr.To[int32](3) }), topic: liveTopic(3, 1, "A"), wantReason: kqv1.ReasonReplicationFactorMismatch},
		{name: "adopt waits for a missing topic", sq: queue(func(sq *kqv1.ShareQueue) { sq.Spec.AdoptionPolicy = kqv1.AdoptionPolicyAdopt }), topic: missingTopic(), wantReason: kqv1.ReasonTopicNotFound},
		{name: "create refuses an existing topic", sq: queue(func(sq *kqv1.ShareQueue) { sq.Spec.AdoptionPolicy = kqv1.AdoptionPolicyCreate }), topic: liveTopic(3, 1, "A"), wantReason: kqv1.ReasonTopicExists},
		{name: "create accepts the topic it created", sq: queue(func(sq *kqv1.ShareQueue) {
			sq.Spec.AdoptionPolicy = kqv1.AdoptionPolicyCreate
			sq.Status.TopicID = "A"
		}), topic: liveTopic(3, 1, "A"), wantReason: kqv1.ReasonReady},
		// Regression: a Create-policy queue blocked on a foreign topic pinned its id, then took
		// the topic over on the next pass (and deleted it on CR deletion).
		{name: "create stays blocked on a foreign topic across passes", sq: queue(func(sq *kqv1.ShareQueue) {
			sq.Spec.AdoptionPolicy = kqv1.AdoptionPolicyCreate
		}), topic: liveTopic(3, 1, "FOREIGN"), cfg: map[string]kafka.ConfigEntry{"cleanup.policy": topicOverride("compact")}, wantReason: kqv1.ReasonTopicExists},
		{name: "create recognises its own interrupted creation", sq: queue(func(sq *kqv1.ShareQueue) {
			sq.Spec.AdoptionPolicy = kqv1.AdoptionPolicyCreate
			sq.Status.TopicCreationStarted = &metav1.Time{Time: time.Unix(1, 0)}
		}), topic: liveTopic(3, 1, "MINE"), wantReason: kqv1.ReasonReady},
		{name: "recreated topic is reported, not adopted", sq: queue(func(sq *kqv1.ShareQueue) { sq.Status.TopicID = "OLD" }), topic: liveTopic(1, 1, "NEW"), wantReason: kqv1.ReasonTopicIDChanged},
		{name: "deleted topic is recreated", sq: queue(func(sq *kqv1.ShareQueue) { sq.Status.TopicID = "OLD" }), topic: missingTopic(), wantReason: kqv1.ReasonReady, wantCreate: true},
		{name: "equal normalised config writes nothing", sq: queue(func(sq *kqv1.ShareQueue) {
			sq.Spec.Topic.Config = kqv1.TopicConfigs{"retention.ms": "86400000 ", "cleanup.policy": "compact, delete"}
		}), topic: liveTopic(3, 1, "A"), cfg: map[string]kafka.ConfigEntry{"retention.ms": topicOverride("86400000"), "cleanup.policy": topicOverride("compact,delete")}, wantReason: kqv1.ReasonReady},
		{name: "declared value equal to the broker default writes nothing", sq: queue(func(sq *kqv1.ShareQueue) {
			sq.Spec.Topic.Config = kqv1.TopicConfigs{"cleanup.policy": "delete"}
		}), topic: liveTopic(3, 1, "A"), cfg: map[string]kafka.ConfigEntry{"cleanup.policy": {Value: "delete", Source: kafka.ConfigSourceDefault}}, wantReason: kqv1.ReasonReady},
		{name: "adopted topic keeps overrides it did not set", sq: queue(func(sq *kqv1.ShareQueue) {
			sq.Spec.Topic.Config = kqv1.TopicConfigs{"retention.ms": "1000"}
		}), topic: liveTopic(3, 1, "A"), cfg: map[string]kafka.ConfigEntry{
			"retention.ms": topicOverride("1000"), "cleanup.policy": topicOverride("compact"),
		}, wantReason: kqv1.ReasonReady},
		{name: "canonical integers compare equal", sq: queue(func(sq *kqv1.ShareQueue) {
			sq.Spec.Topic.Config = kqv1.TopicConfigs{"max.message.bytes": "01048588", "retention.ms": "+1000000"}
		}), topic: liveTopic(3, 1, "A"), cfg: map[string]kafka.ConfigEntry{
			"max.message.bytes": topicOverride("1048588"), "retention.ms": topicOverride("1000000"),
		}, wantReason: kqv1.ReasonReady},
		{name: "no topic writes while the topic shape disagrees", sq: queue(func(sq *kqv1.ShareQueue) {
			sq.Spec.Topic.Config = kqv1.TopicConfigs{"retention.ms": "1000"}
		}), topic: liveTopic(5, 1, "A"), cfg: map[string]kafka.ConfigEntry{"retention.ms": topicOverride("2000")}, wantReason: kqv1.ReasonPartitionCountMismatch},
		{name: "config drift is corrected, dropped managed overrides removed, others and throttles kept", sq: queue(func(sq *kqv1.ShareQueue) {
			sq.Spec.Topic.Config = kqv1.TopicConfigs{"retention.ms": "1000"}
			sq.Status.ManagedTopicConfigs = []string{"max.message.bytes", "retention.ms"}
		}), topic: liveTopic(3, 1, "A"), cfg: map[string]kafka.ConfigEntry{
			"retention.ms": topicOverride("2000"), "max.message.bytes": topicOverride("100"),
			"leader.replication.throttled.replicas": topicOverride("0:1"), "segment.ms": {Value: "1", Source: kafka.ConfigSourceDefault},
			"cleanup.policy": topicOverride("compact"),
		}, wantReason: kqv1.ReasonReady, wantAlter: []kafka.AlterConfig{
			{Name: "retention.ms", Op: kafka.OpSet, Value: "1000"}, {Name: "max.message.bytes", Op: kafka.OpDelete},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := planQueue(tc.sq, obsWith(tc.topic, tc.cfg, defaultGroupConfigs(), bounds43()))
			if p.TopicReady.Reason != tc.wantReason {
				t.Errorf("TopicReady %+v, want reason %s", p.TopicReady, tc.wantReason)
			}
			if p.GrowPartitionsTo != tc.wantGrow {
				t.Errorf("grow to %d, want %d", p.GrowPartitionsTo, tc.wantGrow)
			}
			if (p.CreateTopic != nil) != tc.wantCreate {
				t.Errorf("create %+v, want create=%v", p.CreateTopic, tc.wantCreate)
			}
			if d := cmp.Diff(tc.wantAlter, p.TopicConfigs); d != "" {
				t.Errorf("topic config changes (-want +got):\n%s", d)
			}
			if p.Blocked && !p.Empty() {
				t.Errorf("blocked plan still writes: %v", p.Changes())
			}
		})
	}
}

func TestPlanBoundsRejectAndClamp(t *testing.T) {
	lockTooLong := func(policy kqv1.BoundsPolicy) *kqv1.ShareQueue {
		return queue(func(sq *kqv1.ShareQueue) {
			sq.Spec.BoundsPolicy = policy
			sq.Spec.Delivery.LockDuration = &metav1.Duration{Duration: 2 * time.Minute}
			sq.Spec.Delivery.MaxDeliveryAttempts = ptr.To[int32](1) // below the CEL floor but test the bound anyway
			sq.Spec.Delivery.MaxInFlightPerPartition = ptr.To[int32](500)
		})
	}
	obs := obsWith(liveTopic(3, 1, "A"), nil, defaultGroupConfigs(), bounds43())

	p := planQueue(lockTooLong(kqv1.BoundsPolicyReject), obs)
	if p.ConfigValid.Status != metav1.ConditionFalse || p.ConfigValid.Reason != kqv1.ReasonOutOfBrokerBounds {
		t.Fatalf("ConfigValid %+v", p.ConfigValid)
	}
	for _, want := range []string{
		"delivery.lockDuration 2m0s (share.record.lock.duration.ms=120000) is above the brokers' maximum group.share.max.record.lock.duration.ms=60000 (1m0s)",
		"delivery.maxDeliveryAttempts 1 is below the brokers' minimum group.share.min.delivery.count.limit=2",
	} {
		if !strings.Contains(p.ConfigValid.Message, want) {
			t.Errorf("message %q lacks %q", p.ConfigValid.Message, want)
		}
	}
	wantWrites := []kafka.AlterConfig{{Name: "share.partition.max.record.locks", Op: kafka.OpSet, Value: "500"}}
	if d := cmp.Diff(wantWrites, p.GroupConfigs); d != "" {
		t.Errorf("Reject writes only the in-bounds field (-want +got):\n%s", d)
	}
	if e := p.Effective.LockDuration; e.Value != "30s" || e.Source != kqv1.SourceBrokerDefault {
		t.Errorf("effective lock after reject %+v, want broker default 30s", e)
	}
	if c := p.Capacity; c == nil || c.MaxInFlightRecords != 1500 || c.InFlightStateBytes != 48000 {
		t.Errorf("capacity %+v, want 3×500 records, 48000 bytes", c)
	}

	p = planQueue(lockTooLong(kqv1.BoundsPolicyClamp), obs)
	if p.ConfigValid.Status != metav1.ConditionTrue || p.ConfigValid.Reason != kqv1.ReasonClampedToBrokerBounds {
		t.Fatalf("ConfigValid %+v", p.ConfigValid)
	}
	wantWrites = []kafka.AlterConfig{
		{Name: "share.record.lock.duration.ms", Op: kafka.OpSet, Value: "60000"},
		{Name: "share.delivery.count.limit", Op: kafka.OpSet, Value: "2"},
		{Name: "share.partition.max.record.locks", Op: kafka.OpSet, Value: "500"},
	}
	if d := cmp.Diff(wantWrites, p.GroupConfigs); d != "" {
		t.Errorf("Clamp writes (-want +got):\n%s", d)
	}
	if e := p.Effective.LockDuration; e.Value != "1m0s" || e.Source != kqv1.SourceClamped {
		t.Errorf("effective lock %+v", e)
	}
}

func TestPlanEffectiveValues(t *testing.T) {
	group := defaultGroupConfigs()
	group["share.heartbeat.interval.ms"] = override("7000")
	// A stored override outside narrowed bounds is clamped by brokers at run time (KIP-1240).
	group["share.session.timeout.ms"] = override("90000")
	sq := queue(func(sq *kqv1.ShareQueue) {
		sq.Spec.Delivery.HeartbeatInterval = &metav1.Duration{Duration: 7 * time.Second}
		sq.Spec.DriftPolicy = kqv1.DriftPolicyIgnore
	})
	p := planQueue(sq, obsWith(liveTopic(4, 1, "A"), nil, group, bounds43()))
	want := kqv1.EffectiveDelivery{
		LockDuration:            &kqv1.EffectiveValue{Config: "share.record.lock.duration.ms", Value: "30s", Source: kqv1.SourceBrokerDefault},
		MaxDeliveryAttempts:     &kqv1.EffectiveValue{Config: "share.delivery.count.limit", Value: "5", Source: kqv1.SourceBrokerDefault},
		MaxInFlightPerPartition: &kqv1.EffectiveValue{Config: "share.partition.max.record.locks", Value: "2000", Source: kqv1.SourceBrokerDefault},
		SessionTimeout:          &kqv1.EffectiveValue{Config: "share.session.timeout.ms", Value: "1m0s", Source: kqv1.SourceClamped},
		HeartbeatInterval:       &kqv1.EffectiveValue{Config: "share.heartbeat.interval.ms", Value: "7s", Source: kqv1.SourceGroupOverride},
		AutoOffsetReset:         &kqv1.EffectiveValue{Config: "share.auto.offset.reset", Value: "latest", Source: kqv1.SourceBrokerDefault},
		IsolationLevel:          &kqv1.EffectiveValue{Config: "share.isolation.level", Value: "read_uncommitted", Source: kqv1.SourceBrokerDefault},
		RenewAcknowledge:        &kqv1.EffectiveValue{Config: "share.renew.acknowledge.enable", Value: "true", Source: kqv1.SourceBrokerDefault},
	}
	if d := cmp.Diff(want, p.Effective); d != "" {
		t.Errorf("effective (-want +got):\n%s", d)
	}
	if !p.Empty() {
		t.Errorf("in-sync queue under Ignore plans writes: %v", p.Changes())
	}
	if c := p.Capacity; c.MaxInFlightRecords != 8000 {
		t.Errorf("capacity %+v, want 4×2000", c)
	}
}

func TestPlanGroupDrift(t *testing.T) {
	group := defaultGroupConfigs()
	group["share.record.lock.duration.ms"] = override("20000")
	group["share.isolation.level"] = override("read_committed")
	spec := func(policy kqv1.DriftPolicy) *kqv1.ShareQueue {
		return queue(func(sq *kqv1.ShareQueue) {
			sq.Spec.DriftPolicy = policy
			sq.Spec.Delivery.LockDuration = &metav1.Duration{Duration: 25 * time.Second}
		})
	}
	obs := obsWith(liveTopic(3, 1, "A"), nil, group, bounds43())

	enforce := planQueue(spec(kqv1.DriftPolicyEnforce), obs)
	want := []kafka.AlterConfig{
		{Name: "share.record.lock.duration.ms", Op: kafka.OpSet, Value: "25000"},
		{Name: "share.isolation.level", Op: kafka.OpDelete},
	}
	if d := cmp.Diff(want, enforce.GroupConfigs); d != "" {
		t.Errorf("Enforce (-want +got):\n%s", d)
	}
	report := planQueue(spec(kqv1.DriftPolicyReport), obs)
	if len(report.GroupConfigs) != 0 || len(report.Drift) != 2 || report.GroupConfig.Status != metav1.ConditionTrue {
		t.Errorf("Report: writes %v drift %v cond %+v", report.GroupConfigs, report.Drift, report.GroupConfig)
	}
	ignore := planQueue(spec(kqv1.DriftPolicyIgnore), obs)
	if !ignore.Empty() || len(ignore.Drift) != 0 {
		t.Errorf("Ignore: writes %v drift %v", ignore.Changes(), ignore.Drift)
	}
	// A queue whose spec matches the live overrides plans nothing at all.
	group["share.record.lock.duration.ms"] = override("25000")
	delete(group, "share.isolation.level")
	group["share.isolation.level"] = kafka.ConfigEntry{Value: "read_uncommitted", Source: kafka.ConfigSourceDefault}
	if p := planQueue(spec(kqv1.DriftPolicyEnforce), obsWith(liveTopic(3, 1, "A"), nil, group, bounds43())); !p.Empty() {
		t.Errorf("in-sync plan not empty: %v", p.Changes())
	}
}

func TestPlanUnsupportedOnOlderBrokers(t *testing.T) {
	// Kafka 4.2: no group-level share.delivery.count.limit / share.partition.max.record.locks.
	group := defaultGroupConfigs()
	delete(group, "share.delivery.count.limit")
	delete(group, "share.partition.max.record.locks")
	sq := queue(func(sq *kqv1.ShareQueue) {
		sq.Spec.Delivery.MaxDeliveryAttempts = ptr.To[int32](4)
		sq.Spec.Delivery.LockDuration = &metav1.Duration{Duration: 20 * time.Second}
	})
	p := planQueue(sq, obsWith(liveTopic(3, 1, "A"), nil, group, bounds42()))
	if p.ConfigValid.Reason != kqv1.ReasonUnsupportedByCluster || !strings.Contains(p.ConfigValid.Message, "delivery.maxDeliveryAttempts=4 needs group config share.delivery.count.limit") {
		t.Errorf("ConfigValid %+v", p.ConfigValid)
	}
	want := []kafka.AlterConfig{{Name: "share.record.lock.duration.ms", Op: kafka.OpSet, Value: "20000"}}
	if d := cmp.Diff(want, p.GroupConfigs); d != "" {
		t.Errorf("writes (-want +got):\n%s", d)
	}
	if e := p.Effective.MaxDeliveryAttempts; e.Value != "5" || e.Source != kqv1.SourceBrokerDefault {
		t.Errorf("effective delivery count %+v, want the broker default 5", e)
	}
	// Without a bound the value is not checked against an invented one.
	if strings.Contains(p.ConfigValid.Message, "bound") || strings.Contains(p.ConfigValid.Message, "maximum") {
		t.Errorf("message invents a bound: %q", p.ConfigValid.Message)
	}
}

func TestPlanShareGroupsDisabledWritesNoGroupConfig(t *testing.T) {
	sq := queue(func(sq *kqv1.ShareQueue) { sq.Spec.Delivery.MaxDeliveryAttempts = ptr.To[int32](4) })
	obs := obsWith(missingTopic(), nil, defaultGroupConfigs(), bounds43())
	obs.Cluster.ShareVersion = 0
	p := planQueue(sq, obs)
	if len(p.GroupConfigs) != 0 || p.GroupConfig.Reason != kqv1.ReasonShareGroupsDisabled || p.CreateTopic == nil {
		t.Errorf("group writes %v cond %+v create %v", p.GroupConfigs, p.GroupConfig, p.CreateTopic)
	}
}

func TestPlanChangesDescribeEveryWrite(t *testing.T) {
	sq := queue(func(sq *kqv1.ShareQueue) {
		sq.Spec.Topic.Config = kqv1.TopicConfigs{"retention.ms": "1000"}
		sq.Spec.Delivery.MaxDeliveryAttempts = ptr.To[int32](3)
	})
	p := planQueue(sq, obsWith(missingTopic(), nil, defaultGroupConfigs(), bounds43()))
	want := []string{
		"create topic q: partitions=3 replicationFactor=broker default retention.ms=1000",
		"group q: set share.delivery.count.limit=3",
	}
	if d := cmp.Diff(want, p.Changes()); d != "" {
		t.Errorf("changes (-want +got):\n%s", d)
	}
}

// FuzzPlanQueue checks invariants of the plan over arbitrary specs: it never panics, a
// blocked plan writes nothing, Reject never writes an out-of-bounds value and Clamp only
// writes values inside the bounds.
func FuzzPlanQueue(f *testing.F) {
	f.Add(int32(3), int32(2), int64(30000), int32(5), int32(2000), int64(45000), int64(5000), true, false)
	f.Add(int32(1), int32(9), int64(999999), int32(1), int32(50), int64(1), int64(99999), false, true)
	f.Fuzz(func(t *testing.T, want, live int32, lockMs int64, attempts, locks int32, sessMs, hbMs int64, clamp, exists bool) {
		if want < 1 || want > 100000 || live < 1 || live > 100000 || lockMs < 0 || sessMs < 0 || hbMs < 0 {
			return // outside what the CRD admits: not a spec the plan can be given
		}
		sq := queue(func(sq *kqv1.ShareQueue) {
			sq.Spec.Topic.Partitions = want
			sq.Spec.Delivery = kqv1.DeliverySpec{
				LockDuration:            &metav1.Duration{Duration: time.Duration(lockMs) * time.Millisecond},
				MaxDeliveryAttempts:     &attempts,
				MaxInFlightPerPartition: &locks,
				SessionTimeout:          &metav1.Duration{Duration: time.Duration(sessMs) * time.Millisecond},
				HeartbeatInterval:       &metav1.Duration{Duration: time.Duration(hbMs) * time.Millisecond},
			}
			if clamp {
				sq.Spec.BoundsPolicy = kqv1.BoundsPolicyClamp
			}
		})
		topic := missingTopic()
		if exists {
			topic = liveTopic(live, 1, "A")
		}
		b := bounds43()
		p := planQueue(sq, obsWith(topic, nil, defaultGroupConfigs(), b))
		if p.Blocked && !p.Empty() {
			t.Fatalf("blocked plan writes %v", p.Changes())
		}
		for _, c := range p.GroupConfigs {
			for _, s := range delivery.Settings {
				if s.Config != c.Name || s.Bound == nil {
					continue
				}
				bd := s.Bound(b)
				var v int64
				if _, err := fmtSscan(c.Value, &v); err != nil {
					t.Fatalf("non-numeric write %s=%q", c.Name, c.Value)
				}
				if (bd.Min != nil && v < *bd.Min) || (bd.Max != nil && v > *bd.Max) {
					t.Fatalf("wrote out-of-bounds %s=%d (bounds %v..%v)", c.Name, v, *bd.Min, *bd.Max)
				}
			}
		}
		if p.GrowPartitionsTo != 0 && p.GrowPartitionsTo <= live {
			t.Fatalf("plan shrinks or keeps partitions: %d -> %d", live, p.GrowPartitionsTo)
		}
	})
}

func fmtSscan(s string, v *int64) (int, error) { return fmt.Sscan(s, v) }

func TestPlanDriftIgnoreList(t *testing.T) {
	group := defaultGroupConfigs()
	group["share.record.lock.duration.ms"] = override("20000")
	group["share.isolation.level"] = override("read_committed")
	sq := queue(func(sq *kqv1.ShareQueue) {
		sq.Spec.Delivery.LockDuration = &metav1.Duration{Duration: 25 * time.Second}
		sq.Spec.Topic.Config = kqv1.TopicConfigs{"retention.ms": "1000"}
		sq.Spec.DriftIgnore = []string{"share.record.lock.duration.ms", "share.isolation.level", "retention.ms", "segment.bytes"}
	})
	topicCfg := map[string]kafka.ConfigEntry{"retention.ms": topicOverride("5000"), "segment.bytes": topicOverride("1048576")}
	p := planQueue(sq, obsWith(liveTopic(3, 1, "A"), topicCfg, group, bounds43()))
	if !p.Empty() || len(p.Drift) != 0 {
		t.Errorf("ignored keys still planned: %v drift %v", p.Changes(), p.Drift)
	}
	if e := p.Effective.LockDuration; e.Value != "20s" || e.Source != kqv1.SourceGroupOverride {
		t.Errorf("effective lock %+v, want the live 20s override", e)
	}
	// An ignored key that is not set yet is still written once.
	delete(group, "share.record.lock.duration.ms")
	group["share.record.lock.duration.ms"] = kafka.ConfigEntry{Value: "30000", Source: kafka.ConfigSourceDefault}
	p = planQueue(sq, obsWith(liveTopic(3, 1, "A"), topicCfg, group, bounds43()))
	want := []kafka.AlterConfig{{Name: "share.record.lock.duration.ms", Op: kafka.OpSet, Value: "25000"}}
	if d := cmp.Diff(want, p.GroupConfigs); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestPlanUnderReplicatedTopic(t *testing.T) {
	topic := kafka.Topic{Name: "q", ID: "A", Partitions: 2, ReplicationFactor: 3,
		Replicas: map[int32][]int32{0: {1, 2, 3}, 1: {2, 3, 1}}, ISR: map[int32][]int32{0: {1, 2}, 1: {2, 1}}}
	obs := obsWith(topic, nil, defaultGroupConfigs(), bounds43())
	obs.Cluster.BrokerCount = 2
	p := planQueue(queue(func(sq *kqv1.ShareQueue) { sq.Spec.Topic.Partitions = 2 }), obs)
	if p.TopicReady.Reason != kqv1.ReasonTopicUnderReplicated || !strings.Contains(p.TopicReady.Message, "2 under-replicated partition(s); the cluster has 2 live broker(s)") {
		t.Errorf("TopicReady %+v", p.TopicReady)
	}
	// The topic's own Metadata response counts the brokers when it lists them: the KafkaCluster's
	// count may be a probe older than the ISR it is set against.
	obs.Cluster.BrokerCount = 3
	obs.Topic.LiveBrokers = 2
	p = planQueue(queue(func(sq *kqv1.ShareQueue) { sq.Spec.Topic.Partitions = 2 }), obs)
	if !strings.Contains(p.TopicReady.Message, "the cluster has 2 live broker(s)") {
		t.Errorf("TopicReady %+v, want the broker count of the topic's Metadata response", p.TopicReady)
	}
}

// In Republisher mode the group's limit is one above the application's attempts, checked
// against the brokers' bounds as written.
func TestPlanReservesTheLastAttemptForTheRepublisher(t *testing.T) {
	obs := obsWith(liveTopic(3, 1, "A"), nil, defaultGroupConfigs(), bounds43())
	obs.ReserveLastAttempt = true
	limitWrite := func(p queuePlan) string {
		for _, c := range p.GroupConfigs {
			if c.Name == "share.delivery.count.limit" {
				return c.Value
			}
		}
		return ""
	}
	p := planQueue(queue(func(sq *kqv1.ShareQueue) { sq.Spec.Delivery.MaxDeliveryAttempts = ptr.To[int32](4) }), obs)
	if got := limitWrite(p); got != "5" {
		t.Errorf("share.delivery.count.limit write %q, want 5 (4 attempts + the reserved one)", got)
	}
	// Absent attempts: the brokers' default (5) + 1.
	if got := limitWrite(planQueue(queue(nil), obs)); got != "6" {
		t.Errorf("absent maxDeliveryAttempts: write %q, want 6", got)
	}
	// At the brokers' maximum (10), the reserved attempt does not fit: rejected, nothing written.
	p = planQueue(queue(func(sq *kqv1.ShareQueue) { sq.Spec.Delivery.MaxDeliveryAttempts = ptr.To[int32](10) }), obs)
	if limitWrite(p) != "" || p.ConfigValid.Reason != kqv1.ReasonOutOfBrokerBounds || !strings.Contains(p.ConfigValid.Message, "group.share.max.delivery.count.limit=10") {
		t.Errorf("attempts at the maximum: writes %v, ConfigValid %+v", p.GroupConfigs, p.ConfigValid)
	}
	// Without a republisher the limit is the attempts themselves.
	obs.ReserveLastAttempt = false
	if got := limitWrite(planQueue(queue(func(sq *kqv1.ShareQueue) { sq.Spec.Delivery.MaxDeliveryAttempts = ptr.To[int32](4) }), obs)); got != "4" {
		t.Errorf("no republisher: write %q, want 4", got)
	}
}

// The named parts of planQueue, each with its own table.

func TestPlanTopic(t *testing.T) {
	started := metav1.Now()
	cases := []struct {
		name        string
		mut         func(*kqv1.ShareQueue)
		topic       kafka.Topic
		wantReason  string
		wantStatus  metav1.ConditionStatus
		wantBlocked bool
		wantCreate  bool
		wantGrowTo  int32
		wantAdopt   bool
	}{
		{"missing: created", nil, missingTopic(), kqv1.ReasonReady, metav1.ConditionTrue, false, true, 0, false},
		{"missing under Adopt: waits", func(sq *kqv1.ShareQueue) { sq.Spec.AdoptionPolicy = kqv1.AdoptionPolicyAdopt }, missingTopic(), kqv1.ReasonTopicNotFound, metav1.ConditionFalse, true, false, 0, false},
		{"existing under Create: refused", func(sq *kqv1.ShareQueue) { sq.Spec.AdoptionPolicy = kqv1.AdoptionPolicyCreate }, liveTopic(3, 1, "x"), kqv1.ReasonTopicExists, metav1.ConditionFalse, true, false, 0, false},
		{"existing under Create after our own create began: ours", func(sq *kqv1.ShareQueue) {
			sq.Spec.AdoptionPolicy = kqv1.AdoptionPolicyCreate
			sq.Status.TopicCreationStarted = &started
		}, liveTopic(3, 1, "x"), kqv1.ReasonReady, metav1.ConditionTrue, false, false, 0, true},
		{"another id than the pinned one: blocked", func(sq *kqv1.ShareQueue) { sq.Status.TopicID = "old" }, liveTopic(3, 1, "new"), kqv1.ReasonTopicIDChanged, metav1.ConditionFalse, true, false, 0, false},
		{"fewer partitions: grown", nil, liveTopic(2, 1, "x"), kqv1.ReasonReady, metav1.ConditionTrue, false, false, 3, false},
		{"more partitions: a mismatch, nothing written", nil, liveTopic(5, 1, "x"), kqv1.ReasonPartitionCountMismatch, metav1.ConditionFalse, false, false, 0, false},
		{"another replication factor: a mismatch", func(sq *kqv1.ShareQueue) { sq.Spec.Topic.ReplicationFactor = ptr.To[int32](3) }, liveTopic(3, 1, "x"), kqv1.ReasonReplicationFactorMismatch, metav1.ConditionFalse, false, false, 0, false},
		{"under-replicated", nil, kafka.Topic{Name: "q", ID: "x", Partitions: 3, ReplicationFactor: 3}, kqv1.ReasonTopicUnderReplicated, metav1.ConditionFalse, false, false, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sq := queue(c.mut)
			obs := obsWith(c.topic, map[string]kafka.ConfigEntry{}, defaultGroupConfigs(), bounds43())
			obs.Cluster.BrokerCount = 1
			p := queuePlan{TopicName: "q"}
			planTopic(&p, sq, obs, policiesOf(&sq.Spec))
			if p.TopicReady.Reason != c.wantReason || p.TopicReady.Status != c.wantStatus {
				t.Errorf("TopicReady %+v, want %s/%s", p.TopicReady, c.wantStatus, c.wantReason)
			}
			if p.Blocked != c.wantBlocked || (p.CreateTopic != nil) != c.wantCreate || p.GrowPartitionsTo != c.wantGrowTo || p.AdoptCreated != c.wantAdopt {
				t.Errorf("blocked %v create %v growTo %d adopt %v", p.Blocked, p.CreateTopic != nil, p.GrowPartitionsTo, p.AdoptCreated)
			}
		})
	}
}

func TestPlanDeliverySetting(t *testing.T) {
	lock := delivery.Settings[0] // delivery.lockDuration → share.record.lock.duration.ms
	if lock.Config != "share.record.lock.duration.ms" {
		t.Fatalf("delivery.Settings[0] is %s", lock.Config)
	}
	d := func(v time.Duration) *metav1.Duration { return &metav1.Duration{Duration: v} }
	cases := []struct {
		name                      string
		mut                       func(*kqv1.ShareQueue)
		live                      map[string]kafka.ConfigEntry
		wantWrite                 string // "set=<v>", "delete" or ""
		wantAfter                 string
		wantSource                kqv1.ValueSource
		wantDrift, wantInvalid    bool
		wantClamped, wantUnsupprt bool
	}{
		{"declared and in bounds: set", func(sq *kqv1.ShareQueue) { sq.Spec.Delivery.LockDuration = d(45 * time.Second) }, defaultGroupConfigs(), "set=45000", "45s", kqv1.SourceGroupOverride, false, false, false, false},
		{"already set: nothing to write", func(sq *kqv1.ShareQueue) { sq.Spec.Delivery.LockDuration = d(45 * time.Second) }, withGroup("share.record.lock.duration.ms", override("45000")), "", "45s", kqv1.SourceGroupOverride, false, false, false, false},
		{"above the maximum, Reject: not written", func(sq *kqv1.ShareQueue) { sq.Spec.Delivery.LockDuration = d(5 * time.Minute) }, defaultGroupConfigs(), "", "30s", kqv1.SourceBrokerDefault, false, true, false, false},
		{"above the maximum, Clamp: the bound is written", func(sq *kqv1.ShareQueue) {
			sq.Spec.Delivery.LockDuration = d(5 * time.Minute)
			sq.Spec.BoundsPolicy = kqv1.BoundsPolicyClamp
		}, defaultGroupConfigs(), "set=60000", "1m0s", kqv1.SourceClamped, false, false, true, false},
		{"undeclared override, Enforce: deleted", nil, withGroup("share.record.lock.duration.ms", override("20000")), "delete", "30s", kqv1.SourceBrokerDefault, false, false, false, false},
		{"undeclared override, Report: drift", func(sq *kqv1.ShareQueue) { sq.Spec.DriftPolicy = kqv1.DriftPolicyReport }, withGroup("share.record.lock.duration.ms", override("20000")), "", "20s", kqv1.SourceGroupOverride, true, false, false, false},
		{"declared, other live value, Report: drift", func(sq *kqv1.ShareQueue) {
			sq.Spec.DriftPolicy = kqv1.DriftPolicyReport
			sq.Spec.Delivery.LockDuration = d(45 * time.Second)
		}, withGroup("share.record.lock.duration.ms", override("20000")), "", "20s", kqv1.SourceGroupOverride, true, false, false, false},
		{"driftIgnore keeps the live override", func(sq *kqv1.ShareQueue) {
			sq.Spec.Delivery.LockDuration = d(45 * time.Second)
			sq.Spec.DriftIgnore = []string{"share.record.lock.duration.ms"}
		}, withGroup("share.record.lock.duration.ms", override("20000")), "", "20s", kqv1.SourceGroupOverride, false, false, false, false},
		{"not reported by the brokers: unsupported", func(sq *kqv1.ShareQueue) { sq.Spec.Delivery.LockDuration = d(45 * time.Second) }, map[string]kafka.ConfigEntry{}, "", "30s", kqv1.SourceBrokerDefault, false, false, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sq := queue(c.mut)
			obs := obsWith(liveTopic(3, 1, "x"), nil, c.live, bounds43())
			got := planDeliverySetting(lock, &sq.Spec, obs, *bounds43(), policiesOf(&sq.Spec), "q")
			write := ""
			if w := got.Write; w != nil {
				write = "delete"
				if w.Op == kafka.OpSet {
					write = "set=" + w.Value
				}
			}
			if write != c.wantWrite {
				t.Errorf("write %q, want %q", write, c.wantWrite)
			}
			if got.After == nil || got.After.Value != c.wantAfter || got.After.Source != c.wantSource {
				t.Errorf("effective after %+v, want %s from %s", got.After, c.wantAfter, c.wantSource)
			}
			if (got.Drift != "") != c.wantDrift || (got.Invalid != "") != c.wantInvalid || (got.Clamped != "") != c.wantClamped || (got.Unsupported != "") != c.wantUnsupprt {
				t.Errorf("drift %q invalid %q clamped %q unsupported %q", got.Drift, got.Invalid, got.Clamped, got.Unsupported)
			}
		})
	}
}

func withGroup(config string, e kafka.ConfigEntry) map[string]kafka.ConfigEntry {
	m := defaultGroupConfigs()
	m[config] = e
	return m
}

func TestConfigValid(t *testing.T) {
	cases := []struct {
		name                         string
		invalid, unsupported, clamps []string
		wantStatus                   metav1.ConditionStatus
		wantReason                   string
		wantInMessage                string
	}{
		{"nothing to say", nil, nil, nil, metav1.ConditionTrue, kqv1.ReasonValid, "within the brokers' bounds"},
		{"clamped is still valid", nil, nil, []string{"x clamped"}, metav1.ConditionTrue, kqv1.ReasonClampedToBrokerBounds, "x clamped (boundsPolicy Clamp)"},
		{"unsupported", nil, []string{"y unsupported"}, []string{"x clamped"}, metav1.ConditionFalse, kqv1.ReasonUnsupportedByCluster, "y unsupported"},
		{"out of bounds first, naming the unsupported too", []string{"z too long"}, []string{"y unsupported"}, nil, metav1.ConditionFalse, kqv1.ReasonOutOfBrokerBounds, "z too long; not written (boundsPolicy Reject): change the value or set boundsPolicy: Clamp; y unsupported"},
	}
	for _, c := range cases {
		got := configValid(c.invalid, c.unsupported, c.clamps)
		if got.Status != c.wantStatus || got.Reason != c.wantReason || !strings.Contains(got.Message, c.wantInMessage) {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
}

func TestGroupConfigured(t *testing.T) {
	on := queueObservation{Cluster: kqv1.KafkaClusterStatus{ShareVersion: 1}, GroupConfigs: defaultGroupConfigs()}
	off := queueObservation{Cluster: kqv1.KafkaClusterStatus{ShareVersion: 0}, GroupConfigs: defaultGroupConfigs()}
	unread := queueObservation{Cluster: kqv1.KafkaClusterStatus{ShareVersion: 1}}
	cases := []struct {
		name          string
		obs           queueObservation
		notApplied    bool
		wantStatus    metav1.ConditionStatus
		wantReason    string
		wantInMessage string
	}{
		{"configured", on, false, metav1.ConditionTrue, kqv1.ReasonReady, "share group q configured"},
		{"configured except what ConfigValid names", on, true, metav1.ConditionTrue, kqv1.ReasonReady, "except the fields ConfigValid names"},
		{"share groups off", off, false, metav1.ConditionFalse, kqv1.ReasonShareGroupsDisabled, "share.version=0"},
		{"group configs unread", unread, false, metav1.ConditionUnknown, kqv1.ReasonKafkaUnavailable, "could not be read"},
	}
	for _, c := range cases {
		got := groupConfigured(c.obs, "q", c.notApplied)
		if got.Status != c.wantStatus || got.Reason != c.wantReason || !strings.Contains(got.Message, c.wantInMessage) {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
}

// The soak's bound-change fault (seed 20261203): a lease of 50 s stored while the brokers
// allowed 60 s, the bound then narrowed to 45 s, and maxDeliveryAttempts edited. Kafka
// validates the group's whole config on every alteration, so writing the attempts alone came
// back INVALID_CONFIG ("share.record.lock.duration.ms must be in the range 15000 to 45000
// inclusive") on every reconcile, and the queue said KafkaRejected. The plan sends nothing
// while a stored override it does not replace is out of bounds, and says which changes wait.
func TestPlanWaitsWhileAStoredOverrideIsOutOfNarrowedBounds(t *testing.T) {
	narrowed := bounds43()
	narrowed.RecordLockDurationMs.Max = ptr.To[int64](45000)
	group := defaultGroupConfigs()
	group["share.record.lock.duration.ms"] = override("50000")
	group["share.delivery.count.limit"] = override("5")
	edited := func(policy kqv1.BoundsPolicy) *kqv1.ShareQueue {
		return queue(func(sq *kqv1.ShareQueue) {
			sq.Spec.BoundsPolicy = policy
			sq.Spec.Delivery.LockDuration = &metav1.Duration{Duration: 50 * time.Second}
			sq.Spec.Delivery.MaxDeliveryAttempts = ptr.To[int32](4)
		})
	}
	obs := obsWith(liveTopic(3, 1, "A"), nil, group, narrowed)

	p := planQueue(edited(kqv1.BoundsPolicyReject), obs)
	if len(p.GroupConfigs) != 0 {
		t.Errorf("writes sent that Kafka refuses while the stored lease is out of bounds: %v", p.GroupConfigs)
	}
	if p.ConfigValid.Status != metav1.ConditionFalse || p.ConfigValid.Reason != kqv1.ReasonOutOfBrokerBounds {
		t.Fatalf("ConfigValid %+v", p.ConfigValid)
	}
	if want := "the group's stored share.record.lock.duration.ms=50000 is above the brokers' maximum group.share.max.record.lock.duration.ms=45000 (45s): the brokers refuse every change to the group's configs until it is back in bounds, so share.delivery.count.limit wait"; !strings.Contains(p.ConfigValid.Message, want) {
		t.Errorf("ConfigValid message %q lacks %q", p.ConfigValid.Message, want)
	}
	if e := p.Effective.MaxDeliveryAttempts; e == nil || e.Value != "5" || e.Source != kqv1.SourceGroupOverride {
		t.Errorf("effective attempts %+v, want the live 5 (nothing was written)", e)
	}

	// Clamp rewrites the lease in the same request: that request is valid, so it is sent.
	p = planQueue(edited(kqv1.BoundsPolicyClamp), obs)
	want := []kafka.AlterConfig{
		{Name: "share.record.lock.duration.ms", Op: kafka.OpSet, Value: "45000"},
		{Name: "share.delivery.count.limit", Op: kafka.OpSet, Value: "4"},
	}
	if d := cmp.Diff(want, p.GroupConfigs); d != "" {
		t.Errorf("Clamp writes (-want +got):\n%s", d)
	}

	// With nothing to write, the stored lease alone changes nothing: no extra message.
	group["share.delivery.count.limit"] = override("4")
	p = planQueue(edited(kqv1.BoundsPolicyReject), obsWith(liveTopic(3, 1, "A"), nil, group, narrowed))
	if strings.Contains(p.ConfigValid.Message, "refuse every change") {
		t.Errorf("no write pending, yet ConfigValid says changes wait: %q", p.ConfigValid.Message)
	}
}

// connectionData: the security protocol follows the KafkaCluster's TLS and SASL; Secrets are
// named, never read; the sidecar's URL only with an active Republisher route.
func TestConnectionData(t *testing.T) {
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Name: "orders"}, Spec: kqv1.ShareQueueSpec{GroupID: "billing"}}
	kc := &kqv1.KafkaCluster{Spec: kqv1.KafkaClusterSpec{BootstrapServers: []string{"a:9093", "b:9093"},
		TLS:  &kqv1.KafkaClusterTLS{CASecretRef: &kqv1.SecretKeyReference{Name: "cluster-ca", Key: "ca.crt"}, ServerName: "kafka.example.com"},
		SASL: &kqv1.KafkaClusterSASL{Mechanism: kqv1.SASLMechanismScramSHA512, SecretName: "app-user"}}}
	d := connectionData(sq, kc)
	for k, v := range map[string]string{"KAFKA_BOOTSTRAP_SERVERS": "a:9093,b:9093", "KAFKA_TOPIC": "orders", "KAFKA_GROUP_ID": "billing",
		"KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "KAFKA_SASL_SECRET_NAME": "app-user",
		"KAFKA_SASL_PASSWORD_KEY": "password", "KAFKA_TLS_CA_SECRET_NAME": "cluster-ca", "KAFKA_TLS_CA_SECRET_KEY": "ca.crt",
		"KAFKA_TLS_SERVER_NAME": "kafka.example.com", "KQO_SHARE_QUEUE": "orders"} {
		if d[k] != v {
			t.Errorf("%s = %q, want %q", k, d[k], v)
		}
	}
	if _, ok := d["KQO_REPUBLISHER_URL"]; ok {
		t.Error("a republisher URL without a Republisher route")
	}
	kc.Spec.SASL = nil
	if d := connectionData(sq, kc); d["KAFKA_SECURITY_PROTOCOL"] != "SSL" || d["KAFKA_SASL_MECHANISM"] != "" {
		t.Errorf("TLS only: %v", d)
	}
	sq.Status.DeadLetter = &kqv1.QueueDeadLetterStatus{Route: "orders-dlq", Mode: kqv1.DeadLetterModeRepublisher, Active: true}
	if d := connectionData(sq, kc); d["KQO_REPUBLISHER_URL"] != "http://127.0.0.1:8787" {
		t.Errorf("Republisher route: %v", d)
	}
}
