package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// makeConsumerGroup creates an empty consumer group named group with a committed offset the
// way an application does: a plain franz-go group consumer (kgo.ConsumerGroup) reads one
// record of topic, commits and leaves. It returns the group's type as ListGroups reports it
// and the committed offset.
func makeConsumerGroup(t *testing.T, bootstrap []string, topic, group string) (string, int64) {
	t.Helper()
	ctx := ctxFor(t)
	prod, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(prod)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	for got := 0; got == 0; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consuming %s as group %s: %v", topic, group, err)
		}
		got = fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	cons.Close()
	var typ string
	var offset int64
	eventually(t, 30*time.Second, func() string {
		listed, err := adm.ListGroups(ctx)
		if err != nil {
			return err.Error()
		}
		l, ok := listed[group]
		if !ok || l.State != "Empty" {
			return fmt.Sprintf("group %s not listed as Empty: %+v", group, l)
		}
		typ = l.GroupType
		offs, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return err.Error()
		}
		o, ok := offs.Lookup(topic, 0)
		if !ok || o.Err != nil {
			return fmt.Sprintf("no committed offset for %s/0: %+v", topic, o)
		}
		offset = o.At
		return ""
	})
	prod.Close()
	return typ, offset
}

// Regression (issue 19, case 1): a ShareQueue whose group id was an existing consumer group
// went Ready with group state NotCreated, wrote share.* configs onto the consumer group, and
// with deletionPolicy Delete deleted that group and its committed offsets. Its
// DeadLetterRoute wrote errors.deadletterqueue.* onto it too. Now both report Conflict
// (reason GroupTypeConflict) naming the group and its type, write nothing, and deletion
// leaves the group as it was.
func TestGroupOfAnotherTypeIsAConflict(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	bootstrap := r.kafka.BootstrapServers()
	group, srcTopic := "billing-cg-"+ns, "billing-src-"+ns
	typ, offset := makeConsumerGroup(t, bootstrap, srcTopic, group)
	if typ == "" || typ == kafka.GroupTypeShare {
		t.Fatalf("group %s listed with type %q; want a consumer group's type", group, typ)
	}

	queueTopic := "billing-" + ns
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "billing"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Name: queueTopic}, GroupID: group,
		Delivery:       kqv1.DeliverySpec{MaxDeliveryAttempts: ptr.To[int32](4), AutoOffsetReset: ptr.To("earliest")},
		DeletionPolicy: kqv1.DeletionPolicyDelete,
	}}
	if err := r.k8s.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	dlr := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "billing-dead"}, Spec: kqv1.DeadLetterRouteSpec{
		QueueRef: kqv1.QueueReference{Name: "billing"}, Mode: kqv1.DeadLetterModeBrokerNative, CopyRecord: true}}
	if err := r.k8s.Create(ctx, dlr); err != nil {
		t.Fatal(err)
	}

	got := r.waitQueue(t, sq, kqv1.ConditionConflict, metav1.ConditionTrue)
	c := findCondition(got.Status.Conditions, kqv1.ConditionConflict)
	if want := fmt.Sprintf("group %s is a %s group, not a share group", group, typ); c.Reason != kqv1.ReasonGroupTypeConflict || !strings.Contains(c.Message, want) {
		t.Errorf("Conflict %s: %q; want reason %s and a message saying %q", c.Reason, c.Message, kqv1.ReasonGroupTypeConflict, want)
	}
	if ready := findCondition(got.Status.Conditions, kqv1.ConditionReady); ready.Status != metav1.ConditionFalse || ready.Reason != kqv1.ReasonGroupTypeConflict {
		t.Errorf("Ready %+v, want False/%s", ready, kqv1.ReasonGroupTypeConflict)
	}
	if got.Status.Group != nil {
		t.Errorf("status.group %+v: there is no share group to report", got.Status.Group)
	}
	route := r.waitRoute(t, dlr, kqv1.ConditionConflict, metav1.ConditionTrue)
	if rc := findCondition(route.Status.Conditions, kqv1.ConditionConflict); rc.Reason != kqv1.ReasonGroupTypeConflict || !strings.Contains(rc.Message, typ+" group") {
		t.Errorf("route Conflict %+v, want %s naming the %s group", rc, kqv1.ReasonGroupTypeConflict, typ)
	}
	if ra := findCondition(route.Status.Conditions, kqv1.ConditionRouteActive); ra == nil || ra.Status != metav1.ConditionFalse {
		t.Errorf("route RouteActive %+v, want False", ra)
	}

	// Give any write a chance to land, then check: no group config override, no topic.
	r.poke(t, sq, "1")
	time.Sleep(3 * time.Second)
	groupKey := kafka.ResourceKey{Type: kafka.GroupResource, Name: group}
	noOverrides := func(when string) {
		t.Helper()
		cfgs, err := r.admin.DescribeConfigs(ctx, []kafka.ResourceKey{groupKey})
		if err != nil {
			t.Fatal(err)
		}
		for k, e := range cfgs[groupKey].Configs {
			if e.IsOverride() {
				t.Errorf("%s: group config %s=%s was written onto the %s group %s", when, k, e.Value, typ, group)
			}
		}
	}
	noOverrides("while in Conflict")
	if ts, err := r.admin.DescribeTopics(ctx, queueTopic); err != nil || !kafka.IsNotFound(ts[queueTopic].Err) {
		t.Errorf("topic %s: %v %+v; a queue in Conflict creates no topic", queueTopic, err, ts[queueTopic])
	}

	// Deleting both (deletionPolicy Delete) leaves the consumer group, its type and its
	// committed offset as they were.
	if err := r.k8s.Delete(ctx, dlr); err != nil {
		t.Fatal(err)
	}
	if err := r.k8s.Delete(ctx, sq); err != nil {
		t.Fatal(err)
	}
	r.waitGone(t, dlr)
	r.waitGone(t, sq)
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := listed[group]; !ok || l.GroupType != typ {
		t.Fatalf("after deleting the queue, group %s is %+v (listed %v); want the %s group kept", group, l, ok, typ)
	}
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offs.Lookup(srcTopic, 0); !ok || o.Err != nil || o.At != offset {
		t.Errorf("after deleting the queue, committed offset of %s/0 is %+v (found %v); want %d", srcTopic, o, ok, offset)
	}
	noOverrides("after deletion")
}
