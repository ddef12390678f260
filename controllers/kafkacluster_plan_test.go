package controllers

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

func probeOf(brokers int, shareVersion int16, supportedMax int16, cfg kafka.BrokerConfigs, state *kafka.Topic) clusterProbe {
	pr := clusterProbe{
		Info: kafka.ClusterInfo{
			ClusterID: "cid", ControllerID: 1,
			Finalized: map[string]int16{"metadata.version": 27},
			Supported: map[string]kafka.FeatureRange{"share.version": {Min: 0, Max: supportedMax}},
		},
		BrokerConfigs: cfg,
	}
	if shareVersion > 0 {
		pr.Info.Finalized["share.version"] = shareVersion
	}
	for i := 1; i <= brokers; i++ {
		pr.Info.Brokers = append(pr.Info.Brokers, kafka.Broker{ID: int32(i), Host: "h", Port: 9092})
	}
	if state != nil {
		pr.StateTopic = *state
	} else {
		pr.StateTopic = kafka.Topic{Err: &kafka.Error{Op: "Metadata", Err: kafka.ErrUnknownTopicOrPartition}}
	}
	return pr
}

func stateTopic(rf int, partitions int32, inSync bool) *kafka.Topic {
	t := &kafka.Topic{Name: ShareStateTopic, Partitions: partitions, ReplicationFactor: int32(rf), Replicas: map[int32][]int32{}, ISR: map[int32][]int32{}}
	for p := int32(0); p < partitions; p++ {
		reps := make([]int32, rf)
		for i := range reps {
			reps[i] = int32(i + 1)
		}
		t.Replicas[p] = reps
		t.ISR[p] = reps
		if !inSync && p == 0 {
			t.ISR[p] = reps[:1]
		}
	}
	return t
}

func TestPlanClusterBoundsAbsentAreAbsent(t *testing.T) {
	cfg := kafka.BrokerConfigs{
		"group.share.record.lock.duration.ms": "30000", "group.share.min.record.lock.duration.ms": "15000", "group.share.max.record.lock.duration.ms": "60000",
		"group.share.delivery.count.limit": "5", // no min/max: a 4.2 broker
	}
	st, _, _ := planCluster(&kqv1.KafkaCluster{}, probeOf(1, 1, 1, cfg, nil))
	b := st.ShareBounds
	if *b.RecordLockDurationMs.Min != 15000 || *b.RecordLockDurationMs.Max != 60000 || *b.DeliveryCountLimit.Default != 5 {
		t.Errorf("bounds %+v", b)
	}
	if b.DeliveryCountLimit.Min != nil || b.DeliveryCountLimit.Max != nil || b.PartitionMaxRecordLocks.Default != nil {
		t.Errorf("invented bounds: delivery %+v locks %+v", b.DeliveryCountLimit, b.PartitionMaxRecordLocks)
	}
}

func TestPlanClusterShareVersion(t *testing.T) {
	observe := &kqv1.KafkaCluster{Spec: kqv1.KafkaClusterSpec{BootstrapServers: []string{"k:9092"}, FeaturePolicy: kqv1.FeaturePolicyObserve}}
	finalize := func(target int32) *kqv1.KafkaCluster {
		return &kqv1.KafkaCluster{Spec: kqv1.KafkaClusterSpec{FeaturePolicy: kqv1.FeaturePolicyFinalize, TargetShareVersion: ptr.To(target)}}
	}
	cases := []struct {
		name       string
		kc         *kqv1.KafkaCluster
		level, max int16
		wantStatus metav1.ConditionStatus
		wantReason string
		wantAction int16
		wantMsg    string
	}{
		{"observe at 0 says how to enable", observe, 0, 1, metav1.ConditionFalse, kqv1.ReasonShareGroupsDisabled, 0, "kafka-features.sh --bootstrap-server k:9092 upgrade --feature share.version=1"},
		{"observe at 1", observe, 1, 2, metav1.ConditionTrue, kqv1.ReasonShareGroupsEnabled, 0, "share.version 1"},
		{"finalize raises", finalize(1), 0, 1, metav1.ConditionFalse, kqv1.ReasonProgressing, 1, "from 0 to 1"},
		{"finalize never above support", finalize(2), 1, 1, metav1.ConditionTrue, kqv1.ReasonFeatureUnsupported, 0, "max 1"},
		{"finalize never downgrades", finalize(1), 2, 2, metav1.ConditionTrue, kqv1.ReasonShareGroupsEnabled, 0, "share.version 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, conds, act := planCluster(tc.kc, probeOf(1, tc.level, tc.max, nil, nil))
			if conds.ShareGroups.Status != tc.wantStatus || conds.ShareGroups.Reason != tc.wantReason || !strings.Contains(conds.ShareGroups.Message, tc.wantMsg) {
				t.Errorf("ShareGroupsEnabled %+v, want %s/%s containing %q", conds.ShareGroups, tc.wantStatus, tc.wantReason, tc.wantMsg)
			}
			if act.FinalizeShareVersion != tc.wantAction {
				t.Errorf("finalize to %d, want %d", act.FinalizeShareVersion, tc.wantAction)
			}
			if st.ShareVersion != int32(tc.level) || st.BrokerNativeDLQ != (tc.level >= 2) {
				t.Errorf("shareVersion %d dlq %v", st.ShareVersion, st.BrokerNativeDLQ)
			}
		})
	}
}

func TestPlanClusterShareStateTopic(t *testing.T) {
	rf3 := kafka.BrokerConfigs{"share.coordinator.state.topic.replication.factor": "3", "share.coordinator.state.topic.min.isr": "2"}
	cases := []struct {
		name       string
		brokers    int
		state      *kafka.Topic
		wantStatus metav1.ConditionStatus
		wantReason string
		wantMsg    string
	}{
		{"missing and uncreatable on one broker", 1, nil, metav1.ConditionFalse, kqv1.ReasonShareStateUncreatable, "share.coordinator.state.topic.replication.factor=1"},
		{"missing but creatable", 3, nil, metav1.ConditionTrue, kqv1.ReasonShareStateNotCreated, "first share-group use"},
		{"rf below what the cluster holds", 3, stateTopic(1, 5, true), metav1.ConditionFalse, kqv1.ReasonShareStateUnderReplicated, "replication factor 1; the cluster's 3 brokers can hold 3"},
		{"isr short", 3, stateTopic(3, 5, false), metav1.ConditionFalse, kqv1.ReasonShareStateUnderReplicated, "1 under-replicated"},
		{"healthy", 3, stateTopic(3, 5, true), metav1.ConditionTrue, kqv1.ReasonShareStateReplicated, "replication factor 3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, conds, _ := planCluster(&kqv1.KafkaCluster{}, probeOf(tc.brokers, 1, 1, rf3, tc.state))
			c := conds.ShareState
			if c.Status != tc.wantStatus || c.Reason != tc.wantReason || !strings.Contains(c.Message, tc.wantMsg) {
				t.Errorf("ShareStateReplicated %+v, want %s/%s containing %q", c, tc.wantStatus, tc.wantReason, tc.wantMsg)
			}
			if st.ShareStateTopic.Exists != (tc.state != nil) || *st.ShareStateTopic.ConfiguredReplicationFactor != 3 {
				t.Errorf("share state status %+v", st.ShareStateTopic)
			}
		})
	}
}

func TestPlanShareStateManageSpreadsReplicas(t *testing.T) {
	state := &kafka.Topic{Name: ShareStateTopic, Partitions: 6, ReplicationFactor: 1,
		Replicas: map[int32][]int32{0: {1}, 1: {2}, 2: {3}, 3: {1}, 4: {2}, 5: {3}},
		ISR:      map[int32][]int32{0: {1}, 1: {2}, 2: {3}, 3: {1}, 4: {2}, 5: {3}}}
	pr := probeOf(3, 1, 1, nil, state)
	kc := &kqv1.KafkaCluster{Spec: kqv1.KafkaClusterSpec{ShareStateTopic: kqv1.ShareStateTopicSpec{Policy: kqv1.ShareStatePolicyManage}}}
	_, conds, act := planCluster(kc, pr)
	if conds.ShareState.Reason != kqv1.ReasonShareStateReassigning || len(act.Reassign) != 6 {
		t.Fatalf("cond %+v reassign %v", conds.ShareState, act.Reassign)
	}
	load := map[int32]int{}
	for p, reps := range act.Reassign {
		if len(reps) != 3 || reps[0] != state.Replicas[p][0] {
			t.Errorf("partition %d -> %v: want 3 replicas keeping leader %d first", p, reps, state.Replicas[p][0])
		}
		seen := map[int32]bool{}
		for _, b := range reps {
			if seen[b] {
				t.Errorf("partition %d -> %v repeats broker %d", p, reps, b)
			}
			seen[b] = true
			load[b]++
		}
	}
	for b, n := range load {
		if n != 6 {
			t.Errorf("broker %d holds %d replicas, want an even 6 (load %v)", b, n, load)
		}
	}
	// Observe only reports.
	kc.Spec.ShareStateTopic.Policy = kqv1.ShareStatePolicyObserve
	if _, conds, act := planCluster(kc, pr); act.Reassign != nil || !strings.Contains(conds.ShareState.Message, "set shareStateTopic.policy: Manage") {
		t.Errorf("Observe: reassign %v cond %+v", act.Reassign, conds.ShareState)
	}
	// While reassignments run, nothing new is sent.
	kc.Spec.ShareStateTopic.Policy = kqv1.ShareStatePolicyManage
	pr.Reassigning = map[int32]bool{0: true}
	if _, conds, act := planCluster(kc, pr); act.Reassign != nil || conds.ShareState.Reason != kqv1.ReasonShareStateReassigning {
		t.Errorf("during reassignment: reassign %v cond %+v", act.Reassign, conds.ShareState)
	}
}

func TestPlanShareStateMinISRAndMissingBrokers(t *testing.T) {
	kc := &kqv1.KafkaCluster{Spec: kqv1.KafkaClusterSpec{ShareStateTopic: kqv1.ShareStateTopicSpec{Policy: kqv1.ShareStatePolicyManage}}}
	pr := probeOf(3, 1, 1, nil, stateTopic(3, 4, true))
	pr.StateTopicMinISR = ptr.To[int32](1)
	_, conds, act := planCluster(kc, pr)
	if act.SetStateMinISR == nil || *act.SetStateMinISR != 2 || conds.ShareState.Status != metav1.ConditionFalse {
		t.Errorf("min ISR action %v cond %+v, want set 2", act.SetStateMinISR, conds.ShareState)
	}
	pr.StateTopicMinISR = ptr.To[int32](2)
	if _, conds, act := planCluster(kc, pr); act.SetStateMinISR != nil || conds.ShareState.Status != metav1.ConditionTrue {
		t.Errorf("healthy: action %v cond %+v", act.SetStateMinISR, conds.ShareState)
	}
	// Broker 3 left for good: reported, never shrunk.
	pr2 := probeOf(2, 1, 1, nil, stateTopic(3, 4, true))
	st, conds, act := planCluster(kc, pr2)
	if conds.ShareState.Reason != kqv1.ReasonShareStateBrokerMissing || act.Reassign != nil || act.SetStateMinISR != nil ||
		len(st.ShareStateTopic.MissingBrokers) != 1 || st.ShareStateTopic.MissingBrokers[0] != 3 {
		t.Errorf("missing broker: cond %+v action %+v status %+v", conds.ShareState, act, st.ShareStateTopic)
	}
}
