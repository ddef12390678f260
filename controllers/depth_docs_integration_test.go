package controllers

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// selectorQuery is the PromQL the recipes use: an optional aggregation sum(...) [by (...)]
// around one metric selector with = and != matchers.
var selectorQuery = regexp.MustCompile(`^(?:sum\()?([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}\)?(?: by \([a-z_, ]+\))?$`)

// evalSelector evaluates such a query against the manager's registry: the sum of the
// matching series, and how many matched.
func evalSelector(t *testing.T, query string) (float64, int) {
	t.Helper()
	m := selectorQuery.FindStringSubmatch(strings.TrimSpace(query))
	if m == nil {
		t.Fatalf("query %q is not a metric selector (optionally summed)", query)
	}
	type matcher struct {
		label, value string
		neg          bool
	}
	var ms []matcher
	for _, part := range strings.Split(m[2], ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		mm := regexp.MustCompile(`^([a-z_]+)(!?=)"([^"]*)"$`).FindStringSubmatch(part)
		if mm == nil {
			t.Fatalf("query %q: matcher %q is not label=\"v\" or label!=\"v\"", query, part)
		}
		ms = append(ms, matcher{mm[1], mm[3], mm[2] == "!="})
	}
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum, n := 0.0, 0
	for _, mf := range mfs {
		if mf.GetName() != m[1] {
			continue
		}
	series:
		for _, s := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range s.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for _, x := range ms {
				if (have[x.label] == x.value) == !x.neg {
					continue
				}
				continue series
			}
			sum += s.GetGauge().GetValue()
			n++
		}
	}
	return sum, n
}

// docs/autoscaling.md's manifests: the HPA is accepted by the apiserver; the KEDA
// ScaledObject and the prometheus-adapter rules (their CRDs and binaries are not on the rig)
// decode strictly into their documented shape; and their queries, evaluated against the
// metrics the manager serves, give the backlog of the queue shop/orders (42 records,
// earliest). When the queue cannot be read, the KEDA query matches nothing (the scaler then
// errors and KEDA holds its fallback).
func TestAutoscalingDocsManifests(t *testing.T) {
	t.Parallel()
	r := startRig(t)
	ctx := ctxFor(t)
	blocks := rig.YAMLBlocks(t, "docs/autoscaling.md")
	for _, name := range []string{"keda", "hpa", "adapter-rules"} {
		if blocks[name] == "" {
			t.Fatalf("docs/autoscaling.md has no <!-- yaml:%s --> block", name)
		}
	}
	ns := "shop"
	if err := r.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	r.newCluster(t, ns)
	sq := r.newDepthQueue(t, ns, "orders", "earliest")
	r.produceTo(t, sq.Status.TopicName, 42)

	// KEDA: the documented fields, strictly.
	var so struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metav1.ObjectMeta `json:"metadata"`
		Spec       struct {
			ScaleTargetRef  struct{ Name string } `json:"scaleTargetRef"`
			MinReplicaCount int32                 `json:"minReplicaCount"`
			MaxReplicaCount int32                 `json:"maxReplicaCount"`
			Fallback        struct {
				FailureThreshold int32 `json:"failureThreshold"`
				Replicas         int32 `json:"replicas"`
			} `json:"fallback"`
			Triggers []struct {
				Type     string            `json:"type"`
				Metadata map[string]string `json:"metadata"`
			} `json:"triggers"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict([]byte(blocks["keda"]), &so); err != nil {
		t.Fatalf("keda block: %v", err)
	}
	if so.APIVersion != "keda.sh/v1alpha1" || so.Kind != "ScaledObject" || so.Metadata.Namespace != ns || so.Spec.ScaleTargetRef.Name == "" ||
		len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "prometheus" || so.Spec.Fallback.Replicas < 1 || so.Spec.MaxReplicaCount < so.Spec.MinReplicaCount {
		t.Fatalf("keda block: %+v", so)
	}
	trig := so.Spec.Triggers[0].Metadata
	for _, k := range []string{"serverAddress", "query", "threshold"} {
		if trig[k] == "" {
			t.Errorf("keda trigger without %s", k)
		}
	}
	if trig["ignoreNullValues"] != "false" {
		t.Errorf("keda trigger ignoreNullValues %q: an absent series must be an error, not 0", trig["ignoreNullValues"])
	}

	// prometheus-adapter rules: strictly, and the metricsQuery as the adapter expands it for
	// the HPA's selector in namespace shop.
	var rules struct {
		Rules struct {
			External []struct {
				SeriesQuery string `json:"seriesQuery"`
				Resources   struct {
					Overrides map[string]struct {
						Resource string `json:"resource"`
					} `json:"overrides"`
				} `json:"resources"`
				Name struct {
					As string `json:"as"`
				} `json:"name"`
				MetricsQuery string `json:"metricsQuery"`
			} `json:"external"`
		} `json:"rules"`
	}
	if err := yaml.UnmarshalStrict([]byte(blocks["adapter-rules"]), &rules); err != nil {
		t.Fatalf("adapter-rules block: %v", err)
	}
	if len(rules.Rules.External) != 1 {
		t.Fatalf("adapter-rules: %+v", rules)
	}
	rule := rules.Rules.External[0]
	metricName := strings.SplitN(rule.SeriesQuery, "{", 2)[0]
	expanded := strings.NewReplacer("<<.Series>>", metricName, "<<.LabelMatchers>>", `namespace="shop",name="orders"`).Replace(rule.MetricsQuery)

	// HPA: created on the apiserver, reading the adapter rule's metric for queue orders.
	var hpa autoscalingv2.HorizontalPodAutoscaler
	if err := yaml.UnmarshalStrict([]byte(blocks["hpa"]), &hpa); err != nil {
		t.Fatalf("hpa block: %v", err)
	}
	if err := r.k8s.Create(ctx, &hpa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("the apiserver refused the documented HPA: %v", err)
	}
	ext := hpa.Spec.Metrics[0].External
	if ext == nil || ext.Metric.Name != rule.Name.As || ext.Metric.Selector.MatchLabels["name"] != sq.Name || hpa.Namespace != ns {
		t.Errorf("the HPA does not read the adapter's metric for queue %s: %+v", sq.Name, hpa.Spec.Metrics)
	}

	for what, q := range map[string]string{"keda query": trig["query"], "adapter seriesQuery": rule.SeriesQuery, "adapter metricsQuery": expanded} {
		eventually(t, 30*time.Second, func() string {
			v, n := evalSelector(t, q)
			switch {
			case n == 0:
				return fmt.Sprintf("%s %q matches no series", what, q)
			case what != "adapter seriesQuery" && v != 42:
				return fmt.Sprintf("%s %q = %v over %d series, want 42", what, q, v, n)
			}
			return ""
		})
	}

	// The same queries on a real Prometheus scraping the manager as the chart's ServiceMonitor
	// has prometheus-operator configure it (honorLabels).
	query := onRealPrometheus(t, map[string]string{"keda query": trig["query"], "adapter metricsQuery": expanded}, 42)
	// The chart's Grafana dashboard, every panel on the same Prometheus.
	checkDashboard(t, query, ns, sq.Name)

	// The queue cannot be read: the KEDA query matches nothing.
	r.makeUnreadable(t, sq)
	eventually(t, 30*time.Second, func() string {
		if v, n := evalSelector(t, trig["query"]); n != 0 {
			return fmt.Sprintf("keda query still matches %d series (%v) for an unreadable queue", n, v)
		}
		return ""
	})
}
