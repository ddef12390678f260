package controllers

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// slowRedrive builds redriveFixture, writes 300 dead letters and starts a redrive named name
// at 10 records/s, waiting until it moved at least 10; it returns the fixture's names, the
// redrive as last read, and an admin client of the rig's broker.
func (r *testRig) slowRedrive(t *testing.T, name string) (ns, queueTopic, dlqTopic string, dr *kqv1.DeadLetterRedrive, adm *kadm.Client) {
	t.Helper()
	ns, queueTopic, dlqTopic = r.redriveFixture(t)
	ctx := ctxFor(t)
	bs := r.kafka.BootstrapServers()
	var rs []*kgo.Record
	for i := range 300 {
		rs = append(rs, deadLetter(fmt.Sprintf("%s-%d", name, i), i%3, "rejected"))
	}
	produceRecords(t, bs, dlqTopic, rs)
	dr = &kqv1.DeadLetterRedrive{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kqv1.DeadLetterRedriveSpec{
		RouteRef: kqv1.RouteReference{Name: "work-dead"}, RateLimit: ptr.To[int32](10)}}
	if err := r.k8s.Create(ctx, dr); err != nil {
		t.Fatal(err)
	}
	eventually(t, 90*time.Second, func() string {
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(dr), dr); err != nil {
			return err.Error()
		}
		if dr.Status.Moved < 10 {
			return fmt.Sprintf("moved %d, want at least 10 before the test acts", dr.Status.Moved)
		}
		return ""
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(bs...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return ns, queueTopic, dlqTopic, dr, kadm.NewClient(cl)
}

// Regression: a redrive that failed (here: its dead-letter topic deleted while it ran) kept
// its consumer group kqo.redrive.<uid> on the brokers, although a Failed redrive is never
// resumed; only Complete and Cancelled ones deleted it. It must end Failed and leave no group.
func TestRedriveDeadLetterTopicDeletedFailsAndLeavesNoGroup(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ctx := ctxFor(t)
	_, _, dlqTopic, dr, adm := r.slowRedrive(t, "doomed")
	group := redriveID(dr)
	if gs, err := adm.ListGroups(ctx); err != nil || !hasGroup(gs, group) {
		t.Fatalf("while running, group %s not listed (%v)", group, err)
	}
	if _, err := adm.DeleteTopics(ctx, dlqTopic); err != nil {
		t.Fatal(err)
	}
	got := r.waitRedrive(t, client.ObjectKeyFromObject(dr), kqv1.RedriveFailed, 90*time.Second)
	if c := findCondition(got.Status.Conditions, kqv1.ConditionFailed); c == nil || c.Status != metav1.ConditionTrue || c.Reason != kqv1.ReasonRedriveFailed {
		t.Errorf("Failed condition %+v", c)
	}
	t.Logf("failed with: %s", findCondition(got.Status.Conditions, kqv1.ConditionFailed).Message)
	waitGroupGone(t, adm, group, "the redrive failed")
}

func hasGroup(gs kadm.ListedGroups, group string) bool {
	_, ok := gs[group]
	return ok
}

// waitGroupGone waits up to 30 s until ListGroups no longer lists group, gone since what
// happened (for the failure message).
func waitGroupGone(t *testing.T, adm *kadm.Client, group, since string) {
	t.Helper()
	eventually(t, 30*time.Second, func() string {
		gs, err := adm.ListGroups(ctxFor(t))
		if err != nil {
			return err.Error()
		}
		if hasGroup(gs, group) {
			return fmt.Sprintf("group %s still exists after %s", group, since)
		}
		return ""
	})
}

// Regression: a DeadLetterRedrive deleted while it ran stopped its mover but left its
// consumer group kqo.redrive.<uid> on the brokers until Kafka's offset expiry (7 days by
// default). The mover must stop (nothing more reaches the queue's topic) and the group go.
func TestRedriveDeletedWhileRunningStopsAndLeavesNoGroup(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ctx := ctxFor(t)
	_, queueTopic, _, dr, adm := r.slowRedrive(t, "dropped")
	bs := r.kafka.BootstrapServers()
	group := redriveID(dr)
	if err := r.k8s.Delete(ctx, dr); err != nil {
		t.Fatal(err)
	}
	waitGroupGone(t, adm, group, "its DeadLetterRedrive was deleted")
	// The mover stopped: the queue's topic holds the same committed records 5 s apart, fewer
	// than the 300 the redrive would have moved.
	first := len(readCommitted(t, bs, queueTopic, 3*time.Second))
	time.Sleep(5 * time.Second)
	second := len(readCommitted(t, bs, queueTopic, 3*time.Second))
	if first != second || second >= 300 {
		t.Errorf("queue topic records %d then %d after the redrive was deleted: its mover goes on", first, second)
	}
}
