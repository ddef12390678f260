package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Queue depth metrics, set by the depth poller every --depth-interval (docs/autoscaling.md
// maps each to its SQS attribute). One series per ShareQueue or DeadLetterRoute (namespace,
// name). A queue that could not be read in the last round has no backlog, age or unread
// series (absent, never an old value); its last-read timestamp stays, so
// time() - kafkaqueues_queue_depth_last_read_timestamp_seconds is how stale it is.
var (
	depthRounds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kafkaqueues_depth_polls_total",
		Help: "Depth poller rounds per KafkaCluster, by outcome (ok, error).",
	}, []string{"namespace", "name", "outcome"})
	depthStatusWrites = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kafkaqueues_depth_status_writes_total",
		Help: "ShareQueue status.depth patches written by the depth poller.",
	})

	// perQueueMetrics holds the per-queue series: the depth poller's (backlog, its old name lag,
	// oldest age, unread partitions, last read, dead letters) and the queue reconciler's
	// member count (queue_metrics.go).
	perQueueMetrics = newQueueMetrics()

	depthMetrics = []prometheus.Collector{perQueueMetrics, depthRounds, depthStatusWrites}
)
