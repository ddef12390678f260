package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// Issue 19 case 4: a condition's advice is always something the API accepts. A route whose
// spec.topic.name lacks the brokers' dead-letter prefix on a share.version 2 cluster is
// TopicNamePrefixRequired; each remedy its message names is applied here and works, and the
// edit it no longer suggests (changing spec.topic.name in place) is refused by the apiserver.
func TestPrefixRemediesAreAccepted(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	for _, name := range []string{"orders", "payments", "refunds"} {
		sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kqv1.ShareQueueSpec{
			ClusterRef: kqv1.ClusterReference{Name: "local"}, GroupID: name + "-" + ns, Topic: kqv1.QueueTopicSpec{Name: name + "-" + ns}}}
		if err := r.k8s.Create(ctx, sq); err != nil {
			t.Fatal(err)
		}
	}
	route := func(name, queue, topic string) *kqv1.DeadLetterRoute {
		dlr := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kqv1.DeadLetterRouteSpec{
			QueueRef: kqv1.QueueReference{Name: queue}, Topic: kqv1.DeadLetterTopicSpec{Name: topic}}}
		if err := r.k8s.Create(ctx, dlr); err != nil {
			t.Fatal(err)
		}
		return dlr
	}
	blocked := func(dlr *kqv1.DeadLetterRoute) string {
		var c *metav1.Condition
		eventually(t, 30*time.Second, func() string {
			got := &kqv1.DeadLetterRoute{}
			if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(dlr), got); err != nil {
				return err.Error()
			}
			if c = findCondition(got.Status.Conditions, kqv1.ConditionRouteActive); c == nil || c.Reason != kqv1.ReasonTopicNamePrefixRequired {
				return fmt.Sprintf("%s: RouteActive %+v, want TopicNamePrefixRequired", dlr.Name, c)
			}
			return ""
		})
		for _, want := range []string{"set spec.mode: Republisher", `recreate this DeadLetterRoute with spec.topic.name "dlq.` + dlr.Spec.Topic.Name + `"`, "without spec.topic.name"} {
			if !strings.Contains(c.Message, want) {
				t.Errorf("%s: RouteActive message %q does not advise %q", dlr.Name, c.Message, want)
			}
		}
		return c.Message
	}

	gone := func(dlr *kqv1.DeadLetterRoute) {
		t.Helper()
		if err := r.k8s.Delete(ctx, dlr); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, func() string {
			if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(dlr), &kqv1.DeadLetterRoute{}); err == nil {
				return "route " + dlr.Name + " still there"
			}
			return ""
		})
	}

	// The edit the message does not suggest: spec.topic.name cannot change in place.
	a := route("orders-dlq", "orders", "orders-dlq-"+ns)
	blocked(a)
	cur := &kqv1.DeadLetterRoute{}
	if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(a), cur); err != nil {
		t.Fatal(err)
	}
	renamed := cur.DeepCopy()
	renamed.Spec.Topic.Name = "dlq." + cur.Spec.Topic.Name
	if err := r.k8s.Update(ctx, renamed); err == nil || !strings.Contains(err.Error(), "topic.name is immutable") {
		t.Errorf("changing spec.topic.name in place: %v, want the apiserver's refusal", err)
	}
	// Remedy 1: spec.mode: Republisher, in place.
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Mode = kqv1.DeadLetterModeRepublisher
	if err := r.k8s.Patch(ctx, cur, patch); err != nil {
		t.Fatalf("remedy spec.mode: Republisher refused: %v", err)
	}
	r.waitRoute(t, a, kqv1.ConditionRouteActive, metav1.ConditionTrue)

	// Remedy 2: recreate with the prefixed name.
	b := route("payments-dlq", "payments", "payments-dlq-"+ns)
	blocked(b)
	gone(b)
	b2 := route("payments-dlq", "payments", "dlq.payments-dlq-"+ns)
	if got := r.waitRoute(t, b2, kqv1.ConditionRouteActive, metav1.ConditionTrue); got.Status.EffectiveMode != kqv1.DeadLetterModeBrokerNative {
		t.Errorf("recreated with the prefix: mode %s, want BrokerNative", got.Status.EffectiveMode)
	}

	// Remedy 3: recreate without spec.topic.name (named <prefix><queue topic>).
	c := route("refunds-dlq", "refunds", "refunds-dlq-"+ns)
	blocked(c)
	gone(c)
	c2 := route("refunds-dlq", "refunds", "")
	if got := r.waitRoute(t, c2, kqv1.ConditionRouteActive, metav1.ConditionTrue); got.Status.TopicName != "dlq.refunds-"+ns {
		t.Errorf("recreated without a name: topic %s, want dlq.refunds-%s", got.Status.TopicName, ns)
	}
}

// A route acts on its queue's group: a queue in Conflict over its group (another queue owns
// it) gets a route in Conflict that writes nothing, so the owner's dead-letter configs stay
// its own route's. Found by the adversarial round on kqctl plan: the second route rewrote
// errors.deadletterqueue.topic.name of the owner's group every minute.
func TestRouteOfAQueueInConflictWritesNothing(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	group := "shared-" + ns
	owner := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, GroupID: group, Topic: kqv1.QueueTopicSpec{Name: "owner-" + ns}}}
	if err := r.k8s.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	r.waitQueue(t, owner, kqv1.ConditionReady, metav1.ConditionTrue)
	ownerRoute := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner-dlq"}, Spec: kqv1.DeadLetterRouteSpec{QueueRef: kqv1.QueueReference{Name: "owner"}}}
	if err := r.k8s.Create(ctx, ownerRoute); err != nil {
		t.Fatal(err)
	}
	r.waitRoute(t, ownerRoute, kqv1.ConditionRouteActive, metav1.ConditionTrue)

	// Named after "owner": created in the same second as the owner (a fast rig), the first by
	// name would own the group, and the premise would not hold.
	intruder := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "thief"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, GroupID: group, Topic: kqv1.QueueTopicSpec{Name: "intruder-" + ns}}}
	if err := r.k8s.Create(ctx, intruder); err != nil {
		t.Fatal(err)
	}
	intruderRoute := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "thief-dlq"}, Spec: kqv1.DeadLetterRouteSpec{QueueRef: kqv1.QueueReference{Name: "thief"}}}
	if err := r.k8s.Create(ctx, intruderRoute); err != nil {
		t.Fatal(err)
	}
	got := r.waitRoute(t, intruderRoute, kqv1.ConditionConflict, metav1.ConditionTrue)
	if c := findCondition(got.Status.Conditions, kqv1.ConditionRouteActive); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "ShareQueue thief does not own its topic or group") {
		t.Errorf("intruder's route RouteActive %+v, want False naming the queue's conflict", c)
	}
	// Over a few topic checks and reconciles, the owner's group keeps its own route's topic.
	for i := 0; i < 6; i++ {
		waitConfig(t, r.admin, kafka.ResourceKey{Type: kafka.GroupResource, Name: group}, dlqTopicNameConfig, func(e kafka.ConfigEntry) string {
			if e.Value != "dlq.owner-"+ns {
				return "group " + group + " " + dlqTopicNameConfig + "=" + e.Value + ", want dlq.owner-" + ns
			}
			return ""
		})
		time.Sleep(time.Second)
	}
	if ts, err := r.admin.DescribeTopics(ctx, "dlq.intruder-"+ns); err != nil || !kafka.IsNotFound(ts["dlq.intruder-"+ns].Err) {
		t.Errorf("the intruder's route created its dead-letter topic: %v %+v", err, ts)
	}
}

// Found by the adversarial round on issue 19: a group id taken by a classic group after the
// queue was Ready went unnoticed until the resync. The topic watch's ListGroups notices it
// within seconds; and a paused queue makes no claim about Kafka, nor does its route.
func TestKafkaChangesUnderneathAreNoticed(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	group := "late-" + ns
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, GroupID: group, Topic: kqv1.QueueTopicSpec{Name: group}}}
	if err := r.k8s.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
	makeConsumerGroup(t, []string{r.kafka.Bootstrap()}, "late-src-"+ns, group)
	got := r.waitQueue(t, sq, kqv1.ConditionConflict, metav1.ConditionTrue)
	if c := findCondition(got.Status.Conditions, kqv1.ConditionConflict); c.Reason != kqv1.ReasonGroupTypeConflict {
		t.Errorf("Conflict %+v, want GroupTypeConflict", c)
	}

	// Paused: Ready removed, every condition about Kafka Unknown; its route suspended too.
	paused := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "paused"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, GroupID: "paused-" + ns, Topic: kqv1.QueueTopicSpec{Name: "paused-" + ns}}}
	if err := r.k8s.Create(ctx, paused); err != nil {
		t.Fatal(err)
	}
	r.waitQueue(t, paused, kqv1.ConditionReady, metav1.ConditionTrue)
	route := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "paused-dlq"}, Spec: kqv1.DeadLetterRouteSpec{QueueRef: kqv1.QueueReference{Name: "paused"}}}
	if err := r.k8s.Create(ctx, route); err != nil {
		t.Fatal(err)
	}
	r.waitRoute(t, route, kqv1.ConditionRouteActive, metav1.ConditionTrue)
	cur := &kqv1.ShareQueue{}
	if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(paused), cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Annotations = map[string]string{kqv1.ReconcileAnnotation: kqv1.ReconcilePaused}
	if err := r.k8s.Patch(ctx, cur, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		var q kqv1.ShareQueue
		var d kqv1.DeadLetterRoute
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(paused), &q); err != nil {
			return err.Error()
		}
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(route), &d); err != nil {
			return err.Error()
		}
		for who, conds := range map[string][]metav1.Condition{"queue": q.Status.Conditions, "route": d.Status.Conditions} {
			if c := findCondition(conds, kqv1.ConditionReady); c != nil {
				return fmt.Sprintf("%s: Ready %+v while paused", who, c)
			}
			if c := findCondition(conds, kqv1.ConditionReconciling); c == nil || c.Status != metav1.ConditionFalse || c.Reason != kqv1.ReasonPaused {
				return fmt.Sprintf("%s: Reconciling %+v, want False/Paused", who, c)
			}
			for _, typ := range []string{kqv1.ConditionTopicReady, kqv1.ConditionGroupConfigured, kqv1.ConditionRouteActive} {
				if c := findCondition(conds, typ); c != nil && c.Status != metav1.ConditionUnknown {
					return fmt.Sprintf("%s: %s %+v while nothing is read", who, typ, c)
				}
			}
		}
		return ""
	})
}
