package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

func TestStrimziServiceHost(t *testing.T) {
	for _, c := range []struct {
		addr string
		want bool
	}{
		{"my-cluster-kafka-bootstrap:9092", true},                          // short name: the KafkaCluster's namespace
		{"my-cluster-kafka-bootstrap.kafka:9092", true},                    // <svc>.<ns>
		{"my-cluster-kafka-bootstrap.kafka.svc:9093", true},                // <svc>.<ns>.svc
		{"MY-CLUSTER-KAFKA-BOOTSTRAP.kafka.svc.cluster.local.:9093", true}, // FQDN, any case
		{"my-cluster-kafka-tls-bootstrap.kafka.svc:9093", true},            // a listener's own bootstrap
		{"my-cluster-kafka-0.my-cluster-kafka-brokers.kafka.svc:9092", true},
		{"my-cluster-pool-a-3.my-cluster-kafka-brokers.kafka.svc:9092", true}, // node pools
		{"my-cluster-kafka-bootstrap.other:9092", false},                      // another namespace
		{"my-cluster-kafka-bootstrap.kafka.example.com:9092", false},          // not a Service name
		{"other-kafka-bootstrap.kafka.svc:9092", false},
		{"my-cluster-kafka-x-y-bootstrap.kafka.svc:9092", false}, // cluster "my-cluster-kafka-x", not my-cluster
		{"my-cluster-kafka-brokers.kafka.svc:9092", false},       // the headless Service itself is no broker
		{"10.0.0.1:9092", false},
		{"kafka.example.com:9094", false},
	} {
		if got := strimziServiceHost(c.addr, "kafka", "my-cluster", "kafka", ""); got != c.want {
			t.Errorf("strimziServiceHost(%q) = %v, want %v", c.addr, got, c.want)
		}
	}
	if strimziServiceHost("my-cluster-kafka-bootstrap:9092", "kafka", "my-cluster", "apps", "kqo-system") {
		t.Error("a short name resolves in the KafkaCluster's or the manager's namespace, not the KafkaTopic's")
	}
	if !strimziServiceHost("my-cluster-kafka-bootstrap:9092", "kafka", "my-cluster", "apps", "kafka") {
		t.Error("a short name resolves in the manager's namespace")
	}
}

func TestStrimziKafkaMatches(t *testing.T) {
	k := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{
		"clusterId": "abc",
		"listeners": []any{
			map[string]any{"name": "plain", "bootstrapServers": "my-cluster-kafka-bootstrap.kafka.svc:9092"},
			map[string]any{"name": "external", "addresses": []any{map[string]any{"host": "1.2.3.4", "port": int64(9094)}}},
		},
	}}}
	kc := func(id string, bootstrap ...string) *kqv1.KafkaCluster {
		return &kqv1.KafkaCluster{Spec: kqv1.KafkaClusterSpec{BootstrapServers: bootstrap}, Status: kqv1.KafkaClusterStatus{ClusterID: id}}
	}
	for name, c := range map[string]struct {
		kc   *kqv1.KafkaCluster
		want bool
	}{
		"cluster id":         {kc("abc", "elsewhere:9092"), true},
		"listener bootstrap": {kc("", "lb.example.com:1", "My-Cluster-Kafka-Bootstrap.kafka.svc.:9092"), true},
		"listener address":   {kc("", "1.2.3.4:9094"), true},
		"another port":       {kc("", "1.2.3.4:9092"), false},
		"another cluster id": {kc("xyz", "elsewhere:9092"), false},
		"no id, no address":  {kc("", "elsewhere:9092"), false},
	} {
		if got := strimziKafkaMatches(k, c.kc); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}

func TestStrimziManagesAndTopicName(t *testing.T) {
	kt := func(labels, annotations map[string]string, spec, status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		if spec != nil {
			u.Object["spec"] = spec
		}
		if status != nil {
			u.Object["status"] = status
		}
		u.SetName("meta-name")
		u.SetLabels(labels)
		u.SetAnnotations(annotations)
		return u
	}
	mine := map[string]string{strimziClusterLabel: "c"}
	for name, c := range map[string]struct {
		kt          *unstructured.Unstructured
		managed     bool
		topic       string
		claimsNames []string
	}{
		"defaults to metadata.name":  {kt(mine, nil, nil, nil), true, "meta-name", []string{"meta-name"}},
		"spec.topicName":             {kt(mine, nil, map[string]any{"topicName": "a"}, nil), true, "a", []string{"meta-name", "a"}},
		"status.topicName first":     {kt(mine, nil, map[string]any{"topicName": "a"}, map[string]any{"topicName": "b"}), true, "b", []string{"meta-name", "a", "b"}},
		"unmanaged":                  {kt(mine, map[string]string{strimziManagedAnnotation: "false"}, nil, nil), false, "meta-name", []string{"meta-name"}},
		"unmanaged, any case":        {kt(mine, map[string]string{strimziManagedAnnotation: " False"}, nil, nil), false, "meta-name", []string{"meta-name"}},
		"managed: true":              {kt(mine, map[string]string{strimziManagedAnnotation: "true"}, nil, nil), true, "meta-name", []string{"meta-name"}},
		"no cluster label: no owner": {kt(nil, nil, nil, nil), false, "meta-name", []string{"meta-name"}},
	} {
		if _, managed := strimziManages(c.kt); managed != c.managed {
			t.Errorf("%s: managed %v, want %v", name, managed, c.managed)
		}
		if got := kafkaTopicNameOf(c.kt); got != c.topic {
			t.Errorf("%s: topic %q, want %q", name, got, c.topic)
		}
		if got := strimziTopicNames(c.kt); len(got) != len(c.claimsNames) {
			t.Errorf("%s: names %v, want %v", name, got, c.claimsNames)
		}
	}
}

// A topic Strimzi manages keeps no topic write in the plan; the group's writes and drift stay.
func TestYieldTopicKeepsTheGroup(t *testing.T) {
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Name: "q"}, Spec: kqv1.ShareQueueSpec{
		Topic:       kqv1.QueueTopicSpec{Name: "t", Partitions: 6, Config: kqv1.TopicConfigs{"retention.ms": "1000"}},
		DriftPolicy: kqv1.DriftPolicyReport,
	}}
	obs := queueObservation{
		Cluster:      kqv1.KafkaClusterStatus{ShareVersion: 1},
		Topic:        kafka.Topic{Name: "t", ID: "id", Partitions: 3, ReplicationFactor: 1},
		TopicConfigs: map[string]kafka.ConfigEntry{},
		GroupConfigs: map[string]kafka.ConfigEntry{"share.auto.offset.reset": {Value: "earliest", Source: kafka.ConfigSourceGroup}},
	}
	p := planQueue(sq, obs)
	if p.GrowPartitionsTo != 6 || len(p.Drift) != 2 {
		t.Fatalf("setup: plan grows to %d with drift %v; want a grow and topic and group drift", p.GrowPartitionsTo, p.Drift)
	}
	yieldTopic(&p, obs, "managed by Strimzi")
	if p.CreateTopic != nil || p.GrowPartitionsTo != 0 || len(p.TopicConfigs) != 0 || !p.Blocked || p.ManagedTopicConfigs != nil {
		t.Errorf("plan still writes the topic: %+v", p)
	}
	if p.Partitions != 3 || p.TopicReady.Reason != kqv1.ReasonConflict || p.TopicReady.Status != metav1.ConditionFalse {
		t.Errorf("partitions %d TopicReady %+v", p.Partitions, p.TopicReady)
	}
	if len(p.Drift) != 1 || p.Drift[0][:6] != "group " {
		t.Errorf("drift %v; want only the group's", p.Drift)
	}

	// A missing topic is not created.
	obs.Topic = missingTopic()
	p = planQueue(sq, obs)
	yieldTopic(&p, obs, "managed by Strimzi")
	if p.CreateTopic != nil || p.Partitions != 0 || p.Capacity != nil {
		t.Errorf("missing topic: %+v", p)
	}

	st := &kqv1.ShareQueueStatus{TopicID: "id", ManagedTopicConfigs: []string{"retention.ms"}}
	strimziConflictStatus(st, "managed by Strimzi", 2)
	if c := findCondition(st.Conditions, kqv1.ConditionConflict); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != 2 {
		t.Errorf("Conflict %+v", c)
	}
	if st.TopicID != "" || st.ManagedTopicConfigs != nil || findCondition(st.Conditions, kqv1.ConditionGroupConfigured) != nil {
		t.Errorf("status %+v: the pin and managed configs go, the group is left to the plan", st)
	}
}
