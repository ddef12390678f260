package controllers

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// resetStep is what an OffsetReset's reconcile does next (planReset).
type resetStep int

const (
	// resetDone: the reset finished (Complete or Failed); nothing is read or written again.
	resetDone resetStep = iota
	// resetWaitMembers: the group has members and whenMembersPresent is Wait: re-check later.
	resetWaitMembers
	// resetFailMembers: the group has members and whenMembersPresent is Fail: end as Failed.
	resetFailMembers
	// resetResolve: resolve the target to absolute offsets and record them in status before
	// anything is applied.
	resetResolve
	// resetApply: apply the offsets already recorded in status (never resolved again, so a
	// restarted manager applies exactly what was recorded).
	resetApply
)

// planReset decides an OffsetReset's next step from its status and the member count just
// observed (members < 0: not observed yet, only a finished reset can be decided). Pure.
func planReset(st *kqv1.OffsetResetStatus, policy kqv1.MembersPolicy, members int32) resetStep {
	switch {
	case st.Finished():
		return resetDone
	case members > 0 && policy == kqv1.MembersPolicyFail:
		return resetFailMembers
	case members > 0:
		return resetWaitMembers
	case len(st.Partitions) == 0:
		return resetResolve
	default:
		return resetApply
	}
}

// resetQuery is the ListOffsets query of spec, resolved at now (byDuration counts back from
// it), and the timestamp it stands for (zero for earliest and latest). Pure.
func resetQuery(spec kqv1.OffsetResetSpec, now time.Time) (kafka.OffsetQuery, time.Time) {
	switch {
	case spec.ToEarliest != nil:
		return kafka.OffsetQuery{Earliest: true}, time.Time{}
	case spec.ToLatest != nil:
		return kafka.OffsetQuery{Latest: true}, time.Time{}
	case spec.ToDatetime != nil:
		return kafka.OffsetQuery{At: spec.ToDatetime.Time}, spec.ToDatetime.Time
	default:
		at := now.Add(-spec.ByDuration.Duration)
		return kafka.OffsetQuery{At: at}, at
	}
}

// recordTargets writes the resolved targets into status, with each partition's start offset
// before (absent where the group held no state), so they are persisted before the apply.
// Pure.
func recordTargets(st *kqv1.OffsetResetStatus, before, targets map[int32]int64, resolvedAt, resolvedTS time.Time) {
	st.Partitions = nil
	for _, p := range slices.Sorted(maps.Keys(targets)) {
		pr := kqv1.PartitionOffsetReset{Partition: p, Target: targets[p]}
		if b, ok := before[p]; ok {
			pr.Before = &b
		}
		st.Partitions = append(st.Partitions, pr)
	}
	t := metav1.NewTime(resolvedAt)
	st.ResolvedAt = &t
	if !resolvedTS.IsZero() {
		ts := metav1.NewTime(resolvedTS)
		st.ResolvedTimestamp = &ts
	}
}

// shows reports whether a share-partition start offset cur, read after an apply of pr may
// have been sent, shows that it took (perhaps with consumers gone on since), so that sending
// it again would move the group back over records acknowledged since (issue 30: a purge
// resumed by a restarted manager rewound 20→10; a replay resumed after consumers passed its
// old position replayed twice). A forward move (a purge, or a partition the group held no
// state for) shows as cur at or past the target; a rewind (a replay) as cur anywhere but
// where the group was when the targets were recorded (before), since only a reset moves a
// start offset back. A target equal to before shows nothing either way. Pure.
func shows(pr kqv1.PartitionOffsetReset, cur int64) bool {
	switch {
	case pr.Before == nil || pr.Target > *pr.Before:
		return cur >= pr.Target
	case pr.Target < *pr.Before:
		return cur != *pr.Before
	}
	return cur == pr.Target
}

// resumeTargets are the recorded targets to apply, given the start offsets read just before.
// While no apply was ever sent (status.applyAttempts 0: the targets were only recorded) every
// target is applied, as asked: Kafka's start offset trails acknowledgements, so it cannot
// say what the group has delivered. Once one was sent (a manager stopped between the apply
// and Complete, or an apply read back without effect), a partition whose offset shows it
// took is left where it is and named in kept ("partition 0 at 20, past its target 10"). Pure.
func resumeTargets(st *kqv1.OffsetResetStatus, current map[int32]int64) (apply map[int32]int64, kept []string) {
	apply = make(map[int32]int64, len(st.Partitions))
	for _, pr := range st.Partitions {
		if cur, ok := current[pr.Partition]; st.ApplyAttempts > 0 && ok && shows(pr, cur) {
			switch {
			case cur > pr.Target:
				kept = append(kept, fmt.Sprintf("partition %d at %d, past its target %d", pr.Partition, cur, pr.Target))
			case cur < pr.Target:
				kept = append(kept, fmt.Sprintf("partition %d at %d, behind its target %d: moved back by another reset since the targets were recorded", pr.Partition, cur, pr.Target))
			}
			continue
		}
		apply[pr.Partition] = pr.Target
	}
	return apply, kept
}

// recordAfter writes the start offsets read back after the apply into status and returns how
// many partitions show their reset (at the target, or consumers past it: shows) and a
// summary of those that do not ("partition 2 at 7, target 5"). A partition the group reports
// no state for has no after. Pure.
func recordAfter(st *kqv1.OffsetResetStatus, after map[int32]int64) (atTarget int, off []string) {
	for i := range st.Partitions {
		pr := &st.Partitions[i]
		a, ok := after[pr.Partition]
		if !ok {
			pr.After = nil
			off = append(off, fmt.Sprintf("partition %d has no state in the group, target %d", pr.Partition, pr.Target))
			continue
		}
		pr.After = &a
		if a == pr.Target || shows(*pr, a) && a >= pr.Target {
			atTarget++
		} else {
			off = append(off, fmt.Sprintf("partition %d at %d, target %d", pr.Partition, a, pr.Target))
		}
	}
	return atTarget, off
}

// maxApplyAttempts bounds the applies of one OffsetReset whose read-back does not show its
// targets with no member present.
const maxApplyAttempts = 3

// readBackStep is what an apply's read-back leads to.
type readBackStep int

const (
	// readBackComplete: every target is read back, or members that joined since may have
	// moved the ones that are not.
	readBackComplete readBackStep = iota
	// readBackRetry: not every target is read back and no member could have moved it: the
	// apply did not take (seen when the group's coordinator stopped right after answering);
	// apply the recorded targets again.
	readBackRetry
	// readBackFail: as readBackRetry, after maxApplyAttempts applies.
	readBackFail
)

// planReadBack decides an apply's read-back: atTarget of total partitions at their target,
// members the group's member count (known false: it could not be read, and members may be
// there), attempts the applies so far including this one. Complete rests on what was read,
// never on the apply's answer alone (issue 30, case 2). Pure.
func planReadBack(atTarget, total int, members int32, known bool, attempts int32) readBackStep {
	switch {
	case atTarget == total:
		return readBackComplete
	case known && members > 0:
		return readBackComplete
	case attempts >= maxApplyAttempts:
		return readBackFail
	}
	return readBackRetry
}

// membersRecheck is how long a reset waiting for an empty group waits before looking again:
// a quarter of the time it has waited so far, between 2s and 1m. Pure.
func membersRecheck(waited time.Duration) time.Duration {
	return min(max(waited/4, 2*time.Second), time.Minute)
}

// membersMessage names the member count and what the reset does about it; sent says an
// apply was sent before (its targets do not all show in the group). Pure.
func membersMessage(group string, members int32, policy kqv1.MembersPolicy, sent bool) string {
	what := "waiting for it to be empty (whenMembersPresent Wait); nothing was applied: stop the consumers, or delete this OffsetReset"
	if policy == kqv1.MembersPolicyFail {
		what = "not applied (whenMembersPresent Fail): stop the consumers and create another OffsetReset"
	}
	if sent {
		what = "waiting for it to be empty (whenMembersPresent Wait) to apply the partitions that do not show the reset: an apply was sent before this manager's restart, and its read-back does not show every target; stop the consumers, or delete this OffsetReset"
		if policy == kqv1.MembersPolicyFail {
			what = "ending (whenMembersPresent Fail): an apply was sent before this manager's restart and its read-back does not show every target, so some partitions may have moved; check them (kafka-share-groups.sh --describe --offsets) before creating another OffsetReset"
		}
	}
	return fmt.Sprintf("share group %s has %d member(s); Kafka alters share-group offsets only while the group is empty (AlterShareGroupOffsets, KIP-932): %s", group, members, what)
}

// describeTargets summarises recorded targets for events and messages: "p0 3→10, p1 -→10".
// Pure.
func describeTargets(st *kqv1.OffsetResetStatus) string {
	parts := make([]string, 0, len(st.Partitions))
	for _, p := range st.Partitions {
		b := "-"
		if p.Before != nil {
			b = fmt.Sprint(*p.Before)
		}
		parts = append(parts, fmt.Sprintf("p%d %s→%d", p.Partition, b, p.Target))
	}
	return strings.Join(parts, ", ")
}
