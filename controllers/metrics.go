package controllers

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// Operator metrics, served with controller-runtime's on the manager's metrics endpoint.
// Labels are bounded: kind (ShareQueue today), resource (topic|group|config), config (the 8
// share-group delivery configs).
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
	// Kafka admin calls: api is one of about a dozen Kafka API names; outcome is ok, a
	// Kafka error code name, timeout or transport (a few dozen at most).
	kafkaRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kafkaqueues_kafka_requests_total",
		Help: "Kafka admin calls made by the operator, by Kafka API and outcome.",
	}, []string{"api", "outcome"})
	// Every request written to a broker, including franz-go's own Metadata, ApiVersions and
	// FindCoordinator: api is a Kafka API name, a few dozen values at most.
	kafkaBrokerRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kafkaqueues_kafka_broker_requests_total",
		Help: "Requests the operator's Kafka clients wrote to brokers, by Kafka API (batched admin calls count once).",
	}, []string{"api"})
	kafkaLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "kafkaqueues_kafka_request_duration_seconds",
		Help:    "Latency of the operator's Kafka admin calls, by Kafka API.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 8), // 1 ms … 16 s
	}, []string{"api"})
	// One series per KafkaCluster and finalized feature (about 6 features).
	featureLevel = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kafkaqueues_cluster_feature_level",
		Help: "Finalized feature level reported by a KafkaCluster's brokers (share.version, metadata.version, ...).",
	}, []string{"namespace", "name", "feature"})
)

func init() {
	metrics.Registry.MustRegister(driftCorrections, driftDetections, outOfBoundsRejections,
		kafkaRequests, kafkaBrokerRequests, kafkaLatency, featureLevel)
	metrics.Registry.MustRegister(depthMetrics...)
}

// observeKafka records one admin call (wired into every Kafka client by SetupAll).
func observeKafka(api string, latency time.Duration, err error) {
	kafkaRequests.WithLabelValues(api, kafka.Outcome(err)).Inc()
	kafkaLatency.WithLabelValues(api).Observe(latency.Seconds())
}

// countBrokerRequest counts every request written to a broker (a kafka.BrokerWriteFunc).
func countBrokerRequest(api string, err error) {
	if err == nil {
		kafkaBrokerRequests.WithLabelValues(api).Inc()
	}
}
