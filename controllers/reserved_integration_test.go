package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// Regression (issue 19, case 6): with a Republisher route, a queue asking maxDeliveryAttempts
// 5 showed MAXATTEMPTS 6 and status.effective.maxDeliveryAttempts.value "6": the group's
// limit, which includes the attempt reserved for the sidecar. The field now shows the
// application's 5 and status.effective.reservedAttempts the reserved 1, while the group's
// share.delivery.count.limit is 6; the Preview (kqctl plan) reports the same.
func TestReservedAttemptIsShownApart(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	group := "jobs5-" + ns
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "jobs"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Name: "jobs5-" + ns}, GroupID: group,
		Delivery: kqv1.DeliverySpec{MaxDeliveryAttempts: ptr.To[int32](5)}}}
	if err := r.k8s.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	// Without a route nothing is reserved.
	got := r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
	if e := got.Status.Effective; e == nil || e.MaxDeliveryAttempts == nil || e.MaxDeliveryAttempts.Value != "5" || e.ReservedAttempts != nil {
		t.Fatalf("without a route: status.effective %+v, want maxDeliveryAttempts 5 and no reservedAttempts", e)
	}
	dlr := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "jobs-dead"}, Spec: kqv1.DeadLetterRouteSpec{
		QueueRef: kqv1.QueueReference{Name: "jobs"}, Mode: kqv1.DeadLetterModeRepublisher, Topic: kqv1.DeadLetterTopicSpec{Name: "jobs5-dead-" + ns}}}
	if err := r.k8s.Create(ctx, dlr); err != nil {
		t.Fatal(err)
	}
	r.waitRoute(t, dlr, kqv1.ConditionRouteActive, metav1.ConditionTrue)
	waitConfig(t, r.admin, kafka.ResourceKey{Type: kafka.GroupResource, Name: group}, deliveryCountLimitConfig, func(e kafka.ConfigEntry) string {
		if e.Value != "6" {
			return fmt.Sprintf("%s = %q, want 6 (5 application attempts + 1 reserved)", deliveryCountLimitConfig, e.Value)
		}
		return ""
	})
	eventually(t, 30*time.Second, func() string {
		var q kqv1.ShareQueue
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), &q); err != nil {
			return err.Error()
		}
		e := q.Status.Effective
		if e == nil || e.MaxDeliveryAttempts == nil || e.MaxDeliveryAttempts.Value != "5" || e.MaxDeliveryAttempts.Config != deliveryCountLimitConfig ||
			e.ReservedAttempts == nil || *e.ReservedAttempts != 1 {
			if e == nil || e.MaxDeliveryAttempts == nil {
				return fmt.Sprintf("status.effective %+v has no maxDeliveryAttempts", e)
			}
			return fmt.Sprintf("status.effective.maxDeliveryAttempts %+v, reservedAttempts %v; want value 5 and reservedAttempts 1", *e.MaxDeliveryAttempts, ptr.Deref(e.ReservedAttempts, -1))
		}
		return ""
	})
	var live kqv1.ShareQueue
	if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), &live); err != nil {
		t.Fatal(err)
	}
	pv, err := PreviewQueue(ctx, r.k8s, &live)
	if err != nil {
		t.Fatal(err)
	}
	if e := pv.Effective; e.MaxDeliveryAttempts == nil || e.MaxDeliveryAttempts.Value != "5" || e.ReservedAttempts == nil || *e.ReservedAttempts != 1 {
		t.Errorf("Preview.Effective %+v, want maxDeliveryAttempts 5 and reservedAttempts 1", e)
	}
}

// Found by the adversarial round: at the brokers' maximum (group.share.max.delivery.count.limit
// 10), a Republisher queue asking 10 attempts read "maxDeliveryAttempts 11 is above …", and
// the remedy it named, boundsPolicy Clamp, left the route inactive for good (it wanted 11).
// Now the message names the reserve, and with Clamp the queue writes 10, the application gets
// 9, the republisher keeps the last, and the route is active.
func TestClampedReserveKeepsTheRouteActive(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	group := "jobs10-" + ns
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "jobs"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Name: group}, GroupID: group,
		Delivery: kqv1.DeliverySpec{MaxDeliveryAttempts: ptr.To[int32](10)}}}
	if err := r.k8s.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
	dlr := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "jobs-dead"}, Spec: kqv1.DeadLetterRouteSpec{
		QueueRef: kqv1.QueueReference{Name: "jobs"}, Mode: kqv1.DeadLetterModeRepublisher}}
	if err := r.k8s.Create(ctx, dlr); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		var q kqv1.ShareQueue
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), &q); err != nil {
			return err.Error()
		}
		c := findCondition(q.Status.Conditions, kqv1.ConditionConfigValid)
		if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "delivery.maxDeliveryAttempts 10 plus the republisher's reserved attempt (share.delivery.count.limit=11) is above the brokers' maximum") {
			return fmt.Sprintf("ConfigValid %+v", c)
		}
		return ""
	})
	cur := &kqv1.ShareQueue{}
	if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.BoundsPolicy = kqv1.BoundsPolicyClamp
	if err := r.k8s.Patch(ctx, cur, patch); err != nil {
		t.Fatal(err)
	}
	r.waitRoute(t, dlr, kqv1.ConditionRouteActive, metav1.ConditionTrue)
	waitConfig(t, r.admin, kafka.ResourceKey{Type: kafka.GroupResource, Name: group}, deliveryCountLimitConfig, func(e kafka.ConfigEntry) string {
		if e.Value != "10" {
			return fmt.Sprintf("%s = %q, want 10 (clamped)", deliveryCountLimitConfig, e.Value)
		}
		return ""
	})
	eventually(t, 30*time.Second, func() string {
		var q kqv1.ShareQueue
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(sq), &q); err != nil {
			return err.Error()
		}
		if e := q.Status.Effective; e == nil || e.MaxDeliveryAttempts == nil || e.MaxDeliveryAttempts.Value != "9" || ptr.Deref(e.ReservedAttempts, -1) != 1 {
			return fmt.Sprintf("status.effective %+v, want maxDeliveryAttempts 9 and reservedAttempts 1", e)
		}
		return ""
	})
}
