package controllers

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// Regression: OffsetResets were cached by every sharded manager whatever its
// --watch-label-selector, so a shard that does not hold the queue wrote Complete=False
// QueueNotFound ("does not exist") over the status the queue's own manager wrote, every 10 s
// while the reset waited and, racing, over Complete (after which the owner applied the
// recorded offsets again). Here the rig's manager owns the unlabelled queue; a second manager
// for shard s1 runs the OffsetReset controller: it must leave the reset alone.
func TestOffsetResetIgnoredByAShardWithoutItsQueue(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns, sq := r.resetQueueIn(t, "sharded", 1)
	sel, err := labels.Parse(ShardLabel + " in (s1)")
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(r.env.Config, ctrl.Options{
		Scheme: r.k8s.Scheme(), Cache: CacheOptions(Scope{Selector: sel}),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	pool := kafka.NewPool()
	defer pool.Close()
	if err := (&OffsetResetReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Pool: pool, KafkaTimeout: 10 * time.Second}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := mgr.Start(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("shard manager: %v", err)
		}
	}()
	defer func() { cancel(); <-stopped }()

	// A member, polling all along, holds the reset in Waiting long enough for the shard's
	// 10 s requeue to show.
	member, err := kgo.NewClient(kgo.SeedBrokers(r.kafka.BootstrapServers()...), kgo.ShareGroup(sq.Status.GroupID), kgo.ConsumeTopics(sq.Status.TopicName))
	if err != nil {
		t.Fatal(err)
	}
	pctx, stopPolling := context.WithCancel(context.Background())
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for pctx.Err() == nil {
			member.PollFetches(pctx)
		}
	}()
	var once sync.Once
	leave := func() { once.Do(func() { stopPolling(); <-polled; member.Close() }) }
	t.Cleanup(leave)
	or := r.createReset(t, newReset(ns, sq.Name, func(s *kqv1.OffsetResetSpec) { s.ToLatest = yes }))
	r.waitReset(t, or, 60*time.Second, conditionWith(kqv1.ConditionComplete, metav1.ConditionFalse, kqv1.ReasonMembersPresent))
	watchReasons := func(d time.Duration) {
		t.Helper()
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			var cur kqv1.OffsetReset
			if err := r.k8s.Get(ctxFor(t), client.ObjectKeyFromObject(or), &cur); err != nil {
				t.Fatal(err)
			}
			if c := findCondition(cur.Status.Conditions, kqv1.ConditionComplete); c != nil && c.Reason == kqv1.ReasonQueueNotFound {
				t.Fatalf("a shard without the queue wrote %s over the reset: %s (phase %s)", c.Reason, c.Message, cur.Status.Phase)
			}
		}
	}
	watchReasons(25 * time.Second)
	// The scenario held: the reset was still waiting for the member all along.
	r.waitReset(t, or, time.Second, conditionWith(kqv1.ConditionComplete, metav1.ConditionFalse, kqv1.ReasonMembersPresent))
	leave()
	r.waitReset(t, or, 2*time.Minute, complete)
	watchReasons(12 * time.Second)
	r.waitReset(t, or, time.Second, complete)
}
