package republisher_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/internal/republisher"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// setGroupLimit sets the group's share.delivery.count.limit (what the operator does when
// spec.delivery.maxDeliveryAttempts changes) and checks that DescribeConfigs on the group
// answers it as a group override.
func setGroupLimit(t *testing.T, s *setup, group string, limit int) {
	t.Helper()
	ctx := context.Background()
	key := kafka.ResourceKey{Type: kafka.GroupResource, Name: group}
	alt, err := s.admin.IncrementalAlterConfigs(ctx, []kafka.Alteration{{Resource: key, Configs: []kafka.AlterConfig{
		{Name: "share.auto.offset.reset", Op: kafka.OpSet, Value: "earliest"},
		{Name: republisher.DeliveryCountLimitConfig, Op: kafka.OpSet, Value: strconv.Itoa(limit)},
	}}})
	if err != nil || alt[key] != nil {
		t.Fatalf("group configs: %v %v", err, alt)
	}
	// Brokers serve DescribeConfigs from a metadata image that trails the controller's commit
	// (a loaded machine showed the default a moment after the write): poll.
	rig.Eventually(t, 10*time.Second, func() string {
		res, err := s.admin.DescribeConfigs(ctx, []kafka.ResourceKey{key})
		if err != nil || res[key].Err != nil {
			return fmt.Sprintf("describe group configs: %v %v", err, res[key].Err)
		}
		if e := res[key].Configs[republisher.DeliveryCountLimitConfig]; e.Value != strconv.Itoa(limit) || e.Source != kafka.ConfigSourceGroup {
			return fmt.Sprintf("group %s's %s reads %q (%s), want %d (%s)", group, republisher.DeliveryCountLimitConfig, e.Value, e.Source, limit, kafka.ConfigSourceGroup)
		}
		return ""
	})
}

// waitLimit waits until the republisher follows limit.
func waitLimit(t *testing.T, rp *republisher.Republisher, limit int32) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, observed := rp.DeliveryLimit()
		if observed && l == limit {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the republisher follows limit %d (read from the brokers: %v), want %d", l, observed, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// releaseUntilDeadLettered hands value's record to the application and releases it every
// time until a copy of it is in the dead-letter topic (or nothing is delivered for 10s). It
// returns the delivery counts the application was handed and the record's dead-letter copies.
func releaseUntilDeadLettered(t *testing.T, base string, dl *deadLetters, topic, value string) ([]int32, []*kgo.Record) {
	t.Helper()
	copies := func() []*kgo.Record {
		var out []*kgo.Record
		for _, r := range dl.byValue()[value] {
			if header(r, republisher.HeaderSourceTopic) == topic {
				out = append(out, r)
			}
		}
		return out
	}
	var counts []int32
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && len(counts) < 20; {
		got := receiveHTTP(t, base, 10*time.Second)
		if len(got) == 0 {
			break
		}
		if string(got[0].Value) != value {
			t.Fatalf("received %q, want %q", got[0].Value, value)
		}
		counts = append(counts, got[0].DeliveryCount)
		if code, res := ackHTTP(t, base, got[0].ID, "release"); code != http.StatusOK {
			t.Fatalf("release of delivery %d: %d %+v", got[0].DeliveryCount, code, res)
		}
		// A release on the application's last attempt is a dead-letter write, done before
		// the answer: the copy lands within moments.
		for wait := time.Now().Add(2 * time.Second); len(copies()) == 0 && time.Now().Before(wait); {
			time.Sleep(100 * time.Millisecond)
		}
		if len(copies()) > 0 {
			break
		}
	}
	time.Sleep(2 * time.Second) // a duplicate copy would have landed by now
	return counts, copies()
}

// The record-loss bug of a changed maxDeliveryAttempts (found by the adversarial round): the
// sidecar's KQO_MAX_DELIVERY_ATTEMPTS is fixed at Pod creation, but the operator changes the
// group's share.delivery.count.limit on a live queue. With the sidecar at 5 attempts and the
// group's limit lowered to 3, the application was handed attempt 3, the brokers' last, and
// its release answered 200 while the brokers archived the record without a dead-letter copy.
// The sidecar now follows the brokers' limit: at limit 3 the application gets 2 attempts and
// the release of the 2nd is dead-lettered (one copy), delivery 3 is never handed out, and a
// record given back on its 2nd delivery by a stopping sidecar is dead-lettered on arrival on
// its 3rd by the next one; once the limit is raised to 6, a record is handed out 5 times and
// dead-lettered on the 5th release, not on the old limit's.
func TestRepublisherFollowsTheGroupsDeliveryLimit(t *testing.T) {
	t.Parallel()
	s := newSetup(t, "limit")
	ctx := context.Background()
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dl := &deadLetters{}
	dl.follow(dctx, t, s.bootstrapServer, s.dlq)

	const topic = "limit-q"
	res, err := s.admin.CreateTopics(ctx, []kafka.NewTopic{{Name: topic, Partitions: 1, ReplicationFactor: 1}})
	if err != nil || res[topic].Err != nil {
		t.Fatalf("topic %s: %v %v", topic, err, res[topic].Err)
	}
	// Without an override the group reports the brokers' default (the precedence the
	// sidecar relies on): verify what the brokers answer for a group with no configs.
	key := kafka.ResourceKey{Type: kafka.GroupResource, Name: "limit-no-override"}
	if d, err := s.admin.DescribeConfigs(ctx, []kafka.ResourceKey{key}); err != nil || d[key].Err != nil {
		t.Fatalf("describe a group without configs: %v %v", err, d[key].Err)
	} else if e, ok := d[key].Configs[republisher.DeliveryCountLimitConfig]; !ok || e.Value == "" || e.IsOverride() {
		t.Errorf("a group without configs: %s = %q (%s, reported %v), want the brokers' default", republisher.DeliveryCountLimitConfig, e.Value, e.Source, ok)
	} else {
		t.Logf("a group without configs reports %s = %s (%s)", republisher.DeliveryCountLimitConfig, e.Value, e.Source)
	}
	setGroupLimit(t, s, topic, 3)
	prod, err := kafka.NewProducer(kafka.Config{BootstrapServers: s.bootstrapServer})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.Produce(ctx, topic, []byte("first"), []byte("first"), nil); err != nil {
		t.Fatal(err)
	}

	// The Pod was made when maxDeliveryAttempts was 5.
	rp, _ := s.start(t, republisher.Options{Topic: topic, Group: topic, DeadLetterTopic: s.dlq, MaxDeliveryAttempts: 5,
		LimitRefresh: time.Second, Lease: 30 * time.Second, Members: 1, MaxRecords: 1})
	srv := httptest.NewServer(rp.Handler())
	defer srv.Close()
	waitLimit(t, rp, 3)

	counts, dead := releaseUntilDeadLettered(t, srv.URL, dl, topic, "first")
	t.Logf("limit 3: the application was handed deliveries %v", counts)
	for _, c := range counts {
		if c >= 3 {
			t.Errorf("the application was handed delivery %d, the brokers' last at limit 3 (deliveries %v)", c, counts)
		}
	}
	if len(dead) != 1 {
		t.Errorf("limit 3: %d dead-letter copies of the record (deliveries handed %v), want 1", len(dead), counts)
	} else if got := header(dead[0], republisher.HeaderDeliveryCount); got != "2" || header(dead[0], republisher.HeaderReason) != republisher.ReasonReleasedLast {
		t.Errorf("limit 3: dead-lettered on delivery %s (%s), want 2 (%s)", got, header(dead[0], republisher.HeaderReason), republisher.ReasonReleasedLast)
	}
	if more := receiveHTTP(t, srv.URL, 5*time.Second); len(more) != 0 {
		t.Errorf("delivered again after its dead-letter write: %+v", more)
	}

	// The reserved attempt at the brokers' limit, not at the Pod's: a sidecar (5 attempts,
	// limit 3) stops while the application holds delivery 2 and gives it back; the brokers
	// deliver it a 3rd time, their last, to the next sidecar (also made at 5 attempts), which
	// must dead-letter it on arrival and never hand it out.
	t.Run("reserved attempt after a restart", func(t *testing.T) {
		const topic = "limit-r"
		res, err := s.admin.CreateTopics(ctx, []kafka.NewTopic{{Name: topic, Partitions: 1, ReplicationFactor: 1}})
		if err != nil || res[topic].Err != nil {
			t.Fatalf("topic %s: %v %v", topic, err, res[topic].Err)
		}
		setGroupLimit(t, s, topic, 3)
		if err := prod.Produce(ctx, topic, []byte("restart"), []byte("restart"), nil); err != nil {
			t.Fatal(err)
		}
		opts := republisher.Options{Topic: topic, Group: topic, DeadLetterTopic: s.dlq, MaxDeliveryAttempts: 5,
			LimitRefresh: time.Second, Lease: 30 * time.Second, Members: 1, MaxRecords: 1}
		first, err := republisher.New(kafka.Config{BootstrapServers: s.bootstrapServer}, opts)
		if err != nil {
			t.Fatal(err)
		}
		firstSrv := httptest.NewServer(first.Handler())
		got := receiveHTTP(t, firstSrv.URL, 30*time.Second)
		if len(got) != 1 || got[0].DeliveryCount != 1 {
			t.Fatalf("first receive %+v", got)
		}
		if code, res := ackHTTP(t, firstSrv.URL, got[0].ID, "release"); code != http.StatusOK {
			t.Fatalf("release of delivery 1: %d %+v", code, res)
		}
		got = receiveHTTP(t, firstSrv.URL, 30*time.Second)
		if len(got) != 1 || got[0].DeliveryCount != 2 {
			t.Fatalf("second receive %+v", got)
		}
		firstSrv.Close()
		first.Shutdown(ctx) // gives delivery 2 back: the brokers' next is their last

		next, _ := s.start(t, opts)
		nextSrv := httptest.NewServer(next.Handler())
		defer nextSrv.Close()
		if got := receiveHTTP(t, nextSrv.URL, 10*time.Second); len(got) != 0 {
			t.Errorf("the brokers' last attempt was handed to the application: %+v", got)
		}
		var dead []*kgo.Record
		for deadline := time.Now().Add(30 * time.Second); len(dead) == 0 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			dead = nil
			for _, r := range dl.byValue()["restart"] {
				if header(r, republisher.HeaderSourceTopic) == topic {
					dead = append(dead, r)
				}
			}
		}
		if len(dead) != 1 {
			t.Fatalf("%d dead-letter copies of the record, want 1", len(dead))
		}
		if got := header(dead[0], republisher.HeaderDeliveryCount); got != "3" || header(dead[0], republisher.HeaderReason) != republisher.ReasonOverAttempted {
			t.Errorf("dead-lettered on delivery %s (%s), want 3 (%s)", got, header(dead[0], republisher.HeaderReason), republisher.ReasonOverAttempted)
		}
	})

	// maxDeliveryAttempts raised to 5 on the live queue: the operator sets the limit to 6.
	setGroupLimit(t, s, topic, 6)
	waitLimit(t, rp, 6)
	if err := prod.Produce(ctx, topic, []byte("second"), []byte("second"), nil); err != nil {
		t.Fatal(err)
	}
	counts, dead = releaseUntilDeadLettered(t, srv.URL, dl, topic, "second")
	t.Logf("limit 6: the application was handed deliveries %v", counts)
	if want := []int32{1, 2, 3, 4, 5}; len(counts) != len(want) || counts[0] != 1 || counts[len(counts)-1] != 5 {
		t.Errorf("limit 6: the application was handed deliveries %v, want %v", counts, want)
	}
	if len(dead) != 1 {
		t.Fatalf("limit 6: %d dead-letter copies of the record, want 1", len(dead))
	}
	if got := header(dead[0], republisher.HeaderDeliveryCount); got != "5" || header(dead[0], republisher.HeaderReason) != republisher.ReasonReleasedLast {
		t.Errorf("limit 6: dead-lettered on delivery %s (%s), want 5 (%s)", got, header(dead[0], republisher.HeaderReason), republisher.ReasonReleasedLast)
	}
}
