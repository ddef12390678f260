package controllers

import (
	"fmt"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// Broker-native dead-letter configs (KIP-1191, share.version 2).
const (
	// dlqTopicNameConfig is the group config naming a share group's dead-letter topic.
	dlqTopicNameConfig = "errors.deadletterqueue.topic.name"
	// dlqCopyRecordConfig is the group config that makes the brokers copy key, value and
	// headers of a dead record (false: its metadata only).
	dlqCopyRecordConfig = "errors.deadletterqueue.copy.record.enable"
	// dlqGroupEnableConfig is the topic config a hand-made dead-letter topic needs before
	// the brokers write share-group dead records to it.
	dlqGroupEnableConfig = "errors.deadletterqueue.group.enable"
)

// routeObservation is what a DeadLetterRoute reconcile read: the source queue, its cluster's
// facts, and the live dead-letter topic and group configs.
type routeObservation struct {
	Cluster      kqv1.KafkaClusterStatus
	QueueTopic   string
	GroupID      string
	Topic        kafka.Topic // Err IsNotFound when the topic does not exist
	TopicConfigs map[string]kafka.ConfigEntry
	GroupConfigs map[string]kafka.ConfigEntry
	// QueueAttempts is the attempts the application gets: the queue's
	// spec.delivery.maxDeliveryAttempts, else the brokers' default share.delivery.count.limit;
	// 0 when neither is known.
	QueueAttempts int32
	// TopicOwner names another resource whose topic the dead-letter topic would be (e.g.
	// "ShareQueue ns/name"); empty when the name is free.
	TopicOwner string
}

// routePlan is the Kafka changes a DeadLetterRoute needs and the status they lead to.
type routePlan struct {
	Mode             kqv1.DeadLetterMode
	TopicName        string
	GroupID          string // the queue's share group, which GroupConfigs are written to
	CreateTopic      *kafka.NewTopic
	GrowPartitionsTo int32
	TopicConfigs     []kafka.AlterConfig
	GroupConfigs     []kafka.AlterConfig
	// Blocked: nothing may be written until the user changes the spec or the cluster.
	Blocked     bool
	TopicReady  condInput
	RouteActive condInput
}

// Empty reports a plan with no Kafka write.
func (p routePlan) Empty() bool {
	return p.CreateTopic == nil && p.GrowPartitionsTo == 0 && len(p.TopicConfigs) == 0 && len(p.GroupConfigs) == 0
}

// Changes lists the plan's writes in words, for events and logs.
func (p routePlan) Changes() []string {
	var out []string
	if t := p.CreateTopic; t != nil {
		out = append(out, fmt.Sprintf("create topic %s with %d partitions", t.Name, t.Partitions))
	}
	if p.GrowPartitionsTo > 0 {
		out = append(out, fmt.Sprintf("grow topic %s to %d partitions", p.TopicName, p.GrowPartitionsTo))
	}
	for _, c := range p.TopicConfigs {
		out = append(out, describeAlter("topic "+p.TopicName, c))
	}
	for _, c := range p.GroupConfigs {
		out = append(out, describeAlter("group "+p.GroupID, c))
	}
	return out
}

// resolveDeadLetterMode turns spec.mode into the mode in use: Auto is BrokerNative when the
// cluster's share.version is 2 or more (KIP-1191), else Republisher. It returns "" and a
// message when an explicit BrokerNative cannot work on this cluster.
func resolveDeadLetterMode(spec kqv1.DeadLetterMode, cs kqv1.KafkaClusterStatus) (kqv1.DeadLetterMode, string) {
	switch spec {
	case kqv1.DeadLetterModeBrokerNative:
		if !cs.BrokerNativeDLQ {
			return "", fmt.Sprintf("spec.mode is BrokerNative, which needs share.version 2 (KIP-1191); the cluster's finalized share.version is %d. Use mode Auto or Republisher, or raise share.version (KafkaCluster spec.featurePolicy Finalize with targetShareVersion 2)", cs.ShareVersion)
		}
		return kqv1.DeadLetterModeBrokerNative, ""
	case kqv1.DeadLetterModeRepublisher:
		return kqv1.DeadLetterModeRepublisher, ""
	default:
		if cs.BrokerNativeDLQ {
			return kqv1.DeadLetterModeBrokerNative, ""
		}
		return kqv1.DeadLetterModeRepublisher, ""
	}
}

// planRoute decides the dead-letter topic and group-config writes of a route. It is pure.
//
// Rules: the topic is created when missing (partitions, replicationFactor, config) or adopted
// when it exists (partitions only grow; declared configs are set, others left alone). In
// BrokerNative mode the topic name must start with the brokers' prefix, the topic carries
// errors.deadletterqueue.group.enable=true, and the group gets errors.deadletterqueue.topic.name
// and errors.deadletterqueue.copy.record.enable (KIP-1191). In Republisher mode the group's
// broker-native DLQ configs are removed if present, so records are not dead-lettered twice,
// and the route is active only once the brokers report the settings the sidecar relies on:
// share.delivery.count.limit = the application's attempts + 1 (DeliveryLimitNotReserved) and
// share.renew.acknowledge.enable not false (RenewAcknowledgeDisabled).
func planRoute(dlr *kqv1.DeadLetterRoute, obs routeObservation) routePlan {
	p := routePlan{GroupID: obs.GroupID}
	mode, why := resolveDeadLetterMode(dlr.Spec.Mode, obs.Cluster)
	p.TopicName = dlr.KafkaTopicName(obs.QueueTopic, obs.Cluster)
	if mode == "" {
		p.Blocked = true
		p.TopicReady = condInput{metav1.ConditionUnknown, kqv1.ReasonModeUnsupported, "not evaluated: " + why}
		p.RouteActive = condInput{metav1.ConditionFalse, kqv1.ReasonModeUnsupported, why}
		return p
	}
	p.Mode = mode
	native := mode == kqv1.DeadLetterModeBrokerNative
	if reason, msg := routeTopicRefused(p.TopicName, obs, native); reason != "" {
		p.Blocked = true
		p.TopicReady = condInput{metav1.ConditionFalse, reason, msg}
		p.RouteActive = condInput{metav1.ConditionFalse, reason, msg}
		return p
	}
	planRouteTopic(&p, dlr, obs, native)
	if native {
		planBrokerNativeGroup(&p, dlr, obs)
	} else {
		planRepublisherGroup(&p, dlr, obs)
	}
	return p
}

// routeTopicRefused says why the route's dead-letter topic cannot be used (reason "" when it
// can): a BrokerNative name without the brokers' prefix, another owner's topic, the queue's
// own topic.
func routeTopicRefused(topic string, obs routeObservation, native bool) (reason, msg string) {
	if prefix := obs.Cluster.DeadLetterPrefix(); native && !strings.HasPrefix(topic, prefix) {
		return kqv1.ReasonTopicNamePrefixRequired, fmt.Sprintf("spec.topic.name %q does not start with the brokers' errors.deadletterqueue.topic.name.prefix %q, which BrokerNative mode requires (KIP-1191): set spec.mode: Republisher to keep this name, or recreate this DeadLetterRoute with spec.topic.name %q or without spec.topic.name (it cannot be changed in place)", topic, prefix, prefix+topic)
	}
	if obs.TopicOwner != "" {
		return kqv1.ReasonConflict, fmt.Sprintf("dead-letter topic %s is the topic of %s on this Kafka cluster; dead records need a topic of their own: recreate this DeadLetterRoute with another spec.topic.name (it cannot be changed in place)", topic, obs.TopicOwner)
	}
	if topic == obs.QueueTopic {
		return kqv1.ReasonKafkaRejected, fmt.Sprintf("spec.topic.name %q is the queue's own topic; dead records need a topic of their own", topic)
	}
	return "", ""
}

// planRouteTopic plans the dead-letter topic: created when missing, grown to the declared
// partitions (more is kept), its declared configs set (and, BrokerNative,
// errors.deadletterqueue.group.enable).
func planRouteTopic(p *routePlan, dlr *kqv1.DeadLetterRoute, obs routeObservation, native bool) {
	want := map[string]string{}
	for k, v := range normalisedConfigs(dlr.Spec.Topic.Config) {
		want[k] = v
	}
	if native {
		want[dlqGroupEnableConfig] = "true"
	}
	partitions := max(dlr.Spec.Topic.Partitions, 1)
	if obs.Topic.Err != nil {
		rf := int16(-1)
		if dlr.Spec.Topic.ReplicationFactor != nil {
			rf = int16(*dlr.Spec.Topic.ReplicationFactor)
		}
		p.CreateTopic = &kafka.NewTopic{Name: p.TopicName, Partitions: partitions, ReplicationFactor: rf, Configs: want}
		p.TopicReady = condInput{metav1.ConditionTrue, kqv1.ReasonReady, fmt.Sprintf("topic %s has %d partitions", p.TopicName, partitions)}
		return
	}
	have := obs.Topic.Partitions
	if partitions > have {
		p.GrowPartitionsTo = partitions
		have = partitions
	} // more partitions than declared is harmless for a dead-letter topic: reported, kept
	for _, k := range sortedKeys(want) {
		if e, ok := obs.TopicConfigs[k]; !ok || normaliseValue(e.Value) != normaliseValue(want[k]) {
			p.TopicConfigs = append(p.TopicConfigs, kafka.AlterConfig{Name: k, Op: kafka.OpSet, Value: want[k]})
		}
	}
	p.TopicReady = condInput{metav1.ConditionTrue, kqv1.ReasonReady, fmt.Sprintf("topic %s has %d partitions", p.TopicName, have)}
}

// planBrokerNativeGroup plans the group's KIP-1191 configs: the brokers write its dead
// records to the topic.
func planBrokerNativeGroup(p *routePlan, dlr *kqv1.DeadLetterRoute, obs routeObservation) {
	group := map[string]string{dlqTopicNameConfig: p.TopicName, dlqCopyRecordConfig: strconv.FormatBool(dlr.Spec.CopyRecord)}
	for _, k := range sortedKeys(group) {
		if e, ok := obs.GroupConfigs[k]; !ok || !e.IsOverride() || e.Value != group[k] {
			p.GroupConfigs = append(p.GroupConfigs, kafka.AlterConfig{Name: k, Op: kafka.OpSet, Value: group[k]})
		}
	}
	what := "its metadata (group, topic, partition, offset, delivery count)"
	if dlr.Spec.CopyRecord {
		what = "a copy of the record with its metadata"
	}
	p.RouteActive = condInput{metav1.ConditionTrue, kqv1.ReasonBrokerNative,
		fmt.Sprintf("the brokers write %s to topic %s for every record of group %s that is rejected or released past the delivery limit (%s, KIP-1191)", what, p.TopicName, obs.GroupID, dlqTopicNameConfig)}
}

// planRepublisherGroup removes BrokerNative's group configs and decides whether the sidecar
// may be injected: the group's limit must reserve the last attempt and renew
// acknowledgements must be on.
func planRepublisherGroup(p *routePlan, dlr *kqv1.DeadLetterRoute, obs routeObservation) {
	for _, k := range []string{dlqTopicNameConfig, dlqCopyRecordConfig} {
		if e, ok := obs.GroupConfigs[k]; ok && e.IsOverride() {
			p.GroupConfigs = append(p.GroupConfigs, kafka.AlterConfig{Name: k, Op: kafka.OpDelete})
		}
	}
	// The reserved last attempt must be in place at the brokers, or a record whose last
	// application attempt dies with the sidecar is archived without a copy.
	limit, ok := obs.GroupConfigs[deliveryCountLimitConfig]
	reserved := strconv.Itoa(int(obs.QueueAttempts) + 1)
	if obs.QueueAttempts == 0 || !ok || normaliseValue(limit.Value) != reserved {
		have := "unknown"
		if ok {
			have = limit.Value
		}
		p.RouteActive = condInput{metav1.ConditionFalse, kqv1.ReasonDeliveryLimitNotReserved,
			fmt.Sprintf("Republisher mode needs group %s's %s = maxDeliveryAttempts (%d) + 1 = %s, and it is %s; check the ShareQueue's ConfigValid condition (the brokers' group.share.max.delivery.count.limit may leave no room: lower spec.delivery.maxDeliveryAttempts). The webhook does not inject the republisher until then", obs.GroupID, deliveryCountLimitConfig, obs.QueueAttempts, reserved, have)}
		return
	}
	// The sidecar renews the brokers' acquisition lock while the application holds a record
	// (a lease longer than share.record.lock.duration.ms, the application's renew, a record
	// kept while its dead-letter write is retried). With renew acknowledgements off the
	// brokers refuse every renew (INVALID_RECORD_STATE, measured on Kafka 4.4), the lock
	// lapses under the application and the record is delivered again while it is still
	// being worked on. Brokers before 4.3 have no such switch (renew is always on from 4.2):
	// an absent config does not block.
	if e, ok := obs.GroupConfigs[renewAcknowledgeConfig]; ok && normaliseValue(e.Value) == "false" {
		from := "a group override"
		if !e.IsOverride() {
			from = "the brokers' default"
		}
		p.RouteActive = condInput{metav1.ConditionFalse, kqv1.ReasonRenewAcknowledgeDisabled,
			fmt.Sprintf("Republisher mode needs group %s's %s = true (KIP-1222), and it is false (%s): the republisher sidecar renews the brokers' acquisition lock while the application holds a record, and the brokers refuse renews while it is false, so held records would be delivered again while still being worked on. Set spec.delivery.renewAcknowledge: true on ShareQueue %s. The webhook does not inject the republisher until then", obs.GroupID, renewAcknowledgeConfig, from, dlr.Spec.QueueRef.Name)}
		return
	}
	p.RouteActive = condInput{metav1.ConditionTrue, kqv1.ReasonRepublisher,
		fmt.Sprintf("the republisher sidecar, injected into Pods labelled %s=%s, writes to topic %s every record of group %s that is rejected, or released or lapsed on its last attempt; the group's %s is %s, maxDeliveryAttempts (%d) + 1 (the reserved attempt)", kqv1.QueueAnnotation, dlr.Spec.QueueRef.Name, p.TopicName, obs.GroupID, deliveryCountLimitConfig, reserved, obs.QueueAttempts)}
}
