package v1alpha1_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// Each OffsetReset target alone is admitted (whenMembersPresent defaults to Wait), a
// toDatetime is stored as given, and the spec cannot change afterwards (the rejections of bad specs are in
// test/badinput, 63-71).
func TestOffsetResetRules(t *testing.T) {
	skipShort(t)
	at := metav1.NewTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	for name, set := range map[string]func(*kqv1.OffsetResetSpec){
		"earliest": func(s *kqv1.OffsetResetSpec) { s.ToEarliest = ptr.To(true) },
		"latest":   func(s *kqv1.OffsetResetSpec) { s.ToLatest = ptr.To(true) },
		"datetime": func(s *kqv1.OffsetResetSpec) { s.ToDatetime = &at },
		"duration": func(s *kqv1.OffsetResetSpec) { s.ByDuration = &metav1.Duration{Duration: 90 * time.Minute} },
	} {
		or := &kqv1.OffsetReset{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "osr-" + name},
			Spec: kqv1.OffsetResetSpec{QueueRef: kqv1.QueueReference{Name: "q"}}}
		set(&or.Spec)
		if err := k8s.Create(ctx(t), or); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if or.Spec.WhenMembersPresent != kqv1.MembersPolicyWait {
			t.Errorf("%s: whenMembersPresent %q, want the default Wait", name, or.Spec.WhenMembersPresent)
		}
		if name == "datetime" && !or.Spec.ToDatetime.Equal(&at) {
			t.Errorf("toDatetime stored as %v, want %v", or.Spec.ToDatetime, at)
		}
		or.Spec.WhenMembersPresent = kqv1.MembersPolicyFail
		expectRejected(t, k8s.Update(ctx(t), or), "spec is immutable: create another OffsetReset")
	}
}
