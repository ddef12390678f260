package main

import (
	"bytes"
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/controllers"
)

// In a sharded install an OffsetReset is handled by the shard whose --watch-label-selector
// matches its labels (the manager caches resets by the shard selector, as it does queues):
// purge and reset-offsets give the reset the queue's kafkaqueues.io/shard label, and none
// when the queue has none.
func TestResetCarriesTheQueueShardLabel(t *testing.T) {
	skipShort(t)
	ctx := context.Background()
	for _, tc := range []struct{ queue, shard string }{{"kq-sharded", "s1"}, {"kq-unsharded", ""}} {
		sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: tc.queue}, Spec: kqv1.ShareQueueSpec{
			ClusterRef: kqv1.ClusterReference{Name: "no-such-cluster"}}}
		if tc.shard != "" {
			sq.Labels = map[string]string{controllers.ShardLabel: tc.shard}
		}
		if err := k8s.Create(ctx, sq); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, or := range resetsOf(t, "default", tc.queue) {
				_ = k8s.Delete(context.Background(), &or)
			}
			_ = k8s.Delete(context.Background(), sq)
		})
		var out, errOut bytes.Buffer
		if err := run([]string{"purge", tc.queue, "--no-wait", "--kubeconfig", kubeconfig, "-n", "default"}, &out, &errOut); err != nil {
			t.Fatalf("purge %s: %v\n%s", tc.queue, err, errOut.String())
		}
		resets := resetsOf(t, "default", tc.queue)
		if len(resets) != 1 {
			t.Fatalf("%d OffsetResets for %s, want 1", len(resets), tc.queue)
		}
		got, ok := resets[0].Labels[controllers.ShardLabel]
		if got != tc.shard || ok != (tc.shard != "") {
			t.Errorf("reset of %s has shard label %q (present %v), want %q", tc.queue, got, ok, tc.shard)
		}
	}
}
