package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// readyQueue creates (or finds) the ShareQueue ns/name on KafkaCluster cluster and waits until
// it is Ready.
func readyQueue(t *testing.T, ns, name, cluster string, partitions int32) *kqv1.ShareQueue {
	t.Helper()
	ctx := context.Background()
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: cluster}, Topic: kqv1.QueueTopicSpec{Partitions: partitions}}}
	if err := k8s.Create(ctx, sq); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	rig.Eventually(t, 60*time.Second, func() string {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sq), sq); err != nil {
			return err.Error()
		}
		if !meta.IsStatusConditionTrue(sq.Status.Conditions, kqv1.ConditionReady) {
			return fmt.Sprintf("queue %s/%s not Ready: %+v", ns, name, sq.Status.Conditions)
		}
		return ""
	})
	return sq
}

// readyCluster creates the KafkaCluster ns/name on the rig's broker (waiting out an earlier
// one of that name still being deleted) and waits until it is Ready.
func readyCluster(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	var local kqv1.KafkaCluster
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "local"}, &local); err != nil {
		t.Fatal(err)
	}
	kc := &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: kqv1.KafkaClusterSpec{BootstrapServers: local.Spec.BootstrapServers}}
	rig.Eventually(t, 60*time.Second, func() string {
		if err := k8s.Create(ctx, kc.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return err.Error()
		}
		var got kqv1.KafkaCluster
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(kc), &got); err != nil {
			return err.Error()
		}
		if !got.DeletionTimestamp.IsZero() || !meta.IsStatusConditionTrue(got.Status.Conditions, kqv1.ConditionReady) {
			return fmt.Sprintf("KafkaCluster %s/%s not Ready (or being deleted): %+v", ns, name, got.Status.Conditions)
		}
		return ""
	})
}

// resetsOf lists the OffsetResets of a queue.
func resetsOf(t *testing.T, ns, queue string) []kqv1.OffsetReset {
	t.Helper()
	var list kqv1.OffsetResetList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []kqv1.OffsetReset
	for _, or := range list.Items {
		if or.Spec.QueueRef.Name == queue {
			out = append(out, or)
		}
	}
	return out
}

// testQueueOperationsDocs runs docs/queue-operations.md's blocks verbatim through kubectl's
// plugin lookup, against the queue invoices in namespace shop on KafkaCluster kafka: the
// setup block (which a user of run-local needs, as the rig has only default/local) after
// the same objects were made Ready here — it must leave them as they are and still
// report the queue Ready —, then the kqctl and YAML blocks.
func testQueueOperationsDocs(t *testing.T, p *pluginPath) {
	skipShort(t)
	ensureNamespace(t, "shop")
	readyCluster(t, "shop", "kafka")
	sq := readyQueue(t, "shop", "invoices", "kafka", 2)
	t.Cleanup(func() {
		_ = k8s.DeleteAllOf(context.Background(), &kqv1.OffsetReset{}, client.InNamespace("shop"))
		_ = k8s.Delete(context.Background(), sq)
	})
	dir := t.TempDir()
	var all []string
	for _, block := range []string{"queue-ops-setup", "queue-ops-kqctl", "queue-ops-yaml"} {
		for _, c := range rig.ShellCommands(rig.DocBlock(t, "docs/queue-operations.md", block)) {
			out, errOut, err := p.run(t, dir, []string{"KUBECONFIG=" + kubeconfig}, "bash", "-euo", "pipefail", "-c", c)
			t.Logf("$ %s\n%s%s", c, out, errOut)
			if err != nil {
				t.Fatalf("%s: %v\n%s%s", c, err, out, errOut)
			}
			all = append(all, out+errOut)
		}
	}
	text := strings.Join(all, "\n")
	for _, want := range []string{
		"sharequeue.kafkaqueues.io/invoices condition met", // setup's kubectl wait
		"(--to-latest on ShareQueue shop/invoices)",        // purge
		"TOPIC      PARTITION   BEFORE   TARGET   AFTER",   // its per-partition table
		"2/2 partitions", // its progress
		"(--to-datetime 2026-12-01T09:00:00Z on ShareQueue shop/invoices)", // reset-offsets
		"offsetreset.kafkaqueues.io/invoices-replay created",               // kubectl apply
		"offsetreset.kafkaqueues.io/invoices-replay condition met",         // kubectl wait
		`"partition":1`, // jsonpath
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the docs' commands' output lacks %q", want)
		}
	}
	resets := resetsOf(t, "shop", "invoices")
	if len(resets) != 4 {
		t.Fatalf("%d OffsetResets for invoices, want 4 (purge, two reset-offsets, the YAML one)", len(resets))
	}
	targets := map[string]bool{}
	for _, or := range resets {
		targets[or.Status.Target] = true
		if or.Spec.ByDuration != nil {
			continue // --no-wait: not waited for
		}
		if or.Status.Phase != kqv1.OffsetResetComplete || len(or.Status.Partitions) != 2 {
			t.Errorf("OffsetReset %s: phase %s, %d partitions; want Complete on both partitions", or.Name, or.Status.Phase, len(or.Status.Partitions))
		}
	}
	for _, want := range []string{"--to-latest", "--to-earliest", "--to-datetime 2026-12-01T09:00:00Z"} {
		if !targets[want] {
			t.Errorf("no OffsetReset with target %s among %v", want, targets)
		}
	}
}

// Usage errors exit 2 and name the flag and value; nothing is created.
func TestResetOffsetsUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"reset-offsets", "q"}, "exactly one of --to-earliest, --to-latest, --to-datetime, --by-duration is needed (0 given)"},
		{[]string{"reset-offsets", "q", "--to-earliest", "--to-latest"}, "exactly one of --to-earliest, --to-latest, --to-datetime, --by-duration is needed (2 given)"},
		{[]string{"reset-offsets", "q", "--to-datetime", "yesterday"}, `--to-datetime "yesterday" is not an RFC 3339 time`},
		{[]string{"reset-offsets", "q", "--by-duration", "-1h"}, `--by-duration "-1h": want a Go duration above 0`},
		{[]string{"reset-offsets", "q", "--to-latest", "--when-members-present", "Force"}, `--when-members-present "Force": want Wait or Fail`},
		{[]string{"purge"}, "takes QUEUE (got 0 argument(s))"},
		{[]string{"purge", "a", "b"}, "takes QUEUE (got 2 argument(s))"},
		// redrive's usage errors read the same, and a --reason the republisher never
		// writes is one (it would filter every record).
		{[]string{"redrive"}, "takes ROUTE (got 0 argument(s))"},
		{[]string{"redrive", "orders-dlq", "--reason", "rejected,lease-expired"}, `--reason "lease-expired": want one of rejected, released-on-last-attempt, lease-expired-on-last-attempt, delivery-count-above-limit`},
	} {
		var out, errOut bytes.Buffer
		err := run(append(c.args, "--kubeconfig", "/nonexistent"), &out, &errOut)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("kqctl %v: exit %d, %v; want exit 2 naming %q", c.args, exitCode(err), err, c.want)
		}
	}
}

// A purge of a queue that does not exist fails before creating anything.
func TestPurgeOfMissingQueue(t *testing.T) {
	skipShort(t)
	var out, errOut bytes.Buffer
	err := run([]string{"purge", "no-such-queue", "--kubeconfig", kubeconfig, "-n", "default"}, &out, &errOut)
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "ShareQueue default/no-such-queue not found (kubectl get sq -n default lists the queues)") {
		t.Errorf("purge of a missing queue: exit %d, %v", exitCode(err), err)
	}
	if n := len(resetsOf(t, "default", "no-such-queue")); n != 0 {
		t.Errorf("%d OffsetResets created for a missing queue", n)
	}
}

// With a consumer in the group: --when-members-present Fail exits 1 with the Failed message
// naming the member count; the default (Wait) shows the wait on stderr and, with a short
// --timeout, exits 1 saying the reset goes on; it completes once the member leaves.
func TestResetOffsetsWithAMember(t *testing.T) {
	skipShort(t)
	sq := readyQueue(t, "default", "kq-busy", "local", 1)
	t.Cleanup(func() {
		for _, or := range resetsOf(t, "default", "kq-busy") {
			_ = k8s.Delete(context.Background(), &or)
		}
		_ = k8s.Delete(context.Background(), sq)
	})
	var local kqv1.KafkaCluster
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "local"}, &local); err != nil {
		t.Fatal(err)
	}
	member, err := kgo.NewClient(kgo.SeedBrokers(local.Spec.BootstrapServers...), kgo.ShareGroup(sq.Status.GroupID), kgo.ConsumeTopics(sq.Status.TopicName))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	pctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	member.PollFetches(pctx)
	cancel()

	var out, errOut bytes.Buffer
	err = run([]string{"reset-offsets", "kq-busy", "--to-earliest", "--when-members-present", "Fail", "--kubeconfig", kubeconfig, "-n", "default"}, &out, &errOut)
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "failed (MembersPresent)") || !strings.Contains(err.Error(), "has 1 member(s)") {
		t.Errorf("reset with a member and Fail: exit %d, %v\nstdout %s\nstderr %s", exitCode(err), err, out.String(), errOut.String())
	}

	out.Reset()
	errOut.Reset()
	err = run([]string{"purge", "kq-busy", "--timeout", "8s", "--kubeconfig", kubeconfig, "-n", "default"}, &out, &errOut)
	if err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "timed out after 8s") || !strings.Contains(err.Error(), "it stays and goes on") {
		t.Errorf("purge with a member under Wait and a short timeout: exit %d, %v", exitCode(err), err)
	}
	if !strings.Contains(errOut.String(), "Waiting — MembersPresent: share group "+sq.Status.GroupID+" has 1 member(s)") {
		t.Errorf("purge's progress does not show the wait for the member:\n%s", errOut.String())
	}
	member.Close()
	rig.Eventually(t, 2*time.Minute, func() string {
		for _, or := range resetsOf(t, "default", "kq-busy") {
			if or.Spec.ToLatest != nil && or.Status.Phase != kqv1.OffsetResetComplete {
				return fmt.Sprintf("purge %s: phase %s after the member left", or.Name, or.Status.Phase)
			}
		}
		return ""
	})
}
