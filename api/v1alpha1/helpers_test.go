package v1alpha1_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

func TestOwningRoute(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Second))
	route := func(name string, created metav1.Time, deleting bool) kqv1.DeadLetterRoute {
		d := kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created}}
		if deleting {
			d.DeletionTimestamp = &t1
		}
		return d
	}
	acting := func(d kqv1.DeadLetterRoute) kqv1.DeadLetterRoute {
		d.Status.EffectiveMode = kqv1.DeadLetterModeBrokerNative
		return d
	}
	cases := []struct {
		routes []kqv1.DeadLetterRoute
		want   string
	}{
		{nil, ""},
		{[]kqv1.DeadLetterRoute{route("b", t1, false), route("a", t1, false)}, "a"}, // tie: lowest name
		{[]kqv1.DeadLetterRoute{route("a", t1, false), route("z", t0, false)}, "z"}, // oldest
		{[]kqv1.DeadLetterRoute{route("z", t0, true), route("a", t1, false)}, "a"},  // being deleted: skipped
		{[]kqv1.DeadLetterRoute{route("z", t0, true)}, ""},
		{[]kqv1.DeadLetterRoute{acting(route("z", t1, false)), route("a", t1, false)}, "z"}, // acting first
		{[]kqv1.DeadLetterRoute{acting(route("z", t1, false)), route("a", t0, false)}, "z"}, // even over an older one
		{[]kqv1.DeadLetterRoute{acting(route("z", t1, false)), acting(route("a", t1, false))}, "a"},
	}
	for i, c := range cases {
		got := ""
		if r := kqv1.OwningRoute(c.routes); r != nil {
			got = r.Name
		}
		if got != c.want {
			t.Errorf("case %d: owning route %q, want %q", i, got, c.want)
		}
	}
}

func TestApplicationAttempts(t *testing.T) {
	def := int64(5)
	cs := kqv1.KafkaClusterStatus{ShareBounds: &kqv1.ShareBounds{DeliveryCountLimit: kqv1.Bound{Default: &def}}}
	sq := &kqv1.ShareQueue{}
	if n, ok := sq.ApplicationAttempts(kqv1.KafkaClusterStatus{}); ok || n != 0 {
		t.Errorf("nothing known: %d %v, want 0 false", n, ok)
	}
	if n, ok := sq.ApplicationAttempts(cs); !ok || n != 5 {
		t.Errorf("broker default: %d %v, want 5 true", n, ok)
	}
	sq.Spec.Delivery.MaxDeliveryAttempts = ptr.To[int32](3)
	if n, ok := sq.ApplicationAttempts(cs); !ok || n != 3 {
		t.Errorf("spec: %d %v, want 3 true", n, ok)
	}
}

func TestDefaultNames(t *testing.T) {
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Name: "orders"}}
	if sq.KafkaTopicName() != "orders" || sq.KafkaGroupID() != "orders" {
		t.Errorf("defaults: topic %q group %q", sq.KafkaTopicName(), sq.KafkaGroupID())
	}
	sq.Spec.Topic.Name, sq.Spec.GroupID = "t", "g"
	if sq.KafkaTopicName() != "t" || sq.KafkaGroupID() != "g" {
		t.Errorf("declared: topic %q group %q", sq.KafkaTopicName(), sq.KafkaGroupID())
	}
	d := &kqv1.DeadLetterRoute{}
	if got := d.KafkaTopicName("orders", kqv1.KafkaClusterStatus{}); got != "dlq.orders" {
		t.Errorf("default dead-letter topic %q, want dlq.orders", got)
	}
	if got := d.KafkaTopicName("orders", kqv1.KafkaClusterStatus{DeadLetterTopicPrefix: ptr.To("dead-")}); got != "dead-orders" {
		t.Errorf("with the brokers' prefix %q, want dead-orders", got)
	}
	d.Status.TopicName = "pinned"
	if got := d.KafkaTopicName("orders", kqv1.KafkaClusterStatus{}); got != "pinned" {
		t.Errorf("pinned %q", got)
	}
	d.Spec.Topic.Name = "declared"
	if got := d.KafkaTopicName("orders", kqv1.KafkaClusterStatus{}); got != "declared" {
		t.Errorf("declared %q", got)
	}
}
