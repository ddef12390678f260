package delivery

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// bounds43 are what a 4.3 broker reports by default (KIP-1240 min/default/max).
func bounds43() kqv1.ShareBounds {
	b := func(min, def, max int64) kqv1.Bound { return kqv1.Bound{Min: &min, Default: &def, Max: &max} }
	return kqv1.ShareBounds{
		DeliveryCountLimit:      b(2, 5, 10),
		RecordLockDurationMs:    b(15000, 30000, 60000),
		PartitionMaxRecordLocks: b(100, 2000, 4000),
		SessionTimeoutMs:        b(45000, 45000, 60000),
		HeartbeatIntervalMs:     b(5000, 5000, 15000),
	}
}

func TestBoundViolations(t *testing.T) {
	spec := kqv1.DeliverySpec{
		LockDuration:        &metav1.Duration{Duration: time.Hour},
		MaxDeliveryAttempts: ptr.To[int32](1),
		SessionTimeout:      &metav1.Duration{Duration: 50 * time.Second},
	}
	got := BoundViolations(&spec, bounds43())
	want := []BoundViolation{
		{Field: "spec.delivery.lockDuration", Value: 3600000, Unit: "ms", Above: true, BrokerConfig: "group.share.max.record.lock.duration.ms", Bound: 60000},
		{Field: "spec.delivery.maxDeliveryAttempts", Value: 1, BrokerConfig: "group.share.min.delivery.count.limit", Bound: 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
	if v := BoundViolations(&kqv1.DeliverySpec{}, bounds43()); len(v) != 0 {
		t.Errorf("nothing declared: %+v, want no violation", v)
	}
}
