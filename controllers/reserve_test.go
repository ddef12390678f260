package controllers

import (
	"testing"

	"k8s.io/utils/ptr"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// showReserve splits the group's limit into the application's attempts and the reserve, and
// never claims a reserve the limit has no room for (issue 19, case 6).
func TestShowReserve(t *testing.T) {
	for _, tc := range []struct {
		limit        string
		attempts     int32
		wantApp      string
		wantReserved *int32
	}{
		{limit: "6", attempts: 5, wantApp: "5", wantReserved: ptr.To[int32](1)},
		{limit: "5", attempts: 5, wantApp: "5", wantReserved: ptr.To[int32](0)},    // not written yet, or refused
		{limit: "10", attempts: 10, wantApp: "10", wantReserved: ptr.To[int32](0)}, // clamped at the brokers' max
		{limit: "", attempts: 5, wantApp: ""},                                      // unknown: left alone
	} {
		e := kqv1.EffectiveDelivery{MaxDeliveryAttempts: &kqv1.EffectiveValue{Config: deliveryCountLimitConfig, Value: tc.limit, Source: kqv1.SourceGroupOverride}}
		orig := e.MaxDeliveryAttempts
		showReserve(&e, tc.attempts)
		if e.MaxDeliveryAttempts.Value != tc.wantApp || e.MaxDeliveryAttempts.Config != deliveryCountLimitConfig || e.MaxDeliveryAttempts.Source != kqv1.SourceGroupOverride {
			t.Errorf("limit %q, attempts %d: maxDeliveryAttempts %+v, want value %q", tc.limit, tc.attempts, *e.MaxDeliveryAttempts, tc.wantApp)
		}
		if ptr.Deref(e.ReservedAttempts, -1) != ptr.Deref(tc.wantReserved, -1) {
			t.Errorf("limit %q, attempts %d: reservedAttempts %v, want %v", tc.limit, tc.attempts, ptr.Deref(e.ReservedAttempts, -1), ptr.Deref(tc.wantReserved, -1))
		}
		if orig.Value != tc.limit { // plan.Effective and EffectiveNow may share the value
			t.Errorf("the value showReserve was given was changed in place")
		}
	}
}
