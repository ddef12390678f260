package controllers

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/delivery"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// InFlightRecordStateBytes is the broker memory and disk kept per in-flight record of a share
// partition (KIP-932 share-partition state), used for status.capacity.
const InFlightRecordStateBytes = 32

// driftExemptTopicConfigs are topic configs that tools other than the operator set for a
// while (replica reassignment throttles); drift correction never reverts them.
var driftExemptTopicConfigs = map[string]bool{
	"leader.replication.throttled.replicas":   true,
	"follower.replication.throttled.replicas": true,
}

// condInput is a condition the report step sets (with observedGeneration and a transition
// time that only moves when the status flips).
type condInput struct {
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// queueObservation is everything a ShareQueue plan depends on, observed before planning.
type queueObservation struct {
	// Cluster is the referenced KafkaCluster's status.
	Cluster kqv1.KafkaClusterStatus
	// Topic is the live topic; Topic.Err is IsNotFound when it does not exist.
	Topic kafka.Topic
	// TopicConfigs are the live topic's configs (nil when the topic does not exist).
	TopicConfigs map[string]kafka.ConfigEntry
	// GroupConfigs are the live group configs (every group config the brokers know, with
	// defaults filled in); nil when they could not be read.
	GroupConfigs map[string]kafka.ConfigEntry
	// ReserveLastAttempt is set when the queue's DeadLetterRoute runs in Republisher mode:
	// the group's share.delivery.count.limit becomes maxDeliveryAttempts + 1 (the broker
	// default + 1 when the field is absent), so a record whose last application attempt dies
	// with the sidecar is delivered once more and dead-lettered rather than archived.
	ReserveLastAttempt bool
}

// queuePlan is the pure result of planning one ShareQueue: Kafka changes to make and the
// status they lead to.
type queuePlan struct {
	TopicName string
	GroupID   string

	// CreateTopic is set when the topic must be created.
	CreateTopic *kafka.NewTopic
	// GrowPartitionsTo is the new partition total, 0 when unchanged.
	GrowPartitionsTo int32
	// TopicConfigs and GroupConfigs are incremental changes; empty when in sync.
	TopicConfigs []kafka.AlterConfig
	GroupConfigs []kafka.AlterConfig

	// Blocked is set when the topic must not be touched at all (conflict, id change, waiting
	// for adoption); the conditions say why. A blocked plan never pins the topic id.
	Blocked bool
	// RecreatesTopicID is the pinned id of a topic that was deleted outside the operator and
	// is being created again (reported, not silent).
	RecreatesTopicID string
	// AdoptCreated is set when an existing topic is recognised as the one this resource
	// started creating (status.topicCreationStarted).
	AdoptCreated bool
	// ManagedTopicConfigs are the topic configs this resource manages after the plan.
	ManagedTopicConfigs []string

	TopicReady  condInput
	GroupConfig condInput
	ConfigValid condInput
	// ShareState is the cluster-wide precondition a share consumer needs beyond the topic and
	// the group configs: brokers that can create or serve __share_group_state (sharePrecondition).
	ShareState condInput
	// Drift lists live values that differ from the spec under driftPolicy Report.
	Drift []string
	// Rejected lists the group configs not written because they are out of bounds (Reject).
	Rejected []string

	// Effective is the delivery configuration once the plan is applied; EffectiveNow is the
	// one in force before (used when applying the group configs fails).
	Effective    kqv1.EffectiveDelivery
	EffectiveNow kqv1.EffectiveDelivery
	Partitions   int32
	Capacity     *kqv1.QueueCapacity
	// Bounds are the cluster's share bounds the plan was checked against.
	Bounds kqv1.ShareBounds
}

// Empty reports whether the plan makes no Kafka write.
func (p *queuePlan) Empty() bool {
	return p.CreateTopic == nil && p.GrowPartitionsTo == 0 && len(p.TopicConfigs) == 0 && len(p.GroupConfigs) == 0
}

// Changes describes the plan's Kafka writes, one line each, for status.plannedChanges and
// Events.
func (p *queuePlan) Changes() []string {
	var out []string
	if t := p.CreateTopic; t != nil {
		rf := "broker default"
		if t.ReplicationFactor > 0 {
			rf = strconv.Itoa(int(t.ReplicationFactor))
		}
		out = append(out, fmt.Sprintf("create topic %s: partitions=%d replicationFactor=%s%s", t.Name, t.Partitions, rf, describeConfigs(t.Configs)))
	}
	if p.GrowPartitionsTo > 0 {
		out = append(out, fmt.Sprintf("grow topic %s partitions to %d", p.TopicName, p.GrowPartitionsTo))
	}
	for _, c := range p.TopicConfigs {
		out = append(out, describeAlter("topic "+p.TopicName, c))
	}
	for _, c := range p.GroupConfigs {
		out = append(out, describeAlter("group "+p.GroupID, c))
	}
	return out
}

func describeConfigs(m map[string]string) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", k, m[k])
	}
	return b.String()
}

func describeAlter(resource string, c kafka.AlterConfig) string {
	if c.Op == kafka.OpDelete {
		return fmt.Sprintf("%s: delete %s (broker default applies)", resource, c.Name)
	}
	return fmt.Sprintf("%s: set %s=%s", resource, c.Name, c.Value)
}

// specValue renders the user's value for messages, with the Kafka value beside durations.
func specValue(s delivery.Setting, kafkaValue string) string {
	if s.Kind == delivery.KindDurationMs {
		return fmt.Sprintf("%s (%s=%s)", delivery.DisplayValue(s.Kind, kafkaValue), s.Config, kafkaValue)
	}
	return kafkaValue
}

// boundText renders a bound for messages.
func boundText(s delivery.Setting, which string, v int64) string {
	name := "group.share." + which + s.BrokerPrefix
	if s.Kind == delivery.KindDurationMs {
		return fmt.Sprintf("%s=%d (%s)", name, v, delivery.DisplayValue(s.Kind, strconv.FormatInt(v, 10)))
	}
	return fmt.Sprintf("%s=%d", name, v)
}

// planQueue decides, from the spec and what was observed, which Kafka changes to make and
// what status follows. It is pure: no clients, context or clock.
//
// Rules and their sources:
//   - delivery values are checked against the brokers' group.share.min/max.* bounds
//     (KIP-1240); Reject writes nothing for an out-of-bounds field, Clamp writes the bound;
//   - a field whose group config the brokers do not report is unsupported on this cluster
//     (share.delivery.count.limit and share.partition.max.record.locks need Kafka 4.3+);
//   - effective value = group override, else broker default, clamped to the bounds (brokers
//     clamp stored values at run time, KIP-1240);
//   - capacity = partitions × effective share.partition.max.record.locks, × 32 B of state.
func planQueue(sq *kqv1.ShareQueue, obs queueObservation) queuePlan {
	p := queuePlan{TopicName: sq.KafkaTopicName(), GroupID: sq.KafkaGroupID()}
	pol := policiesOf(&sq.Spec)
	planTopic(&p, sq, obs, pol)

	bounds := kqv1.ShareBounds{}
	if obs.Cluster.ShareBounds != nil {
		bounds = *obs.Cluster.ShareBounds
	}
	var invalid, clamped, unsupported []string
	for _, s := range delivery.Settings {
		d := planDeliverySetting(s, &sq.Spec, obs, bounds, pol, p.GroupID)
		*s.Effective(&p.EffectiveNow), *s.Effective(&p.Effective) = d.Now, d.After
		if d.Write != nil {
			p.GroupConfigs = append(p.GroupConfigs, *d.Write)
		}
		if d.Drift != "" {
			p.Drift = append(p.Drift, d.Drift)
		}
		if d.Invalid != "" {
			invalid = append(invalid, d.Invalid)
			p.Rejected = append(p.Rejected, s.Config)
		}
		if d.Clamped != "" {
			clamped = append(clamped, d.Clamped)
		}
		if d.Unsupported != "" {
			unsupported = append(unsupported, d.Unsupported)
		}
	}
	if why := storedOutOfBounds(obs, bounds, p.GroupConfigs); why != "" {
		// The brokers validate a group's whole config on every IncrementalAlterConfigs
		// (measured on 4.4: INVALID_CONFIG "share.record.lock.duration.ms must be in the range
		// 15000 to 45000 inclusive" for a write of share.delivery.count.limit alone): while a
		// stored override lies outside bounds narrowed after it was written, every change to
		// the group is refused. Nothing is sent; ConfigValid says which changes wait.
		waiting := make([]string, 0, len(p.GroupConfigs))
		for _, w := range p.GroupConfigs {
			waiting = append(waiting, w.Name)
		}
		invalid = append(invalid, why+": the brokers refuse every change to the group's configs until it is back in bounds, so "+strings.Join(waiting, ", ")+" wait")
		for _, s := range delivery.Settings {
			*s.Effective(&p.Effective) = *s.Effective(&p.EffectiveNow)
		}
		p.GroupConfigs = nil
	}
	if obs.Cluster.ShareVersion < 1 {
		// No group-config writes while share groups are off (share.version 0).
		p.GroupConfigs = nil
		p.Effective = p.EffectiveNow
	}
	if obs.ReserveLastAttempt {
		if attempts := reservableAttempts(sq, obs.Cluster); attempts > 0 {
			showReserve(&p.EffectiveNow, attempts)
			showReserve(&p.Effective, attempts)
		}
	}
	p.ConfigValid = configValid(invalid, unsupported, clamped)
	p.GroupConfig = groupConfigured(obs, p.GroupID, len(invalid) > 0 || len(unsupported) > 0)
	p.ShareState = sharePrecondition(obs.Cluster)

	if p.Blocked {
		p.CreateTopic, p.GrowPartitionsTo, p.TopicConfigs = nil, 0, nil
		p.ManagedTopicConfigs = sq.Status.ManagedTopicConfigs
	} else {
		p.ManagedTopicConfigs = sortedKeys(normalisedConfigs(sq.Spec.Topic.Config))
	}
	p.Bounds = bounds
	p.Capacity = capacityOf(p.Partitions, p.Effective.MaxInFlightPerPartition, bounds)
	return p
}

// queuePolicies are the spec's policies with their defaults applied.
type queuePolicies struct {
	drift      kqv1.DriftPolicy
	adoption   kqv1.AdoptionPolicy
	ignored    map[string]bool // driftIgnore
	partitions int32           // topic.partitions, at least 1
}

func policiesOf(spec *kqv1.ShareQueueSpec) queuePolicies {
	pol := queuePolicies{drift: spec.DriftPolicy, adoption: spec.AdoptionPolicy, ignored: map[string]bool{}, partitions: max(spec.Topic.Partitions, 1)}
	if pol.drift == "" {
		pol.drift = kqv1.DriftPolicyEnforce
	}
	if pol.adoption == "" {
		pol.adoption = kqv1.AdoptionPolicyAdoptOrCreate
	}
	for _, k := range spec.DriftIgnore {
		pol.ignored[strings.TrimSpace(k)] = true
	}
	return pol
}

// planTopic decides the topic's writes (create, grow, configs), whether it is Blocked, its
// partitions and TopicReady: adoptionPolicy, the pinned topic id, the creation intent, shape
// mismatches (more partitions, another replication factor) and driftPolicy.
func planTopic(p *queuePlan, sq *kqv1.ShareQueue, obs queueObservation, pol queuePolicies) {
	exists := obs.Topic.Err == nil
	switch {
	case !exists && pol.adoption == kqv1.AdoptionPolicyAdopt:
		p.Blocked = true
		p.TopicReady = condInput{metav1.ConditionFalse, kqv1.ReasonTopicNotFound,
			fmt.Sprintf("adoptionPolicy is Adopt and topic %q does not exist; waiting for it to be created", p.TopicName)}
	case !exists:
		rf := int16(-1)
		if sq.Spec.Topic.ReplicationFactor != nil {
			rf = int16(*sq.Spec.Topic.ReplicationFactor)
		}
		p.CreateTopic = &kafka.NewTopic{Name: p.TopicName, Partitions: pol.partitions, ReplicationFactor: rf, Configs: normalisedConfigs(sq.Spec.Topic.Config)}
		p.RecreatesTopicID = sq.Status.TopicID
		p.Partitions = pol.partitions
		p.TopicReady = condInput{metav1.ConditionTrue, kqv1.ReasonReady, fmt.Sprintf("topic %s has %d partitions", p.TopicName, pol.partitions)}
	case sq.Status.TopicID != "" && obs.Topic.ID != "" && obs.Topic.ID != sq.Status.TopicID:
		p.Blocked = true
		p.Partitions = obs.Topic.Partitions
		p.TopicReady = condInput{metav1.ConditionFalse, kqv1.ReasonTopicIDChanged,
			fmt.Sprintf("topic %s now has id %s but this ShareQueue pinned id %s: it was deleted and recreated outside the operator; nothing is written until a person checks it. To take the new topic over, delete this ShareQueue (its finalizer never deletes a topic whose id is not the pinned one) and create it again with adoptionPolicy Adopt or AdoptOrCreate", p.TopicName, obs.Topic.ID, sq.Status.TopicID)}
	case pol.adoption == kqv1.AdoptionPolicyCreate && sq.Status.TopicID == "" && sq.Status.TopicCreationStarted != nil:
		// Our own CreateTopics whose result was never recorded (manager stopped, response
		// lost): the topic is ours.
		p.Partitions = obs.Topic.Partitions
		p.AdoptCreated = true
		p.TopicReady = condInput{metav1.ConditionTrue, kqv1.ReasonReady, fmt.Sprintf("topic %s has %d partitions", p.TopicName, p.Partitions)}
	case pol.adoption == kqv1.AdoptionPolicyCreate && sq.Status.TopicID == "":
		p.Blocked = true
		p.Partitions = obs.Topic.Partitions
		p.TopicReady = condInput{metav1.ConditionFalse, kqv1.ReasonTopicExists,
			fmt.Sprintf("adoptionPolicy is Create and topic %s already exists (id %s); use AdoptOrCreate or Adopt to take it over", p.TopicName, obs.Topic.ID)}
	default:
		p.Partitions = obs.Topic.Partitions
		var problems []string
		reason := ""
		if obs.Topic.Partitions < pol.partitions {
			if pol.drift == kqv1.DriftPolicyEnforce || sq.Status.TopicID == "" || pol.partitions > sq.Status.Partitions {
				p.GrowPartitionsTo = pol.partitions
				p.Partitions = pol.partitions
			}
		} else if obs.Topic.Partitions > pol.partitions {
			reason = kqv1.ReasonPartitionCountMismatch
			problems = append(problems, fmt.Sprintf("topic %s has %d partitions but topic.partitions is %d; Kafka cannot remove partitions: set topic.partitions to %d",
				p.TopicName, obs.Topic.Partitions, pol.partitions, obs.Topic.Partitions))
		}
		if rf := sq.Spec.Topic.ReplicationFactor; rf != nil && obs.Topic.ReplicationFactor != *rf {
			if reason == "" {
				reason = kqv1.ReasonReplicationFactorMismatch
			}
			problems = append(problems, fmt.Sprintf("topic %s has replication factor %d but topic.replicationFactor is %d; the operator does not reassign queue topics",
				p.TopicName, obs.Topic.ReplicationFactor, *rf))
		}
		if pol.drift != kqv1.DriftPolicyIgnore {
			changes := diffTopicConfigs(sq.Spec.Topic.Config, obs.TopicConfigs, pol.ignored, managedSet(sq.Status.ManagedTopicConfigs))
			if pol.drift == kqv1.DriftPolicyEnforce {
				p.TopicConfigs = changes
			} else {
				for _, c := range changes {
					p.Drift = append(p.Drift, describeAlter("topic "+p.TopicName, c))
				}
			}
		}
		// The broker count of the topic's own Metadata response, so the under-replication and
		// the live brokers it is set against are one observation (the KafkaCluster's count
		// can be a probe older).
		brokers := obs.Cluster.BrokerCount
		if obs.Topic.LiveBrokers > 0 {
			brokers = obs.Topic.LiveBrokers
		}
		if len(problems) > 0 {
			// Nothing is written to a topic whose shape disagrees with the spec.
			p.TopicConfigs, p.GrowPartitionsTo = nil, 0
		}
		if ur := obs.Topic.UnderReplicated(); len(problems) == 0 && (ur > 0 || (brokers > 0 && obs.Topic.ReplicationFactor > brokers)) {
			p.TopicReady = condInput{metav1.ConditionFalse, kqv1.ReasonTopicUnderReplicated,
				fmt.Sprintf("topic %s has replication factor %d with %d under-replicated partition(s); the cluster has %d live broker(s)", p.TopicName, obs.Topic.ReplicationFactor, ur, brokers)}
		} else if len(problems) > 0 {
			p.TopicReady = condInput{metav1.ConditionFalse, reason, strings.Join(problems, "; ")}
		} else {
			p.TopicReady = condInput{metav1.ConditionTrue, kqv1.ReasonReady, fmt.Sprintf("topic %s has %d partitions", p.TopicName, p.Partitions)}
		}
	}
}

// settingPlan is the plan for one delivery setting.
type settingPlan struct {
	// Now is the effective value before the plan, After once it is applied.
	Now, After *kqv1.EffectiveValue
	// Write is the group-config change, nil when none.
	Write *kafka.AlterConfig
	// Drift describes a live value left as it is under driftPolicy Report.
	Drift string
	// Invalid (rejected, boundsPolicy Reject), Clamped (boundsPolicy Clamp) and Unsupported
	// (the brokers do not report the config) are ConfigValid's messages for this setting.
	Invalid, Clamped, Unsupported string
}

// planDeliverySetting decides one delivery setting: the declared value (the reserved last
// attempt added in Republisher mode) against the live group config and the brokers' bounds,
// under boundsPolicy, driftPolicy and driftIgnore.
func planDeliverySetting(s delivery.Setting, spec *kqv1.ShareQueueSpec, obs queueObservation, bounds kqv1.ShareBounds, pol queuePolicies, groupID string) settingPlan {
	want, declared := s.Desired(&spec.Delivery)
	live, liveKnown := obs.GroupConfigs[s.Config]
	if obs.ReserveLastAttempt && s.Config == deliveryCountLimitConfig {
		want, declared = reservedDeliveryLimit(want, declared, s, bounds)
	}
	supported := obs.GroupConfigs == nil || liveKnown
	var bound kqv1.Bound
	if s.Bound != nil {
		bound = s.Bound(&bounds)
	}
	var d settingPlan
	now := effectiveOf(s, live, liveKnown, bound)
	d.Now, d.After = now, now

	switch {
	case !supported:
		if declared {
			d.Unsupported = fmt.Sprintf("%s=%s needs group config %s, which this cluster's brokers do not report (Kafka 4.3+ adds it); the field is not applied",
				s.Field, delivery.DisplayValue(s.Kind, want), s.Config)
		}
		if declared && now.Value == "" {
			d.After = &kqv1.EffectiveValue{Config: s.Config, Source: kqv1.SourceUnsupported}
		}
	case declared && pol.ignored[s.Config] && liveKnown && live.IsOverride():
		// driftIgnore: the live override stands, whatever it is.
	case declared:
		write, source := want, kqv1.SourceGroupOverride
		if _, c, side := s.OutOfBounds(want, bound); side != "" {
			rel := "below the brokers' minimum"
			if side == "max." {
				rel = "above the brokers' maximum"
			}
			what := s.Field + " " + specValue(s, want)
			if obs.ReserveLastAttempt && s.Config == deliveryCountLimitConfig {
				// The value the user wrote, and the reserve that makes the group's limit.
				n, _ := strconv.ParseInt(want, 10, 64)
				what = fmt.Sprintf("%s %d plus the republisher's reserved attempt (%s=%s)", s.Field, n-1, s.Config, want)
			}
			if spec.BoundsPolicy == kqv1.BoundsPolicyClamp {
				d.Clamped = fmt.Sprintf("%s is %s %s; wrote %s", what, rel, boundText(s, side, c), delivery.DisplayValue(s.Kind, strconv.FormatInt(c, 10)))
				if obs.ReserveLastAttempt && s.Config == deliveryCountLimitConfig {
					d.Clamped += fmt.Sprintf(": the application gets %d attempts and the republisher keeps the last", c-1)
				}
				write, source = strconv.FormatInt(c, 10), kqv1.SourceClamped
			} else {
				d.Invalid = fmt.Sprintf("%s is %s %s", what, rel, boundText(s, side, c))
				return d // rejected: keep what is live
			}
		}
		d.After = &kqv1.EffectiveValue{Config: s.Config, Value: delivery.DisplayValue(s.Kind, write), Source: source}
		if liveKnown && live.IsOverride() && normaliseValue(live.Value) == normaliseValue(write) {
			break
		}
		switch {
		case pol.drift == kqv1.DriftPolicyEnforce || !(liveKnown && live.IsOverride()):
			d.Write = &kafka.AlterConfig{Name: s.Config, Op: kafka.OpSet, Value: write}
		case pol.drift == kqv1.DriftPolicyReport:
			d.Drift = fmt.Sprintf("group %s: %s is %s, spec wants %s", groupID, s.Config, live.Value, write)
			d.After = now
		default:
			d.After = now
		}
	case liveKnown && live.IsOverride() && !pol.ignored[s.Config]:
		// Not declared: the broker default should apply.
		switch pol.drift {
		case kqv1.DriftPolicyEnforce:
			d.Write = &kafka.AlterConfig{Name: s.Config, Op: kafka.OpDelete}
			d.After = effectiveOf(s, kafka.ConfigEntry{}, false, bound)
		case kqv1.DriftPolicyReport:
			d.Drift = fmt.Sprintf("group %s: %s is set to %s outside the spec", groupID, s.Config, live.Value)
		}
	}
	return d
}

// storedOutOfBounds names the first group config whose stored override lies outside the
// brokers' bounds (KIP-1240 bounds narrowed after it was written: the brokers clamp it at run
// time but refuse any alteration of the group while it stands) and that writes does not
// replace; "" when there is none or nothing is to be written. Pure.
func storedOutOfBounds(obs queueObservation, bounds kqv1.ShareBounds, writes []kafka.AlterConfig) string {
	if len(writes) == 0 {
		return ""
	}
	replaced := map[string]bool{}
	for _, w := range writes {
		replaced[w.Name] = true
	}
	for _, s := range delivery.Settings {
		live, ok := obs.GroupConfigs[s.Config]
		if !ok || !live.IsOverride() || replaced[s.Config] || s.Bound == nil {
			continue
		}
		if _, c, side := s.OutOfBounds(live.Value, s.Bound(&bounds)); side != "" {
			rel := "below the brokers' minimum"
			if side == "max." {
				rel = "above the brokers' maximum"
			}
			return fmt.Sprintf("the group's stored %s=%s is %s %s", s.Config, live.Value, rel, boundText(s, side, c))
		}
	}
	return ""
}

// configValid is ConfigValid from the delivery settings' verdicts: out of bounds (Reject)
// first, then unsupported by the cluster, then clamped (True), else Valid.
func configValid(invalid, unsupported, clamped []string) condInput {
	switch {
	case len(invalid) > 0:
		msg := strings.Join(invalid, "; ") + "; not written (boundsPolicy Reject): change the value or set boundsPolicy: Clamp"
		if len(unsupported) > 0 {
			msg += "; " + strings.Join(unsupported, "; ")
		}
		return condInput{metav1.ConditionFalse, kqv1.ReasonOutOfBrokerBounds, msg}
	case len(unsupported) > 0:
		return condInput{metav1.ConditionFalse, kqv1.ReasonUnsupportedByCluster, strings.Join(unsupported, "; ")}
	case len(clamped) > 0:
		return condInput{metav1.ConditionTrue, kqv1.ReasonClampedToBrokerBounds, strings.Join(clamped, "; ") + " (boundsPolicy Clamp)"}
	}
	return condInput{metav1.ConditionTrue, kqv1.ReasonValid, "every delivery value is within the brokers' bounds"}
}

// groupConfigured is GroupConfigured: False while share groups are off, Unknown when the
// group configs could not be read, else True (naming the fields ConfigValid excludes, when
// some are).
func groupConfigured(obs queueObservation, groupID string, someNotApplied bool) condInput {
	switch {
	case obs.Cluster.ShareVersion < 1:
		return condInput{metav1.ConditionFalse, kqv1.ReasonShareGroupsDisabled,
			fmt.Sprintf("share groups are disabled on this cluster (share.version=%d); group configs are written once share.version >= 1 is finalized", obs.Cluster.ShareVersion)}
	case obs.GroupConfigs == nil:
		return condInput{metav1.ConditionUnknown, kqv1.ReasonKafkaUnavailable, "group configs could not be read"}
	case someNotApplied:
		return condInput{metav1.ConditionTrue, kqv1.ReasonReady, fmt.Sprintf("share group %s configured, except the fields ConfigValid names", groupID)}
	}
	return condInput{metav1.ConditionTrue, kqv1.ReasonReady, fmt.Sprintf("share group %s configured", groupID)}
}

// sharePrecondition is whether the cluster can hold share-group state, read from the
// KafkaCluster's own verdict: a queue whose brokers cannot create __share_group_state (its
// replication factor exceeds the broker count) has members that join and receive nothing, so
// it is not Ready, and it says which broker settings to change. It is True otherwise,
// including before the first share-group use creates the topic.
func sharePrecondition(cluster kqv1.KafkaClusterStatus) condInput {
	if c := findCondition(cluster.Conditions, kqv1.ConditionShareStateReplicated); c != nil && c.Status == metav1.ConditionFalse && c.Reason == kqv1.ReasonShareStateUncreatable {
		return condInput{metav1.ConditionFalse, kqv1.ReasonShareStateUncreatable,
			"share consumers of this queue join but receive nothing: the KafkaCluster reports " + c.Message}
	}
	return condInput{metav1.ConditionTrue, kqv1.ReasonReady, "the brokers can hold share-group state"}
}

// effectiveOf is the value the brokers apply: the group override when there is one, else the
// broker default; numeric values are clamped to the bounds as brokers do at run time.
func effectiveOf(s delivery.Setting, live kafka.ConfigEntry, liveKnown bool, bound kqv1.Bound) *kqv1.EffectiveValue {
	var raw string
	source := kqv1.SourceBrokerDefault
	switch {
	case liveKnown && live.IsOverride():
		raw, source = live.Value, kqv1.SourceGroupOverride
	case bound.Default != nil:
		raw = strconv.FormatInt(*bound.Default, 10)
	case liveKnown:
		raw = live.Value
	default:
		return &kqv1.EffectiveValue{Config: s.Config, Source: kqv1.SourceBrokerDefault}
	}
	if n, err := strconv.ParseInt(raw, 10, 64); err == nil && (s.Kind == delivery.KindInt || s.Kind == delivery.KindDurationMs) {
		if c, side := delivery.ClampToBound(n, bound); side != "" {
			raw, source = strconv.FormatInt(c, 10), kqv1.SourceClamped
		}
	}
	return &kqv1.EffectiveValue{Config: s.Config, Value: delivery.DisplayValue(s.Kind, raw), Source: source}
}

// capacityOf is partitions × effective share.partition.max.record.locks.
func capacityOf(partitions int32, maxLocks *kqv1.EffectiveValue, bounds kqv1.ShareBounds) *kqv1.QueueCapacity {
	var locks int64
	if maxLocks != nil && maxLocks.Value != "" {
		locks, _ = strconv.ParseInt(maxLocks.Value, 10, 64)
	} else if bounds.PartitionMaxRecordLocks.Default != nil {
		locks = *bounds.PartitionMaxRecordLocks.Default
	}
	if partitions <= 0 || locks <= 0 {
		return nil
	}
	n := int64(partitions) * locks
	return &kqv1.QueueCapacity{MaxInFlightRecords: n, InFlightStateBytes: n * InFlightRecordStateBytes}
}

// deliveryCountLimitConfig is the group config behind delivery.maxDeliveryAttempts.
const deliveryCountLimitConfig = "share.delivery.count.limit"

// renewAcknowledgeConfig is the group config behind delivery.renewAcknowledge (KIP-1222,
// Kafka 4.3+): whether the brokers take renew acknowledgements (AckRenew) for the group.
const renewAcknowledgeConfig = "share.renew.acknowledge.enable"

// reservedDeliveryLimit is the group limit in Republisher mode: the declared attempts (else the
// brokers' default) plus one. It is not declared when neither is known.
func reservedDeliveryLimit(want string, declared bool, s delivery.Setting, bounds kqv1.ShareBounds) (string, bool) {
	var n int64
	switch {
	case declared:
		v, err := strconv.ParseInt(want, 10, 64)
		if err != nil {
			return want, declared
		}
		n = v
	case s.Bound != nil && s.Bound(&bounds).Default != nil:
		n = int64(*s.Bound(&bounds).Default)
	default:
		return want, declared
	}
	return strconv.FormatInt(n+1, 10), true
}

// showReserve splits the group's delivery limit in e.MaxDeliveryAttempts (Republisher mode)
// into the application's attempts (at most attempts: what the sidecar hands out) and
// e.ReservedAttempts, the rest. A limit that is not known leaves e as it is.
func showReserve(e *kqv1.EffectiveDelivery, attempts int32) {
	v := e.MaxDeliveryAttempts
	if v == nil {
		return
	}
	limit, err := strconv.ParseInt(v.Value, 10, 32)
	if err != nil {
		return
	}
	app := min(int32(limit), attempts)
	shown := *v
	shown.Value = strconv.Itoa(int(app))
	e.MaxDeliveryAttempts = &shown
	e.ReservedAttempts = ptr.To(int32(limit) - app)
}

// normaliseValue makes equal Kafka values compare equal: surrounding blanks, blanks around
// list commas, boolean case.
func normaliseValue(v string) string {
	v = strings.TrimSpace(v)
	// Kafka stores integers in canonical form ("+0100" is written back as "100").
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return strconv.FormatInt(n, 10)
	}
	if strings.Contains(v, ",") {
		parts := strings.Split(v, ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		v = strings.Join(parts, ",")
	}
	if lv := strings.ToLower(v); lv == "true" || lv == "false" {
		return lv
	}
	return v
}

func normalisedConfigs(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[strings.TrimSpace(k)] = normaliseValue(v)
	}
	return out
}

// diffTopicConfigs returns the incremental changes that make the topic's dynamic configs equal
// the spec: set what differs, delete overrides this resource set earlier (managed) and the
// spec no longer declares; overrides set by others (on an adopted topic) and reassignment
// throttles are never touched. Values are compared normalised against the
// broker's effective config, so a value equal to the default is not rewritten.
func diffTopicConfigs(want map[string]string, live map[string]kafka.ConfigEntry, ignored, managed map[string]bool) []kafka.AlterConfig {
	want = normalisedConfigs(want)
	var out []kafka.AlterConfig
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		cur, ok := live[k]
		if ok && (normaliseValue(cur.Value) == want[k] || (ignored[k] && cur.IsOverride())) {
			continue
		}
		out = append(out, kafka.AlterConfig{Name: k, Op: kafka.OpSet, Value: want[k]})
	}
	var extra []string
	for k, e := range live {
		if _, declared := want[k]; declared || !e.IsOverride() || driftExemptTopicConfigs[k] || ignored[k] || !managed[k] {
			continue
		}
		extra = append(extra, k)
	}
	sort.Strings(extra)
	for _, k := range extra {
		out = append(out, kafka.AlterConfig{Name: k, Op: kafka.OpDelete})
	}
	return out
}

func managedSet(keys []string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

func sortedKeys(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
