package verify

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// checkQueue checks a ShareQueue's claims against w; it says whether the queue is Ready
// with its topic there, so its usability is to be checked (runJoins).
func (ck *checker) checkQueue(w *world, sq *kqv1.ShareQueue) (join bool) {
	ns, name, st := sq.Namespace, sq.Name, &sq.Status
	conds := st.Conditions
	claim := func(field, says, has string, holds bool) { ck.claim(KindShareQueue, ns, name, field, says, has, holds) }
	topicOK := false
	if isTrue(conds, kqv1.ConditionTopicReady) || isTrue(conds, kqv1.ConditionReady) {
		cond := "conditions[TopicReady]"
		if !isTrue(conds, kqv1.ConditionTopicReady) {
			cond = "conditions[Ready]"
		}
		t, missing, why := w.topic(st.TopicName)
		switch {
		case st.TopicName == "":
			claim(cond, "True (a topic exists)", "no topic named in status.topicName", false)
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
	switch {
	case !isTrue(conds, kqv1.ConditionGroupConfigured):
	case st.GroupID == "" || st.Effective == nil:
		claim("conditions[GroupConfigured]", "True (a share group is configured)", fmt.Sprintf("status.groupID %q, status.effective %s: nothing to compare", st.GroupID, map[bool]string{true: "absent", false: "set"}[st.Effective == nil]), false)
	default:
		ck.checkGroupConfigs(w, sq)
	}
	// status.deadLetter is vouched for by the queue's reconcile: a held-back (Paused) queue,
	// whose conditions the operator sets to Unknown, keeps an old copy and claims nothing.
	if dl := st.DeadLetter; dl != nil && dl.Active && (isTrue(conds, kqv1.ConditionGroupConfigured) || isTrue(conds, kqv1.ConditionReady)) {
		ck.checkQueueDeadLetter(w, sq)
	}
	if depthClaims(sq) {
		ck.checkDepth(w, sq)
	}
	if isTrue(conds, kqv1.ConditionReady) && st.GroupID == "" {
		claim("conditions[Ready]", "True (the queue's share group is usable)", "no group named in status.groupId", false)
	}
	return isTrue(conds, kqv1.ConditionReady) && !ck.opts.SkipJoin && topicOK && st.GroupID != ""
}

// runJoins checks the usability of queues on one cluster, Options.Parallel at a time. Once a
// join or receive gets no answer from Kafka (a broker gone mid-check), the joins not yet
// started are not tried — each would wait its full JoinWait for a cluster that is not
// answering — and their Ready claims are listed unverifiable, naming the first failure.
func (ck *checker) runJoins(ctx context.Context, cl *kafka.Client, queues []*kqv1.ShareQueue) {
	var silent atomic.Pointer[string]
	sem := make(chan struct{}, ck.opts.Parallel)
	var wg sync.WaitGroup
	for _, sq := range queues {
		sem <- struct{}{}
		if why := silent.Load(); why != nil {
			<-sem
			ck.unverifiable(KindShareQueue, sq.Namespace, sq.Name, "conditions[Ready]: join not tried: %s", *why)
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if why := ck.checkUsable(ctx, cl, sq); why != "" {
				why = fmt.Sprintf("Kafka did not answer the check of ShareQueue %s/%s: %s", sq.Namespace, sq.Name, why)
				silent.CompareAndSwap(nil, &why)
			}
		}()
	}
	wg.Wait()
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
		case kqv1.SourceClamped:
			ck.checkClamped(w, sq, f.path, v, entry, present, overridden)
		case kqv1.SourceGroupOverride:
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
			says, has, holds := v.Config+" not overridden (BrokerDefault)", v.Config+" not overridden", !overridden
			if overridden {
				has = v.Config + "=" + entry.Value + " set on the group"
			} else if want, err := wantConfig(st.Effective, f.path, v); present && v.Value != "" && err == nil {
				// The value shown is the brokers' default: the group's describe gives it.
				says = fmt.Sprintf("%s=%s, the brokers' default (BrokerDefault)", v.Config, want)
				has = fmt.Sprintf("%s=%s, not overridden", v.Config, entry.Value)
				holds = entry.Value == want
			}
			ck.claim(KindShareQueue, ns, name, f.path, says, has, holds)
		}
	}
}

// checkClamped checks an effective value with source Clamped: the value the brokers apply is
// the group's config (its override, else the brokers' default) clamped to the brokers'
// group.share.min.<x> / group.share.max.<x> bounds (KIP-1240; <x> is the group config
// without its "share." prefix). The brokers clamp at run time, so the stored override may
// lie outside the bounds — an override written while the bounds allowed it and then narrowed
// by a broker restart, which the operator under boundsPolicy Reject reports as Clamped and
// does not rewrite — and the claim holds when the clamp of it is the value shown. The bounds
// are read from every live broker; brokers that disagree (a rolling restart under way) make
// the claim unverifiable.
func (ck *checker) checkClamped(w *world, sq *kqv1.ShareQueue, path string, v *kqv1.EffectiveValue, entry kafka.ConfigEntry, present, overridden bool) {
	ns, name := sq.Namespace, sq.Name
	want, err := wantConfig(sq.Status.Effective, path, v)
	if err != nil {
		ck.unverifiable(KindShareQueue, ns, name, "%v", err)
		return
	}
	says := fmt.Sprintf("%s=%s (%s)", v.Config, want, v.Source)
	if !present {
		ck.unverifiable(KindShareQueue, ns, name, "%s: the group's describe does not report %s", path, v.Config)
		return
	}
	live, err := strconv.ParseInt(entry.Value, 10, 64)
	if err != nil {
		ck.unverifiable(KindShareQueue, ns, name, "%s: %s=%q is not a number", path, v.Config, entry.Value)
		return
	}
	lo, hi, why := w.bounds(strings.TrimPrefix(v.Config, "share."))
	if why != "" {
		ck.unverifiable(KindShareQueue, ns, name, "%s: %s", path, why)
		return
	}
	applied := live
	if lo != nil && applied < *lo {
		applied = *lo
	}
	if hi != nil && applied > *hi {
		applied = *hi
	}
	stored := "the brokers' default " + entry.Value
	if overridden {
		stored = "override " + entry.Value
	}
	has := fmt.Sprintf("%s=%d applied (%s, bounds %s..%s)", v.Config, applied, stored, boundText(lo), boundText(hi))
	ck.claim(KindShareQueue, ns, name, path, says, has, strconv.FormatInt(applied, 10) == want)
}

func boundText(b *int64) string {
	if b == nil {
		return "none"
	}
	return strconv.FormatInt(*b, 10)
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
// fetches once and releases what it got). It returns why when Kafka did not answer ("" when
// the claim was compared).
func (ck *checker) checkUsable(ctx context.Context, cl *kafka.Client, sq *kqv1.ShareQueue) (unanswered string) {
	ns, name, st := sq.Namespace, sq.Name, &sq.Status
	says := fmt.Sprintf("True (share group %s usable for topic %s)", st.GroupID, st.TopicName)
	j, err := cl.JoinShareGroup(ctx, st.GroupID, st.TopicName, ck.opts.JoinWait)
	if err != nil && !answered(err) {
		ck.unverifiable(KindShareQueue, ns, name, "conditions[Ready]: Kafka did not answer the join: %v", err)
		return err.Error()
	}
	if err != nil {
		ck.claim(KindShareQueue, ns, name, "conditions[Ready]", says, "join failed: "+err.Error(), false)
		return ""
	}
	has := fmt.Sprintf("joined, %d partitions assigned", j.Partitions)
	if !ck.opts.Receive {
		ck.claim(KindShareQueue, ns, name, "conditions[Ready]", says, has, true)
		return ""
	}
	n, err := cl.ReceiveOnce(ctx, st.GroupID, st.TopicName, ck.opts.JoinWait)
	if err != nil && !answered(err) {
		ck.unverifiable(KindShareQueue, ns, name, "conditions[Ready]: %s; Kafka did not answer the receive: %v", has, err)
		return err.Error()
	}
	if err != nil {
		ck.claim(KindShareQueue, ns, name, "conditions[Ready]", says, has+"; receive failed: "+err.Error(), false)
		return ""
	}
	ck.claim(KindShareQueue, ns, name, "conditions[Ready]", says, fmt.Sprintf("%s; received and released %d records", has, n), true)
	return ""
}

// answered: a failure Kafka decided contradicts a Ready claim; one where Kafka did not answer
// (kafka.Answered is false) makes it unverifiable, as a cluster that does not answer does.
func answered(err error) bool { return kafka.Answered(err) }

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
			ck.claim(KindDeadLetterRoute, ns, name, cond, "True (a dead-letter topic exists)", "no topic named in status.topicName", false)
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
	// The republisher renews the acquisition lock while the application holds a record: the
	// route is active only while the brokers take renew acknowledgements (KIP-1222; brokers
	// before 4.3 have no such config and always take them).
	const renew = "share.renew.acknowledge.enable"
	if e, ok := live[renew]; ok {
		ck.claim(KindDeadLetterRoute, ns, name, "conditions[RouteActive]", fmt.Sprintf("True (Republisher: group %s takes renew acknowledgements)", g),
			fmt.Sprintf("group %s %s=%s", g, renew, e.Value), !strings.EqualFold(strings.TrimSpace(e.Value), "false"))
	}
}

func existence(topic string, missing bool) string {
	if missing {
		return "no topic " + topic
	}
	return "topic " + topic
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }

// checkDepth checks status.depth.oldestRecordTime of a queue whose status.depth claims
// waiting records: it is present, and not later than the oldest waiting record Kafka has now
// (to the second). Kafka's oldest only gets later as records are acknowledged and new ones
// arrive, so an honest status, however old, is never later; a status that dated the wrong
// partition, or none, is (issue 30: absent while 1,000 records waited, because the poller
// dated one partition per broker). Not judged while Kafka has no backlog or cannot date it.
func (ck *checker) checkDepth(w *world, sq *kqv1.ShareQueue) {
	st := sq.Status.Depth
	if w.depthE != nil {
		ck.unverifiable(KindShareQueue, sq.Namespace, sq.Name, "status.depth: the depth could not be read: %v", w.depthE)
		return
	}
	d, ok := w.depth[sq.Status.GroupID]
	if !ok || d.Err != nil || d.Partial() || len(d.Undated) > 0 || d.Backlog == 0 || d.Oldest.IsZero() {
		return
	}
	says := "absent"
	if st.OldestRecordTime != nil {
		says = st.OldestRecordTime.UTC().Format(time.RFC3339)
	}
	oldest := d.Oldest.Truncate(time.Second)
	holds := st.OldestRecordTime != nil && !st.OldestRecordTime.Time.After(oldest.Add(time.Second))
	ck.claim(KindShareQueue, sq.Namespace, sq.Name, "status.depth.oldestRecordTime",
		fmt.Sprintf("%s (backlog %d at %s)", says, *st.Backlog, st.ObservedAt.UTC().Format(time.RFC3339)),
		fmt.Sprintf("the oldest waiting record at %s (backlog %d now)", oldest.UTC().Format(time.RFC3339), d.Backlog), holds)
}
