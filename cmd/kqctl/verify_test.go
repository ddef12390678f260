package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/verify"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// verifyWorld creates namespace ns with a KafkaCluster "local" on the rig's broker and a
// ShareQueue "orders", and waits until both are Ready.
func verifyWorld(t *testing.T, ns string) *kqv1.ShareQueue {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	kc := &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "local"}, Spec: kqv1.KafkaClusterSpec{BootstrapServers: bootstrap}}
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "local"}, Topic: kqv1.QueueTopicSpec{Name: "orders-" + ns}, GroupID: "orders-" + ns}}
	for _, o := range []client.Object{kc, sq} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	rig.Eventually(t, 90*time.Second, func() string {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(kc), kc); err != nil {
			return err.Error()
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sq), sq); err != nil {
			return err.Error()
		}
		if !meta.IsStatusConditionTrue(kc.Status.Conditions, kqv1.ConditionReady) || !meta.IsStatusConditionTrue(sq.Status.Conditions, kqv1.ConditionReady) {
			return "cluster or queue not Ready yet"
		}
		return ""
	})
	return sq
}

// The commands of docs/verify.md, verbatim, against a reconciled namespace billing: each exits 0,
// and what they print says every claim held.
func TestVerifyDocsCommands(t *testing.T) {
	skipShort(t)
	verifyWorld(t, "billing")
	p := buildPlugin(t)
	cmds := rig.ShellCommands(rig.DocBlock(t, "docs/verify.md", "verify"))
	if len(cmds) != 3 {
		t.Fatalf("docs/verify.md block verify has %d commands, want 3", len(cmds))
	}
	for i, cmd := range cmds {
		c := exec.Command("bash", "-euo", "pipefail", "-c", cmd)
		c.Dir = t.TempDir()
		c.Env = append(os.Environ(), "PATH="+p.path, "KUBECONFIG="+kubeconfig)
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("$ %s\n%s\n%v", cmd, out, err)
		}
		if i == 1 { // -o json
			var rep verify.Report
			if err := json.Unmarshal(out, &rep); err != nil {
				t.Fatalf("$ %s: not a JSON report: %v\n%s", cmd, err, out)
			}
			if len(rep.Findings) != 0 || rep.Claims == 0 || rep.Objects != 2 {
				t.Errorf("$ %s: %d objects, %d claims, findings %v; want 2 objects, claims, no finding", cmd, rep.Objects, rep.Claims, rep.Findings)
			}
			continue
		}
		if !strings.Contains(string(out), "checked 2 objects, ") || !strings.Contains(string(out), ": 0 false, 0 unverifiable") {
			t.Errorf("$ %s: summary missing or not clean:\n%s", cmd, out)
		}
	}
}

// kqctl verify's exit statuses: 0 when every claim holds, 1 with a false claim (named on its
// own line), 0 or with --strict 3 when a cluster does not answer, 2 for a malformed flag.
func TestVerifyExitStatuses(t *testing.T) {
	skipShort(t)
	ns := "verify-exit"
	sq := verifyWorld(t, ns)
	verifyRun := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		err := run(append([]string{"verify", "--kubeconfig", kubeconfig}, args...), &out, &errOut)
		if err != nil { // as main prints it
			errOut.WriteString("kqctl: " + err.Error() + "\n")
		}
		return out.String() + errOut.String(), exitCode(err)
	}
	if out, code := verifyRun("-n", ns); code != 0 || !strings.Contains(out, "0 false, 0 unverifiable") {
		t.Fatalf("reconciled namespace: exit %d\n%s", code, out)
	}

	// A hand-written status.partitions (the queue controller does not reconcile on status
	// writes; a reconcile triggered meanwhile rewrites it, so write until a run sees it).
	var out string
	var code int
	rig.Eventually(t, 60*time.Second, func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sq), sq); err != nil {
			return err.Error()
		}
		if sq.Status.Partitions != 7 {
			sq.Status.Partitions = 7
			if err := k8s.Status().Update(ctx, sq); err != nil {
				return err.Error()
			}
		}
		out, code = verifyRun("-n", ns)
		if code == 0 {
			return "the hand-written status was rewritten before verify ran"
		}
		return ""
	})
	if code != verifyExitFalse {
		t.Errorf("false claim: exit %d, want 1\n%s", code, out)
	}
	want := "FALSE ShareQueue " + ns + "/orders status.partitions: status says 7, Kafka has 1"
	if !strings.Contains(out, want+"\n") || !strings.Contains(out, ": 1 false, 0 unverifiable") {
		t.Errorf("output lacks %q and the summary:\n%s", want, out)
	}
	// Put the truth back (the operator would at its next reconcile).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rig.Eventually(t, 30*time.Second, func() string {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(sq), sq); err != nil {
			return err.Error()
		}
		sq.Status.Partitions = 1
		if err := k8s.Status().Update(ctx, sq); err != nil {
			return err.Error()
		}
		return ""
	})

	unreachable := "--bootstrap-server=" + ns + "/local=127.0.0.1:1"
	out, code = verifyRun("-n", ns, unreachable, "--kafka-timeout", "2s")
	if code != 0 || !strings.Contains(out, "UNVERIFIABLE ShareQueue "+ns+"/orders: ") || !strings.Contains(out, ": 0 false, 2 unverifiable") {
		t.Errorf("unreachable cluster without --strict: exit %d, want 0 with the claims listed\n%s", code, out)
	}
	out, code = verifyRun("-n", ns, unreachable, "--kafka-timeout", "2s", "--strict")
	if code != verifyExitUnverifiable {
		t.Errorf("unreachable cluster with --strict: exit %d, want 3\n%s", code, out)
	}
	for _, bad := range []string{"local=127.0.0.1:9092", ns + "/local=127.0.0.1", ns + "/local="} {
		out, code = verifyRun("-n", ns, "--bootstrap-server", bad)
		if code != 2 || !strings.Contains(out, "--bootstrap-server") {
			t.Errorf("--bootstrap-server %s: exit %d, want 2 naming the flag\n%s", bad, code, out)
		}
	}
	if _, code = verifyRun("-o", "yaml"); code != 2 {
		t.Errorf("-o yaml: exit %d, want 2", code)
	}
	var st exitStatus
	if err := run([]string{"verify", "--kubeconfig", kubeconfig, "-n", ns, unreachable, "--kafka-timeout", "2s", "--strict"}, &bytes.Buffer{}, &bytes.Buffer{}); !errors.As(err, &st) {
		t.Errorf("--strict with unverifiable claims returned %v, want an exit status", err)
	}
}
