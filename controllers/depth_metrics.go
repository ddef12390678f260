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
	queueBacklog = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kafkaqueues_queue_backlog_records",
		Help: "Records of a ShareQueue not yet acknowledged, visible or in flight, over every partition (SQS ApproximateNumberOfMessagesVisible + NotVisible).",
	}, []string{"namespace", "name"})
	queueOldestAge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kafkaqueues_queue_oldest_record_age_seconds",
		Help: "Age of the oldest unacknowledged record of a ShareQueue at the last read, 0 with no backlog (SQS ApproximateAgeOfOldestMessage).",
	}, []string{"namespace", "name"})
	queueUnread = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kafkaqueues_queue_depth_unread_partitions",
		Help: "Partitions of a ShareQueue left out of the last backlog because they could not be read (0: the backlog is complete).",
	}, []string{"namespace", "name"})
	queueLastRead = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kafkaqueues_queue_depth_last_read_timestamp_seconds",
		Help: "Unix time of the last successful depth read of a ShareQueue.",
	}, []string{"namespace", "name"})
	deadLetterRecords = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kafkaqueues_deadletter_records",
		Help: "Records in a DeadLetterRoute's topic (end minus log start offset over its partitions; SQS ApproximateNumberOfMessagesVisible of the DLQ).",
	}, []string{"namespace", "name", "queue"})
	depthRounds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kafkaqueues_depth_polls_total",
		Help: "Depth poller rounds per KafkaCluster, by outcome (ok, error).",
	}, []string{"namespace", "name", "outcome"})
	depthStatusWrites = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kafkaqueues_depth_status_writes_total",
		Help: "ShareQueue status.depth patches written by the depth poller.",
	})

	depthMetrics = []prometheus.Collector{queueBacklog, queueOldestAge, queueUnread, queueLastRead, deadLetterRecords, depthRounds, depthStatusWrites}
)

// deleteQueueDepthSeries removes a queue's depth series that must not outlive a read
// (backlog, its old name, age, unread partitions).
func deleteQueueDepthSeries(namespace, name string) {
	for _, g := range []*prometheus.GaugeVec{queueBacklog, queueLag, queueOldestAge, queueUnread} {
		g.DeleteLabelValues(namespace, name)
	}
}
