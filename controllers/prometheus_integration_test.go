package controllers

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// chartServiceMonitor renders the chart's ServiceMonitor (metrics.serviceMonitor.enabled) with
// the pinned helm and decodes it into prometheus-operator's type.
func chartServiceMonitor(t *testing.T) monitoringv1.ServiceMonitor {
	t.Helper()
	cmd := exec.Command("go", "tool", "-modfile=hack/tools/go.mod", "helm", "template", "kqo", "charts/kafka-queue-operator",
		"--namespace", "kqo-system", "--kube-version", "1.37.2", "--set", "metrics.serviceMonitor.enabled=true", "--show-only", "templates/metrics.yaml")
	cmd.Dir = rig.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	for _, doc := range strings.Split(string(out), "\n---") {
		if !strings.Contains(doc, "kind: ServiceMonitor") {
			continue
		}
		var sm monitoringv1.ServiceMonitor
		if err := yaml.UnmarshalStrict([]byte(doc), &sm); err != nil {
			t.Fatalf("the chart's ServiceMonitor: %v", err)
		}
		return sm
	}
	t.Fatalf("helm template rendered no ServiceMonitor:\n%s", out)
	return monitoringv1.ServiceMonitor{}
}

// onRealPrometheus scrapes the manager's metrics (this process's registry, as the manager
// serves it) with a real Prometheus, configured as prometheus-operator configures a target of
// the chart's ServiceMonitor: the target's own labels (namespace of the release, service,
// pod, ...) and the endpoint's honorLabels. Each query must return want. A second job without
// honor_labels shows what the chart's default avoids: the queue's namespace label renamed
// exported_namespace.
func onRealPrometheus(t *testing.T, queries map[string]string, want float64) (query func(string) (map[string]float64, error)) {
	t.Helper()
	bins, err := rig.PrometheusBinaries()
	if err != nil {
		t.Fatal(err)
	}
	sm := chartServiceMonitor(t)
	if len(sm.Spec.Endpoints) != 1 || !sm.Spec.Endpoints[0].HonorLabels {
		t.Fatalf("the chart's ServiceMonitor endpoints %+v: want one, with honorLabels", sm.Spec.Endpoints)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0") // held open: the test serves it
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	target := map[string]any{"targets": []string{l.Addr().String()}, "labels": map[string]string{
		"namespace": sm.Namespace, "service": "kqo-kafka-queue-operator-metrics", "endpoint": sm.Spec.Endpoints[0].Port,
		"pod": "kqo-kafka-queue-operator-5d8f7c9b6d-x7k2p", "container": "manager"}}
	job := func(name string, honor bool) map[string]any {
		return map[string]any{"job_name": name, "honor_labels": honor, "scrape_interval": "1s", "static_configs": []any{target}}
	}
	cfg, err := yaml.Marshal(map[string]any{
		"global":         map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"},
		"scrape_configs": []any{job("serviceMonitor/kqo-system/kqo-kafka-queue-operator/0", true), job("without-honor-labels", false)},
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	addr, err := rig.FreeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bins, "prometheus"), "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	query = func(q string) (map[string]float64, error) {
		resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var r struct {
			Status string
			Data   struct {
				Result []struct {
					Metric map[string]string
					Value  [2]any
				}
			}
		}
		if err := json.Unmarshal(b, &r); err != nil || r.Status != "success" {
			return nil, fmt.Errorf("%s: %v", b, err)
		}
		out := map[string]float64{}
		for _, s := range r.Data.Result {
			v, _ := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
			out[fmt.Sprint(s.Metric)] = v
		}
		return out, nil
	}
	for what, q := range queries {
		eventually(t, 90*time.Second, func() string {
			got, err := query(q)
			if err != nil {
				return fmt.Sprintf("%s %q: %v\n%s", what, q, err, logs.String())
			}
			if len(got) != 1 {
				return fmt.Sprintf("%s %q on Prometheus: %v, want one series of %v", what, q, got, want)
			}
			for _, v := range got {
				if v != want {
					return fmt.Sprintf("%s %q on Prometheus = %v, want %v", what, q, v, want)
				}
			}
			t.Logf("%s %q on Prometheus, scraping as the chart's ServiceMonitor makes it: %v", what, q, got)
			return ""
		})
	}
	// Without honor_labels the same series carry the target's namespace, and the queue's
	// moved to exported_namespace, where the documented queries do not look.
	eventually(t, 30*time.Second, func() string {
		got, err := query(`kafkaqueues_queue_backlog_records{job="without-honor-labels",exported_namespace="shop",name="orders"}`)
		if err != nil || len(got) != 1 {
			return fmt.Sprintf("the job without honor_labels: %v %v", got, err)
		}
		for m := range got {
			if !strings.Contains(m, "namespace:"+sm.Namespace) {
				return fmt.Sprintf("the job without honor_labels: %s, want namespace %s", m, sm.Namespace)
			}
		}
		return ""
	})
	return query
}

// checkDashboard evaluates every panel query of the chart's Grafana dashboard on the real
// Prometheus, with its variables set to namespace ns and queue name: each is valid PromQL,
// and the queue panels (backlog, oldest record) return the queue's series.
func checkDashboard(t *testing.T, query func(string) (map[string]float64, error), ns, name string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rig.RepoRoot(), "charts", "kafka-queue-operator", "dashboards", "kafka-queue-operator.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			ID      int
			Type    string
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	vars := strings.NewReplacer("$namespace", ns, "$queue", name, "$__rate_interval", "1m")
	ids := map[int]bool{}
	mustHaveData := map[string]bool{"kafkaqueues_queue_backlog_records": true, "kafkaqueues_queue_oldest_record_age_seconds": true}
	n := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		for _, tg := range p.Targets {
			n++
			q := vars.Replace(tg.Expr)
			got, err := query(q)
			if err != nil {
				t.Errorf("panel %q: %q is refused by Prometheus: %v", p.Title, q, err)
				continue
			}
			for metric := range mustHaveData {
				if strings.Contains(q, metric+"{") && len(got) == 0 {
					t.Errorf("panel %q: %q returns no series for queue %s/%s", p.Title, q, ns, name)
				}
			}
		}
	}
	if n < 9 {
		t.Errorf("%d panel queries; the dashboard has queues, operator and sidecar panels", n)
	}
}
