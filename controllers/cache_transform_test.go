package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// The cache keeps what controllers read (spec, status: the patch base, labels, other
// annotations, finalizers) and drops managedFields and kubectl's last-applied copy.
func TestTrimCachedObject(t *testing.T) {
	sq := func(annotations map[string]string) *kqv1.ShareQueue {
		return &kqv1.ShareQueue{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orders", Labels: map[string]string{"app": "shop"},
				Annotations: annotations, Finalizers: []string{"kafkaqueues.io/cleanup"},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}},
			Spec: kqv1.ShareQueueSpec{ClusterRef: kqv1.ClusterReference{Name: "local"}},
			Status: kqv1.ShareQueueStatus{TopicName: "orders", GroupID: "orders",
				Conditions: []metav1.Condition{{Type: kqv1.ConditionReady, Status: metav1.ConditionTrue, Reason: kqv1.ReasonReady}}},
		}
	}
	for _, tc := range []struct {
		name    string
		in, out map[string]string
	}{
		{"no annotations", nil, nil},
		{"only last-applied", map[string]string{lastAppliedAnnotation: `{"spec":{}}`}, nil},
		{"others kept", map[string]string{lastAppliedAnnotation: `{"spec":{}}`, "kafkaqueues.io/reconcile": "now"}, map[string]string{"kafkaqueues.io/reconcile": "now"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := trimCachedObject(sq(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			want := sq(tc.out)
			want.ManagedFields = nil
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("trimmed object (-want +got):\n%s", d)
			}
		})
	}
}
