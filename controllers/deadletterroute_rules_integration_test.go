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

// The rules a route keeps besides its own plan (found by adversarial testing): ownership
// stays with the route that acts, a route deleted while another takes over removes nothing,
// a dead-letter topic is never another queue's topic (either way round), the group is
// pointed at its dead-letter topic only once the topic exists, and the reconcile annotation
// binds a route as it binds a queue.
func TestDeadLetterRouteRules(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	queue := func(name string, annotations map[string]string) *kqv1.ShareQueue {
		t.Helper()
		sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations}, Spec: kqv1.ShareQueueSpec{
			ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Name: name + "-" + ns}, GroupID: name + "-" + ns}}
		if err := r.k8s.Create(ctx, sq); err != nil {
			t.Fatal(err)
		}
		return sq
	}
	route := func(name, q string, mut func(*kqv1.DeadLetterRoute)) *kqv1.DeadLetterRoute {
		t.Helper()
		d := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kqv1.DeadLetterRouteSpec{QueueRef: kqv1.QueueReference{Name: q}}}
		if mut != nil {
			mut(d)
		}
		if err := r.k8s.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	reasonOf := func(d *kqv1.DeadLetterRoute, typ string) string {
		var got kqv1.DeadLetterRoute
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(d), &got); err != nil {
			return err.Error()
		}
		c := findCondition(got.Status.Conditions, typ)
		if c == nil {
			return "no " + typ
		}
		return c.Reason + ": " + c.Message
	}
	groupDLQ := func(group string) string {
		cfgs, err := r.admin.DescribeConfigs(ctx, []kafka.ResourceKey{{Type: kafka.GroupResource, Name: group}})
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := cfgs[kafka.ResourceKey{Type: kafka.GroupResource, Name: group}].Configs[dlqTopicNameConfig]; ok && e.IsOverride() {
			return e.Value
		}
		return ""
	}

	// 1. A route created in the same second as the acting one, with a lower name, does not
	// take over; deleting it removes nothing from the group.
	queue("race", nil)
	z := route("z-route", "race", nil)
	r.waitRoute(t, z, kqv1.ConditionReady, metav1.ConditionTrue)
	a := route("a-route", "race", nil)
	r.waitRoute(t, a, kqv1.ConditionConflict, metav1.ConditionTrue)
	if got := r.waitRoute(t, z, kqv1.ConditionReady, metav1.ConditionTrue); got.Status.EffectiveMode == "" {
		t.Errorf("acting route lost its mode: %+v", got.Status)
	}
	var loser kqv1.DeadLetterRoute
	if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(a), &loser); err != nil {
		t.Fatal(err)
	}
	if loser.Status.EffectiveMode != "" || loser.Status.TopicName != "" || loser.Status.GroupID != "" {
		t.Errorf("route in Conflict still claims %+v", loser.Status)
	}
	if err := r.k8s.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if v := groupDLQ("race-" + ns); v != "dlq.race-"+ns {
		t.Errorf("after deleting the route in Conflict the group's %s is %q, want the owner's dlq.race-%s", dlqTopicNameConfig, v, ns)
	}

	// 2. A route whose dead-letter topic is another queue's topic gets Conflict and writes
	// nothing; a queue naming an acting route's dead-letter topic gets Conflict.
	other := queue("other", nil)
	r.waitQueue(t, other, kqv1.ConditionReady, metav1.ConditionTrue)
	queue("thief", nil)
	thief := route("thief-dead", "thief", func(d *kqv1.DeadLetterRoute) {
		d.Spec.Mode = kqv1.DeadLetterModeRepublisher
		d.Spec.Topic.Name = "other-" + ns
	})
	// (The route first waits, QueueNotReady, until its queue's ownership was checked.)
	eventually(t, 30*time.Second, func() string {
		if why := reasonOf(thief, kqv1.ConditionTopicReady); !strings.HasPrefix(why, kqv1.ReasonConflict) || !strings.Contains(why, "ShareQueue "+ns+"/other") {
			return "route onto another queue's topic: TopicReady " + why
		}
		return ""
	})
	squatter := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "squatter"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Name: "dlq.race-" + ns}, GroupID: "squatter-" + ns}}
	if err := r.k8s.Create(ctx, squatter); err != nil {
		t.Fatal(err)
	}
	got := r.waitQueue(t, squatter, kqv1.ConditionConflict, metav1.ConditionTrue)
	if c := findCondition(got.Status.Conditions, kqv1.ConditionConflict); !strings.Contains(c.Message, "DeadLetterRoute "+ns+"/z-route") {
		t.Errorf("queue on a dead-letter topic: Conflict %q, want it to name the route", c.Message)
	}

	// 3. A dead-letter topic the brokers refuse: the group is not pointed at it.
	queue("badtopic", nil)
	bad := route("badtopic-dead", "badtopic", func(d *kqv1.DeadLetterRoute) {
		d.Spec.Topic.Config = kqv1.TopicConfigs{"cleanup.policy": "bogus"}
	})
	r.waitRoute(t, bad, kqv1.ConditionTopicReady, metav1.ConditionFalse)
	if v := groupDLQ("badtopic-" + ns); v != "" {
		t.Errorf("group names dead-letter topic %q although its creation was refused", v)
	}

	// 4. The queue's ObserveOnly binds its route: changes are listed, none is made.
	queue("watched", map[string]string{kqv1.ReconcileAnnotation: kqv1.ReconcileObserveOnly})
	watched := route("watched-dead", "watched", nil)
	r.waitRoute(t, watched, kqv1.ConditionRouteActive, metav1.ConditionFalse)
	eventually(t, 30*time.Second, func() string {
		if why := reasonOf(watched, kqv1.ConditionRouteActive); !strings.HasPrefix(why, kqv1.ReasonObserveOnly) {
			return "RouteActive " + why
		}
		return ""
	})
	if v := groupDLQ("watched-" + ns); v != "" {
		t.Errorf("ObserveOnly queue's group got %s=%q from its route", dlqTopicNameConfig, v)
	}
	if topics, err := r.admin.DescribeTopics(ctx, "dlq.watched-"+ns); err != nil || topics["dlq.watched-"+ns].Err == nil {
		t.Errorf("ObserveOnly: dead-letter topic created (%v)", err)
	}
	// Lifting the queue's annotation reaches the route at once (not at the next resync).
	var wq kqv1.ShareQueue
	if err := r.k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "watched"}, &wq); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(wq.DeepCopy())
	delete(wq.Annotations, kqv1.ReconcileAnnotation)
	if err := r.k8s.Patch(ctx, &wq, patch); err != nil {
		t.Fatal(err)
	}
	r.waitRoute(t, watched, kqv1.ConditionReady, metav1.ConditionTrue)
	if v := groupDLQ("watched-" + ns); v != "dlq.watched-"+ns {
		t.Errorf("after the queue's ObserveOnly was lifted the group's %s is %q", dlqTopicNameConfig, v)
	}

	// 5. A Paused route, and a route with an unknown mode, read and write nothing.
	queue("held", nil)
	held := route("held-dead", "held", func(d *kqv1.DeadLetterRoute) {
		d.Annotations = map[string]string{kqv1.ReconcileAnnotation: "Bogus"}
	})
	eventually(t, 30*time.Second, func() string {
		if why := reasonOf(held, kqv1.ConditionReconciling); !strings.HasPrefix(why, kqv1.ReasonInvalidReconcileMode) {
			return "Reconciling " + why
		}
		return ""
	})
	if topics, err := r.admin.DescribeTopics(ctx, "dlq.held-"+ns); err != nil || topics["dlq.held-"+ns].Err == nil {
		t.Errorf("route with an invalid reconcile mode created its topic (%v)", err)
	}
}

// A queue recreated with another group: its route moves to the new group and removes the
// dead-letter configs it had set on the old one.
func TestDeadLetterRouteFollowsANewGroup(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	mk := func(group string) *kqv1.ShareQueue {
		sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "q"}, Spec: kqv1.ShareQueueSpec{
			ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Name: "q-" + ns}, GroupID: group}}
		if err := r.k8s.Create(ctx, sq); err != nil {
			t.Fatal(err)
		}
		return r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
	}
	g1, g2 := "g1-"+ns, "g2-"+ns
	sq := mk(g1)
	d := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "q-dead"}, Spec: kqv1.DeadLetterRouteSpec{QueueRef: kqv1.QueueReference{Name: "q"}}}
	if err := r.k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	r.waitRoute(t, d, kqv1.ConditionReady, metav1.ConditionTrue)
	if err := r.k8s.Delete(ctx, sq); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), &kqv1.ShareQueue{}); err == nil {
			return "queue still there"
		}
		return ""
	})
	mk(g2)
	eventually(t, 60*time.Second, func() string {
		var got kqv1.DeadLetterRoute
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(d), &got); err != nil {
			return err.Error()
		}
		if got.Status.GroupID != g2 {
			return fmt.Sprintf("route status.groupID %q, want %s", got.Status.GroupID, g2)
		}
		return ""
	})
	for group, want := range map[string]string{g1: "", g2: "dlq.q-" + ns} {
		waitConfig(t, r.admin, kafka.ResourceKey{Type: kafka.GroupResource, Name: group}, dlqTopicNameConfig, func(e kafka.ConfigEntry) string {
			v := ""
			if e.IsOverride() {
				v = e.Value
			}
			if v != want {
				return fmt.Sprintf("group %s %s=%q, want %q", group, dlqTopicNameConfig, v, want)
			}
			return ""
		})
	}
}
