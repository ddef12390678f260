package controllers

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// conditionDesc is kafkaqueues_resource_condition: one series per condition of every object
// of the five kinds the manager caches, value 1, labelled with the condition's type, status
// and reason (never its message), so "Ready has not been True for 15 minutes" is an alert.
// It is read from the manager's cache at each scrape (as kube-state-metrics reads objects),
// so it is exactly the status the apiserver holds and has no series of deleted objects.
var conditionDesc = prometheus.NewDesc("kafkaqueues_resource_condition",
	"Conditions of the operator's objects as the apiserver holds them: 1 for each (kind, namespace, name, condition type) with its current status and reason.",
	[]string{"kind", "namespace", "name", "type", "status", "reason"}, nil)

// conditionCollector lists the objects from the cache of the manager SetupAll last set up
// (one per process in production).
type conditionCollector struct {
	mu     sync.Mutex
	reader client.Reader
}

var conditions = &conditionCollector{}

func init() { metrics.Registry.MustRegister(conditions) }

func (c *conditionCollector) setReader(r client.Reader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reader = r
}

// Describe implements prometheus.Collector.
func (c *conditionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- conditionDesc }

// Collect implements prometheus.Collector. A kind the cache cannot list (not started yet, or
// not watched by this manager) contributes nothing.
func (c *conditionCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	r := c.reader
	c.mu.Unlock()
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	emit := func(kind, ns, name string, conds []metav1.Condition) {
		for _, cond := range conds {
			ch <- prometheus.MustNewConstMetric(conditionDesc, prometheus.GaugeValue, 1, kind, ns, name, cond.Type, string(cond.Status), cond.Reason)
		}
	}
	for _, l := range []struct {
		kind string
		list client.ObjectList
	}{
		{"ShareQueue", &kqv1.ShareQueueList{}}, {"DeadLetterRoute", &kqv1.DeadLetterRouteList{}},
		{"KafkaCluster", &kqv1.KafkaClusterList{}}, {"OffsetReset", &kqv1.OffsetResetList{}},
		{"DeadLetterRedrive", &kqv1.DeadLetterRedriveList{}},
	} {
		if r.List(ctx, l.list, client.UnsafeDisableDeepCopy) != nil {
			continue
		}
		_ = meta.EachListItem(l.list, func(o runtime.Object) error {
			if co, ok := o.(client.Object); ok {
				emit(l.kind, co.GetNamespace(), co.GetName(), conditionsOf(o))
			}
			return nil
		})
	}
}

// conditionsOf is an object's status.conditions (nil for another kind).
func conditionsOf(o runtime.Object) []metav1.Condition {
	switch x := o.(type) {
	case *kqv1.ShareQueue:
		return x.Status.Conditions
	case *kqv1.DeadLetterRoute:
		return x.Status.Conditions
	case *kqv1.KafkaCluster:
		return x.Status.Conditions
	case *kqv1.OffsetReset:
		return x.Status.Conditions
	case *kqv1.DeadLetterRedrive:
		return x.Status.Conditions
	}
	return nil
}
