package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// OffsetResetReconciler acts on OffsetReset objects: once per object it resolves the
// requested target to absolute per-partition offsets (ListOffsets), records them in status,
// applies exactly those (AlterShareGroupOffsets, only while the share group is empty) and
// reads them back (DescribeShareGroupOffsets). A finished reset is never acted on again, and
// recorded targets are never resolved again, so a manager restarted at any point applies at
// most the offsets it recorded.
type OffsetResetReconciler struct {
	client.Client
	APIReader    client.Reader
	Pool         *kafka.Pool
	Recorder     events.EventRecorder
	KafkaTimeout time.Duration
	// Now is the clock (time.Now when nil); byDuration and the backoff read it.
	Now func() time.Time
}

// +kubebuilder:rbac:groups=kafkaqueues.io,resources=offsetresets,verbs=get;list;watch
// +kubebuilder:rbac:groups=kafkaqueues.io,resources=offsetresets/status,verbs=get;update;patch

func (r *OffsetResetReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// resetScope is one OffsetReset reconcile.
type resetScope struct {
	r        *OffsetResetReconciler
	or       *kqv1.OffsetReset
	original *kqv1.OffsetReset
	sq       kqv1.ShareQueue
	kc       kqv1.KafkaCluster
	cl       *kafka.Client
	requeue  time.Duration
}

// Reconcile acts on one OffsetReset (see OffsetResetReconciler).
func (r *OffsetResetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	var or kqv1.OffsetReset
	if err := r.Get(ctx, req.NamespacedName, &or); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if or.Status.Finished() {
		// A finished reset is never applied again, whatever happened since.
		return ctrl.Result{}, nil
	}
	s := &resetScope{r: r, or: &or, original: or.DeepCopy()}
	st := &or.Status
	st.ObservedGeneration = or.Generation
	st.Target = or.Spec.TargetString()
	if st.Phase == "" {
		st.Phase = kqv1.OffsetResetPending
	}
	defer func() {
		if perr := s.patch(ctx); perr != nil {
			err = errors.Join(err, perr)
		}
		if err == nil {
			res = ctrl.Result{RequeueAfter: s.requeue}
		}
	}()
	err = s.run(ctx)
	var w *waitError
	if errors.As(err, &w) {
		s.waiting(w.Reason, w.Message)
		if w.After > 0 {
			s.requeue = w.After
		}
		return ctrl.Result{}, w.Cause
	}
	return ctrl.Result{}, err
}

// patch writes status when it changed, and makes the written object the base of the next.
func (s *resetScope) patch(ctx context.Context) error {
	if equality.Semantic.DeepEqual(s.original.Status, s.or.Status) {
		return nil
	}
	if err := s.r.Status().Patch(ctx, s.or, client.MergeFrom(s.original)); err != nil {
		return client.IgnoreNotFound(err)
	}
	s.original = s.or.DeepCopy()
	return nil
}

// run is the reset's steps: queue and cluster, members, resolve and record, apply, read back.
func (s *resetScope) run(ctx context.Context) error {
	or := s.or
	if err := s.r.Get(ctx, types.NamespacedName{Namespace: or.Namespace, Name: or.Spec.QueueRef.Name}, &s.sq); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		if len(or.Status.Partitions) > 0 {
			// Targets were recorded for the queue's topic and group; with the queue gone they
			// are not applied to anything (a queue created again under the name may hold
			// another topic), and waiting would never end.
			return s.fail(kqv1.ReasonQueueNotFound, fmt.Sprintf("ShareQueue %s/%s (spec.queueRef.name) was deleted after the targets for topic %s and group %s were recorded (%s); nothing more is applied",
				or.Namespace, or.Spec.QueueRef.Name, or.Status.Topic, or.Status.GroupID, describeTargets(&or.Status)))
		}
		return &waitError{Reason: kqv1.ReasonQueueNotFound, After: 10 * time.Second,
			Message: fmt.Sprintf("ShareQueue %s/%s (spec.queueRef.name) does not exist", or.Namespace, or.Spec.QueueRef.Name)}
	}
	if or.Status.Topic == "" {
		// The topic and group are fixed once, with the targets.
		or.Status.Topic, or.Status.GroupID = s.sq.KafkaTopicName(), s.sq.KafkaGroupID()
	}
	if err := s.r.Get(ctx, types.NamespacedName{Namespace: or.Namespace, Name: s.sq.Spec.ClusterRef.Name}, &s.kc); err != nil {
		if !apierrors.IsNotFound(err) {
			return err
		}
		return &waitError{Reason: kqv1.ReasonClusterNotFound, After: 10 * time.Second,
			Message: fmt.Sprintf("KafkaCluster %s/%s of ShareQueue %s does not exist", or.Namespace, s.sq.Spec.ClusterRef.Name, s.sq.Name)}
	}
	if c := findCondition(s.kc.Status.Conditions, kqv1.ConditionConnected); c == nil || c.Status != metav1.ConditionTrue {
		return &waitError{Reason: kqv1.ReasonClusterNotReady, After: 10 * time.Second, Message: fmt.Sprintf("KafkaCluster %s is not connected", s.kc.Name)}
	}
	if v := s.kc.Status.ShareVersion; v < 1 {
		return &waitError{Reason: kqv1.ReasonShareGroupsDisabled, After: 15 * time.Second,
			Message: fmt.Sprintf("share groups are disabled on KafkaCluster %s (share.version=%d): AlterShareGroupOffsets needs share.version >= 1 (KIP-932); finalize it (kafka-features.sh upgrade --feature share.version=1, or the KafkaCluster's featurePolicy Finalize)", s.kc.Name, v)}
	}
	// Where the brokers cannot hold share-group state, an applied reset cannot take effect
	// (issue 30, cases 1 and 2): wait, naming the cluster's problem and its fix.
	if pre := sharePrecondition(s.kc.Status); pre.Status != metav1.ConditionTrue {
		c := findCondition(s.kc.Status.Conditions, kqv1.ConditionShareStateReplicated)
		return &waitError{Reason: pre.Reason, After: 30 * time.Second,
			Message: fmt.Sprintf("nothing applied: the brokers cannot hold share-group state, so moved offsets would not take effect; KafkaCluster %s reports %s", s.kc.Name, c.Message)}
	}
	// Only a queue that owns its topic and group may have its group's offsets moved.
	switch pending, reason, conflict := queueOwnership(&s.sq); {
	case pending:
		return &waitError{Reason: kqv1.ReasonQueueNotReady, After: 5 * time.Second,
			Message: fmt.Sprintf("ShareQueue %s has not yet been checked for ownership of its topic and group at generation %d", s.sq.Name, s.sq.Generation)}
	case conflict != "":
		return &waitError{Reason: reason, After: 30 * time.Second,
			Message: fmt.Sprintf("ShareQueue %s does not own its topic or group, so its offsets are not reset: %s", s.sq.Name, conflict)}
	}
	timeout := s.r.KafkaTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	kctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := pooledClientFor(kctx, s.r.APIReader, s.r.Pool, &s.kc)
	if err != nil {
		return &waitError{Reason: kqv1.ReasonClusterNotReady, Message: fmt.Sprintf("KafkaCluster %s: %v", s.kc.Name, err), Cause: err}
	}
	s.cl = cl
	group, topic := or.Status.GroupID, or.Status.Topic

	gs, err := cl.DescribeShareGroups(kctx, group)
	if err == nil {
		err = gs[group].Err
	}
	if err != nil {
		return s.kafkaWait(fmt.Sprintf("describing share group %s", group), err)
	}
	members := gs[group].Members
	or.Status.Members = &members
	if members > 0 && or.Status.ApplyAttempts > 0 && !or.Status.Finished() {
		// An apply was sent before (a manager stopped before Complete) and consumers have
		// joined since: what Kafka shows decides, not the member count.
		current, err := cl.ShareStartOffsets(kctx, group, topic)
		if err != nil {
			return s.kafkaWait(fmt.Sprintf("reading the start offsets of share group %s", group), err)
		}
		if targets, kept := resumeTargets(&or.Status, current); len(targets) == 0 {
			return s.readBack(kctx, group, topic, current, kept)
		}
	}
	switch planReset(&or.Status, or.Spec.WhenMembersPresent, members) {
	case resetDone:
		return nil
	case resetFailMembers:
		return s.fail(kqv1.ReasonMembersPresent, membersMessage(group, members, kqv1.MembersPolicyFail, or.Status.ApplyAttempts > 0))
	case resetWaitMembers:
		return s.waitMembers(group, members)
	case resetResolve:
		if err := s.resolve(ctx, kctx, group, topic); err != nil {
			return err
		}
	}
	return s.apply(ctx, kctx, group, topic)
}

// resolve turns the target into absolute offsets (one batched ListOffsets round) and
// records them, with the group's start offsets before, in status — written to the apiserver
// before anything is applied.
func (s *resetScope) resolve(ctx, kctx context.Context, group, topic string) error {
	st := &s.or.Status
	now := s.r.now()
	q, at := resetQuery(s.or.Spec, now)
	id, err := s.topicID(kctx, topic)
	if err != nil {
		return err
	}
	targets, err := s.cl.ListPartitionOffsets(kctx, topic, q)
	if err != nil {
		return s.kafkaWait(fmt.Sprintf("listing the offsets of topic %s", topic), err)
	}
	before, err := s.cl.ShareStartOffsets(kctx, group, topic)
	if err != nil {
		return s.kafkaWait(fmt.Sprintf("reading the start offsets of share group %s", group), err)
	}
	recordTargets(st, before, targets, now, at)
	st.TopicID = id
	st.Phase = kqv1.OffsetResetApplying
	setCondition(&st.Conditions, kqv1.ConditionComplete, condInput{metav1.ConditionFalse, kqv1.ReasonOffsetsApplying,
		fmt.Sprintf("resolved %s on topic %s to %s; applying", st.Target, topic, describeTargets(st))}, s.or.Generation)
	// Persisted before the apply: a manager that stops after this point applies exactly these.
	if err := s.r.Status().Patch(ctx, s.or, client.MergeFrom(s.original)); err != nil {
		return err
	}
	s.original = s.or.DeepCopy()
	return nil
}

// apply sends the recorded targets and reads them back.
func (s *resetScope) apply(ctx, kctx context.Context, group, topic string) error {
	st := &s.or.Status
	if st.TopicID != "" {
		// The targets are offsets in the log they were resolved on.
		id, err := s.topicID(kctx, topic)
		if err != nil {
			return err
		}
		if id != st.TopicID {
			return s.fail(kqv1.ReasonTopicIDChanged, fmt.Sprintf("topic %s was deleted and made again (id %s, the targets %s were resolved on id %s): the recorded offsets are not applied to the new log; create another OffsetReset",
				topic, id, describeTargets(st), st.TopicID))
		}
	}
	// Where an apply was sent before (a manager stopped before Complete), read where the
	// group is now: a partition that shows the reset is not moved again.
	current, err := s.cl.ShareStartOffsets(kctx, group, topic)
	if err != nil {
		return s.kafkaWait(fmt.Sprintf("reading the start offsets of share group %s before applying", group), err)
	}
	targets, kept := resumeTargets(st, current)
	if len(targets) == 0 {
		return s.readBack(kctx, group, topic, current, kept)
	}
	// Recorded before it is sent: a manager that stops from here on knows an apply may have
	// taken (resumeTargets).
	st.ApplyAttempts++
	if err := s.r.Status().Patch(ctx, s.or, client.MergeFrom(s.original)); err != nil {
		return err
	}
	s.original = s.or.DeepCopy()
	err = s.cl.AlterShareStartOffsets(kctx, group, topic, targets)
	switch {
	case errors.Is(err, kafka.ErrGroupNotEmpty):
		// A member joined since the check; the brokers applied nothing.
		st.ApplyAttempts--
		gs, derr := s.cl.DescribeShareGroups(kctx, group)
		members := int32(1)
		if derr == nil && gs[group].Members > 0 {
			members = gs[group].Members
		}
		st.Members = &members
		if s.or.Spec.WhenMembersPresent == kqv1.MembersPolicyFail {
			return s.fail(kqv1.ReasonMembersPresent, membersMessage(group, members, kqv1.MembersPolicyFail, st.ApplyAttempts > 0))
		}
		return s.waitMembers(group, members)
	case err != nil && kafka.IsRetriable(err):
		return s.kafkaWait(fmt.Sprintf("altering the start offsets of share group %s", group), err)
	case err != nil:
		return s.fail(kqv1.ReasonKafkaRejected, fmt.Sprintf("the brokers refused the offsets %s for share group %s on topic %s: %v", describeTargets(st), group, topic, err))
	}
	if afterResetApply != nil {
		if err := afterResetApply(kctx, s.or); err != nil {
			return err
		}
	}
	after, err := s.cl.ShareStartOffsets(kctx, group, topic)
	if err != nil {
		return s.kafkaWait(fmt.Sprintf("reading back the start offsets of share group %s (the offsets were applied)", group), err)
	}
	return s.readBack(kctx, group, topic, after, kept)
}

// readBack records the start offsets read after an apply (or instead of one, where every
// partition already showed the reset: kept names those past their target) and ends the reset
// Complete, applies again, or fails (planReadBack).
func (s *resetScope) readBack(kctx context.Context, group, topic string, after map[int32]int64, kept []string) error {
	st := &s.or.Status
	atTarget, off := recordAfter(st, after)
	msg := fmt.Sprintf("share group %s on topic %s: %s applied (%s); read back: %d of %d partition(s) at their target", group, topic, st.Target, describeTargets(st), atTarget, len(st.Partitions))
	if len(kept) > 0 {
		msg += fmt.Sprintf(" or past it (left where the group is now, not moved back: %s)", strings.Join(kept, "; "))
	}
	var members int32
	known := true
	if st.Members != nil {
		members = *st.Members
	}
	if atTarget < len(st.Partitions) {
		gs, derr := s.cl.DescribeShareGroups(kctx, group)
		if known = derr == nil; known {
			members = gs[group].Members
			st.Members = &members
		}
	}
	switch planReadBack(atTarget, len(st.Partitions), members, known, st.ApplyAttempts) {
	case readBackRetry:
		return &waitError{Reason: kqv1.ReasonOffsetsApplying, After: 2 * time.Second,
			Message: fmt.Sprintf("%s (%v) and the group has no member that could have moved them: the apply did not take; applying again (attempt %d of %d)", msg, off, st.ApplyAttempts+1, maxApplyAttempts)}
	case readBackFail:
		return s.fail(kqv1.ReasonReadBackMismatch, fmt.Sprintf("%s (%v) after %d applies the brokers answered without error, with no member in the group: the offsets did not take; create another OffsetReset", msg, off, st.ApplyAttempts))
	}
	if len(off) > 0 {
		msg += fmt.Sprintf(" (%v: consumers that joined since may already have moved them)", off)
	}
	now := metav1.NewTime(s.r.now())
	st.CompletionTime = &now
	st.Phase = kqv1.OffsetResetComplete
	setCondition(&st.Conditions, kqv1.ConditionComplete, condInput{metav1.ConditionTrue, kqv1.ReasonOffsetsReset, msg}, s.or.Generation)
	setCondition(&st.Conditions, kqv1.ConditionFailed, condInput{metav1.ConditionFalse, kqv1.ReasonOffsetsReset, "applied"}, s.or.Generation)
	emitEvent(s.r.Recorder, s.or, corev1.EventTypeNormal, kqv1.ReasonOffsetsReset, "ResetOffsets", msg)
	return nil
}

// topicID reads topic's id from the brokers' metadata.
func (s *resetScope) topicID(kctx context.Context, topic string) (string, error) {
	ts, err := s.cl.DescribeTopics(kctx, topic)
	if err == nil {
		err = ts[topic].Err
	}
	if err != nil {
		return "", s.kafkaWait(fmt.Sprintf("describing topic %s", topic), err)
	}
	return ts[topic].ID, nil
}

// afterResetApply, set only by this package's tests before their manager starts, runs
// between an apply the brokers answered without error and its read-back: there a test does
// to the real brokers what a coordinator that fails at that moment does (the offsets do not
// take), which no timing of a broker stop reproduces reliably. An error it returns ends the
// reconcile there, with the targets recorded and nothing more written: what a manager
// stopped between the apply and Complete leaves for the next one.
var afterResetApply func(ctx context.Context, or *kqv1.OffsetReset) error

// waitMembers reports a reset waiting for an empty group and schedules the next look.
func (s *resetScope) waitMembers(group string, members int32) error {
	waited := time.Duration(0)
	if c := findCondition(s.or.Status.Conditions, kqv1.ConditionComplete); c != nil && c.Reason == kqv1.ReasonMembersPresent {
		waited = s.r.now().Sub(c.LastTransitionTime.Time)
	}
	if waited == 0 {
		emitEvent(s.r.Recorder, s.or, corev1.EventTypeNormal, kqv1.ReasonMembersPresent, "ResetOffsets", membersMessage(group, members, kqv1.MembersPolicyWait, s.or.Status.ApplyAttempts > 0))
	}
	return &waitError{Reason: kqv1.ReasonMembersPresent, Message: membersMessage(group, members, kqv1.MembersPolicyWait, s.or.Status.ApplyAttempts > 0), After: membersRecheck(waited)}
}

// waiting sets Complete=False with reason and phase Waiting (Applying once targets are
// recorded).
func (s *resetScope) waiting(reason, msg string) {
	st := &s.or.Status
	st.Phase = kqv1.OffsetResetWaiting
	if len(st.Partitions) > 0 {
		st.Phase = kqv1.OffsetResetApplying
	}
	prev := findCondition(st.Conditions, kqv1.ConditionComplete)
	if prev != nil && prev.Status == metav1.ConditionFalse && prev.Reason == reason {
		// Keep LastTransitionTime as when this wait began (the members backoff reads it):
		// meta.SetStatusCondition moves it only on a status change, so set the message only.
		prev.Message, prev.ObservedGeneration = msg, s.or.Generation
		return
	}
	// A new reason: restart the clock by removing the old condition first.
	meta.RemoveStatusCondition(&st.Conditions, kqv1.ConditionComplete)
	setCondition(&st.Conditions, kqv1.ConditionComplete, condInput{metav1.ConditionFalse, reason, msg}, s.or.Generation)
}

// fail ends the reset as Failed: nothing more is applied.
func (s *resetScope) fail(reason, msg string) error {
	st := &s.or.Status
	now := metav1.NewTime(s.r.now())
	st.CompletionTime = &now
	st.Phase = kqv1.OffsetResetFailed
	setCondition(&st.Conditions, kqv1.ConditionFailed, condInput{metav1.ConditionTrue, reason, msg}, s.or.Generation)
	setCondition(&st.Conditions, kqv1.ConditionComplete, condInput{metav1.ConditionFalse, reason, msg}, s.or.Generation)
	emitEvent(s.r.Recorder, s.or, corev1.EventTypeWarning, reason, "ResetOffsets", msg)
	return nil
}

// kafkaWait is a Kafka failure to retry with backoff: Complete=False/KafkaUnavailable.
func (s *resetScope) kafkaWait(what string, err error) error {
	return &waitError{Reason: kqv1.ReasonKafkaUnavailable, Message: fmt.Sprintf("%s: %v", what, errMessage(err)), Cause: err}
}

// SetupWithManager registers the reconciler. Only spec changes and creation wake it (its
// own status writes do not); waits requeue themselves.
func (r *OffsetResetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&kqv1.OffsetReset{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("offsetreset").
		// A reconcile can wait on the brokers up to --kafka-timeout; one reset whose cluster
		// is slow must not hold every other namespace's resets behind it.
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}
