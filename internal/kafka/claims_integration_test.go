package kafka_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// Two managers' views of one claims topic: the topic is created compacted with one
// partition; a claim written by one is in the other's view once written and read back, and
// its change callback fires; an unchanged claim is not written again; a release removes only
// that claimant's claim; a fresh view and a one-shot read (ReadClaims) rebuild the same live
// claims from the log.
func TestClaimsAcrossManagers(t *testing.T) {
	ctx := ctxT(t)
	topic := fmt.Sprintf("claims-%d", time.Now().UnixNano())
	countA := &kafka.RequestCounter{}
	a, b := newClient(t, countA.Observe), newClient(t)
	type change struct {
		c        kafka.Claim
		released bool
	}
	seen := make(chan change, 16)
	va, err := a.Claims(ctx, topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	vb, err := b.Claims(ctx, topic, func(c kafka.Claim, released bool) { seen <- change{c, released} })
	if err != nil {
		t.Fatal(err)
	}
	topics, err := a.DescribeTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if got := topics[topic].Partitions; got != 1 {
		t.Fatalf("claims topic has %d partitions, want 1", got)
	}
	cfgs, err := a.DescribeConfigs(ctx, []kafka.ResourceKey{{Type: kafka.TopicResource, Name: topic}})
	if err != nil {
		t.Fatal(err)
	}
	if v := cfgs[kafka.ResourceKey{Type: kafka.TopicResource, Name: topic}].Configs["cleanup.policy"].Value; v != "compact" {
		t.Fatalf("claims topic cleanup.policy %q, want compact", v)
	}

	// Why a topic of its own: the broker refuses a config name it does not define, on a topic
	// and on a group alike (docs/kafka-findings.md), so no config can carry an owner marker.
	for _, key := range []kafka.ResourceKey{{Type: kafka.TopicResource, Name: topic}, {Type: kafka.GroupResource, Name: "claims-test-group"}} {
		res, err := a.ValidateIncrementalAlterConfigs(ctx, []kafka.Alteration{{Resource: key, Configs: []kafka.AlterConfig{{Name: "kafkaqueues.owner", Op: kafka.OpSet, Value: "team-a/orders"}}}})
		if err != nil {
			t.Fatal(err)
		}
		if res[key] == nil || !strings.Contains(res[key].Error(), "INVALID_CONFIG") {
			t.Fatalf("setting an unknown config on %v: %v; want INVALID_CONFIG", key, res[key])
		}
		t.Logf("unknown config on %v: %v", key, res[key])
	}

	old := kafka.Claimant{Namespace: "team-a", Name: "orders", UID: "uid-a", Created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Manager: "kqo-a"}
	young := kafka.Claimant{Namespace: "team-b", Name: "orders", UID: "uid-b", Created: old.Created.Add(time.Hour), Manager: "kqo-b"}
	names := []kafka.Claim{{Kind: kafka.ClaimTopic, Name: "orders"}, {Kind: kafka.ClaimGroup, Name: "orders"}}
	if err := va.Ensure(ctx, old, names...); err != nil {
		t.Fatal(err)
	}
	// b's view holds a's claims once it has read past them: its own write guarantees that.
	if err := vb.Ensure(ctx, young, names[0]); err != nil {
		t.Fatal(err)
	}
	got := vb.Of(kafka.ClaimTopic, "orders")
	sort.Slice(got, func(i, j int) bool { return got[i].UID < got[j].UID })
	if len(got) != 2 || got[0].Claimant != old || got[1].Claimant != young {
		t.Fatalf("b's view of topic orders: %+v; want a's and b's claims", got)
	}
	if g := vb.Of(kafka.ClaimGroup, "orders"); len(g) != 1 || g[0].UID != "uid-a" {
		t.Fatalf("b's view of group orders: %+v; want a's claim only", g)
	}
	for range 2 { // a's two records
		select {
		case ch := <-seen:
			if ch.released || ch.c.UID != "uid-a" || ch.c.Manager != "kqo-a" {
				t.Fatalf("b saw %+v, want a's claims", ch)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("b's change callback did not fire for a's claims")
		}
	}

	// Nothing changed: nothing written.
	before := countA.Snapshot()["Produce"]
	if err := va.Ensure(ctx, old, names...); err != nil {
		t.Fatal(err)
	}
	if after := countA.Snapshot()["Produce"]; after != before {
		t.Fatalf("re-claiming an unchanged claim sent %d Produce requests", after-before)
	}

	// a's queue goes: its claims are released, b's stays.
	if err := va.Release(ctx, va.ByQueue("team-a", "orders")...); err != nil {
		t.Fatal(err)
	}
	if err := vb.Ensure(ctx, young, names[1]); err != nil { // read past a's tombstones
		t.Fatal(err)
	}
	for _, kind := range []kafka.ClaimKind{kafka.ClaimTopic, kafka.ClaimGroup} {
		if g := vb.Of(kind, "orders"); len(g) != 1 || g[0].UID != "uid-b" {
			t.Fatalf("after a's release, b's view of %s orders: %+v; want b's claim only", kind, g)
		}
	}

	// The log rebuilds the same state for a new manager and for a one-shot reader.
	fresh, err := newClient(t).Claims(ctx, topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Len() != 2 || len(fresh.ByQueue("team-b", "orders")) != 2 {
		t.Fatalf("a fresh view holds %d claims (%+v), want b's two", fresh.Len(), fresh.ByQueue("team-b", "orders"))
	}
	live, err := kafka.ReadClaims(ctx, kafka.Config{BootstrapServers: broker.BootstrapServers()}, topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 2 || live[0].UID != "uid-b" || live[1].UID != "uid-b" {
		t.Fatalf("ReadClaims: %+v, want b's two claims", live)
	}
	if none, err := kafka.ReadClaims(ctx, kafka.Config{BootstrapServers: broker.BootstrapServers()}, topic+"-missing"); err != nil || len(none) != 0 {
		t.Fatalf("ReadClaims of a missing topic: %v, %v; want none", none, err)
	}
}
