package verify

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/twmb/franz-go/pkg/kgo"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// A world the operator reconciled — a 4.4 cluster with a plain queue, a queue with a clamped
// lease and a queue with an Auto (BrokerNative) route, and a cluster formatted at release 4.1 (share.version finalized
// to 1 by the operator) with an Auto (Republisher) route — holds every claim, and claims of
// every kind are compared. With Receive, the records a check fetched are released: they are
// still there for the application, one delivery attempt later.
func TestCheckReconciledWorldHoldsEveryClaim(t *testing.T) {
	t.Parallel()
	s := startSuite(t)
	ns := s.namespace(t)
	s.startManager(t, ns)
	old, err := rig.StartKafka(context.Background(), rig.KafkaOptions{ReleaseVersion: "4.1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(old.Stop)

	local := cluster(ns, "local", s.kafka.BootstrapServers())
	legacy := cluster(ns, "legacy", old.BootstrapServers())
	legacy.Spec.FeaturePolicy, legacy.Spec.TargetShareVersion = kqv1.FeaturePolicyFinalize, ptr.To[int32](1)
	plain := queue(ns, "plain", "local", kqv1.DeliverySpec{LockDuration: &metav1.Duration{Duration: 45 * time.Second},
		MaxDeliveryAttempts: ptr.To[int32](4), AutoOffsetReset: ptr.To("earliest")})
	native := queue(ns, "native", "local", kqv1.DeliverySpec{MaxDeliveryAttempts: ptr.To[int32](3)})
	// clamped: a lease above the brokers' max, written clamped (source Clamped).
	clamped := queue(ns, "clamped", "local", kqv1.DeliverySpec{LockDuration: &metav1.Duration{Duration: 2 * time.Hour}})
	clamped.Spec.BoundsPolicy = kqv1.BoundsPolicyClamp
	jobs := queue(ns, "jobs", "legacy", kqv1.DeliverySpec{MaxDeliveryAttempts: ptr.To[int32](3)})
	nativeRoute := route(ns, "native-dead", "native", "", "")
	jobsRoute := route(ns, "jobs-dead", "jobs", "", "jobs-dead-"+ns)
	s.create(t, local, legacy, plain, native, clamped, jobs, nativeRoute, jobsRoute)
	for _, o := range []client.Object{local, legacy, plain, native, clamped, jobs, nativeRoute, jobsRoute} {
		s.waitTrue(t, o, kqv1.ConditionReady)
	}
	if nativeRoute.Status.EffectiveMode != kqv1.DeadLetterModeBrokerNative || jobsRoute.Status.EffectiveMode != kqv1.DeadLetterModeRepublisher {
		t.Fatalf("routes in modes %s and %s, want BrokerNative and Republisher", nativeRoute.Status.EffectiveMode, jobsRoute.Status.EffectiveMode)
	}
	// The queues' statuses carry their dead-letter routes once the routes have written them.
	rig.Eventually(t, 30*time.Second, func() string {
		for _, q := range []*kqv1.ShareQueue{native, jobs} {
			if err := s.k8s.Get(ctxFor(t), client.ObjectKeyFromObject(q), q); err != nil {
				return err.Error()
			}
			if q.Status.DeadLetter == nil || !q.Status.DeadLetter.Active {
				return q.Name + ": status.deadLetter not active yet"
			}
		}
		return ""
	})

	rep, err := Check(ctxFor(t), s.k8s, Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("false claim in a reconciled world: %s", f)
	}
	for _, u := range rep.Unverifiable {
		t.Errorf("unverifiable with every cluster up: %s", u)
	}
	if rep.Objects != 8 {
		t.Errorf("Objects = %d, want 8", rep.Objects)
	}
	if e := clamped.Status.Effective; e == nil || e.LockDuration == nil || e.LockDuration.Source != kqv1.SourceClamped {
		t.Errorf("queue clamped: effective %+v, want lockDuration with source Clamped (the claim this world must include)", e)
	}
	for _, kind := range []string{KindKafkaCluster, KindShareQueue, KindDeadLetterRoute} {
		if rep.ClaimsByKind[kind] == 0 {
			t.Errorf("no %s claim compared: %+v", kind, rep.ClaimsByKind)
		}
	}
	t.Logf("%s; by kind %v", rep.Summary(), rep.ClaimsByKind)

	// Receive: three records on plain are fetched and released, and are still there.
	if err := rig.ProduceSpread(ctxFor(t), s.kafka.BootstrapServers(), plain.Status.TopicName, 3); err != nil {
		t.Fatal(err)
	}
	rep, err = Check(ctxFor(t), s.k8s, Options{Namespace: ns, Receive: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("false claim with Receive: %s", f)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(s.kafka.BootstrapServers()...), kgo.ShareGroup(plain.Status.GroupID), kgo.ConsumeTopics(plain.Status.TopicName))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	counts := map[string]int32{}
	rig.Eventually(t, 30*time.Second, func() string {
		pctx, cancel := context.WithTimeout(ctxFor(t), 2*time.Second)
		defer cancel()
		cons.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			counts[string(r.Value)] = r.DeliveryCount()
			r.Ack(kgo.AckAccept)
		})
		if len(counts) < 3 {
			return "the application got " + strings.Repeat("*", len(counts)) + " of 3 records"
		}
		return ""
	})
	for v, n := range counts {
		if n != 2 {
			t.Errorf("record %s delivered with count %d after a receiving check, want 2 (the check's attempt was released)", v, n)
		}
	}
}

// find returns the findings about one object's field.
func find(rep Report, kind, name, field string) []Finding {
	var out []Finding
	for _, f := range rep.Findings {
		if f.Kind == kind && f.Name == name && f.Field == field {
			out = append(out, f)
		}
	}
	return out
}

// Each way a status can be made false is caught and named: the world is reconciled, the
// manager is stopped (so statuses keep their claims), Kafka is changed behind its back or a
// status is written by hand, and one Check finds every false claim.
func TestCheckCatchesEachFalseClaim(t *testing.T) {
	// Not parallel: it stops its manager and writes false statuses; in shuffled parallel runs
	// something rewrote them before the check read them (see docs/testing.md).
	s := startSuite(t)
	ns := s.namespace(t)
	stopManager := s.startManager(t, ns)
	ctx := ctxFor(t)

	local := cluster(ns, "local", s.kafka.BootstrapServers())
	liar := cluster(ns, "liar", s.kafka.BootstrapServers())
	d := kqv1.DeliverySpec{LockDuration: &metav1.Duration{Duration: 45 * time.Second}, MaxDeliveryAttempts: ptr.To[int32](4)}
	names := []string{"deleted", "recreated", "grown", "reconfigured", "handwritten", "routed", "classic", "honest"}
	qs := map[string]*kqv1.ShareQueue{}
	objs := []client.Object{local, liar}
	for _, n := range names {
		qs[n] = queue(ns, n, "local", d)
		objs = append(objs, qs[n])
	}
	dlr := route(ns, "routed-dead", "routed", "", "")
	objs = append(objs, dlr)
	s.create(t, objs...)
	for _, o := range objs {
		s.waitTrue(t, o, kqv1.ConditionReady)
	}
	rig.Eventually(t, 30*time.Second, func() string {
		q := qs["routed"]
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(q), q); err != nil {
			return err.Error()
		}
		if q.Status.DeadLetter == nil || !q.Status.DeadLetter.Active {
			return "status.deadLetter not active yet"
		}
		return ""
	})
	// Before anything is broken, every claim holds.
	rep, err := Check(ctx, s.k8s, Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) > 0 || len(rep.Unverifiable) > 0 {
		t.Fatalf("before the faults: findings %v, unverifiable %v", rep.Findings, rep.Unverifiable)
	}
	stopManager()

	topic := func(n string) string { return qs[n].Status.TopicName }
	mustItems := func(m map[string]error, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		for k, e := range m {
			if e != nil {
				t.Fatalf("%s: %v", k, e)
			}
		}
	}
	// deleted: the topic is deleted outside the operator.
	mustItems(s.admin.DeleteTopics(ctx, topic("deleted")))
	// recreated: deleted and created again, with a new id.
	mustItems(s.admin.DeleteTopics(ctx, topic("recreated")))
	rig.Eventually(t, 60*time.Second, func() string {
		res, err := s.admin.CreateTopics(ctx, []kafka.NewTopic{{Name: topic("recreated"), Partitions: 1, ReplicationFactor: 1}})
		if err != nil {
			return err.Error()
		}
		if e := res[topic("recreated")].Err; e != nil {
			return e.Error()
		}
		return ""
	})
	// grown: partitions added outside.
	mustItems(s.admin.GrowPartitions(ctx, map[string]int32{topic("grown"): 3}))
	// reconfigured: the group's lease changed outside.
	g := kafka.ResourceKey{Type: kafka.GroupResource, Name: qs["reconfigured"].Status.GroupID}
	res, err := s.admin.IncrementalAlterConfigs(ctx, []kafka.Alteration{{Resource: g, Configs: []kafka.AlterConfig{{Name: "share.record.lock.duration.ms", Op: kafka.OpSet, Value: "20000"}}}})
	if err != nil || res[g] != nil {
		t.Fatalf("altering %s: %v %v", g, err, res[g])
	}
	// handwritten: statuses written by hand — a queue's partitions, a cluster's broker count,
	// share.version and brokerNativeDLQ.
	hw := qs["handwritten"]
	s.refresh(t, hw) // the manager may have written it after the wait above read it
	hw.Status.Partitions = 9
	if err := s.k8s.Status().Update(ctx, hw); err != nil {
		t.Fatal(err)
	}
	if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(liar), liar); err != nil {
		t.Fatal(err)
	}
	liar.Status.BrokerCount, liar.Status.ShareVersion, liar.Status.BrokerNativeDLQ = 3, 1, false
	if err := s.k8s.Status().Update(ctx, liar); err != nil {
		t.Fatal(err)
	}
	// routed: the route's dead-letter topic is deleted outside.
	if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(dlr), dlr); err != nil {
		t.Fatal(err)
	}
	mustItems(s.admin.DeleteTopics(ctx, dlr.Status.TopicName))
	// classic: a consumer group of another type holds the queue's group id, so no share
	// consumer can join it. The check above joined the share group, so it exists (empty):
	// it is deleted first.
	mustItems(s.admin.DeleteShareGroups(ctx, qs["classic"].Status.GroupID))
	cg, err := kgo.NewClient(kgo.SeedBrokers(s.kafka.BootstrapServers()...), kgo.ConsumerGroup(qs["classic"].Status.GroupID),
		kgo.ConsumeTopics(topic("classic")))
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()
	rig.Eventually(t, 30*time.Second, func() string {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		cg.PollFetches(pctx)
		gs, err := s.admin.OtherGroupTypes(ctx, qs["classic"].Status.GroupID)
		if err != nil {
			return err.Error()
		}
		if gs[qs["classic"].Status.GroupID] == "" {
			return "the classic group has not formed yet"
		}
		return ""
	})

	// Metadata and configs trail the controller's commit briefly: wait until the deletions show.
	rig.Eventually(t, 30*time.Second, func() string {
		rep, err = Check(ctx, s.k8s, Options{Namespace: ns, JoinWait: 5 * time.Second})
		if err != nil {
			return err.Error()
		}
		if len(find(rep, KindShareQueue, "deleted", "conditions[TopicReady]")) == 0 || len(find(rep, KindDeadLetterRoute, "routed-dead", "conditions[RouteActive]")) == 0 {
			return "deletions not seen yet"
		}
		return ""
	})
	for _, f := range rep.Findings {
		t.Logf("finding: %s", f)
	}
	for _, c := range []struct {
		name, kind, obj, field string
		contains               []string
	}{
		{"topic deleted", KindShareQueue, "deleted", "conditions[TopicReady]", []string{"no topic " + topic("deleted")}},
		{"topic recreated with a new id", KindShareQueue, "recreated", "status.topicId", []string{qs["recreated"].Status.TopicID}},
		{"partitions added outside", KindShareQueue, "grown", "status.partitions", []string{"status says 1", "Kafka has 3"}},
		{"group config changed outside", KindShareQueue, "reconfigured", "status.effective.lockDuration", []string{"share.record.lock.duration.ms=45000", "share.record.lock.duration.ms=20000"}},
		{"hand-written partitions", KindShareQueue, "handwritten", "status.partitions", []string{"status says 9", "Kafka has 1"}},
		{"hand-written brokerCount", KindKafkaCluster, "liar", "status.brokerCount", []string{"status says 3", "Kafka has 1"}},
		{"hand-written share.version", KindKafkaCluster, "liar", "status.shareVersion", []string{"status says 1", "Kafka has 2"}},
		{"hand-written brokerNativeDLQ inconsistent with share.version", KindKafkaCluster, "liar", "status.brokerNativeDLQ", []string{"status says false", "Kafka has true (share.version 2)"}},
		{"route's dead-letter topic deleted", KindDeadLetterRoute, "routed-dead", "conditions[RouteActive]", []string{"no topic " + dlr.Status.TopicName}},
		{"route's dead-letter topic deleted, as the queue says it", KindShareQueue, "routed", "status.deadLetter.topicName", []string{"no topic " + dlr.Status.TopicName}},
		{"group held by a classic consumer group", KindShareQueue, "classic", "conditions[Ready]", []string{"join failed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := find(rep, c.kind, c.obj, c.field)
			if len(fs) == 0 {
				t.Fatalf("no finding for %s %s %s; findings: %v", c.kind, c.obj, c.field, rep.Findings)
			}
			for _, want := range c.contains {
				if !strings.Contains(fs[0].String(), want) {
					t.Errorf("finding %q does not say %q", fs[0], want)
				}
			}
		})
	}
	t.Run("an untouched queue has no finding", func(t *testing.T) {
		for _, f := range rep.Findings {
			if f.Name == "honest" || f.Name == "local" {
				t.Errorf("false finding about an untouched object: %s", f)
			}
		}
	})
	t.Run("a KafkaCluster that does not answer is unverifiable, not false", func(t *testing.T) {
		rep, err := Check(ctx, s.k8s, Options{Namespace: ns, Timeout: 2 * time.Second, Bootstrap: map[string][]string{ns + "/local": {"127.0.0.1:1"}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range rep.Findings {
			if f.Name == "honest" || f.Name == "local" {
				t.Errorf("finding about an object of an unreachable cluster: %s", f)
			}
		}
		found := false
		for _, u := range rep.Unverifiable {
			if strings.HasPrefix(u, "ShareQueue "+ns+"/honest: ") && strings.Contains(u, "did not answer") {
				found = true
			}
		}
		if !found {
			t.Errorf("queue honest not listed unverifiable: %v", rep.Unverifiable)
		}
	})
}
