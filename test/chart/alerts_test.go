package chart

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"sigs.k8s.io/yaml"

	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// TestChartAlertsFire: the chart's PrometheusRule, rendered with the default values, passes
// `promtool check rules`, and `promtool test rules` (testdata/alerts-test.yaml) shows each
// alert silent before its `for`, firing after it, with its labels and annotations — on a real
// promtool built from the Go module proxy (hack/build-prometheus.sh).
func TestChartAlertsFire(t *testing.T) {
	t.Parallel()
	rig.SkipWithoutRig(t, "promtool")
	bins, err := rig.PrometheusBinaries()
	if err != nil {
		t.Fatal(err)
	}
	out, err := render("--set", "metrics.prometheusRule.enabled=true")
	if err != nil {
		t.Fatal(err)
	}
	var rule monitoringv1.PrometheusRule
	strictInto(t, out, "PrometheusRule", "kqo-kafka-queue-operator", &rule)
	rules, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join("testdata", "alerts-test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts-test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "alerts-test.yaml"}} {
		cmd := exec.Command(filepath.Join(bins, "promtool"), args...)
		cmd.Dir = dir
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %v: %v\n%s\nrules.yaml:\n%s", args, err, b, rules)
		}
	}
}

// `helm --set metrics.prometheusRule.retentionRatio=0.9` passes the value as a string; the
// schema takes it (a breaker's finding: it was refused with "got string, want number"), the
// rule uses it, and a value outside (0, 1] is still refused in either form.
func TestChartRetentionRatioFromSet(t *testing.T) {
	t.Parallel()
	for _, set := range []string{"--set", "--set-json"} {
		out, err := render("--set", "metrics.prometheusRule.enabled=true", set, "metrics.prometheusRule.retentionRatio=0.9")
		if err != nil {
			t.Fatalf("%s retentionRatio=0.9: %v", set, err)
		}
		if !strings.Contains(out, "kafkaqueues_queue_topic_retention_seconds) > 0.9\n") {
			t.Errorf("%s retentionRatio=0.9: the rule does not compare with 0.9:\n%s", set, out)
		}
		for _, bad := range []string{"0", "1.5", "-0.2"} {
			if _, err := render("--set", "metrics.prometheusRule.enabled=true", set, "metrics.prometheusRule.retentionRatio="+bad); err == nil || !strings.Contains(err.Error(), "retentionRatio") {
				t.Errorf("%s retentionRatio=%s: %v, want the schema to refuse it naming retentionRatio", set, bad, err)
			}
		}
	}
}
