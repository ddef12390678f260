package controllers

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// Issue 19 case 2: a Republisher route on a queue with renewAcknowledge: false is not active
// (the sidecar renews the brokers' lock, and Kafka 4.4 refuses renews while
// share.renew.acknowledge.enable is false): RouteActive=False/RenewAcknowledgeDisabled, the
// message naming the config, its value and the field to change. Following that advice (the
// queue's renewAcknowledge: true) makes the route active without waiting for a resync.
func TestDeadLetterRouteRepublisherNeedsRenewAcknowledge(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	group := "renew-" + ns
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "renew"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Name: group}, GroupID: group,
		Delivery: kqv1.DeliverySpec{MaxDeliveryAttempts: ptr.To[int32](3), RenewAcknowledge: ptr.To(false)}}}
	if err := r.k8s.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	dlr := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "renew-dead"}, Spec: kqv1.DeadLetterRouteSpec{
		QueueRef: kqv1.QueueReference{Name: "renew"}, Mode: kqv1.DeadLetterModeRepublisher, Topic: kqv1.DeadLetterTopicSpec{Name: "renew-dead-" + ns}}}
	if err := r.k8s.Create(ctx, dlr); err != nil {
		t.Fatal(err)
	}
	key := kafka.ResourceKey{Type: kafka.GroupResource, Name: group}
	// The brokers hold the queue's settings: renew off, the reserved attempt in place.
	waitConfig(t, r.admin, key, "share.renew.acknowledge.enable", func(e kafka.ConfigEntry) string {
		if e.Value != "false" {
			return "share.renew.acknowledge.enable = " + e.Value + ", want false"
		}
		return ""
	})
	waitConfig(t, r.admin, key, "share.delivery.count.limit", func(e kafka.ConfigEntry) string {
		if e.Value != "4" {
			return "share.delivery.count.limit = " + e.Value + ", want 4"
		}
		return ""
	})
	got := &kqv1.DeadLetterRoute{}
	eventually(t, 60*time.Second, func() string {
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(dlr), got); err != nil {
			return err.Error()
		}
		c := findCondition(got.Status.Conditions, kqv1.ConditionRouteActive)
		if c == nil || c.Reason != kqv1.ReasonRenewAcknowledgeDisabled || c.ObservedGeneration != got.Generation {
			return "RouteActive " + condString(c) + ", want False/RenewAcknowledgeDisabled"
		}
		return ""
	})
	c := findCondition(got.Status.Conditions, kqv1.ConditionRouteActive)
	if c.Status != metav1.ConditionFalse {
		t.Errorf("RouteActive %+v, want False", c)
	}
	for _, want := range []string{"share.renew.acknowledge.enable = true", "it is false", "spec.delivery.renewAcknowledge: true", "ShareQueue renew", "does not inject"} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("RouteActive message %q does not name %q", c.Message, want)
		}
	}
	if rd := findCondition(got.Status.Conditions, kqv1.ConditionReady); rd == nil || rd.Status == metav1.ConditionTrue {
		t.Errorf("Ready %+v while the route is not active", rd)
	}

	// The remedy the message gives.
	if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), sq); err != nil {
		t.Fatal(err)
	}
	sq.Spec.Delivery.RenewAcknowledge = ptr.To(true)
	if err := r.k8s.Update(ctx, sq); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got = r.waitRoute(t, dlr, kqv1.ConditionRouteActive, metav1.ConditionTrue)
	if c := findCondition(got.Status.Conditions, kqv1.ConditionRouteActive); c.Reason != kqv1.ReasonRepublisher {
		t.Errorf("RouteActive %+v, want Republisher", c)
	}
	if d := time.Since(start); d > 45*time.Second {
		t.Errorf("route active %s after the queue's renewAcknowledge became true; want well within a resync", d)
	}
}

func condString(c *metav1.Condition) string {
	if c == nil {
		return "absent"
	}
	return string(c.Status) + "/" + c.Reason + ": " + c.Message
}
