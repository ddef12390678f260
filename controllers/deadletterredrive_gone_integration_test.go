package controllers

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// Regression: a redrive left Running by a manager that stopped (its bound recorded, nothing
// running it now) whose DeadLetterRoute was deleted meanwhile was resumed without a cluster:
// every reconcile failed looking up a KafkaCluster with an empty name, and the redrive stayed
// Running for ever with no word of why. It must end Failed, naming spec.routeRef.name.
func TestRedriveStartedWhoseRouteIsGoneFails(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	dr := &kqv1.DeadLetterRedrive{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan"}, Spec: kqv1.DeadLetterRedriveSpec{
		RouteRef: kqv1.RouteReference{Name: "deleted-route"}}}
	if err := r.k8s.Create(ctx, dr); err != nil {
		t.Fatal(err)
	}
	r.waitRedrive(t, client.ObjectKeyFromObject(dr), kqv1.RedrivePending, 30*time.Second)
	// The status a manager leaves when it stops mid-redrive: Running, bound and topics recorded.
	if err := r.k8s.Get(ctx, client.ObjectKeyFromObject(dr), dr); err != nil {
		t.Fatal(err)
	}
	base := dr.DeepCopy()
	now := metav1.Now()
	dr.Status.Phase, dr.Status.StartTime, dr.Status.Total, dr.Status.Moved = kqv1.RedriveRunning, &now, 10, 4
	dr.Status.SourceTopic, dr.Status.TargetTopic = "work-dead-"+ns, "work-"+ns
	dr.Status.Bound = []kqv1.PartitionBound{{Partition: 0, StartOffset: 0, EndOffset: 10}}
	if err := r.k8s.Status().Patch(ctx, dr, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	got := r.waitRedrive(t, client.ObjectKeyFromObject(dr), kqv1.RedriveFailed, 60*time.Second)
	c := findCondition(got.Status.Conditions, kqv1.ConditionFailed)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != kqv1.ReasonRouteNotFound ||
		!strings.Contains(c.Message, "spec.routeRef.name") || !strings.Contains(c.Message, "deleted-route") || !strings.Contains(c.Message, "4 of 10") {
		t.Errorf("Failed condition %+v: want True/RouteNotFound naming spec.routeRef.name deleted-route and 4 of 10 moved", c)
	}
	if got.Status.CompletionTime == nil || got.Status.Moved != 4 {
		t.Errorf("status %+v: want completionTime and moved 4 kept", got.Status)
	}
}
