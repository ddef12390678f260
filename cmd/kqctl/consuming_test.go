package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// testConsumingDocs runs docs/consuming.md as an application developer would: the queue
// block and the Deployment block verbatim through kubectl, then the page's Go and Java
// consumers, each given only the variables of the ConfigMap the queue published, against the
// rig's broker: each must process (and accept) the records produced for it.
func testConsumingDocs(t *testing.T, p *pluginPath) {
	skipShort(t)
	ctx := context.Background()
	ensureNamespace(t, "shop")
	readyCluster(t, "shop", "kafka")
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "payments"}})
	})
	dir := t.TempDir()
	var text []string
	for _, block := range []string{"consuming-queue", "consuming-deployment"} {
		for _, c := range rig.ShellCommands(rig.DocBlock(t, "docs/consuming.md", block)) {
			out, errOut, err := p.run(t, dir, []string{"KUBECONFIG=" + kubeconfig}, "bash", "-euo", "pipefail", "-c", c)
			if err != nil {
				t.Fatalf("%s: %v\n%s%s", c, err, out, errOut)
			}
			text = append(text, out+errOut)
		}
	}
	for _, want := range []string{"sharequeue.kafkaqueues.io/payments condition met", "KAFKA_TOPIC: payments", "KAFKA_GROUP_ID: payments", "deployment.apps/payments-worker created"} {
		if !strings.Contains(strings.Join(text, "\n"), want) {
			t.Errorf("the docs' commands' output lacks %q:\n%s", want, strings.Join(text, "\n"))
		}
	}
	var cm corev1.ConfigMap
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "payments-kafka"}, &cm); err != nil {
		t.Fatal(err)
	}
	var env []string
	for k, v := range cm.Data {
		env = append(env, k+"="+v)
	}

	produce := func(prefix string, n int) []string {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(cm.Data["KAFKA_BOOTSTRAP_SERVERS"], ",")...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		var vs []string
		for i := 0; i < n; i++ {
			v := fmt.Sprintf("%s-%d", prefix, i)
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: cm.Data["KAFKA_TOPIC"], Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			vs = append(vs, v)
		}
		return vs
	}

	// Go: the program, as written, in a directory of this module (so it builds with the
	// module's franz-go).
	goDir, err := os.MkdirTemp(filepath.Join(rig.RepoRoot(), "tmp"), "consumer-go-")
	if err != nil {
		if err := os.MkdirAll(filepath.Join(rig.RepoRoot(), "tmp"), 0o755); err != nil {
			t.Fatal(err)
		}
		if goDir, err = os.MkdirTemp(filepath.Join(rig.RepoRoot(), "tmp"), "consumer-go-"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.RemoveAll(goDir) })
	if err := os.WriteFile(filepath.Join(goDir, "main.go"), []byte(rig.DocBlock(t, "docs/consuming.md", "consumer-go")), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "consumer")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = goDir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the docs' Go consumer: %v\n%s", err, out)
	}
	runConsumer(t, "Go", exec.Command(bin), env, produce("go", 5))

	// Java: the single source file, run with Kafka's client jars (those the rig resolved).
	cp, err := rig.KafkaClasspath("4.4.0")
	if err != nil {
		t.Fatal(err)
	}
	javaDir := t.TempDir()
	src := filepath.Join(javaDir, "PaymentsWorker.java")
	if err := os.WriteFile(src, []byte(rig.DocBlock(t, "docs/consuming.md", "consumer-java")), 0o644); err != nil {
		t.Fatal(err)
	}
	runConsumer(t, "Java", exec.Command("java", "-cp", cp, src), env, produce("java", 5))

	// HTTP: the route block makes the route a Republisher one; the ConfigMap then names the
	// sidecar's address. The sidecar is run here as the webhook would inject it (this
	// machine is not a Pod), and the page's curl round runs until it processed every record.
	for _, c := range rig.ShellCommands(rig.DocBlock(t, "docs/consuming.md", "consuming-route")) {
		out, errOut, err := p.run(t, dir, []string{"KUBECONFIG=" + kubeconfig}, "bash", "-euo", "pipefail", "-c", c)
		if err != nil {
			t.Fatalf("%s: %v\n%s%s", c, err, out, errOut)
		}
	}
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "payments-dlq"}})
	})
	rig.Eventually(t, 60*time.Second, func() string {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "payments-kafka"}, &cm); err != nil {
			return err.Error()
		}
		if cm.Data["KQO_REPUBLISHER_URL"] == "" {
			return fmt.Sprintf("ConfigMap without KQO_REPUBLISHER_URL: %v", cm.Data)
		}
		return ""
	})
	var route kqv1.DeadLetterRoute
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "payments-dlq"}, &route); err != nil {
		t.Fatal(err)
	}
	sidecar := filepath.Join(t.TempDir(), "republisher")
	if out, err := exec.Command("go", "build", "-o", sidecar, filepath.Join(rig.RepoRoot(), "cmd", "republisher")).CombinedOutput(); err != nil {
		t.Fatalf("building the republisher: %v\n%s", err, out)
	}
	api, err := rig.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	health, err := rig.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	side := exec.Command(sidecar)
	side.Env = append(os.Environ(), "KQO_BOOTSTRAP_SERVERS="+cm.Data["KAFKA_BOOTSTRAP_SERVERS"], "KQO_TOPIC="+cm.Data["KAFKA_TOPIC"],
		"KQO_GROUP="+cm.Data["KAFKA_GROUP_ID"], "KQO_DEAD_LETTER_TOPIC="+route.Status.TopicName, "KQO_MAX_DELIVERY_ATTEMPTS=5",
		"KQO_LISTEN="+api, "KQO_METRICS_BIND_ADDRESS="+health)
	var sideLog strings.Builder
	side.Stdout, side.Stderr = &sideLog, &sideLog
	side.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := side.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = side.Process.Signal(syscall.SIGTERM); _ = side.Wait() })
	rig.Eventually(t, 60*time.Second, func() string {
		resp, err := http.Get("http://" + health + "/readyz")
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("sidecar /readyz %d\n%s", resp.StatusCode, sideLog.String())
		}
		return ""
	})
	values := produce("curl", 3)
	curlEnv := append(slices.Clone(env), "KQO_REPUBLISHER_URL=http://"+api)
	round := rig.DocBlock(t, "docs/consuming.md", "consumer-curl")
	seen := map[string]bool{}
	rig.Eventually(t, 60*time.Second, func() string {
		out, errOut, err := p.run(t, dir, curlEnv, "bash", "-euo", "pipefail", "-c", round)
		if err != nil {
			return fmt.Sprintf("the curl round: %v\n%s%s", err, out, errOut)
		}
		for _, l := range strings.Split(out, "\n") {
			if v, ok := strings.CutPrefix(l, "processed "); ok {
				seen[v] = true
			}
			if strings.HasPrefix(l, "{") && !strings.Contains(l, `"code":200`) {
				t.Errorf("an accept was not taken: %s", l)
			}
		}
		for _, v := range values {
			if !seen[v] {
				return fmt.Sprintf("processed %v of %v", seen, values)
			}
		}
		return ""
	})
}

// runConsumer starts a docs consumer with exactly env (and PATH, HOME), waits until it
// printed "processed V" for every value, then stops it with SIGTERM and requires it to exit
// by itself.
func runConsumer(t *testing.T, lang string, cmd *exec.Cmd, env, values []string) {
	t.Helper()
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	// Dies with the test process (a killed test run left the consumer polling for ever).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(lines)
	}()
	deadline := time.After(90 * time.Second)
	for missing := len(values); missing > 0; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the %s consumer exited having processed %v of %v: %v\n%s", lang, seen, values, cmd.Wait(), stderr.String())
			}
			if v, ok := strings.CutPrefix(l, "processed "); ok && !seen[v] {
				seen[v] = true
				missing--
			}
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("the %s consumer processed %v of %v in 90 s\n%s", lang, seen, values, stderr.String())
		}
	}
	for _, v := range values {
		if !seen[v] {
			t.Errorf("the %s consumer did not process %s (it processed %v)", lang, v, seen)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() {
		for range lines {
		}
		exited <- cmd.Wait()
	}()
	select {
	case err := <-exited:
		if err != nil && !strings.Contains(err.Error(), "signal: terminated") && !strings.Contains(err.Error(), "exit status 143") {
			t.Errorf("the %s consumer exited with %v after SIGTERM\n%s", lang, err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Errorf("the %s consumer did not exit within 30 s of SIGTERM", lang)
	}
}
