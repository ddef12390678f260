package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// Regression: a target before 1970 reached ListOffsets as a negative timestamp, which Kafka
// reads as a command or refuses. toDatetime 1969-12-31T23:59:59.999Z (-1 ms, "latest")
// purged the queue instead of redelivering every record; byDuration 876000h (100 years) and
// toDatetime 1969-12-31T23:59:59Z were refused with UNSUPPORTED_VERSION and the reset waited
// for ever as KafkaUnavailable. Each must move every partition to its first record. The specs
// are created as a user writes them (unstructured), so the fractional seconds reach the
// controller.
func TestOffsetResetBeforeTheEpochRedeliversEverything(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ns, sq := r.resetQueueIn(t, "epoch", 2)
	topic := sq.Status.TopicName
	r.produceAt(t, topic, "old", 10, 2, time.Time{})
	for i, target := range []map[string]any{
		{"toDatetime": "1969-12-31T23:59:59.999Z"},
		{"byDuration": "876000h"},
		{"toDatetime": "1969-12-31T23:59:59Z"},
	} {
		spec := map[string]any{"queueRef": map[string]any{"name": sq.Name}}
		for k, v := range target {
			spec[k] = v
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": kqv1.GroupVersion.String(), "kind": "OffsetReset",
			"metadata": map[string]any{"namespace": ns, "generateName": "epoch-reset-"},
			"spec":     spec,
		}}
		if err := r.k8s.Create(ctxFor(t), u); err != nil {
			t.Fatalf("%v: %v", target, err)
		}
		or := &kqv1.OffsetReset{}
		or.Namespace, or.Name = ns, u.GetName()
		or = r.waitReset(t, or, 60*time.Second, complete)
		// The first reset finds a group without state; the later ones find the first's.
		assertTargets(t, or, map[int32]int64{0: 0, 1: 0}, i > 0)
		if got := r.startOffsets(t, sq.Status.GroupID, topic); got[0] != 0 || got[1] != 0 {
			t.Errorf("%v: group start offsets %v, want 0 on both partitions", target, got)
		}
	}
}
