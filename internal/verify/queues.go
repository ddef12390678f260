package verify

import (
	"context"
	"fmt"
	"strconv"
	"time"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// effectiveFields lists a queue's effective delivery values with their status paths.
func effectiveFields(e *kqv1.EffectiveDelivery) []struct {
	path string
	v    *kqv1.EffectiveValue
} {
	return []struct {
		path string
		v    *kqv1.EffectiveValue
	}{
		{"status.effective.lockDuration", e.LockDuration},
		{"status.effective.maxDeliveryAttempts", e.MaxDeliveryAttempts},
		{"status.effective.maxInFlightPerPartition", e.MaxInFlightPerPartition},
		{"status.effective.autoOffsetReset", e.AutoOffsetReset},
		{"status.effective.isolationLevel", e.IsolationLevel},
		{"status.effective.renewAcknowledge", e.RenewAcknowledge},
		{"status.effective.sessionTimeout", e.SessionTimeout},
		{"status.effective.heartbeatInterval", e.HeartbeatInterval},
	}
}

// wantConfig is the live group config value an effective value stands for: durations (Go
// duration text) as Kafka's milliseconds, maxDeliveryAttempts plus reservedAttempts.
func wantConfig(e *kqv1.EffectiveDelivery, path string, v *kqv1.EffectiveValue) (string, error) {
	switch {
	case path == "status.effective.maxDeliveryAttempts":
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			return "", fmt.Errorf("%s value %q is not a count", path, v.Value)
		}
		if e.ReservedAttempts != nil {
			n += int64(*e.ReservedAttempts)
		}
		return strconv.FormatInt(n, 10), nil
	case len(v.Config) > 3 && v.Config[len(v.Config)-3:] == ".ms":
		d, err := time.ParseDuration(v.Value)
		if err != nil {
			return "", fmt.Errorf("%s value %q is not a duration", path, v.Value)
		}
		return strconv.FormatInt(d.Milliseconds(), 10), nil
	}
	return v.Value, nil
}

// checkQueue checks a ShareQueue's claims against w; it returns the usability check of a
// Ready queue to run concurrently with the others (nil when there is none).
func (ck *checker) checkQueue(ctx context.Context, cl *kafka.Client, w *world, sq *kqv1.ShareQueue) func() {
	ns, name, st := sq.Namespace, sq.Name, &sq.Status
	conds := st.Conditions
	claim := func(field, says, has string, holds bool) { ck.claim(KindShareQueue, ns, name, field, says, has, holds) }
	topicOK := false
	if (isTrue(conds, kqv1.ConditionTopicReady) || isTrue(conds, kqv1.ConditionReady)) && st.TopicName != "" {
		cond := "conditions[TopicReady]"
		if !isTrue(conds, kqv1.ConditionTopicReady) {
			cond = "conditions[Ready]"
		}
		t, missing, why := w.topic(st.TopicName)
		switch {
		case why != "":
			ck.unverifiable(KindShareQueue, ns, name, "%s", why)
		case missing:
			claim(cond, "True (topic "+st.TopicName+" exists)", "no topic "+st.TopicName, false)
		default:
			topicOK = true
			claim(cond, "True (topic "+st.TopicName+" exists)", "topic "+st.TopicName, true)
			if st.TopicID != "" {
				claim("status.topicId", st.TopicID, t.ID, st.TopicID == t.ID)
			}
			if st.Partitions != 0 {
				claim("status.partitions", itoa(st.Partitions), itoa(t.Partitions), st.Partitions == t.Partitions)
			}
			if st.ReplicationFactor != 0 {
				claim("status.replicationFactor", itoa(st.ReplicationFactor), itoa(t.ReplicationFactor), st.ReplicationFactor == t.ReplicationFactor)
			}
		}
	}
	if isTrue(conds, kqv1.ConditionGroupConfigured) && st.Effective != nil && st.GroupID != "" {
		ck.checkGroupConfigs(w, sq)
	}
	if dl := st.DeadLetter; dl != nil && dl.Active {
		ck.checkQueueDeadLetter(w, sq)
	}
	if !isTrue(conds, kqv1.ConditionReady) || ck.opts.SkipJoin || !topicOK || st.GroupID == "" {
		return nil
	}
	return func() { ck.checkUsable(ctx, cl, sq) }
}

func (ck *checker) checkGroupConfigs(w *world, sq *kqv1.ShareQueue) {
	ns, name, st := sq.Namespace, sq.Name, &sq.Status
	live, why := w.groupConfigs(st.GroupID)
	if why != "" {
		ck.unverifiable(KindShareQueue, ns, name, "%s", why)
		return
	}
	for _, f := range effectiveFields(st.Effective) {
		v := f.v
		if v == nil || v.Source == kqv1.SourceUnsupported || v.Config == "" {
			continue
		}
		entry, present := live[v.Config]
		overridden := present && entry.Source == kafka.ConfigSourceGroup
		switch v.Source {
		case kqv1.SourceGroupOverride, kqv1.SourceClamped:
			want, err := wantConfig(st.Effective, f.path, v)
			if err != nil {
				ck.unverifiable(KindShareQueue, ns, name, "%v", err)
				continue
			}
			has := "no override of " + v.Config
			if overridden {
				has = v.Config + "=" + entry.Value
			}
			ck.claim(KindShareQueue, ns, name, f.path, fmt.Sprintf("%s=%s (%s)", v.Config, want, v.Source), has, overridden && entry.Value == want)
		case kqv1.SourceBrokerDefault:
			has := v.Config + " not overridden"
			if overridden {
				has = v.Config + "=" + entry.Value + " set on the group"
			}
			ck.claim(KindShareQueue, ns, name, f.path, v.Config+" not overridden (BrokerDefault)", has, !overridden)
		}
	}
}

// checkQueueDeadLetter checks status.deadLetter (active): the route says the same, and the
// topic exists.
func (ck *checker) checkQueueDeadLetter(w *world, sq *kqv1.ShareQueue) {
	ns, name, dl := sq.Namespace, sq.Name, sq.Status.DeadLetter
	says := fmt.Sprintf("route %s active, topic %s, mode %s", dl.Route, dl.TopicName, dl.Mode)
	r := w.allRoutes[ns+"/"+dl.Route]
	var has string
	switch {
	case r == nil:
		has = "no DeadLetterRoute " + dl.Route
	default:
		has = fmt.Sprintf("route %s RouteActive=%t, topic %s, mode %s", dl.Route, isTrue(r.Status.Conditions, kqv1.ConditionRouteActive), r.Status.TopicName, r.Status.EffectiveMode)
	}
	ck.claim(KindShareQueue, ns, name, "status.deadLetter", says, has,
		r != nil && isTrue(r.Status.Conditions, kqv1.ConditionRouteActive) && r.Status.TopicName == dl.TopicName && r.Status.EffectiveMode == dl.Mode)
	if dl.TopicName == "" {
		return
	}
	_, missing, why := w.topic(dl.TopicName)
	switch {
	case why != "":
		ck.unverifiable(KindShareQueue, ns, name, "status.deadLetter.topicName: %s", why)
	default:
		ck.claim(KindShareQueue, ns, name, "status.deadLetter.topicName", "topic "+dl.TopicName+" exists", existence(dl.TopicName, missing), !missing)
	}
}

// checkUsable joins the queue's share group as a new member (and with Options.Receive
// fetches once and releases what it got).
func (ck *checker) checkUsable(ctx context.Context, cl *kafka.Client, sq *kqv1.ShareQueue) {
	ns, name, st := sq.Namespace, sq.Name, &sq.Status
	says := fmt.Sprintf("True (share group %s usable for topic %s)", st.GroupID, st.TopicName)
	j, err := cl.JoinShareGroup(ctx, st.GroupID, st.TopicName, ck.opts.JoinWait)
	if err != nil {
		ck.claim(KindShareQueue, ns, name, "conditions[Ready]", says, "join failed: "+err.Error(), false)
		return
	}
	has := fmt.Sprintf("joined, %d partitions assigned", j.Partitions)
	if !ck.opts.Receive {
		ck.claim(KindShareQueue, ns, name, "conditions[Ready]", says, has, true)
		return
	}
	n, err := cl.ReceiveOnce(ctx, st.GroupID, st.TopicName, ck.opts.JoinWait)
	if err != nil {
		ck.claim(KindShareQueue, ns, name, "conditions[Ready]", says, has+"; receive failed: "+err.Error(), false)
		return
	}
	ck.claim(KindShareQueue, ns, name, "conditions[Ready]", says, fmt.Sprintf("%s; received and released %d records", has, n), true)
}

// routeGroup is the share group a route's dead-letter configs are on: status.groupID, else
// the queue's.
func (ck *checker) routeGroup(r *kqv1.DeadLetterRoute, w *world) string {
	if r.Status.GroupID != "" {
		return r.Status.GroupID
	}
	if q := w.allQueues[r.Namespace+"/"+r.Spec.QueueRef.Name]; q != nil {
		return q.Status.GroupID
	}
	return ""
}

func (ck *checker) checkRoute(w *world, r *kqv1.DeadLetterRoute) {
	ns, name, st := r.Namespace, r.Name, &r.Status
	conds := st.Conditions
	topicClaim := func(cond string) {
		if st.TopicName == "" {
			return
		}
		_, missing, why := w.topic(st.TopicName)
		if why != "" {
			ck.unverifiable(KindDeadLetterRoute, ns, name, "%s: %s", cond, why)
			return
		}
		ck.claim(KindDeadLetterRoute, ns, name, cond, "True (topic "+st.TopicName+" exists)", existence(st.TopicName, missing), !missing)
	}
	if isTrue(conds, kqv1.ConditionRouteActive) {
		topicClaim("conditions[RouteActive]")
		switch st.EffectiveMode {
		case kqv1.DeadLetterModeBrokerNative:
			ck.checkBrokerNative(w, r)
		case kqv1.DeadLetterModeRepublisher:
			ck.checkReserved(w, r)
		}
	}
	if isTrue(conds, kqv1.ConditionTopicReady) {
		topicClaim("conditions[TopicReady]")
	}
	if isTrue(conds, kqv1.ConditionReady) {
		tr := "not set"
		if c := findCondition(conds, kqv1.ConditionTopicReady); c != nil {
			tr = string(c.Status)
		}
		ck.claim(KindDeadLetterRoute, ns, name, "conditions[Ready]", "True (TopicReady True)", "conditions[TopicReady] "+tr, tr == "True")
		topicClaim("conditions[Ready]")
	}
}

// checkBrokerNative: the group's errors.deadletterqueue.topic.name is the route's topic.
func (ck *checker) checkBrokerNative(w *world, r *kqv1.DeadLetterRoute) {
	ns, name := r.Namespace, r.Name
	g := ck.routeGroup(r, w)
	if g == "" {
		ck.unverifiable(KindDeadLetterRoute, ns, name, "status.effectiveMode BrokerNative: no group resolved")
		return
	}
	live, why := w.groupConfigs(g)
	if why != "" {
		ck.unverifiable(KindDeadLetterRoute, ns, name, "status.effectiveMode BrokerNative: %s", why)
		return
	}
	const cfg = "errors.deadletterqueue.topic.name"
	e, ok := live[cfg]
	has := fmt.Sprintf("group %s has no %s", g, cfg)
	if ok && e.Value != "" {
		has = fmt.Sprintf("group %s %s=%s", g, cfg, e.Value)
	}
	ck.claim(KindDeadLetterRoute, ns, name, "status.effectiveMode", fmt.Sprintf("BrokerNative: group %s %s=%s", g, cfg, r.Status.TopicName), has,
		ok && e.Value == r.Status.TopicName)
}

// checkReserved: in Republisher mode the group's share.delivery.count.limit is the queue's
// application attempts plus the reserved attempt.
func (ck *checker) checkReserved(w *world, r *kqv1.DeadLetterRoute) {
	ns, name := r.Namespace, r.Name
	qn := r.Status.QueueName
	if qn == "" {
		qn = r.Spec.QueueRef.Name
	}
	q := w.allQueues[ns+"/"+qn]
	if q == nil || q.Status.Effective == nil || q.Status.Effective.MaxDeliveryAttempts == nil || q.Status.Effective.MaxDeliveryAttempts.Source == kqv1.SourceUnsupported {
		ck.unverifiable(KindDeadLetterRoute, ns, name, "status.effectiveMode Republisher: queue %s has no effective maxDeliveryAttempts", qn)
		return
	}
	e := q.Status.Effective
	g := ck.routeGroup(r, w)
	live, why := w.groupConfigs(g)
	if why != "" {
		ck.unverifiable(KindDeadLetterRoute, ns, name, "status.effectiveMode Republisher: %s", why)
		return
	}
	reserved := int32(0)
	if e.ReservedAttempts != nil {
		reserved = *e.ReservedAttempts
	}
	want, err := wantConfig(e, "status.effective.maxDeliveryAttempts", e.MaxDeliveryAttempts)
	if err != nil {
		ck.unverifiable(KindDeadLetterRoute, ns, name, "%v", err)
		return
	}
	const cfg = "share.delivery.count.limit"
	entry, ok := live[cfg]
	has := fmt.Sprintf("group %s has no %s override", g, cfg)
	if ok && entry.Source == kafka.ConfigSourceGroup {
		has = fmt.Sprintf("group %s %s=%s", g, cfg, entry.Value)
	}
	ck.claim(KindDeadLetterRoute, ns, name, "status.effectiveMode",
		fmt.Sprintf("Republisher: group %s %s=%s (%s attempts + %d reserved)", g, cfg, want, e.MaxDeliveryAttempts.Value, reserved), has,
		reserved >= 1 && ok && entry.Source == kafka.ConfigSourceGroup && entry.Value == want)
}

func existence(topic string, missing bool) string {
	if missing {
		return "no topic " + topic
	}
	return "topic " + topic
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
