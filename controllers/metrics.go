package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Operator metrics, served with controller-runtime's on the manager's metrics endpoint.
// Labels are bounded: kind (3 values), resource (topic|group), config (the 8 share-group
// delivery configs).
var (
	driftCorrections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kafkaqueues_drift_corrections_total",
		Help: "Kafka configs written back because they had drifted from the spec (driftPolicy Enforce).",
	}, []string{"kind", "resource"})
	driftDetections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kafkaqueues_drift_detections_total",
		Help: "Reconciles that found Kafka configs differing from the spec and left them (driftPolicy Report).",
	}, []string{"kind", "resource"})
	outOfBoundsRejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kafkaqueues_out_of_bounds_rejections_total",
		Help: "Delivery values not written because they lie outside the brokers' KIP-1240 bounds (boundsPolicy Reject).",
	}, []string{"kind", "config"})
)

func init() {
	metrics.Registry.MustRegister(driftCorrections, driftDetections, outOfBoundsRejections)
}
