package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// pluginPath is a PATH on which kubectl finds kqctl as the plugin kq (kubectl-kq and
// kubectl_complete-kq, links to a kqctl built like `make build`) and kubectl itself.
type pluginPath struct {
	bin     string // the directory holding kqctl and its links
	kubectl string
	path    string
}

// buildPlugin builds kqctl into a temp dir with the links `make build` makes, or skips
// (fails under the rig requirement) when the envtest kubectl is missing.
func buildPlugin(t *testing.T) *pluginPath {
	t.Helper()
	kubectl, err := rig.Kubectl()
	if err == nil {
		_, err = os.Stat(kubectl)
	}
	if err != nil {
		if rig.RigRequired() {
			t.Fatalf("kubectl (hack/build-envtest-bins.sh): %v", err)
		}
		t.Skipf("no kubectl from hack/build-envtest-bins.sh: %v", err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "kqctl"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, link := range []string{pluginBinary, completionBinary} {
		if err := os.Symlink("kqctl", filepath.Join(bin, link)); err != nil {
			t.Fatal(err)
		}
	}
	return &pluginPath{bin: bin, kubectl: kubectl,
		path: bin + string(os.PathListSeparator) + filepath.Dir(kubectl) + string(os.PathListSeparator) + os.Getenv("PATH")}
}

// run runs argv (argv[0] looked up on the plugin PATH) in dir with extra environment.
func (p *pluginPath) run(t *testing.T, dir string, env []string, argv ...string) (stdout, stderr string, err error) {
	t.Helper()
	var cmd *exec.Cmd
	if argv[0] == "kubectl" {
		cmd = exec.Command(p.kubectl, argv[1:]...)
	} else {
		cmd = exec.Command(argv[0], argv[1:]...)
	}
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "PATH="+p.path, "KUBECONFIG="), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// TestKubectlPlugin builds kqctl once, as `make build` does, and runs the real kubectl with it
// on PATH: help, completion, the kubeconfig flags, docs/kqctl.md's commands, the krew archive.
func TestKubectlPlugin(t *testing.T) {
	p := buildPlugin(t)
	t.Run("help", func(t *testing.T) { testKubectlPluginHelp(t, p) })
	t.Run("completion", func(t *testing.T) { testKubectlPluginCompletion(t, p) })
	t.Run("kubeconfig flags", func(t *testing.T) { testKubectlPluginKubeconfigFlags(t, p) })
	t.Run("docs commands", func(t *testing.T) { testDocsKqctlCommands(t, p) })
	t.Run("consuming docs", func(t *testing.T) { testConsumingDocs(t, p) })
	t.Run("queue operations docs", func(t *testing.T) { testQueueOperationsDocs(t, p) })
	t.Run("krew release archive", func(t *testing.T) { testKrewReleaseArchive(t, p) })
}

// testKubectlPluginHelp: kubectl finds kubectl-kq on PATH and the usage text says `kubectl kq`.
// Needs no cluster.
func testKubectlPluginHelp(t *testing.T, p *pluginPath) {
	dir := t.TempDir()
	out, errOut, err := p.run(t, dir, nil, "kubectl", "plugin", "list")
	if err != nil || !strings.Contains(out, filepath.Join(p.bin, pluginBinary)) {
		t.Errorf("kubectl plugin list: %v\n%s%s", err, out, errOut)
	}
	out, errOut, err = p.run(t, dir, nil, "kubectl", "kq", "--help")
	if err != nil {
		t.Fatalf("kubectl kq --help: %v\n%s", err, errOut)
	}
	for _, want := range []string{"kubectl kq [command]", `Use "kubectl kq [command] --help"`, "import", "status", "plan", "completion",
		"--kubeconfig", "--context", "-n, --namespace", "--as string"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl kq --help lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "kqctl") {
		t.Errorf("kubectl kq --help names kqctl:\n%s", out)
	}
	out, _, err = p.run(t, dir, nil, "kubectl", "kq", "import", "sqs", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kubectl kq import sqs -f attributes.json", "--kafka-cluster string", "Global Flags:", "--context string"} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl kq import sqs --help lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "--cluster string") && !strings.Contains(out, "--kafka-cluster string") {
		t.Errorf("import sqs still documents --cluster:\n%s", out)
	}
	out, _, err = p.run(t, dir, nil, "kubectl", "kq", "status", "--help")
	if err != nil || !strings.Contains(out, "kubectl kq status -A -o yaml") || !strings.Contains(out, "-A, --all-namespaces") {
		t.Errorf("kubectl kq status --help: %v\n%s", err, out)
	}
	// Run as kqctl, it names itself kqctl; kubectl's KUBECTL_PLUGINS_CALLER also means plugin.
	out, _, _ = p.run(t, dir, nil, filepath.Join(p.bin, "kqctl"), "--help")
	if !strings.Contains(out, "kqctl [command]") {
		t.Errorf("kqctl --help:\n%s", out)
	}
	out, _, _ = p.run(t, dir, []string{"KUBECTL_PLUGINS_CALLER=" + p.kubectl}, filepath.Join(p.bin, "kqctl"), "--help")
	if !strings.Contains(out, "kubectl kq [command]") {
		t.Errorf("kqctl --help under KUBECTL_PLUGINS_CALLER:\n%s", out)
	}
	// Usage errors keep exit status 2.
	_, errOut, err = p.run(t, dir, nil, "kubectl", "kq", "bogus")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(errOut, `unknown command "bogus" for "kubectl kq"`) {
		t.Errorf("kubectl kq bogus: %v %q", err, errOut)
	}
}

// completions asks kubectl to complete `kubectl <words...>` the way the shell scripts do,
// returning the candidates (without descriptions).
func (p *pluginPath) completions(t *testing.T, env []string, words ...string) []string {
	t.Helper()
	out, errOut, err := p.run(t, t.TempDir(), env, append([]string{"kubectl", "__complete"}, words...)...)
	if err != nil {
		t.Fatalf("kubectl __complete %q: %v\n%s", words, err, errOut)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" || strings.HasPrefix(line, ":") {
			continue
		}
		got = append(got, strings.SplitN(line, "\t", 2)[0])
	}
	return got
}

func containsAll(have []string, want ...string) bool {
	set := map[string]bool{}
	for _, h := range have {
		set[h] = true
	}
	for _, w := range want {
		if !set[w] {
			return false
		}
	}
	return true
}

// testKubectlPluginCompletion: kubectl completes `kubectl kq ...` through kubectl_complete-kq
// (its plugin completion lookup); kqctl completion writes bash, zsh and fish scripts.
func testKubectlPluginCompletion(t *testing.T, p *pluginPath) {
	if got := p.completions(t, nil, "k"); !containsAll(got, "kq") {
		t.Errorf("kubectl k<TAB>: %q, want the plugin kq", got)
	}
	if got := p.completions(t, nil, "kq", ""); !containsAll(got, "import", "status", "plan", "completion") {
		t.Errorf("kubectl kq <TAB>: %q", got)
	}
	if got := p.completions(t, nil, "kq", "import", ""); !containsAll(got, "sqs") {
		t.Errorf("kubectl kq import <TAB>: %q", got)
	}
	if got := p.completions(t, nil, "kq", "import", "sqs", "--kafka"); !containsAll(got, "--kafka-cluster") {
		t.Errorf("kubectl kq import sqs --kafka<TAB>: %q", got)
	}
	if got := p.completions(t, nil, "kq", "status", "-o", ""); !containsAll(got, "table", "yaml", "json") {
		t.Errorf("kubectl kq status -o <TAB>: %q", got)
	}
	if got := p.completions(t, nil, "kq", "completion", ""); !containsAll(got, "bash", "zsh", "fish") {
		t.Errorf("kubectl kq completion <TAB>: %q", got)
	}
	// --context completes from the kubeconfig kubectl's environment names.
	kc := filepath.Join(t.TempDir(), "config")
	raw := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts: [{name: staging, context: {cluster: c, user: u}}, {name: prod, context: {cluster: c, user: u}}]
current-context: staging
`
	if err := os.WriteFile(kc, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := p.completions(t, []string{"KUBECONFIG=" + kc}, "kq", "status", "--context", ""); !containsAll(got, "prod", "staging") {
		t.Errorf("kubectl kq status --context <TAB>: %q", got)
	}
	if got := p.completions(t, nil, "kq", "status", "--kubeconfig", kc, "--context", "pr"); len(got) != 1 || got[0] != "prod" {
		t.Errorf("kubectl kq status --kubeconfig K --context pr<TAB>: %q", got)
	}

	for shell, want := range map[string]string{"bash": "__start_kqctl", "zsh": "#compdef kqctl", "fish": "complete -c kqctl"} {
		var out bytes.Buffer
		if err := run([]string{"completion", shell}, &out, os.Stderr); err != nil || !strings.Contains(out.String(), want) {
			t.Errorf("kqctl completion %s: %v, lacks %q", shell, err, want)
		}
	}

	// Against the rig: -n completes namespaces and --kafka-cluster the KafkaClusters.
	skipShort(t)
	env := []string{"KUBECONFIG=" + kubeconfig}
	if got := p.completions(t, env, "kq", "status", "-n", ""); !containsAll(got, "default", "kube-system") {
		t.Errorf("kubectl kq status -n <TAB>: %q", got)
	}
	if got := p.completions(t, env, "kq", "import", "sqs", "--kafka-cluster", ""); !containsAll(got, "local") {
		t.Errorf("kubectl kq import sqs --kafka-cluster <TAB>: %q", got)
	}
}

// writeContexts writes a kubeconfig whose current context cannot be reached and whose
// context rig-shop reaches the rig with namespace ns.
func writeContexts(t *testing.T, ns string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Clusters["unreachable"] = cfg.Clusters["rig"].DeepCopy()
	cfg.Clusters["unreachable"].Server = "https://127.0.0.1:1"
	broken := cfg.Contexts["rig"].DeepCopy()
	broken.Cluster = "unreachable"
	cfg.Contexts["broken"] = broken
	shop := cfg.Contexts["rig"].DeepCopy()
	shop.Namespace = ns
	cfg.Contexts["rig-shop"] = shop
	cfg.CurrentContext = "broken"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	err := k8s.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// testKubectlPluginKubeconfigFlags: --kubeconfig, --context, -n, -A and --as select what
// `kubectl kq status` reads, as they do for kubectl.
func testKubectlPluginKubeconfigFlags(t *testing.T, p *pluginPath) {
	skipShort(t)
	ctx := context.Background()
	ensureNamespace(t, "kq-ctx")
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "kq-ctx", Name: "kq-ctx-queue"}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: "absent"}}}
	if err := k8s.Create(ctx, sq); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k8s.Delete(ctx, sq) }()
	kc := writeContexts(t, "kq-ctx")
	dir := t.TempDir()

	names := func(args ...string) ([]string, error) {
		t.Helper()
		out, errOut, err := p.run(t, dir, nil, append([]string{"kubectl", "kq", "status", "-o", "json"}, args...)...)
		if err != nil {
			return nil, errors.New(err.Error() + ": " + errOut)
		}
		var rows []queueRow
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		var ns []string
		for _, r := range rows {
			ns = append(ns, r.Namespace+"/"+r.Name)
		}
		return ns, nil
	}
	if got, err := names("--kubeconfig", kc, "--context", "rig-shop"); err != nil || len(got) != 1 || got[0] != "kq-ctx/kq-ctx-queue" {
		t.Errorf("--context rig-shop (namespace kq-ctx): %q %v", got, err)
	}
	if got, err := names("--kubeconfig", kc, "--context", "rig-shop", "-n", "default"); err != nil || containsAll(got, "kq-ctx/kq-ctx-queue") {
		t.Errorf("--context rig-shop -n default: %q %v", got, err)
	}
	if got, err := names("--kubeconfig", kc, "--context", "rig-shop", "--namespace=default"); err != nil || containsAll(got, "kq-ctx/kq-ctx-queue") {
		t.Errorf("--context rig-shop --namespace=default: %q %v", got, err)
	}
	if got, err := names("--kubeconfig", kc, "--context", "rig-shop", "-A"); err != nil || !containsAll(got, "kq-ctx/kq-ctx-queue") {
		t.Errorf("--context rig-shop -A: %q %v", got, err)
	}
	// The current context is unreachable: without --context kqctl goes there.
	if _, err := names("--kubeconfig", kc, "--request-timeout", "5s"); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("current context (unreachable): %v", err)
	}
	// KUBECONFIG works as for kubectl.
	out, errOut, err := p.run(t, dir, []string{"KUBECONFIG=" + kc}, "kubectl", "kq", "status", "--context", "rig-shop")
	if err != nil || !strings.Contains(out, "kq-ctx-queue") {
		t.Errorf("KUBECONFIG + --context: %v\n%s%s", err, out, errOut)
	}
	// --as impersonates: an account without RBAC is refused, by name.
	_, err = names("--kubeconfig", kc, "--context", "rig-shop", "--as", "system:serviceaccount:kq-ctx:nobody")
	if err == nil || !strings.Contains(err.Error(), `"system:serviceaccount:kq-ctx:nobody" cannot list`) {
		t.Errorf("--as nobody: %v", err)
	}
	// import sqs: -n and --context select where --kafka-cluster is read.
	abs, _ := filepath.Abs("../../internal/sqsimport/testdata/standard.json")
	out, errOut, err = p.run(t, dir, nil, "kubectl", "kq", "import", "sqs", "--kubeconfig", kc, "--context", "rig-shop", "-n", "default",
		"-f", abs, "--kafka-cluster", "local")
	if err != nil || !strings.Contains(errOut, "check: every value fits KafkaCluster default/local's bounds") || !strings.Contains(out, "namespace: default") {
		t.Errorf("import sqs --context rig-shop -n default --kafka-cluster local: %v\n%s%s", err, out, errOut)
	}
	_, errOut, err = p.run(t, dir, nil, "kubectl", "kq", "import", "sqs", "--kubeconfig", kc, "--context", "rig-shop",
		"-f", abs, "--kafka-cluster", "local")
	if err == nil || !strings.Contains(errOut, "reading KafkaCluster kq-ctx/local") {
		t.Errorf("import sqs --context rig-shop (namespace kq-ctx) --kafka-cluster local: %v\n%s", err, errOut)
	}
}

// TestImportDeprecatedClusterFlag: --cluster on import sqs still names the KafkaCluster, with
// a deprecation note on stderr (stdout stays pure YAML).
func TestImportDeprecatedClusterFlag(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := runImportSQS([]string{"-f", "../../internal/sqsimport/testdata/fifo.json", "--cluster", "prod", "--no-check"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "name: prod") || strings.Contains(out.String(), "deprecated") {
		t.Errorf("stdout:\n%s", out.String())
	}
	if !strings.Contains(errOut.String(), "Flag --cluster has been deprecated, use --kafka-cluster") {
		t.Errorf("stderr: %q", errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if err := runImportSQS([]string{"-f", "../../internal/sqsimport/testdata/fifo.json", "--kafka-cluster", "prod", "--no-check"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "name: prod") || errOut.Len() != 0 {
		t.Errorf("--kafka-cluster: stdout\n%s\nstderr %q", out.String(), errOut.String())
	}
}

// docsCommands returns the commands of docs/kqctl.md's block marked <!-- test:kqctl -->.
func docsCommands(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(rig.RepoRoot(), "docs", "kqctl.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "<!-- test:kqctl -->\n```sh\n")
	if !ok {
		t.Fatal("docs/kqctl.md has no <!-- test:kqctl --> sh block")
	}
	block, _, _ := strings.Cut(rest, "```")
	var cmds []string
	for _, line := range strings.Split(block, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			cmds = append(cmds, line)
		}
	}
	return cmds
}

// testDocsKqctlCommands runs docs/kqctl.md's kqctl commands verbatim through kubectl's plugin
// lookup against the rig: a KafkaCluster kafka in namespace shop, attributes.json in the
// working directory.
func testDocsKqctlCommands(t *testing.T, p *pluginPath) {
	skipShort(t)
	ctx := context.Background()
	ensureNamespace(t, "shop")
	var local kqv1.KafkaCluster
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "local"}, &local); err != nil {
		t.Fatal(err)
	}
	kc := &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "kafka"}, Spec: kqv1.KafkaClusterSpec{BootstrapServers: local.Spec.BootstrapServers}}
	if err := k8s.Create(ctx, kc); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k8s.Delete(ctx, kc) }()
	for deadline := time.Now().Add(60 * time.Second); !meta.IsStatusConditionTrue(kc.Status.Conditions, kqv1.ConditionReady); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("KafkaCluster shop/kafka never Ready: %+v", kc.Status.Conditions)
		}
		_ = k8s.Get(ctx, client.ObjectKeyFromObject(kc), kc)
	}
	defer func() {
		_ = k8s.DeleteAllOf(ctx, &kqv1.DeadLetterRoute{}, client.InNamespace("shop"))
		_ = k8s.DeleteAllOf(ctx, &kqv1.ShareQueue{}, client.InNamespace("shop"))
	}()
	dir := t.TempDir()
	attrs, err := os.ReadFile("../../internal/sqsimport/testdata/standard.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "attributes.json"), attrs, 0o644); err != nil {
		t.Fatal(err)
	}

	cmds := docsCommands(t)
	if len(cmds) < 4 {
		t.Fatalf("docs/kqctl.md kqctl block: %q", cmds)
	}
	outputs := map[string]string{}
	for _, c := range cmds {
		out, errOut, err := p.run(t, dir, []string{"KUBECONFIG=" + kubeconfig}, "sh", "-c", c)
		if err != nil {
			t.Fatalf("%s: %v\n%s%s", c, err, out, errOut)
		}
		outputs[c] = out + errOut
		t.Logf("$ %s\n%s%s", c, out, errOut)
	}
	all := strings.Join(func() []string {
		var s []string
		for _, c := range cmds {
			s = append(s, outputs[c])
		}
		return s
	}(), "\n")
	for _, want := range []string{
		"check: every value fits KafkaCluster shop/kafka's bounds", // import sqs --kafka-cluster
		"ShareQueue shop/orders",                                   // plan
		"namespace: shop",                                          // status -A -o yaml
	} {
		if !strings.Contains(all, want) {
			t.Errorf("docs/kqctl.md commands' output lacks %q", want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "orders.yaml")); err != nil || !strings.Contains(string(b), "kind: ShareQueue") {
		t.Errorf("orders.yaml: %v\n%s", err, b)
	}
}

// Go-flag-style single-dash long flags (kqctl before cobra) are refused, not misread:
// pflag alone would take -no-check as -n o-check.
func TestSingleDashLongFlagsAreRefused(t *testing.T) {
	for _, args := range [][]string{
		{"import", "sqs", "-f", "../../internal/sqsimport/testdata/fifo.json", "--kafka-cluster", "prod", "-no-check"},
		{"status", "-kubeconfig", "/nonexistent"},
		{"plan", "-f", "m.yaml", "-namespace=x"},
	} {
		var out, errOut bytes.Buffer
		err := run(args, &out, &errOut)
		if err == nil || exitCode(err) != 2 || !strings.Contains(err.Error(), "needs two dashes") {
			t.Errorf("%q: %v (exit %d)", args, err, exitCode(err))
		}
	}
	// Shorthands with attached values still work.
	var out bytes.Buffer
	if err := run([]string{"import", "sqs", "-f../../internal/sqsimport/testdata/fifo.json", "-nshop"}, &out, os.Stderr); err != nil || !strings.Contains(out.String(), "namespace: shop") {
		t.Errorf("-f<file> -n<ns>: %v\n%s", err, out.String())
	}
}
