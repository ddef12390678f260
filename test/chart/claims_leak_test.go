package chart

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// A queue deleted while its release's manager is down (a rollout, a crash): no manager sees
// the deletion, so none releases its claims on the way. Another tenant's release may not read
// that namespace and counts the claim as live. The queue's own release must release it when
// it comes back, or the other tenant's queue naming the same topic stays in Conflict forever.
func TestClaimOfQueueDeletedWhileManagerDown(t *testing.T) {
	t.Parallel()
	cfg, admin := freshCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	k, sh := startKafkaAndShell(t, ctx, cfg)
	rels := &releases{t: t, cfg: cfg, sh: sh, runs: map[string][]*releaseManager{}}
	sh.Run("helm install kqo-crds charts/kafka-queue-operator-crds -n kqo-system --create-namespace")
	sh.Run("kubectl create namespace team-a")
	sh.Run("kubectl create namespace team-b")
	sh.Run("helm install kqo-a charts/kafka-queue-operator -n kqo-a --create-namespace --set 'watchNamespaces={team-a}'")
	rels.restart("kqo-a", "kqo-a")
	sh.Run("helm install kqo-b charts/kafka-queue-operator -n kqo-b --create-namespace --set 'watchNamespaces={team-b}'")
	rels.restart("kqo-b", "kqo-b")
	queue := func(ns string) {
		sh.Run(`kubectl apply -n ` + ns + ` -f - <<'EOF'
apiVersion: kafkaqueues.io/v1alpha1
kind: KafkaCluster
metadata: {name: kafka}
spec: {bootstrapServers: ["` + k.Bootstrap() + `"]}
---
apiVersion: kafkaqueues.io/v1alpha1
kind: ShareQueue
metadata: {name: orders}
spec: {clusterRef: {name: kafka}, topic: {name: orders, partitions: 1}, groupId: orders}
EOF`)
	}
	queue("team-a")
	waitReady(t, ctx, admin, "team-a", "orders")
	var gone kqv1.ShareQueue
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "orders"}, &gone); err != nil {
		t.Fatal(err)
	}

	// kqo-a goes down; team-a's queue is deleted (deletionPolicy Retain: no finalizer, gone at
	// once); kqo-a comes back.
	for _, m := range rels.runs["kqo-a"] {
		m.stop()
	}
	rels.runs["kqo-a"] = nil
	sh.Run("kubectl -n team-a delete sq orders")
	rels.restart("kqo-a", "kqo-a")

	time.Sleep(3 * time.Second) // team-b's queue is created well after team-a's
	queue("team-b")
	rig.Eventually(t, 90*time.Second, func() string {
		var sq kqv1.ShareQueue
		if err := admin.Get(ctx, client.ObjectKey{Namespace: "team-b", Name: "orders"}, &sq); err != nil {
			return err.Error()
		}
		if c := meta.FindStatusCondition(sq.Status.Conditions, kqv1.ConditionReady); c == nil || c.Status != "True" {
			msg := "no Ready condition"
			if c != nil {
				msg = c.Reason + ": " + c.Message
			}
			return "team-b/orders not Ready: " + msg
		}
		return ""
	})
	claims := readClaims(t, ctx, k.BootstrapServers(), "kafkaqueues.claims")
	for c := range claims {
		if strings.HasSuffix(c, "/"+string(gone.UID)) {
			t.Errorf("the deleted queue's claim %s is still live", c)
		}
	}
}
