package controllers

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// depthStatusDue writes a queue's status.depth when it has none, when it changed and the
// status interval has passed, and never when unchanged, however long ago; never more than the
// budget per round, longest-waiting first.
func TestDepthStatusDue(t *testing.T) {
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	const interval = 5 * time.Minute
	written := func(ago time.Duration, backlog int64) *kqv1.ShareQueue {
		return &kqv1.ShareQueue{Status: kqv1.ShareQueueStatus{Depth: &kqv1.QueueDepthStatus{
			ObservedAt: metav1.NewTime(now.Add(-ago)), Backlog: ptr.To(backlog), UnreadPartitions: nil}}}
	}
	read := func(sq *kqv1.ShareQueue, backlog int64) queueDepthOf {
		return queueDepthOf{sq: sq, depth: kafka.QueueDepth{Backlog: backlog}}
	}
	last := func(sq *kqv1.ShareQueue) time.Time {
		if sq.Status.Depth == nil {
			return time.Time{}
		}
		return sq.Status.Depth.ObservedAt.Time
	}
	round := []queueDepthOf{
		0: read(&kqv1.ShareQueue{}, 5),                                            // no status.depth yet: due
		1: read(written(time.Minute, 5), 6),                                       // changed, but written a minute ago: not due
		2: read(written(6*time.Minute, 5), 6),                                     // changed, interval passed: due
		3: read(written(6*time.Minute, 5), 5),                                     // unchanged: not due
		4: read(written(31*time.Minute, 5), 5),                                    // unchanged for hours: not due (idle queues cost no writes)
		5: {sq: written(6*time.Minute, 5), err: errors.New("topic gone").Error()}, // now unreadable: changed, due
	}
	got := depthStatusDue(round, last, now, interval, 10)
	want := []int{0, 2, 5} // zero time first, then the oldest writes
	if len(got) != len(want) {
		t.Fatalf("due %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("due %v, want %v", got, want)
		}
	}
	if got := depthStatusDue(round, last, now, interval, 2); len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Errorf("budget 2: due %v, want [0 2]", got)
	}
}

// An unreadable queue's status.depth carries the error and no figures (never old ones).
func TestDepthStatusOfUnreadableQueue(t *testing.T) {
	st := depthStatusOf(queueDepthOf{sq: &kqv1.ShareQueue{}, err: "topic t does not exist", dead: ptr.To(int64(3))}, time.Now())
	if st.Backlog != nil || st.OldestRecordTime != nil || st.Error == "" || st.DeadLetters == nil || *st.DeadLetters != 3 {
		t.Errorf("status.depth %+v", st)
	}
	oldest := time.Now().Add(-time.Minute)
	st = depthStatusOf(queueDepthOf{sq: &kqv1.ShareQueue{}, depth: kafka.QueueDepth{Backlog: 4, Unread: []int32{2}, Oldest: oldest}}, time.Now())
	if st.Backlog == nil || *st.Backlog != 4 || len(st.UnreadPartitions) != 1 || st.OldestRecordTime == nil || st.OldestRecordTime.Unix() != oldest.Unix() {
		t.Errorf("status.depth %+v", st)
	}
}

func TestValidateDepthIntervals(t *testing.T) {
	for _, c := range []struct {
		interval, status time.Duration
		want             string // substring of the error; "" for none
	}{
		{30 * time.Second, 5 * time.Minute, ""},
		{0, 0, ""},
		{time.Minute, 5 * time.Minute, "--depth-interval 1m0s: must be between 0 (off) and 30s"},
		{-time.Second, 5 * time.Minute, "--depth-interval -1s"},
		{30 * time.Second, 10 * time.Second, "--depth-status-interval 10s: must be 0 (status.depth unwritten) or at least --depth-interval (30s)"},
	} {
		err := ValidateDepthIntervals(c.interval, c.status)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s/%s: %v", c.interval, c.status, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s/%s: %v, want %q", c.interval, c.status, err, c.want)
		}
	}
}
