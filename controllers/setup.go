package controllers

import (
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// Options are the manager-wide settings of the reconcilers.
type Options struct {
	// ProbeInterval is how often each KafkaCluster is re-probed (brokers joining or leaving,
	// bounds changed by a rolling restart).
	ProbeInterval time.Duration
	// ResyncInterval is how often each ShareQueue is re-checked against Kafka.
	ResyncInterval time.Duration
	// KafkaTimeout bounds the Kafka requests of one reconcile.
	KafkaTimeout time.Duration
	// ClusterConcurrency is how many KafkaClusters are probed at once (an unreachable cluster
	// must not hold up the others); default 4.
	ClusterConcurrency int
	// QueueConcurrency is how many ShareQueues are reconciled at once. The manager's
	// --sharequeue-concurrency flag defaults to 256; 0 here (callers that set no value) means 8.
	QueueConcurrency int
	// FinalizerTimeout is how long a deleting ShareQueue (deletionPolicy Delete) waits for an
	// unreachable cluster before releasing its finalizer and leaving Kafka as it is; default 10m.
	FinalizerTimeout time.Duration
	// KafkaBatching coalesces the Kafka admin calls of concurrent reconciles on one cluster
	// into shared requests (see kafka.Batching). Off, every reconcile sends its own requests.
	KafkaBatching kafka.Batching
	// TopicCheckInterval is how often the topics of every queue and dead-letter route are
	// checked for deletion outside the operator (topicWatch: one Metadata request per
	// cluster); 0 turns the check off and leaves it to the resync.
	TopicCheckInterval time.Duration
	// WebhookConfigName names the republisher webhook's MutatingWebhookConfiguration (the
	// manager's --webhook-config-name when the webhook is on; empty when it is off), so a Pod
	// reported without its sidecar can be told apart from one the webhook never sees.
	WebhookConfigName string
}

// SetupAll registers every reconciler with the manager, sharing one Kafka client pool (one
// long-lived client per KafkaCluster).
func SetupAll(mgr ctrl.Manager, pool *kafka.Pool, opts Options) error {
	pool.SetObserver(observeKafka)
	pool.ObserveBrokerWrites(countBrokerRequest)
	pool.SetBatching(opts.KafkaBatching)
	recorder := mgr.GetEventRecorder("kafka-queue-operator")
	if err := (&KafkaClusterReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Pool: pool, Recorder: recorder,
		ProbeInterval: opts.ProbeInterval, KafkaTimeout: opts.KafkaTimeout, Concurrency: opts.ClusterConcurrency,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := indexRoutes(mgr); err != nil {
		return err
	}
	kafkaTimeout := opts.KafkaTimeout
	if kafkaTimeout <= 0 {
		kafkaTimeout = 30 * time.Second
	}
	watch := &topicWatch{client: mgr.GetClient(), pool: pool, interval: opts.TopicCheckInterval, timeout: kafkaTimeout,
		queues: make(chan event.GenericEvent), routes: make(chan event.GenericEvent)}
	if err := (&ShareQueueReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Pool: pool, Recorder: recorder,
		ResyncInterval: opts.ResyncInterval, KafkaTimeout: opts.KafkaTimeout, Concurrency: opts.QueueConcurrency,
		FinalizerTimeout: opts.FinalizerTimeout, topicGone: watch.queues,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&DeadLetterRouteReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Pool: pool, Recorder: recorder,
		ResyncInterval: opts.ResyncInterval, KafkaTimeout: opts.KafkaTimeout, FinalizerTimeout: opts.FinalizerTimeout,
		topicGone: watch.routes,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.Add(watch); err != nil {
		return err
	}
	// Pods admitted without their republisher sidecar (the webhook fails open). The manager's
	// cache should hold only labelled Pods: build it with CacheByObject.
	return (&PodReconciler{Client: mgr.GetClient(), Recorder: recorder, APIReader: mgr.GetAPIReader(), WebhookConfigName: opts.WebhookConfigName}).SetupWithManager(mgr)
}
