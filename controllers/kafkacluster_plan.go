package controllers

import (
	"fmt"
	"sort"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// ShareStateTopic is the internal topic holding share-group state (KIP-932).
const ShareStateTopic = "__share_group_state"

// shareVersionFeature is the feature gating share groups (1) and broker-native DLQs (2).
const shareVersionFeature = "share.version"

// clusterProbe is what one probe of a Kafka cluster observed.
type clusterProbe struct {
	Info          kafka.ClusterInfo
	BrokerConfigs kafka.BrokerConfigs
	// StateTopic is __share_group_state; StateTopic.Err is IsNotFound when it does not exist.
	StateTopic kafka.Topic
	// StateTopicMinISR is the topic's min.insync.replicas, when it exists and was read.
	StateTopicMinISR *int32
	// Reassigning are the state topic's partitions with a reassignment in progress.
	Reassigning map[int32]bool
}

// clusterAction is a change the KafkaCluster controller decided to make.
type clusterAction struct {
	// FinalizeShareVersion is the share.version level to raise to, 0 for none.
	FinalizeShareVersion int16
	// Reassign maps __share_group_state partitions to their new replica lists.
	Reassign map[int32][]int32
	// SetStateMinISR is the min.insync.replicas to set on __share_group_state, nil for none.
	SetStateMinISR *int32
}

// clusterConditions are the conditions a probe leads to.
type clusterConditions struct {
	Connected, ShareGroups, ShareState condInput
}

// boundFrom reads group.share.<x>, group.share.min.<x> and group.share.max.<x>; absent
// configs stay nil (pre-4.3 brokers have no min/max delivery-count and lock bounds).
func boundFrom(bc kafka.BrokerConfigs, suffix string) kqv1.Bound {
	var b kqv1.Bound
	if v, ok := bc.Int("group.share." + suffix); ok {
		b.Default = &v
	}
	if v, ok := bc.Int("group.share.min." + suffix); ok {
		b.Min = &v
	}
	if v, ok := bc.Int("group.share.max." + suffix); ok {
		b.Max = &v
	}
	return b
}

// shareBoundsFrom reads the share-group defaults and KIP-1240 bounds from broker configs.
func shareBoundsFrom(bc kafka.BrokerConfigs) *kqv1.ShareBounds {
	sb := &kqv1.ShareBounds{
		DeliveryCountLimit:      boundFrom(bc, "delivery.count.limit"),
		RecordLockDurationMs:    boundFrom(bc, "record.lock.duration.ms"),
		PartitionMaxRecordLocks: boundFrom(bc, "partition.max.record.locks"),
		SessionTimeoutMs:        boundFrom(bc, "session.timeout.ms"),
		HeartbeatIntervalMs:     boundFrom(bc, "heartbeat.interval.ms"),
	}
	if v, ok := bc.Int("group.share.max.size"); ok {
		sb.MaxGroupSize = &v
	}
	return sb
}

func int32p(bc kafka.BrokerConfigs, name string) *int32 {
	v, ok := bc.Int(name)
	if !ok {
		return nil
	}
	n := int32(v)
	return &n
}

// planCluster turns a probe into status fields, conditions and the feature change to make.
// Pure: the controller applies the action and writes the status.
//
// Rules: share groups need share.version >= 1, broker-native DLQ needs 2 (KIP-932,
// KIP-1191); the share-state topic target is RF min(3, brokers) and min ISR min(2, RF)
// (share.coordinator.state.topic.replication.factor / .min.isr defaults 3 / 2).
func planCluster(kc *kqv1.KafkaCluster, pr clusterProbe) (kqv1.KafkaClusterStatus, clusterConditions, clusterAction) {
	st := kqv1.KafkaClusterStatus{
		ClusterID:   pr.Info.ClusterID,
		BrokerCount: int32(len(pr.Info.Brokers)),
	}
	ctrl := pr.Info.ControllerID
	st.ControllerID = &ctrl
	for _, b := range pr.Info.Brokers {
		st.Brokers = append(st.Brokers, kqv1.BrokerStatus{ID: b.ID, Host: b.Host, Port: b.Port, Rack: b.Rack})
	}
	for name, lvl := range pr.Info.Finalized {
		st.FinalizedFeatures = append(st.FinalizedFeatures, kqv1.FeatureLevel{Name: name, Level: int32(lvl)})
	}
	sort.Slice(st.FinalizedFeatures, func(i, j int) bool { return st.FinalizedFeatures[i].Name < st.FinalizedFeatures[j].Name })
	for name, r := range pr.Info.Supported {
		st.SupportedFeatures = append(st.SupportedFeatures, kqv1.FeatureRange{Name: name, MinLevel: int32(r.Min), MaxLevel: int32(r.Max)})
	}
	sort.Slice(st.SupportedFeatures, func(i, j int) bool { return st.SupportedFeatures[i].Name < st.SupportedFeatures[j].Name })
	level := pr.Info.FeatureLevel(shareVersionFeature)
	st.ShareVersion = int32(level)
	st.BrokerNativeDLQ = level >= 2
	st.ShareBounds = shareBoundsFrom(pr.BrokerConfigs)
	if v, ok := pr.BrokerConfigs["errors.deadletterqueue.topic.name.prefix"]; ok {
		st.DeadLetterTopicPrefix = &v
	}

	var conds clusterConditions
	var act clusterAction
	conds.Connected = condInput{metav1.ConditionTrue, kqv1.ReasonConnected,
		fmt.Sprintf("connected to cluster %s: %d broker(s), controller %d", pr.Info.ClusterID, len(pr.Info.Brokers), ctrl)}

	// --- share.version
	supported, known := pr.Info.Supported[shareVersionFeature]
	target := int16(0)
	if kc.Spec.FeaturePolicy == kqv1.FeaturePolicyFinalize && kc.Spec.TargetShareVersion != nil {
		target = int16(*kc.Spec.TargetShareVersion)
	}
	switch {
	case target > level && (!known || supported.Max < target):
		max := int16(0)
		if known {
			max = supported.Max
		}
		conds.ShareGroups = condInput{boolStatus(level >= 1), kqv1.ReasonFeatureUnsupported,
			fmt.Sprintf("targetShareVersion %d is above what every broker supports (share.version max %d); finalized level stays %d", target, max, level)}
	case target > level:
		act.FinalizeShareVersion = target
		conds.ShareGroups = condInput{boolStatus(level >= 1), kqv1.ReasonProgressing,
			fmt.Sprintf("raising share.version from %d to %d (featurePolicy Finalize)", level, target)}
	case level >= 1:
		conds.ShareGroups = condInput{metav1.ConditionTrue, kqv1.ReasonShareGroupsEnabled, fmt.Sprintf("share.version %d is finalized", level)}
	default:
		conds.ShareGroups = condInput{metav1.ConditionFalse, kqv1.ReasonShareGroupsDisabled,
			fmt.Sprintf("share.version is %d: share groups are off; run `kafka-features.sh --bootstrap-server %s upgrade --feature share.version=1` or set featurePolicy: Finalize with targetShareVersion: 1",
				level, firstOr(kc.Spec.BootstrapServers, "<broker>"))}
	}

	// --- __share_group_state
	ss, cond, reassign, minISR := planShareState(kc.Spec.ShareStateTopic.Policy, pr)
	st.ShareStateTopic = ss
	conds.ShareState = cond
	act.Reassign, act.SetStateMinISR = reassign, minISR
	return st, conds, act
}

func boolStatus(b bool) metav1.ConditionStatus {
	if b {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}

func firstOr(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}

// planShareState reports __share_group_state and, under policy Manage, plans raising its
// replication factor to min(3, brokers) with reassignments spread evenly over the brokers,
// then min.insync.replicas to min(2, RF). It never shrinks replication: replicas on brokers
// that left the cluster are reported, not removed.
func planShareState(policy kqv1.ShareStatePolicy, pr clusterProbe) (*kqv1.ShareStateTopicStatus, condInput, map[int32][]int32, *int32) {
	brokers := int32(len(pr.Info.Brokers))
	targetRF := min(int32(3), brokers)
	targetISR := min(int32(2), targetRF)
	ss := &kqv1.ShareStateTopicStatus{
		TargetReplicationFactor:     targetRF,
		ConfiguredReplicationFactor: int32p(pr.BrokerConfigs, "share.coordinator.state.topic.replication.factor"),
		ConfiguredMinISR:            int32p(pr.BrokerConfigs, "share.coordinator.state.topic.min.isr"),
	}
	if pr.StateTopic.Err != nil {
		if rf := ss.ConfiguredReplicationFactor; rf != nil && *rf > brokers {
			return ss, condInput{metav1.ConditionFalse, kqv1.ReasonShareStateUncreatable,
				fmt.Sprintf("%s does not exist and cannot be created: the brokers' share.coordinator.state.topic.replication.factor is %d but the cluster has %d broker(s); set share.coordinator.state.topic.replication.factor=%d and share.coordinator.state.topic.min.isr=%d in every broker's server.properties and restart them, or add brokers",
					ShareStateTopic, *rf, brokers, targetRF, targetISR)}, nil, nil
		}
		return ss, condInput{metav1.ConditionTrue, kqv1.ReasonShareStateNotCreated,
			fmt.Sprintf("%s does not exist yet; brokers create it on first share-group use", ShareStateTopic)}, nil, nil
	}
	t := pr.StateTopic
	ss.Exists = true
	ss.Partitions = t.Partitions
	ss.ReplicationFactor = t.ReplicationFactor
	ss.UnderReplicatedPartitions = t.UnderReplicated()
	ss.MinInSyncReplicas = pr.StateTopicMinISR
	live := map[int32]bool{}
	for _, b := range pr.Info.Brokers {
		live[b.ID] = true
	}
	parts := make([]int32, 0, len(t.Replicas))
	for p := range t.Replicas {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	missing := map[int32]bool{}
	load := map[int32]int{}
	for _, p := range parts {
		ss.Assignments = append(ss.Assignments, kqv1.PartitionAssignment{Partition: p, Replicas: t.Replicas[p], ISR: t.ISR[p]})
		for _, b := range t.Replicas[p] {
			load[b]++
			if !live[b] {
				missing[b] = true
			}
		}
	}
	for b := range missing {
		ss.MissingBrokers = append(ss.MissingBrokers, b)
	}
	sort.Slice(ss.MissingBrokers, func(i, j int) bool { return ss.MissingBrokers[i] < ss.MissingBrokers[j] })

	switch {
	case len(ss.MissingBrokers) > 0:
		return ss, condInput{metav1.ConditionFalse, kqv1.ReasonShareStateBrokerMissing,
			fmt.Sprintf("%s has replicas on broker(s) %v, which are not in the cluster; bring them back or reassign those replicas by hand (the operator never shrinks replication, which could lose share state)", ShareStateTopic, ss.MissingBrokers)}, nil, nil
	case len(pr.Reassigning) > 0:
		return ss, condInput{metav1.ConditionFalse, kqv1.ReasonShareStateReassigning,
			fmt.Sprintf("%d partition reassignment(s) of %s in progress (replication factor %d, target %d)", len(pr.Reassigning), ShareStateTopic, ss.ReplicationFactor, targetRF)}, nil, nil
	case ss.ReplicationFactor < targetRF && policy == kqv1.ShareStatePolicyManage:
		ids := make([]int32, 0, len(pr.Info.Brokers))
		for _, b := range pr.Info.Brokers {
			ids = append(ids, b.ID)
		}
		reassign := map[int32][]int32{}
		for _, p := range parts {
			cur := append([]int32(nil), t.Replicas[p]...)
			for int32(len(cur)) < targetRF {
				best := int32(-1)
				for _, id := range ids {
					if containsID(cur, id) {
						continue
					}
					if best < 0 || load[id] < load[best] {
						best = id
					}
				}
				if best < 0 {
					break
				}
				cur = append(cur, best)
				load[best]++
			}
			if len(cur) != len(t.Replicas[p]) {
				reassign[p] = cur
			}
		}
		return ss, condInput{metav1.ConditionFalse, kqv1.ReasonShareStateReassigning,
			fmt.Sprintf("raising %s replication factor from %d to %d on %d partition(s) (shareStateTopic.policy Manage)", ShareStateTopic, ss.ReplicationFactor, targetRF, len(reassign))}, reassign, nil
	case ss.ReplicationFactor < targetRF:
		return ss, condInput{metav1.ConditionFalse, kqv1.ReasonShareStateUnderReplicated,
			fmt.Sprintf("%s has replication factor %d; the cluster's %d brokers can hold %d: set shareStateTopic.policy: Manage to raise it, or reassign it by hand", ShareStateTopic, ss.ReplicationFactor, brokers, targetRF)}, nil, nil
	case policy == kqv1.ShareStatePolicyManage && (ss.MinInSyncReplicas == nil || *ss.MinInSyncReplicas != min(targetISR, ss.ReplicationFactor)):
		want := min(targetISR, ss.ReplicationFactor)
		return ss, condInput{metav1.ConditionFalse, kqv1.ReasonProgressing,
			fmt.Sprintf("setting %s min.insync.replicas to %d (replication factor %d)", ShareStateTopic, want, ss.ReplicationFactor)}, nil, &want
	case ss.UnderReplicatedPartitions > 0:
		return ss, condInput{metav1.ConditionFalse, kqv1.ReasonShareStateUnderReplicated,
			fmt.Sprintf("%s has %d under-replicated partition(s) of %d", ShareStateTopic, ss.UnderReplicatedPartitions, ss.Partitions)}, nil, nil
	}
	isr := "unknown"
	if ss.MinInSyncReplicas != nil {
		isr = strconv.Itoa(int(*ss.MinInSyncReplicas))
	}
	return ss, condInput{metav1.ConditionTrue, kqv1.ReasonShareStateReplicated,
		fmt.Sprintf("%s: %d partitions, replication factor %d, min.insync.replicas %s, all in sync", ShareStateTopic, ss.Partitions, ss.ReplicationFactor, isr)}, nil, nil
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
