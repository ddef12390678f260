package controllers

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

func routeFor(mode kqv1.DeadLetterMode, topic string) *kqv1.DeadLetterRoute {
	return &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Name: "orders-dlq", Namespace: "ns"}, Spec: kqv1.DeadLetterRouteSpec{
		QueueRef: kqv1.QueueReference{Name: "orders"}, Mode: mode, Topic: kqv1.DeadLetterTopicSpec{Name: topic, Partitions: 2},
	}}
}

func clusterAt(shareVersion int32) kqv1.KafkaClusterStatus {
	return kqv1.KafkaClusterStatus{ShareVersion: shareVersion, BrokerNativeDLQ: shareVersion >= 2}
}

func alters(cs []kafka.AlterConfig) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%s %v %s", c.Name, c.Op, c.Value))
	}
	return strings.Join(parts, "; ")
}

func TestPlanRouteAutoPicksBrokerNativeAtShareVersion2(t *testing.T) {
	dlr := routeFor(kqv1.DeadLetterModeAuto, "")
	dlr.Spec.CopyRecord = true
	p := planRoute(dlr, routeObservation{Cluster: clusterAt(2), QueueTopic: "orders", GroupID: "orders", Topic: missingTopic()})
	if p.Mode != kqv1.DeadLetterModeBrokerNative || p.Blocked {
		t.Fatalf("mode %s blocked %v, want BrokerNative", p.Mode, p.Blocked)
	}
	if p.TopicName != "dlq.orders" {
		t.Errorf("topic %q, want the brokers' default prefix on the queue topic: dlq.orders", p.TopicName)
	}
	if p.CreateTopic == nil || p.CreateTopic.Partitions != 2 || p.CreateTopic.Configs[dlqGroupEnableConfig] != "true" {
		t.Fatalf("create %+v, want 2 partitions and %s=true", p.CreateTopic, dlqGroupEnableConfig)
	}
	want := "errors.deadletterqueue.copy.record.enable SET true; errors.deadletterqueue.topic.name SET dlq.orders"
	if got := alters(p.GroupConfigs); got != want {
		t.Errorf("group configs %q, want %q", got, want)
	}
	if p.RouteActive.Status != metav1.ConditionTrue || p.RouteActive.Reason != kqv1.ReasonBrokerNative {
		t.Errorf("RouteActive %+v", p.RouteActive)
	}
}

func TestPlanRouteAutoPicksRepublisherBelowShareVersion2(t *testing.T) {
	obs := routeObservation{Cluster: clusterAt(1), QueueTopic: "orders", GroupID: "orders", Topic: missingTopic(), QueueAttempts: 4,
		GroupConfigs: map[string]kafka.ConfigEntry{"share.delivery.count.limit": override("5")}}
	p := planRoute(routeFor(kqv1.DeadLetterModeAuto, ""), obs)
	if p.Mode != kqv1.DeadLetterModeRepublisher {
		t.Fatalf("mode %s, want Republisher", p.Mode)
	}
	if p.CreateTopic == nil || p.CreateTopic.Configs[dlqGroupEnableConfig] != "" {
		t.Errorf("create %+v: a cluster without KIP-1191 must not get %s (it would refuse the topic)", p.CreateTopic, dlqGroupEnableConfig)
	}
	if len(p.GroupConfigs) != 0 {
		t.Errorf("group configs %v, want none", alters(p.GroupConfigs))
	}
	if p.RouteActive.Status != metav1.ConditionTrue || p.RouteActive.Reason != kqv1.ReasonRepublisher || !strings.Contains(p.RouteActive.Message, "kafkaqueues.io/queue=orders") {
		t.Errorf("RouteActive %+v", p.RouteActive)
	}
}

// Without the reserved attempt at the brokers (the queue's limit could not be raised, e.g.
// attempts already at the brokers' maximum), a Republisher route is not active.
func TestPlanRouteRepublisherNeedsTheReservedAttempt(t *testing.T) {
	for _, tc := range []struct {
		name     string
		attempts int32
		limit    map[string]kafka.ConfigEntry
	}{
		{"limit equals attempts (maximum reached)", 10, map[string]kafka.ConfigEntry{"share.delivery.count.limit": override("10")}},
		{"limit not reported", 4, nil},
		{"attempts unknown", 0, map[string]kafka.ConfigEntry{"share.delivery.count.limit": override("5")}},
	} {
		p := planRoute(routeFor(kqv1.DeadLetterModeRepublisher, ""), routeObservation{Cluster: clusterAt(1), QueueTopic: "orders", GroupID: "orders",
			Topic: missingTopic(), QueueAttempts: tc.attempts, GroupConfigs: tc.limit})
		if p.RouteActive.Status != metav1.ConditionFalse || p.RouteActive.Reason != kqv1.ReasonDeliveryLimitNotReserved ||
			!strings.Contains(p.RouteActive.Message, "share.delivery.count.limit") {
			t.Errorf("%s: RouteActive %+v", tc.name, p.RouteActive)
		}
		if p.CreateTopic == nil {
			t.Errorf("%s: the topic is still created", tc.name)
		}
	}
}

func TestPlanRouteExplicitBrokerNativeNeedsShareVersion2(t *testing.T) {
	p := planRoute(routeFor(kqv1.DeadLetterModeBrokerNative, ""), routeObservation{Cluster: clusterAt(1), QueueTopic: "orders", GroupID: "orders", Topic: missingTopic()})
	if !p.Blocked || !p.Empty() || p.RouteActive.Reason != kqv1.ReasonModeUnsupported {
		t.Fatalf("blocked %v empty %v RouteActive %+v", p.Blocked, p.Empty(), p.RouteActive)
	}
	for _, want := range []string{"spec.mode", "BrokerNative", "share.version is 1", "share.version 2"} {
		if !strings.Contains(p.RouteActive.Message, want) {
			t.Errorf("message %q does not name %q", p.RouteActive.Message, want)
		}
	}
}

func TestPlanRouteBrokerNativeTopicNeedsThePrefix(t *testing.T) {
	cs := clusterAt(2)
	cs.DeadLetterTopicPrefix = ptr.To("dead.")
	p := planRoute(routeFor(kqv1.DeadLetterModeAuto, "orders-dlq"), routeObservation{Cluster: cs, QueueTopic: "orders", GroupID: "orders", Topic: missingTopic()})
	if !p.Blocked || !p.Empty() || p.TopicReady.Reason != kqv1.ReasonTopicNamePrefixRequired {
		t.Fatalf("blocked %v TopicReady %+v", p.Blocked, p.TopicReady)
	}
	for _, want := range []string{`"orders-dlq"`, `"dead."`, "errors.deadletterqueue.topic.name.prefix", `"dead.orders-dlq"`} {
		if !strings.Contains(p.TopicReady.Message, want) {
			t.Errorf("message %q does not name %s", p.TopicReady.Message, want)
		}
	}
	// The same name is fine for a republisher, which writes wherever it is told.
	p = planRoute(routeFor(kqv1.DeadLetterModeRepublisher, "orders-dlq"), routeObservation{Cluster: cs, QueueTopic: "orders", GroupID: "orders", Topic: missingTopic()})
	if p.Blocked || p.CreateTopic == nil || p.CreateTopic.Name != "orders-dlq" {
		t.Errorf("Republisher with an unprefixed name: blocked %v create %+v", p.Blocked, p.CreateTopic)
	}
}

func TestPlanRouteRefusesTheQueuesOwnTopic(t *testing.T) {
	p := planRoute(routeFor(kqv1.DeadLetterModeRepublisher, "orders"), routeObservation{Cluster: clusterAt(1), QueueTopic: "orders", GroupID: "orders", Topic: kafka.Topic{Name: "orders", Partitions: 1}})
	if !p.Blocked || !p.Empty() {
		t.Fatalf("routing dead records into the source topic must be refused: %+v", p)
	}
}

func TestPlanRouteAdoptsAndConverges(t *testing.T) {
	dlr := routeFor(kqv1.DeadLetterModeAuto, "dlq.orders")
	dlr.Spec.Topic.Config = kqv1.TopicConfigs{"retention.ms": "604800000"}
	obs := routeObservation{Cluster: clusterAt(2), QueueTopic: "orders", GroupID: "orders",
		Topic:        kafka.Topic{Name: "dlq.orders", Partitions: 1},
		TopicConfigs: map[string]kafka.ConfigEntry{"retention.ms": {Value: "86400000"}},
		GroupConfigs: map[string]kafka.ConfigEntry{dlqTopicNameConfig: override("dlq.orders")},
	}
	p := planRoute(dlr, obs)
	if p.CreateTopic != nil || p.GrowPartitionsTo != 2 {
		t.Errorf("create %+v grow %d, want adopt and grow to 2", p.CreateTopic, p.GrowPartitionsTo)
	}
	if got, want := alters(p.TopicConfigs), "errors.deadletterqueue.group.enable SET true; retention.ms SET 604800000"; got != want {
		t.Errorf("topic configs %q, want %q", got, want)
	}
	if got, want := alters(p.GroupConfigs), "errors.deadletterqueue.copy.record.enable SET false"; got != want {
		t.Errorf("group configs %q, want %q (the topic name is already set)", got, want)
	}

	// Once Kafka matches, the plan is empty.
	obs.Topic.Partitions = 2
	obs.TopicConfigs = map[string]kafka.ConfigEntry{"retention.ms": {Value: "604800000"}, dlqGroupEnableConfig: {Value: "true"}}
	obs.GroupConfigs[dlqCopyRecordConfig] = override("false")
	if p := planRoute(dlr, obs); !p.Empty() || p.TopicReady.Status != metav1.ConditionTrue || p.RouteActive.Status != metav1.ConditionTrue {
		t.Errorf("converged route plans %v (TopicReady %+v RouteActive %+v)", p.Changes(), p.TopicReady, p.RouteActive)
	}
}

func TestPlanRouteRepublisherRemovesBrokerNativeConfigs(t *testing.T) {
	obs := routeObservation{Cluster: clusterAt(2), QueueTopic: "orders", GroupID: "orders",
		Topic:        kafka.Topic{Name: "dlq.orders", Partitions: 2},
		GroupConfigs: map[string]kafka.ConfigEntry{dlqTopicNameConfig: override("dlq.orders"), dlqCopyRecordConfig: override("true")},
	}
	p := planRoute(routeFor(kqv1.DeadLetterModeRepublisher, ""), obs)
	if got, want := alters(p.GroupConfigs), "errors.deadletterqueue.topic.name DELETE ; errors.deadletterqueue.copy.record.enable DELETE "; got != want {
		t.Errorf("group configs %q, want both deleted (%q) so records are not dead-lettered twice", got, want)
	}
}

func TestPlanRouteKeepsItsPinnedTopic(t *testing.T) {
	dlr := routeFor(kqv1.DeadLetterModeAuto, "")
	dlr.Status.TopicName = "dlq.orders"
	cs := clusterAt(2)
	cs.DeadLetterTopicPrefix = ptr.To("changed.")
	if got := dlr.KafkaTopicName("orders", cs); got != "dlq.orders" {
		t.Errorf("topic %q: a resolved default must not move when the brokers' prefix changes", got)
	}
}

// The sidecar renews the brokers' lock: a Republisher route on a group whose brokers report
// share.renew.acknowledge.enable=false (override or default) is not active, and the message
// names the config, its value and the field to change. Absent (brokers before 4.3) or true
// does not block.
func TestPlanRouteRepublisherNeedsRenewAcknowledge(t *testing.T) {
	reserved := map[string]kafka.ConfigEntry{"share.delivery.count.limit": override("4")}
	for _, tc := range []struct {
		name   string
		renew  *kafka.ConfigEntry
		active bool
	}{
		{"override false", ptrTo(override("false")), false},
		{"brokers' default false", &kafka.ConfigEntry{Value: "false", Source: kafka.ConfigSourceDefault}, false},
		{"override true", ptrTo(override("true")), true},
		{"absent (Kafka 4.2)", nil, true},
	} {
		cfgs := map[string]kafka.ConfigEntry{}
		for k, v := range reserved {
			cfgs[k] = v
		}
		if tc.renew != nil {
			cfgs["share.renew.acknowledge.enable"] = *tc.renew
		}
		p := planRoute(routeFor(kqv1.DeadLetterModeRepublisher, ""), routeObservation{Cluster: clusterAt(1), QueueTopic: "orders", GroupID: "orders",
			Topic: missingTopic(), QueueAttempts: 3, GroupConfigs: cfgs})
		if tc.active {
			if p.RouteActive.Status != metav1.ConditionTrue || p.RouteActive.Reason != kqv1.ReasonRepublisher {
				t.Errorf("%s: RouteActive %+v, want True/Republisher", tc.name, p.RouteActive)
			}
			continue
		}
		if p.RouteActive.Status != metav1.ConditionFalse || p.RouteActive.Reason != kqv1.ReasonRenewAcknowledgeDisabled {
			t.Errorf("%s: RouteActive %+v, want False/RenewAcknowledgeDisabled", tc.name, p.RouteActive)
		}
		for _, want := range []string{"share.renew.acknowledge.enable = true", "it is false", "spec.delivery.renewAcknowledge: true", "ShareQueue orders", "does not inject"} {
			if !strings.Contains(p.RouteActive.Message, want) {
				t.Errorf("%s: message %q does not name %q", tc.name, p.RouteActive.Message, want)
			}
		}
		if p.CreateTopic == nil {
			t.Errorf("%s: the topic is still created", tc.name)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
