package verify

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// afterList is a client.Reader on the real apiserver that runs hook once, right after the
// first List of a ShareQueueList returns: what happens to the cluster while a Check runs.
type afterList struct {
	client.Reader
	hook func()
	done bool
}

func (a *afterList) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	err := a.Reader.List(ctx, l, opts...)
	if _, ok := l.(*kqv1.ShareQueueList); ok && err == nil && !a.done {
		a.done = true
		a.hook()
	}
	return err
}

// createReady creates objs and waits until each is Ready at its generation.
func (s *suite) createReady(t *testing.T, objs ...client.Object) {
	t.Helper()
	s.create(t, objs...)
	for _, o := range objs {
		s.waitTrue(t, o, kqv1.ConditionReady)
	}
	// Ready follows the controller's answer to CreateTopics; the broker's metadata image, which
	// answers the check's Metadata requests, trails it — by seconds on a loaded machine (a
	// shuffled parallel run saw Ready queues whose topics the broker did not list yet). The
	// check is meant to see the world as the operator made it: wait until the broker lists them.
	for _, o := range objs {
		if sq, ok := o.(*kqv1.ShareQueue); ok {
			var kc kqv1.KafkaCluster
			if err := s.k8s.Get(ctxFor(t), client.ObjectKey{Namespace: sq.Namespace, Name: sq.Spec.ClusterRef.Name}, &kc); err != nil {
				t.Fatal(err)
			}
			s.waitListed(t, kc.Spec.BootstrapServers, sq.Status.TopicName)
		}
	}
}

// waitListed waits until Metadata from the brokers at bootstrap lists topic.
func (s *suite) waitListed(t *testing.T, bootstrap []string, topic string) {
	t.Helper()
	admin, err := kafka.NewClient(kafka.Config{BootstrapServers: bootstrap, ClientID: "test-admin"})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	rig.Eventually(t, 30*time.Second, func() string {
		ts, err := admin.DescribeTopics(ctxFor(t), topic)
		if err != nil {
			return err.Error()
		}
		if e := ts[topic].Err; e != nil {
			return "topic " + topic + ": " + e.Error()
		}
		return ""
	})
}

// refresh re-reads objs once the test has stopped its manager: the manager may have written
// them after the test last read them (a loaded machine showed it), and the test's lies are to
// be told on what is stored.
func (s *suite) refresh(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := s.k8s.Get(ctxFor(t), client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
	}
}

// mustGone deletes topic and waits until Metadata no longer lists it.
func (s *suite) mustGone(t *testing.T, topic string) {
	t.Helper()
	ctx := ctxFor(t)
	if _, err := s.admin.DeleteTopics(ctx, topic); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, 30*time.Second, func() string {
		ts, err := s.admin.DescribeTopics(ctx, topic)
		if err != nil {
			return err.Error()
		}
		if e := ts[topic].Err; e == nil || !kafka.IsNotFound(e) {
			return "topic " + topic + " still listed"
		}
		return ""
	})
}

// A queue being deleted (its finalizer removes topic and group while its status still says
// TopicReady True) and a queue deleted while the check runs claim nothing any more: neither
// is a finding. Before the fix both were reported false, and the soak, which deletes
// queues, would have failed on a status that was right.
func TestCheckIgnoresObjectsDeletedBeforeOrDuringTheCheck(t *testing.T) {
	// Not parallel: it stops its manager and writes false statuses; in shuffled parallel runs
	// something rewrote them before the check read them (see docs/testing.md).
	s := startSuite(t)
	ns := s.namespace(t)
	stopManager := s.startManager(t, ns)
	ctx := ctxFor(t)
	local := cluster(ns, "local", s.kafka.BootstrapServers())
	doomed := queue(ns, "doomed", "local", kqv1.DeliverySpec{})
	vanishing := queue(ns, "vanishing", "local", kqv1.DeliverySpec{})
	honest := queue(ns, "honest", "local", kqv1.DeliverySpec{})
	s.createReady(t, local, doomed, vanishing, honest)
	stopManager()
	s.refresh(t, doomed, vanishing, honest)

	// doomed: being deleted (a finalizer of the test's holds it), its topic already gone.
	doomed.Finalizers = append(doomed.Finalizers, "test.kafkaqueues.io/hold")
	if err := s.k8s.Update(ctx, doomed); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.k8s.Get(context.Background(), client.ObjectKeyFromObject(doomed), doomed)
		doomed.Finalizers = nil
		_ = s.k8s.Update(context.Background(), doomed)
	})
	if err := s.k8s.Delete(ctx, doomed); err != nil {
		t.Fatal(err)
	}
	s.mustGone(t, doomed.Status.TopicName)

	// vanishing: deleted (finalizers dropped, as the operator's would be) and its topic with
	// it, between the check's List and its Metadata request.
	r := &afterList{Reader: s.k8s, hook: func() {
		q := &kqv1.ShareQueue{}
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(vanishing), q); err != nil {
			t.Fatal(err)
		}
		q.Finalizers = nil
		if err := s.k8s.Update(ctx, q); err != nil {
			t.Fatal(err)
		}
		if err := s.k8s.Delete(ctx, q); err != nil {
			t.Fatal(err)
		}
		s.mustGone(t, vanishing.Status.TopicName)
	}}
	// The check's default join wait: honest's join is the control, and on a loaded machine a
	// share-group join took more than the 3 s this test once allowed.
	rep, err := Check(ctx, r, Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if !r.done {
		t.Fatal("the hook did not run: the check listed no ShareQueues")
	}
	for _, f := range rep.Findings {
		t.Errorf("finding about a right status: %s", f)
	}
	var gone bool
	for _, u := range rep.Unverifiable {
		if strings.HasPrefix(u, "ShareQueue "+ns+"/vanishing: ") && strings.Contains(u, "deleted during the check") {
			gone = true
		}
		if strings.Contains(u, "/doomed") {
			t.Errorf("a queue being deleted before the check is listed: %s", u)
		}
	}
	if !gone {
		t.Errorf("queue vanishing not listed as deleted during the check: %v", rep.Unverifiable)
	}
	// The honest queue's claims were still compared (and hold).
	if rep.ClaimsByKind[KindShareQueue] == 0 {
		t.Errorf("no ShareQueue claim compared: %+v", rep.ClaimsByKind)
	}
}

// A broker that goes away between the check's Metadata and its joins makes the Ready claims
// unverifiable, as a cluster that does not answer does (before the fix: false, "join failed:
// ShareGroupHeartbeat ...: EOF"), and once one join got no answer the joins not yet started
// on that cluster are not tried (each would wait JoinWait for nothing; with 10,000 queues at
// 64 at a time that was hours): they are listed unverifiable, naming the first failure.
func TestCheckJoinAgainstABrokerGoneIsUnverifiable(t *testing.T) {
	// Not parallel: it stops its manager and writes false statuses; in shuffled parallel runs
	// something rewrote them before the check read them (see docs/testing.md).
	s := startSuite(t)
	ns := s.namespace(t)
	stopManager := s.startManager(t, ns)
	ctx := ctxFor(t)
	k2, err := rig.StartKafka(context.Background(), rig.KafkaOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k2.Stop)
	kc := cluster(ns, "brief", k2.BootstrapServers())
	qs := []*kqv1.ShareQueue{queue(ns, "a", "brief", kqv1.DeliverySpec{}), queue(ns, "b", "brief", kqv1.DeliverySpec{}), queue(ns, "c", "brief", kqv1.DeliverySpec{})}
	s.createReady(t, kc, qs[0], qs[1], qs[2])
	stopManager()
	s.refresh(t, qs[0], qs[1], qs[2])

	cl, err := kafka.NewClient(kafka.Config{BootstrapServers: k2.BootstrapServers(), ClientID: "verify-test", RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.DescribeCluster(ctx); err != nil {
		t.Fatalf("the broker did not answer before it was stopped: %v", err)
	}
	k2.Stop()
	ck := &checker{c: s.k8s, opts: Options{JoinWait: 3 * time.Second, Parallel: 1}, rep: Report{ClaimsByKind: map[string]int{}}}
	ck.runJoins(ctx, cl, qs)
	for _, f := range ck.rep.Findings {
		t.Errorf("a join that got no answer reported false: %s", f)
	}
	u := ck.rep.Unverifiable
	if len(u) != 3 || !strings.Contains(u[0], "/a: conditions[Ready]: Kafka did not answer the join") {
		t.Fatalf("unverifiable = %q, want queue a's Ready claim first, Kafka not answering its join", u)
	}
	for i, q := range []string{"b", "c"} {
		if !strings.Contains(u[i+1], "/"+q+": conditions[Ready]: join not tried: Kafka did not answer the check of ShareQueue "+ns+"/a") {
			t.Errorf("queue %s: %q, want its join not tried after a's got no answer", q, u[i+1])
		}
	}
}

// Status written by hand with a True condition and the field it vouches for left empty —
// TopicReady True without status.topicName, GroupConfigured True without status.groupID —
// and a Republisher route that stays RouteActive True after the group stopped taking renew
// acknowledgements (KIP-1222: the republisher's lock renewals are refused) are false
// claims, and so is a value shown as the brokers' default (source BrokerDefault) that is not
// theirs. Before the fix each of them passed with no claim compared.
func TestCheckCatchesVouchedFieldsLeftEmptyAndRenewOff(t *testing.T) {
	// Not parallel: it stops its manager and writes false statuses; in shuffled parallel runs
	// something rewrote them before the check read them (see docs/testing.md).
	s := startSuite(t)
	ns := s.namespace(t)
	stopManager := s.startManager(t, ns)
	ctx := ctxFor(t)
	local := cluster(ns, "local", s.kafka.BootstrapServers())
	blank := queue(ns, "blank", "local", kqv1.DeliverySpec{LockDuration: &metav1.Duration{Duration: 50 * time.Second}})
	jobs := queue(ns, "jobs", "local", kqv1.DeliverySpec{MaxDeliveryAttempts: ptr.To[int32](3), RenewAcknowledge: ptr.To(true)})
	dead := route(ns, "jobs-dead", "jobs", kqv1.DeadLetterModeRepublisher, "jobs-dead-"+ns)
	defaulted := queue(ns, "defaulted", "local", kqv1.DeliverySpec{})
	s.createReady(t, local, blank, jobs, dead, defaulted)
	s.waitTrue(t, dead, kqv1.ConditionRouteActive)
	rep, err := Check(ctx, s.k8s, Options{Namespace: ns, SkipJoin: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) > 0 {
		t.Fatalf("before the lies: %v", rep.Findings)
	}
	stopManager()
	s.refresh(t, blank, jobs, dead, defaulted)

	blank.Status.TopicName, blank.Status.GroupID = "", ""
	if err := s.k8s.Status().Update(ctx, blank); err != nil {
		t.Fatal(err)
	}
	// defaulted: the lease shown as the brokers' default is not the brokers' default.
	if e := defaulted.Status.Effective; e == nil || e.LockDuration == nil || e.LockDuration.Source != kqv1.SourceBrokerDefault || e.LockDuration.Value == "" {
		t.Fatalf("queue defaulted: effective %+v, want lockDuration with a value and source BrokerDefault", e)
	}
	defaulted.Status.Effective.LockDuration.Value = "1m30s"
	if err := s.k8s.Status().Update(ctx, defaulted); err != nil {
		t.Fatal(err)
	}
	g := kafka.ResourceKey{Type: kafka.GroupResource, Name: jobs.Status.GroupID}
	res, err := s.admin.IncrementalAlterConfigs(ctx, []kafka.Alteration{{Resource: g, Configs: []kafka.AlterConfig{{Name: "share.renew.acknowledge.enable", Op: kafka.OpSet, Value: "false"}}}})
	if err != nil || res[g] != nil {
		t.Fatalf("altering %s: %v %v", g, err, res[g])
	}
	rig.Eventually(t, 30*time.Second, func() string {
		rep, err = Check(ctx, s.k8s, Options{Namespace: ns, SkipJoin: true})
		if err != nil {
			return err.Error()
		}
		if len(find(rep, KindDeadLetterRoute, "jobs-dead", "conditions[RouteActive]")) == 0 {
			return "the renew change not seen yet"
		}
		return ""
	})
	for _, c := range []struct {
		kind, obj, field, contains string
	}{
		{KindShareQueue, "blank", "conditions[TopicReady]", "no topic named in status.topicName"},
		{KindShareQueue, "blank", "conditions[GroupConfigured]", `status.groupID ""`},
		{KindDeadLetterRoute, "jobs-dead", "conditions[RouteActive]", "share.renew.acknowledge.enable=false"},
		{KindShareQueue, "defaulted", "status.effective.lockDuration", "share.record.lock.duration.ms=90000, the brokers' default"},
	} {
		fs := find(rep, c.kind, c.obj, c.field)
		if len(fs) == 0 {
			t.Errorf("no finding for %s %s %s; findings: %v", c.kind, c.obj, c.field, rep.Findings)
			continue
		}
		if !strings.Contains(fs[0].String(), c.contains) {
			t.Errorf("finding %q does not say %q", fs[0], c.contains)
		}
	}
}

// A status rewritten while the check runs: when the rewrite changes only figures that move on
// their own (status.depth, as the depth poller writes it every few seconds) the false claim
// is still made and still reported; when the rewrite takes the claim back (a reconcile
// during the check) it is listed unverifiable ("rewritten during the check"), not false.
// Before the fix the second was reported false; a first fix (any new resourceVersion made
// the finding unverifiable) let a running depth poller hide every lie.
func TestCheckConfirmsFindingsAgainstTheStatusNow(t *testing.T) {
	// Not parallel: it stops its manager and writes false statuses; in shuffled parallel runs
	// something rewrote them before the check read them (see docs/testing.md).
	s := startSuite(t)
	ns := s.namespace(t)
	stopManager := s.startManager(t, ns)
	ctx := ctxFor(t)
	local := cluster(ns, "local", s.kafka.BootstrapServers())
	liar := queue(ns, "liar", "local", kqv1.DeliverySpec{})
	fixed := queue(ns, "fixed", "local", kqv1.DeliverySpec{})
	s.createReady(t, local, liar, fixed)
	stopManager()
	s.refresh(t, liar, fixed)
	for _, q := range []*kqv1.ShareQueue{liar, fixed} {
		q.Status.Partitions = 5
		if err := s.k8s.Status().Update(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	r := &afterList{Reader: s.k8s, hook: func() {
		// liar: only its depth moves. fixed: its claim is taken back.
		q := &kqv1.ShareQueue{}
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(liar), q); err != nil {
			t.Fatal(err)
		}
		q.Status.Depth = &kqv1.QueueDepthStatus{ObservedAt: metav1.Now(), Backlog: ptr.To[int64](3)}
		if err := s.k8s.Status().Update(ctx, q); err != nil {
			t.Fatal(err)
		}
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(fixed), q); err != nil {
			t.Fatal(err)
		}
		q.Status.Partitions = 1
		if err := s.k8s.Status().Update(ctx, q); err != nil {
			t.Fatal(err)
		}
	}}
	rep, err := Check(ctx, r, Options{Namespace: ns, SkipJoin: true})
	if err != nil {
		t.Fatal(err)
	}
	if fs := find(rep, KindShareQueue, "liar", "status.partitions"); len(fs) != 1 || !strings.Contains(fs[0].String(), "status says 5, Kafka has 1") {
		t.Errorf("liar (only its depth rewritten): findings %v, want status.partitions 5 against 1; unverifiable %v", rep.Findings, rep.Unverifiable)
	}
	if fs := find(rep, KindShareQueue, "fixed", "status.partitions"); len(fs) != 0 {
		t.Errorf("fixed (its claim taken back during the check) reported false: %v", fs)
	}
	var listed bool
	for _, u := range rep.Unverifiable {
		if strings.HasPrefix(u, "ShareQueue "+ns+"/fixed: status.partitions: status rewritten during the check") {
			listed = true
		}
	}
	if !listed {
		t.Errorf("fixed not listed as rewritten during the check: %v", rep.Unverifiable)
	}
}

// Three brokers, one stopped: once the operator's probe has seen it (status.brokerCount 2),
// every claim holds — the queues' replication factor is still the replica count (3), the
// share-state topic's too, and a join finds the group's new coordinator. A claim found
// false here would fail the soak on a right status.
func TestCheckHoldsWithOneOfThreeBrokersStopped(t *testing.T) {
	t.Parallel()
	s := startSuite(t)
	ns := s.namespace(t)
	s.startManager(t, ns)
	ctx := ctxFor(t)
	k3, err := rig.StartKafka(context.Background(), rig.KafkaOptions{Brokers: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k3.Stop)
	kc := cluster(ns, "three", k3.BootstrapServers())
	var objs []client.Object
	objs = append(objs, kc)
	for _, n := range []string{"a", "b", "c", "d"} {
		q := queue(ns, n, "three", kqv1.DeliverySpec{})
		q.Spec.Topic.Partitions, q.Spec.Topic.ReplicationFactor = 12, ptr.To[int32](3)
		objs = append(objs, q)
	}
	s.createReady(t, objs...)
	rep, err := Check(ctx, s.k8s, Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) > 0 || len(rep.Unverifiable) > 0 {
		t.Fatalf("three brokers up: findings %v, unverifiable %v", rep.Findings, rep.Unverifiable)
	}
	k3.StopNode(k3.Nodes[2])
	rig.Eventually(t, 60*time.Second, func() string {
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(kc), kc); err != nil {
			return err.Error()
		}
		if kc.Status.BrokerCount != 2 {
			return "the probe has not seen the stopped broker yet"
		}
		return ""
	})
	// No finding ever; unverifiable claims only while a group coordinator that was on the
	// stopped broker moves (a join answered "unable to dial" once, on a loaded machine).
	rig.Eventually(t, 60*time.Second, func() string {
		if rep, err = Check(ctx, s.k8s, Options{Namespace: ns}); err != nil {
			t.Fatal(err)
		}
		for _, f := range rep.Findings {
			t.Fatalf("one broker of three stopped: %s", f)
		}
		if len(rep.Unverifiable) > 0 {
			return fmt.Sprintf("one broker of three stopped, unverifiable: %v", rep.Unverifiable)
		}
		return ""
	})
	if rep.ClaimsByKind[KindShareQueue] == 0 || rep.ClaimsByKind[KindKafkaCluster] == 0 {
		t.Errorf("claims compared: %v", rep.ClaimsByKind)
	}
	t.Logf("%s", rep.Summary())
}
