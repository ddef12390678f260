package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// strictInto decodes a rendered object into prometheus-operator's own API type, refusing any
// field the type does not have (what the CRD's schema would prune or refuse).
func strictInto(t *testing.T, rendered, kind, name string, out any) {
	t.Helper()
	for _, u := range objects(t, rendered) {
		if u.GetKind() != kind || u.GetName() != name {
			continue
		}
		b, err := json.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(out); err != nil {
			t.Fatalf("%s %s does not fit prometheus-operator's %T: %v", kind, name, out, err)
		}
		return
	}
	t.Fatalf("no %s %s rendered", kind, name)
}

// The monitoring bundle (issue 34): every part off by default; on, each object fits
// prometheus-operator's API types; the ServiceMonitor honors the series' own namespace label;
// the PodMonitors select the shards' managers and the injected sidecars; every alert links a
// section of docs/alerts.md that exists and queries only metrics the operator exposes.
func TestChartMonitoringBundle(t *testing.T) {
	t.Parallel()
	out, err := render()
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"ServiceMonitor", "PodMonitor", "PrometheusRule"} {
		if strings.Contains(out, "kind: "+kind) {
			t.Errorf("the default install renders a %s (prometheus-operator's CRDs may be absent)", kind)
		}
	}
	out, err = render("--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.scrapeTimeout=20s",
		"--set", "metrics.serviceMonitor.relabelings[0].targetLabel=cluster", "--set", "metrics.serviceMonitor.relabelings[0].replacement=prod",
		"--set", "metrics.podMonitor.shards.enabled=true", "--set", "shards={s0}", "--set", "metrics.podMonitor.sidecars.enabled=true",
		"--set", "watchNamespaces={shop}", "--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.prometheusRule.labels.release=prom")
	if err != nil {
		t.Fatal(err)
	}
	var sm monitoringv1.ServiceMonitor
	strictInto(t, out, "ServiceMonitor", "kqo-kafka-queue-operator", &sm)
	if e := sm.Spec.Endpoints; len(e) != 1 || !e[0].HonorLabels || e[0].ScrapeTimeout != "20s" ||
		len(e[0].RelabelConfigs) != 1 || e[0].RelabelConfigs[0].TargetLabel != "cluster" {
		t.Errorf("ServiceMonitor endpoints %+v: want honorLabels true, scrapeTimeout 20s, the relabeling", e)
	}
	var shards, sidecars monitoringv1.PodMonitor
	strictInto(t, out, "PodMonitor", "kqo-kafka-queue-operator-shards", &shards)
	strictInto(t, out, "PodMonitor", "kqo-kafka-queue-operator-sidecars", &sidecars)
	if shards.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != "kafka-queue-operator-shard" || shards.Spec.PodMetricsEndpoints[0].Port == nil || *shards.Spec.PodMetricsEndpoints[0].Port != "metrics" {
		t.Errorf("shards PodMonitor %+v", shards.Spec)
	}
	// The shard Deployment's Pods carry the labels the PodMonitor selects.
	for _, o := range objects(t, out) {
		if o.GetKind() == "Deployment" && strings.Contains(o.GetName(), "-shard-") {
			labels, _, _ := unstructuredStringMap(o.Object, "spec", "template", "metadata", "labels")
			for k, v := range shards.Spec.Selector.MatchLabels {
				if labels[k] != v {
					t.Errorf("shard Pods' labels %v lack %s=%s", labels, k, v)
				}
			}
		}
	}
	if sidecars.Spec.Selector.MatchLabels["kafkaqueues.io/republisher"] != "injected" || *sidecars.Spec.PodMetricsEndpoints[0].Port != "kqo-metrics" ||
		strings.Join(sidecars.Spec.NamespaceSelector.MatchNames, ",") != "shop" {
		t.Errorf("sidecars PodMonitor %+v", sidecars.Spec)
	}

	var rule monitoringv1.PrometheusRule
	strictInto(t, out, "PrometheusRule", "kqo-kafka-queue-operator", &rule)
	if rule.Labels["release"] != "prom" {
		t.Errorf("PrometheusRule labels %v", rule.Labels)
	}
	alertsDoc, err := os.ReadFile(filepath.Join(rig.RepoRoot(), "docs", "alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\S+)$`).FindAllStringSubmatch(string(alertsDoc), -1) {
		anchors[strings.ToLower(m[1])] = true
	}
	exposed := exposedMetrics(t)
	var alerts []string
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			url := r.Annotations["runbook_url"]
			if _, anchor, ok := strings.Cut(url, "docs/alerts.md#"); !ok || !anchors[anchor] || anchor != strings.ToLower(r.Alert) {
				t.Errorf("alert %s: runbook_url %q names no section of docs/alerts.md", r.Alert, url)
			}
			for _, name := range regexp.MustCompile(`kafkaqueues_[a-z_]+`).FindAllString(r.Expr.String(), -1) {
				if !exposed[name] {
					t.Errorf("alert %s queries %s, which the operator does not expose", r.Alert, name)
				}
			}
		}
	}
	if len(alerts) < 7 {
		t.Errorf("alerts %v", alerts)
	}
}

// exposedMetrics are the metric names the operator's code declares (Name: "..." or NewDesc).
func exposedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	re := regexp.MustCompile(`"(kafkaqueues_[a-z_]+)"`)
	for _, dir := range []string{"controllers", "internal/republisher"} {
		files, err := filepath.Glob(filepath.Join(rig.RepoRoot(), dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				out[m[1]] = true
			}
		}
	}
	return out
}

func unstructuredStringMap(obj map[string]any, fields ...string) (map[string]string, bool, error) {
	cur := any(obj)
	for _, f := range fields {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[f]
	}
	m, ok := cur.(map[string]any)
	if !ok {
		return nil, false, nil
	}
	out := map[string]string{}
	for k, v := range m {
		out[k], _ = v.(string)
	}
	return out, true, nil
}

// The Grafana dashboard (grafana.dashboards.enabled): a ConfigMap with the sidecar's label,
// holding the chart's dashboard JSON (its queries run on a real Prometheus in controllers'
// TestAutoscalingDocsManifests).
func TestChartGrafanaDashboard(t *testing.T) {
	t.Parallel()
	out, err := render()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "-dashboard") {
		t.Error("the default install renders the dashboard ConfigMap")
	}
	out, err = render("--set", "grafana.dashboards.enabled=true", "--set", "grafana.dashboards.namespace=monitoring")
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	find(t, out, "ConfigMap", "kqo-kafka-queue-operator-dashboard", &cm)
	if cm.Labels["grafana_dashboard"] != "1" || cm.Namespace != "monitoring" {
		t.Errorf("dashboard ConfigMap labels %v namespace %s", cm.Labels, cm.Namespace)
	}
	var d struct {
		Title  string
		Panels []any
	}
	if err := json.Unmarshal([]byte(cm.Data["kafka-queue-operator.json"]), &d); err != nil || d.Title == "" || len(d.Panels) < 10 {
		t.Errorf("dashboard JSON: %v, title %q, %d panels", err, d.Title, len(d.Panels))
	}
}
