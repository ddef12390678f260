package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// Regression: the depth poller read every queue with a topic and group in status, including
// one in Conflict over its group: a second ShareQueue naming another queue's topic and group
// exported the first one's backlog as its own (and wrote it to its status.depth), so a KEDA
// ScaledObject on it scaled consumers into a group that is not its. Such a queue's series
// must be absent and its status.depth must say why, while the owner's are exported.
func TestDepthOfAQueueInConflictIsNotRead(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	owner := r.newDepthQueue(t, ns, "owner", "earliest")
	r.produceTo(t, owner.Status.TopicName, 50)
	squatter := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "squatter"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Name: owner.Status.TopicName, Partitions: 3},
		GroupID: owner.Status.GroupID, Delivery: kqv1.DeliverySpec{AutoOffsetReset: ptr.To("earliest")}}}
	if err := r.k8s.Create(ctx, squatter); err != nil {
		t.Fatal(err)
	}
	squatter = r.waitQueue(t, squatter, kqv1.ConditionConflict, metav1.ConditionTrue)
	if _, _, conflict := queueOwnership(squatter); conflict == "" {
		t.Fatalf("squatter's conditions %+v do not say it lacks its group", squatter.Status.Conditions)
	}
	eventually(t, 30*time.Second, func() string {
		if v, _ := metricValue("kafkaqueues_queue_backlog_records", queueSeries(owner)); v != 50 {
			return fmt.Sprintf("owner's backlog %v, want 50", v)
		}
		return ""
	})
	// Three more rounds: the squatter's series never appear.
	for end := time.Now().Add(3 * testDepthInterval); time.Now().Before(end); time.Sleep(time.Second) {
		if name, v, ok := exportedDepthSeries(squatter, "kafkaqueues_queue_depth_last_read_timestamp_seconds", "kafkaqueues_queue_depth_unread_since_timestamp_seconds"); ok {
			t.Fatalf("%s exported (%v) for a queue in Conflict over its group", name, v)
		}
	}
	eventually(t, 2*testDepthStatusInterval+testDepthInterval, func() string {
		var got kqv1.ShareQueue
		if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(squatter), &got); err != nil {
			return err.Error()
		}
		if d := got.Status.Depth; d == nil || d.Backlog != nil || !strings.Contains(d.Error, "does not own its topic or group") {
			return fmt.Sprintf("squatter's status.depth %+v, want no backlog and an error saying it does not own its group", d)
		}
		return ""
	})
}

// exportedDepthSeries is the first of the queue's backlog, lag, oldest-age and unread series
// (and of extra) that is exported, with its value; ok is false when none is.
func exportedDepthSeries(sq *kqv1.ShareQueue, extra ...string) (name string, v float64, ok bool) {
	names := append([]string{"kafkaqueues_queue_backlog_records", "kafkaqueues_queue_lag_records", "kafkaqueues_queue_oldest_record_age_seconds", "kafkaqueues_queue_depth_unread_partitions"}, extra...)
	for _, name := range names {
		if v, ok := metricValue(name, queueSeries(sq)); ok {
			return name, v, true
		}
	}
	return "", 0, false
}
