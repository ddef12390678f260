package controllers

import (
	"time"

	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// ShardLabel is the label the chart's shard Deployments select on (--watch-label-selector
// "kafkaqueues.io/shard in (NAME)"; the unsharded one "!kafkaqueues.io/shard"), as Flux's
// sharding.fluxcd.io/key does.
const ShardLabel = "kafkaqueues.io/shard"

// Scope is the part of the cluster one manager works on. The zero Scope is everything.
type Scope struct {
	// Namespaces, when not empty, limits the manager's caches, and so every reconciler, the
	// Pod watch and the topic watch, to these namespaces (--watch-namespaces). Its RBAC can
	// then be Roles in those namespaces (the chart's watchNamespaces).
	Namespaces []string
	// Selector, when not nil, limits the ShareQueues and DeadLetterRoutes the manager caches,
	// and the KafkaClusters it probes, to those whose labels match (--watch-label-selector).
	// KafkaClusters are all cached: a queue may use one probed by another shard.
	Selector labels.Selector
}

// inScope reports whether o's labels match the scope's selector (always, without one).
func (s Scope) inScope(o client.Object) bool {
	return s.Selector == nil || s.Selector.Matches(labels.Set(o.GetLabels()))
}

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
	// --sharequeue-concurrency flag defaults to 1024; 0 here (callers that set no value) means 8.
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
	// Scope is what this manager works on (namespaces, shard selector); build the manager's
	// cache with CacheOptions(Scope).
	Scope Scope
	// ClaimsTopic names the compacted topic, on every Kafka cluster, where managers record
	// which ShareQueue owns a topic or share group (kafka.Claims), so managers that cannot see
	// each other's queues (other namespaces, other shards, other installs) still agree on one
	// owner. Empty: ownership is decided among the queues this manager caches only.
	ClaimsTopic string
	// ManagerName identifies this manager in the claims it writes (informational).
	ManagerName string
	// RedriveProgressInterval is the least time between two progress writes of one
	// DeadLetterRedrive's status (--redrive-progress-interval); 0 means 5s.
	RedriveProgressInterval time.Duration
	// DepthInterval is how often the depth poller reads every queue's backlog, oldest record
	// and dead letters and refreshes the kafkaqueues_queue_* depth metrics (the manager's
	// --depth-interval, default 30s, at most MaxDepthInterval); 0 turns the poller off.
	DepthInterval time.Duration
	// DepthStatusInterval is the least time between two writes of one queue's status.depth
	// (--depth-status-interval, default 5m); 0 leaves status.depth unwritten.
	DepthStatusInterval time.Duration
	// KEDAScaler serves KEDA's external scaler API from the depth poller's rounds (off
	// without a bind address).
	KEDAScaler KEDAScalerOptions
}

// SetupAll registers every reconciler with the manager, sharing one Kafka client pool (one
// long-lived client per KafkaCluster).
func SetupAll(mgr ctrl.Manager, pool *kafka.Pool, opts Options) error {
	conditions.setReader(mgr.GetClient())
	pool.SetObserver(observeKafka)
	pool.ObserveBrokerWrites(countBrokerRequest)
	pool.SetBatching(opts.KafkaBatching)
	pool.ObserveBrokerConnects(countBrokerConnect)
	recorder := mgr.GetEventRecorder("kafka-queue-operator")
	gateTimeout := opts.KafkaTimeout
	if gateTimeout <= 0 {
		gateTimeout = 30 * time.Second
	}
	gate, gateCh, err := newGate(mgr, gateTimeout)
	if err != nil {
		return err
	}
	if err := (&KafkaClusterReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Pool: pool, Recorder: recorder,
		ProbeInterval: opts.ProbeInterval, KafkaTimeout: opts.KafkaTimeout, Concurrency: opts.ClusterConcurrency,
		Scope: opts.Scope, gate: gate, gateWake: gateCh.clusters,
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
		queues: make(chan event.GenericEvent), routes: make(chan event.GenericEvent),
		unreachable: func(cluster string, err error) {
			gate.failure(cluster, gateWaiter{}, err)
			gate.recover(cluster) // probe now: Connected=False wakes the cluster's queues and routes
		}}
	if err := (&ShareQueueReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Pool: pool, Recorder: recorder,
		ResyncInterval: opts.ResyncInterval, KafkaTimeout: opts.KafkaTimeout, Concurrency: opts.QueueConcurrency,
		FinalizerTimeout: opts.FinalizerTimeout, topicGone: watch.queues,
		ClaimsTopic: opts.ClaimsTopic, ManagerName: opts.ManagerName, WatchNamespaces: opts.Scope.Namespaces,
		gate: gate, gateWake: gateCh.queues,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&DeadLetterRouteReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Pool: pool, Recorder: recorder,
		ResyncInterval: opts.ResyncInterval, KafkaTimeout: opts.KafkaTimeout, FinalizerTimeout: opts.FinalizerTimeout,
		topicGone: watch.routes, gate: gate, gateWake: gateCh.routes,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&OffsetResetReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Pool: pool, Recorder: recorder, KafkaTimeout: opts.KafkaTimeout,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&DeadLetterRedriveReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Pool: pool, Recorder: recorder,
		KafkaTimeout: opts.KafkaTimeout, ProgressInterval: opts.RedriveProgressInterval,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.Add(watch); err != nil {
		return err
	}
	store, err := setupKEDAScaler(mgr, opts.KEDAScaler, opts.DepthInterval, kafkaTimeout)
	if err != nil {
		return err
	}
	if err := mgr.Add(&depthPoller{reader: mgr.GetClient(), writer: mgr.GetClient(), pool: pool, interval: opts.DepthInterval,
		statusInterval: opts.DepthStatusInterval, timeout: kafkaTimeout, scaler: store}); err != nil {
		return err
	}
	// Pods admitted without their republisher sidecar (the webhook fails open). The manager's
	// cache should hold only labelled Pods: build it with CacheByObject.
	return (&PodReconciler{Client: mgr.GetClient(), Recorder: recorder, APIReader: mgr.GetAPIReader(), WebhookConfigName: opts.WebhookConfigName}).SetupWithManager(mgr)
}
