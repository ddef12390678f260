package verify

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// A Paused queue keeps its last status.deadLetter (active) while the operator sets its
// conditions, and its route's, to Unknown: nothing vouches for that copy any more, so it is
// not a claim (it was reported false: "route RouteActive=false"). And a KafkaCluster being
// deleted (held by another finalizer) claims nothing, whatever its conditions say (a
// precedence slip let Ready=True through).
func TestCheckHeldBackAndDeletingObjectsClaimNothing(t *testing.T) {
	// Not parallel: it stops its manager and writes false statuses; in shuffled parallel runs
	// something rewrote them before the check read them (see docs/testing.md).
	s := startSuite(t)
	ns := s.namespace(t)
	stop := s.startManager(t, ns)
	ctx := ctxFor(t)
	kc := cluster(ns, "held", s.kafka.BootstrapServers())
	q := queue(ns, "paused", "held", kqv1.DeliverySpec{})
	r := route(ns, "paused-dead", "paused", kqv1.DeadLetterModeBrokerNative, "")
	s.createReady(t, kc, q, r)
	rig.Eventually(t, 60*time.Second, func() string {
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(q), q); err != nil {
			return err.Error()
		}
		if dl := q.Status.DeadLetter; dl == nil || !dl.Active {
			return fmt.Sprintf("queue status.deadLetter %+v, want active (the claim this test is about)", dl)
		}
		return ""
	})

	// Pause the queue; wait until the operator has held it back.
	q.Annotations = map[string]string{kqv1.ReconcileAnnotation: kqv1.ReconcilePaused}
	if err := s.k8s.Update(ctx, q); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, 60*time.Second, func() string {
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(q), q); err != nil {
			return err.Error()
		}
		if c := meta.FindStatusCondition(q.Status.Conditions, kqv1.ConditionGroupConfigured); c == nil || c.Status != metav1.ConditionUnknown {
			return fmt.Sprintf("queue not held back yet: %+v", q.Status.Conditions)
		}
		return ""
	})
	if dl := q.Status.DeadLetter; dl == nil || !dl.Active {
		t.Fatalf("paused queue's status.deadLetter %+v: the copy this test is about is gone", dl)
	}
	// The route follows its queue.
	time.Sleep(3 * time.Second)
	rep, err := Check(ctx, s.k8s, Options{Namespace: ns, SkipJoin: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("paused queue: %s", f)
	}

	// A KafkaCluster being deleted: stop the operator, write a lie, hold the deletion.
	stop()
	if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(kc), kc); err != nil {
		t.Fatal(err)
	}
	kc.Status.BrokerCount = 7
	if err := s.k8s.Status().Update(ctx, kc); err != nil {
		t.Fatal(err)
	}
	kc.Finalizers = append(kc.Finalizers, "example.com/hold")
	if err := s.k8s.Update(ctx, kc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(kc), kc); err == nil {
			kc.Finalizers = nil
			_ = s.k8s.Update(ctx, kc)
		}
	})
	// Before the deletion the lie is found: the check can fail.
	rep, err = Check(ctx, s.k8s, Options{Namespace: ns, SkipJoin: true})
	if err != nil {
		t.Fatal(err)
	}
	if !hasFinding(rep, KindKafkaCluster, "status.brokerCount") {
		t.Fatalf("a brokerCount of 7 on one broker was not found: %v", rep.Findings)
	}
	if err := s.k8s.Delete(ctx, kc); err != nil {
		t.Fatal(err)
	}
	rep, err = Check(ctx, s.k8s, Options{Namespace: ns, SkipJoin: true})
	if err != nil {
		t.Fatal(err)
	}
	if hasFinding(rep, KindKafkaCluster, "status.brokerCount") {
		t.Errorf("a KafkaCluster being deleted was checked: %v", rep.Findings)
	}
	for _, u := range rep.Unverifiable {
		if strings.Contains(u, "status.brokerCount") {
			t.Errorf("a KafkaCluster being deleted was checked (its finding then set aside): %s", u)
		}
	}
}

func hasFinding(rep Report, kind, field string) bool {
	for _, f := range rep.Findings {
		if f.Kind == kind && f.Field == field {
			return true
		}
	}
	return false
}
