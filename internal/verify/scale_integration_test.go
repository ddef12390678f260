package verify

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// How long a check of N Ready queues takes (N from KQO_VERIFY_SCALE_N, default 300), with
// and without the joins; reported, not asserted. The statuses are written by the test (no
// manager), true to the topics it created, so every claim must hold: one Metadata and one
// share-group join per queue, nothing per queue besides.
func TestCheckScale(t *testing.T) {
	t.Parallel()
	s := startSuite(t)
	n := 300
	if v := os.Getenv("KQO_VERIFY_SCALE_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	ns := s.namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ci, err := s.admin.DescribeCluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	cond := func(typ string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "Test", Message: "written by TestCheckScale", LastTransitionTime: now, ObservedGeneration: 1}
	}
	kc := cluster(ns, "local", s.kafka.BootstrapServers())
	s.create(t, kc)
	kc.Status = kqv1.KafkaClusterStatus{Conditions: []metav1.Condition{cond(kqv1.ConditionConnected)}, ClusterID: ci.ClusterID,
		BrokerCount: int32(len(ci.Brokers)), ShareVersion: int32(ci.FeatureLevel("share.version")), BrokerNativeDLQ: ci.FeatureLevel("share.version") >= 2}
	if err := s.k8s.Status().Update(ctx, kc); err != nil {
		t.Fatal(err)
	}
	var topics []kafka.NewTopic
	for i := range n {
		topics = append(topics, kafka.NewTopic{Name: fmt.Sprintf("scale-%d-%s", i, ns), Partitions: 1, ReplicationFactor: 1})
	}
	created, err := s.admin.CreateTopics(ctx, topics)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			name := fmt.Sprintf("scale-%d", i)
			sq := queue(ns, name, "local", kqv1.DeliverySpec{})
			if err := s.k8s.Create(ctx, sq); err != nil {
				errs <- err
				return
			}
			ct := created[sq.Spec.Topic.Name]
			if ct.Err != nil {
				errs <- ct.Err
				return
			}
			sq.Status = kqv1.ShareQueueStatus{Conditions: []metav1.Condition{cond(kqv1.ConditionTopicReady), cond(kqv1.ConditionReady)},
				TopicName: sq.Spec.Topic.Name, TopicID: ct.ID, GroupID: sq.Spec.GroupID, Partitions: 1, ReplicationFactor: 1}
			if err := s.k8s.Status().Update(ctx, sq); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d queues created with statuses in %s", n, time.Since(start).Round(time.Millisecond))

	for _, skipJoin := range []bool{true, false} {
		start := time.Now()
		rep, err := Check(ctx, s.k8s, Options{Namespace: ns, SkipJoin: skipJoin})
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range rep.Findings {
			if i < 10 {
				t.Errorf("false claim: %s", f)
			}
		}
		if len(rep.Unverifiable) > 0 {
			t.Errorf("unverifiable: %v", rep.Unverifiable[:min(10, len(rep.Unverifiable))])
		}
		perQueue := 4 // exists, topicId, partitions, replicationFactor
		if !skipJoin {
			perQueue++ // usable
		}
		if want := n*perQueue + 4; rep.Claims != want { // + clusterID, brokerCount, shareVersion, brokerNativeDLQ
			t.Errorf("Claims = %d, want %d", rep.Claims, want)
		}
		t.Logf("Check of %d queues (SkipJoin %t): %s; %s", n, skipJoin, took.Round(time.Millisecond), rep.Summary())
	}
	var list kqv1.ShareQueueList
	_ = s.k8s.List(ctx, &list, client.InNamespace(ns))
	names := make([]string, 0, len(list.Items))
	for _, q := range list.Items {
		names = append(names, q.Status.TopicName)
	}
	if _, err := s.admin.DeleteTopics(ctx, names...); err != nil {
		t.Logf("cleanup: %v", err)
	}
}
