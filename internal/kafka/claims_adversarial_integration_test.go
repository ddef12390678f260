package kafka_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

var advClaimant = kafka.Claimant{Namespace: "team-a", Name: "orders", UID: "uid-a", Created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Manager: "kqo-a"}

// A claims topic whose records were all removed (DeleteRecords, or retention on a topic
// someone created with cleanup.policy=delete): its log start offset equals its end offset.
// A new manager's view must load it (there is nothing to read) rather than wait for
// records that are gone.
func TestClaimsViewLoadsEmptiedLog(t *testing.T) {
	rig.SkipWithoutRig(t, "a real Kafka broker")
	ctx := ctxT(t)
	topic := fmt.Sprintf("claims-emptied-%d", time.Now().UnixNano())
	// Created by someone else, with the default cleanup.policy (delete): records can then go
	// (retention, or DeleteRecords, which the broker refuses on a compacted topic).
	adm := kadm.NewClient(mustKgo(t))
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("delete")}, topic); err != nil {
		t.Fatal(err)
	}
	va, err := newClient(t).Claims(ctx, topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := va.Ensure(ctx, advClaimant, kafka.Claim{Kind: kafka.ClaimTopic, Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	del := kadm.Offsets{}
	del.AddOffset(topic, 0, ends[topic][0].Offset, -1)
	res, err := adm.DeleteRecords(ctx, del)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	lctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	start := time.Now()
	vb, err := newClient(t).Claims(lctx, topic, nil)
	if err != nil {
		t.Fatalf("a new view of a claims topic whose records were deleted: %v (after %v)", err, time.Since(start))
	}
	if vb.Len() != 0 {
		t.Fatalf("view holds %d claims, want 0", vb.Len())
	}
	if live, err := kafka.ReadClaims(lctx, kafka.Config{BootstrapServers: broker.BootstrapServers()}, topic); err != nil || len(live) != 0 {
		t.Fatalf("ReadClaims of the emptied claims topic: %+v, %v; want none", live, err)
	}
	// And it works: a claim written now is read back.
	if err := vb.Ensure(lctx, advClaimant, kafka.Claim{Kind: kafka.ClaimGroup, Name: "orders"}); err != nil {
		t.Fatal(err)
	}
}

// Records on the claims topic that are not claims (someone else's writes): non-JSON keys,
// claim keys with a value that is JSON but names no queue. None may become a claimant.
func TestClaimsIgnoresMalformedRecords(t *testing.T) {
	rig.SkipWithoutRig(t, "a real Kafka broker")
	ctx := ctxT(t)
	topic := fmt.Sprintf("claims-garbage-%d", time.Now().UnixNano())
	cl := mustKgo(t)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, topic); err != nil {
		t.Fatal(err)
	}
	key := func(name string) []byte {
		return []byte(`{"kind":"topic","name":"` + name + `","uid":"x-` + name + `"}`)
	}
	recs := []*kgo.Record{
		{Topic: topic, Key: []byte("not json"), Value: []byte("garbage")},
		{Topic: topic, Key: key("empty-object"), Value: []byte(`{}`)},
		{Topic: topic, Key: key("json-null"), Value: []byte(`null`)},
		{Topic: topic, Key: key("string"), Value: []byte(`"garbage"`)},
		{Topic: topic, Key: key("no-created"), Value: []byte(`{"namespace":"a","name":"b","uid":"x-no-created"}`)},
		{Topic: topic, Key: []byte(`{"kind":"topic","name":"","uid":"u"}`), Value: []byte(`{"namespace":"a","name":"b","uid":"u","created":"2020-01-01T00:00:00Z"}`)},
		{Topic: topic, Key: []byte(`{"kind":"topic","name":"no-uid","uid":""}`), Value: []byte(`{"namespace":"a","name":"b","created":"2020-01-01T00:00:00Z"}`)},
		{Topic: topic, Key: []byte(`{"kind":"bogus","name":"orders","uid":"u"}`), Value: []byte(`{"namespace":"a","name":"b","uid":"u","created":"2020-01-01T00:00:00Z"}`)},
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	v, err := newClient(t).Claims(ctx, topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"empty-object", "json-null", "string", "no-created", "", "no-uid"} {
		for _, c := range v.Of(kafka.ClaimTopic, name) {
			t.Errorf("malformed record became a claim on topic %q: %+v", name, c)
		}
	}
	if n := v.Len(); n != 0 {
		t.Errorf("view holds %d claims from malformed records, want 0", n)
	}
}

// The claims topic deleted while managers run. The manager that next writes a claim has its
// write refused (UNKNOWN_TOPIC_OR_PARTITION); its next attempt creates the topic again and
// reads it into a new view. Another manager's view, which tails the topic, notices the log
// starting over and is replaced too, so it does not go on trusting claims the topic no longer
// holds (its own would never be written again: Ensure skips claims the view holds).
func TestClaimsTopicDeletedWhileRunning(t *testing.T) {
	rig.SkipWithoutRig(t, "a real Kafka broker")
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	topic := fmt.Sprintf("claims-deleted-%d", time.Now().UnixNano())
	a, b := newClient(t), newClient(t)
	va, err := a.Claims(ctx, topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	vb, err := b.Claims(ctx, topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := va.Ensure(ctx, advClaimant, kafka.Claim{Kind: kafka.ClaimTopic, Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	other := kafka.Claimant{Namespace: "team-b", Name: "payments", UID: "uid-b", Created: advClaimant.Created, Manager: "kqo-b"}
	for i := range 3 { // b's log position ahead of what the recreated topic will hold
		if err := vb.Ensure(ctx, other, kafka.Claim{Kind: kafka.ClaimTopic, Name: fmt.Sprintf("payments-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kadm.NewClient(mustKgo(t)).DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	newQueue := kafka.Claimant{Namespace: "team-a", Name: "new", UID: "uid-new", Created: advClaimant.Created.Add(time.Hour), Manager: "kqo-a"}
	var nva *kafka.Claims
	for i := range 3 {
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		start := time.Now()
		v, err := a.Claims(wctx, topic, nil)
		if err == nil {
			err = v.Ensure(wctx, newQueue, kafka.Claim{Kind: kafka.ClaimTopic, Name: "new"})
		}
		wcancel()
		t.Logf("a's claim, attempt %d after the deletion: %v (%v), same view as before: %v", i, err, time.Since(start).Round(time.Millisecond), v == va)
		if err == nil {
			nva = v
			break
		}
	}
	if nva == nil {
		t.Fatal("a's claims could not be written after the claims topic was deleted: new queues wedge until the manager restarts")
	}
	if nva.Len() != 1 {
		t.Fatalf("a's new view holds %d claims, want its new one", nva.Len())
	}
	// a's old queue claims again (its reconcile calls Ensure each time): written anew.
	if err := nva.Ensure(ctx, advClaimant, kafka.Claim{Kind: kafka.ClaimTopic, Name: "orders"}); err != nil {
		t.Fatal(err)
	}
	// b: a view that no longer matches the log is replaced.
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := b.Claims(ctx, topic, nil)
		if err == nil && v != vb {
			if got := v.Of(kafka.ClaimTopic, "payments-0"); len(got) != 0 {
				t.Fatalf("b's new view holds %+v, gone with the deleted topic", got)
			}
			if err := v.Ensure(ctx, other, kafka.Claim{Kind: kafka.ClaimTopic, Name: "payments-0"}); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b still uses its view of the deleted claims topic (%d claims, %v): its claims are never written to the new topic", vb.Len(), err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	live, err := kafka.ReadClaims(ctx, kafka.Config{BootstrapServers: broker.BootstrapServers()}, topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 3 {
		t.Fatalf("the recreated claims topic holds %+v; want a's two claims and b's", live)
	}
}
