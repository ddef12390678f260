package republisher

import (
	"testing"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// The delivery id handed to applications and the source key keep their shapes
// ("topic:partition:offset[:deliveryCount]") when built without fmt.
func TestDeliveryIDAndSourceKeyShapes(t *testing.T) {
	rec := &kafka.ShareRecord{Topic: "orders.v1", Partition: 12, Offset: 9876543210, DeliveryCount: 3}
	if got, want := sourceKey(rec), "orders.v1:12:9876543210"; got != want {
		t.Errorf("sourceKey = %q, want %q", got, want)
	}
	if got, want := deliveryID(rec), "orders.v1:12:9876543210:3"; got != want {
		t.Errorf("deliveryID = %q, want %q", got, want)
	}
	rec = &kafka.ShareRecord{Topic: "q", Partition: 0, Offset: 0, DeliveryCount: 1}
	if got, want := deliveryID(rec), "q:0:0:1"; got != want {
		t.Errorf("deliveryID = %q, want %q", got, want)
	}
}
