package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

func TestProgressLine(t *testing.T) {
	for _, tc := range []struct {
		st   kqv1.DeadLetterRedriveStatus
		want string
	}{
		{kqv1.DeadLetterRedriveStatus{}, "[..............................] 0/0 moved, 0 filtered, 0 refused, 0 records/s  Pending"},
		{kqv1.DeadLetterRedriveStatus{Phase: kqv1.RedriveRunning, Total: 100, Moved: 40, Filtered: 5, Refused: 5, RecordsPerSecond: 12},
			"[###############...............] 40/100 moved, 5 filtered, 5 refused, 12 records/s  Running"},
		{kqv1.DeadLetterRedriveStatus{Phase: kqv1.RedriveComplete, Total: 7, Moved: 7}, "[##############################] 7/7 moved, 0 filtered, 0 refused, 0 records/s  Complete"},
	} {
		if got := progressLine(tc.st); got != tc.want {
			t.Errorf("progressLine(%+v)\n got %q\nwant %q", tc.st, got, tc.want)
		}
	}
}

// produceDeadLetters writes n records to topic as the republisher would dead-letter them:
// kqo.reason and kqo.source.partition headers, a unique value.
func produceDeadLetters(t *testing.T, topic, prefix string, n int, reason func(i int) string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(localBootstrap(t)...), kgo.DefaultProduceTopic(topic), kgo.UnknownTopicRetries(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Value: fmt.Appendf(nil, "%s-%d", prefix, i), Headers: []kgo.RecordHeader{
			{Key: "kqo.reason", Value: []byte(reason(i))}, {Key: "kqo.source.partition", Value: fmt.Appendf(nil, "%d", i%3)}}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// docs/dead-letter-redrive.md's blocks, verbatim, from the repository root against the rig's
// cluster local: the route orders-dlq (named as run-local's sample route, which the page
// points new users at; topic dlq.orders) of queue orders holds 60 dead letters (30 rejected,
// 30 lease-expired); `kqctl redrive` moves all 60, prints its progress and the summary, and
// exits 0; kubectl lists the redrive with its printer columns. Then 30 more rejected dead
// letters arrive and the YAML block's filtered, rate-limited redrive (1 record/s) is cancelled
// and reaches Cancelled with only part of them moved. A route that does not exist is an
// error (exit status 1).
func TestRedriveDocsCommands(t *testing.T) {
	skipShort(t)
	// The page's commands name no namespace: they run in one of the test's own (its kubeconfig's
	// context), and the topics carry its name, so other tests may use orders too.
	ns, kubeconfig := ownNamespace(t)
	ctx := context.Background()
	dlqTopic := "dlq.orders-" + ns
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Name: "orders-" + ns, Partitions: 3}, GroupID: "orders-" + ns}}
	dlr := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-dlq"}, Spec: kqv1.DeadLetterRouteSpec{
		QueueRef: kqv1.QueueReference{Name: "orders"}, Mode: kqv1.DeadLetterModeRepublisher,
		Topic: kqv1.DeadLetterTopicSpec{Name: dlqTopic, Partitions: 3}}}
	for _, o := range []client.Object{sq, dlr} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	rig.Eventually(t, 60*time.Second, func() string {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(dlr), dlr); err != nil {
			return err.Error()
		}
		if !meta.IsStatusConditionTrue(dlr.Status.Conditions, kqv1.ConditionReady) {
			return fmt.Sprintf("route not Ready: %+v", dlr.Status.Conditions)
		}
		return ""
	})
	produceDeadLetters(t, dlqTopic, "first", 60, func(i int) string {
		if i%2 == 0 {
			return "rejected"
		}
		return "lease-expired-on-last-attempt"
	})

	blocks := rig.DocBlocks(t, "docs/dead-letter-redrive.md")
	runBlock := func(name string) string {
		t.Helper()
		c := exec.Command("bash", "-euo", "pipefail", "-c", blocks[name])
		c.Dir = rig.RepoRoot()
		c.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("block %s:\n%s\n%s\n%v", name, blocks[name], out, err)
		}
		return string(out)
	}
	out := runBlock("redrive-kqctl")
	for _, want := range []string{"deadletterredrive.kafkaqueues.io/orders-dlq-", "Complete: 60 of 60 moved, 0 filtered, 0 refused", "60/60 moved",
		"ROUTE", "MOVED", "TOTAL", "PHASE", "orders-dlq"} {
		if !strings.Contains(out, want) {
			t.Errorf("redrive-kqctl output lacks %q:\n%s", want, out)
		}
	}

	produceDeadLetters(t, dlqTopic, "second", 30, func(int) string { return "rejected" })
	out = runBlock("redrive-yaml")
	if !strings.Contains(out, "condition met") {
		t.Errorf("redrive-yaml output:\n%s", out)
	}
	var dr kqv1.DeadLetterRedrive
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orders-rejected"}, &dr); err != nil {
		t.Fatal(err)
	}
	// It starts where the kqctl one stopped: only the 30 new records are in its bound; of
	// them, partitions 0 and 1 of the source (20) are selected, and the cancel came long
	// before 20 s at 1 record/s.
	if dr.Status.Phase != kqv1.RedriveCancelled || dr.Status.Total != 30 || dr.Status.Moved >= 20 {
		t.Errorf("orders-rejected: phase %s total %d moved %d, want Cancelled, 30, fewer than 20", dr.Status.Phase, dr.Status.Total, dr.Status.Moved)
	}

	var stdout, stderr bytes.Buffer
	err := run([]string{"--kubeconfig", kubeconfig, "redrive", "no-such-route"}, &stdout, &stderr)
	if exitCode(err) != 1 || !strings.Contains(fmt.Sprint(err), "DeadLetterRoute "+ns+"/no-such-route not found (kubectl get dlr -n "+ns+" lists the routes)") {
		t.Errorf("redrive of a missing route: exit %d, %v", exitCode(err), err)
	}
	err = run([]string{"--kubeconfig", kubeconfig, "redrive", "orders-dlq", "--rate", "0"}, &stdout, &stderr)
	if exitCode(err) != 2 || !strings.Contains(fmt.Sprint(err), "--rate 0") {
		t.Errorf("--rate 0: exit %d, %v", exitCode(err), err)
	}
	// A --reason the republisher never writes would filter every record: a usage error
	// naming the values it does write, and no DeadLetterRedrive is created.
	var before kqv1.DeadLetterRedriveList
	if err := k8s.List(ctx, &before, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	err = run([]string{"--kubeconfig", kubeconfig, "redrive", "orders-dlq", "--reason", "rejectd"}, &stdout, &stderr)
	if exitCode(err) != 2 || !strings.Contains(fmt.Sprint(err), `--reason "rejectd": want one of rejected, released-on-last-attempt,`) {
		t.Errorf("--reason rejectd: exit %d, %v", exitCode(err), err)
	}
	var after kqv1.DeadLetterRedriveList
	if err := k8s.List(ctx, &after, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(after.Items) != len(before.Items) {
		t.Errorf("--reason rejectd created a DeadLetterRedrive: %d before, %d after", len(before.Items), len(after.Items))
	}
}
