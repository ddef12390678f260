package controllers

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// Queues created together share Kafka requests (the suite's manager batches), and a queue
// whose topic the brokers refuse, in a CreateTopics or an IncrementalAlterConfigs shared with
// others, gets its own error while the others become Ready.
func TestBatchedQueuesKeepTheirOwnErrors(t *testing.T) {
	// Not parallel: it counts the suite manager's Kafka requests, which parallel tests would add to.
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)

	// A topic that exists already, adopted with a config the brokers refuse: its rejection
	// comes back as one item of a shared IncrementalAlterConfigs.
	adoptTopic := "adopt-bad-" + ns
	if res, err := r.admin.CreateTopics(ctx, []kafka.NewTopic{{Name: adoptTopic, Partitions: 1, ReplicationFactor: 1}}); err != nil || res[adoptTopic].Err != nil {
		t.Fatalf("pre-creating %s: %v %v", adoptTopic, err, res[adoptTopic].Err)
	}

	const good = 30
	var queues []*kqv1.ShareQueue
	for i := 0; i < good; i++ {
		queues = append(queues, &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("q-%02d", i)}, Spec: kqv1.ShareQueueSpec{
			ClusterRef: kqv1.ClusterReference{Name: "local"},
			Topic:      kqv1.QueueTopicSpec{Name: fmt.Sprintf("batch-%02d-%s", i, ns)},
			Delivery:   kqv1.DeliverySpec{LockDuration: &metav1.Duration{Duration: 40 * time.Second}, MaxDeliveryAttempts: ptr.To[int32](3)},
		}})
	}
	badCreate := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-create"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"},
		Topic:      kqv1.QueueTopicSpec{Name: "bad-create-" + ns, Config: kqv1.TopicConfigs{"max.message.bytes": "-5"}},
	}}
	badAlter := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad-alter"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"},
		Topic:      kqv1.QueueTopicSpec{Name: adoptTopic, Config: kqv1.TopicConfigs{"max.message.bytes": "-5"}},
		Delivery:   kqv1.DeliverySpec{LockDuration: &metav1.Duration{Duration: 40 * time.Second}},
	}}
	all := append(append([]*kqv1.ShareQueue{}, queues...), badCreate, badAlter)
	for _, sq := range all {
		sq.Spec.GroupID = sq.Name + "-" + ns // groups of their own (rule 1: -count=2 reuses the names)
	}

	before := r.counter.Snapshot()
	var wg sync.WaitGroup
	errs := make(chan error, len(all))
	for _, sq := range all {
		wg.Add(1)
		go func(sq *kqv1.ShareQueue) { defer wg.Done(); errs <- r.k8s.Create(ctx, sq) }(sq)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	for _, sq := range queues {
		got := r.waitQueue(t, sq, kqv1.ConditionReady, metav1.ConditionTrue)
		if got.Status.TopicID == "" || !got.Status.TopicCreated {
			t.Errorf("%s: Ready without its own topic id (%+v)", sq.Name, got.Status)
		}
	}
	for _, sq := range []*kqv1.ShareQueue{badCreate, badAlter} {
		got := r.waitQueue(t, sq, kqv1.ConditionTopicReady, metav1.ConditionFalse)
		c := findCondition(got.Status.Conditions, kqv1.ConditionTopicReady)
		if c.Reason != kqv1.ReasonKafkaRejected || !strings.Contains(c.Message, "max.message.bytes") {
			t.Errorf("%s: TopicReady %s %q, want KafkaRejected naming max.message.bytes", sq.Name, c.Reason, c.Message)
		}
		if ready := findCondition(got.Status.Conditions, kqv1.ConditionReady); ready == nil || ready.Status != metav1.ConditionFalse {
			t.Errorf("%s: Ready %+v, want False", sq.Name, ready)
		}
	}
	// The refused topic item did not take the same request's group item with it.
	waitConfig(t, r.admin, kafka.ResourceKey{Type: kafka.GroupResource, Name: badAlter.KafkaGroupID()}, "share.record.lock.duration.ms", func(e kafka.ConfigEntry) string {
		if e.Value != "40000" {
			return fmt.Sprintf("group %s lock duration %q, want 40000", badAlter.KafkaGroupID(), e.Value)
		}
		return ""
	})

	used := kafka.Diff(before, r.counter.Snapshot())
	t.Logf("Kafka requests for %d queues created at once: %v", len(all), used)
	// 31 topics were created (30 good, 1 refused); unbatched that is 31 CreateTopics requests.
	if used["CreateTopics"] == 0 || used["CreateTopics"] > 8 {
		t.Errorf("CreateTopics requests %d for %d new topics; batching should share them", used["CreateTopics"], good+1)
	}
	if used["IncrementalAlterConfigs"] == 0 || used["IncrementalAlterConfigs"] > 8 {
		t.Errorf("IncrementalAlterConfigs requests %d for %d queues; batching should share them", used["IncrementalAlterConfigs"], len(all))
	}
}
