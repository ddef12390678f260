// Command manager runs the kafka-queue-operator controllers.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/controllers"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/internal/memlimit"
	"github.com/kafkaqueues/kafka-queue-operator/internal/version"
	"github.com/kafkaqueues/kafka-queue-operator/internal/webhook"
)

func main() {
	var (
		metricsAddr   string
		probeAddr     string
		pprofAddr     string
		leaderElect   bool
		leaderElectNS string
		opts          controllers.Options
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz endpoints bind to.")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "", "Address to serve net/http/pprof on (e.g. 127.0.0.1:6060); empty disables it.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader so only one replica reconciles at a time.")
	flag.StringVar(&leaderElectNS, "leader-election-namespace", "", "Namespace of the leader-election Lease (default: the Pod's namespace).")
	var leaderElectID string
	var leaseDuration, renewDeadline, retryPeriod time.Duration
	flag.StringVar(&leaderElectID, "leader-election-id", "kafka-queue-operator.kafkaqueues.io", "Name of the leader-election Lease. Managers with the same id in one namespace elect one leader among them; each shard needs its own.")
	flag.DurationVar(&leaseDuration, "leader-election-lease-duration", 15*time.Second, "How long a standby waits after the leader's last renewal before it takes the lease: a killed leader's work waits this plus up to two jittered retry periods (docs/scaling-out.md).")
	flag.DurationVar(&renewDeadline, "leader-election-renew-deadline", 10*time.Second, "How long the leader keeps retrying a failed renewal before it stops leading (and exits).")
	flag.DurationVar(&retryPeriod, "leader-election-retry-period", 2*time.Second, "How often the leader renews and a standby tries to take the lease.")
	var watchNamespaces, watchSelector string
	flag.StringVar(&watchNamespaces, "watch-namespaces", "", "Comma-separated namespaces whose KafkaClusters, ShareQueues, DeadLetterRoutes and Pods this manager works on; empty watches every namespace. With a list, Roles in those namespaces are all the RBAC it needs for them (docs/operating.md, Scaling out).")
	flag.StringVar(&watchSelector, "watch-label-selector", "", "Label selector (e.g. \"kafkaqueues.io/shard in (shard1)\" or \"!kafkaqueues.io/shard\") limiting the ShareQueues, DeadLetterRoutes and KafkaClusters this manager works on; KafkaClusters outside it are still read. Empty selects everything.")
	flag.StringVar(&opts.ClaimsTopic, "claims-topic", "kafkaqueues.claims", "Compacted topic on each Kafka cluster where managers record which ShareQueue owns a topic and share group, so installs, shards and namespaces that cannot see each other's queues agree on one owner. Created when missing (1 partition, compacted). Empty turns it off: ownership is then decided among the queues this manager sees.")
	flag.DurationVar(&opts.ProbeInterval, "cluster-probe-interval", 3*time.Minute, "How often each KafkaCluster is re-probed (brokers, features, bounds).")
	flag.DurationVar(&opts.ResyncInterval, "queue-resync-interval", 10*time.Minute, "How often each ShareQueue is re-checked against Kafka.")
	flag.DurationVar(&opts.TopicCheckInterval, "topic-check-interval", 10*time.Second, "How often the topics of all queues and dead-letter routes are checked for deletion outside the operator (one Metadata request per KafkaCluster); a route recreates a deleted dead-letter topic at once. 0 leaves it to --queue-resync-interval.")
	flag.DurationVar(&opts.RedriveProgressInterval, "redrive-progress-interval", 5*time.Second, "Least time between two progress writes of one DeadLetterRedrive's status (moved, rate) to the apiserver.")
	flag.DurationVar(&opts.DepthInterval, "depth-interval", controllers.MaxDepthInterval, "How often every queue's depth (backlog, oldest record age, dead letters) is read from Kafka and its kafkaqueues_queue_* metrics refreshed: the metrics' freshness bound, at most 30s (docs/autoscaling.md). 0 turns the depth poller off.")
	flag.DurationVar(&opts.DepthStatusInterval, "depth-status-interval", 5*time.Minute, "Least time between two writes of one ShareQueue's status.depth (written only when the figures changed, so unchanged queues cost no writes); bounds the depth poller's apiserver writes to queues/interval. 0 leaves status.depth unwritten.")
	flag.StringVar(&opts.KEDAScaler.BindAddress, "keda-scaler-bind-address", "", "Address KEDA's external scaler API (gRPC) is served on, e.g. :9090, from the depth poller's rounds (docs/autoscaling.md); empty turns it off. Served by the leader, which labels its Pod kafkaqueues.io/keda-scaler=serving (POD_NAME and POD_NAMESPACE from the downward API) for the chart's Service to select.")
	flag.StringVar(&opts.KEDAScaler.CertDir, "keda-scaler-cert-dir", "", "Directory of the scaler's tls.crt and tls.key (reloaded when they change) and, to require client certificates, ca.crt; empty serves without TLS.")
	flag.DurationVar(&opts.KafkaTimeout, "kafka-timeout", 30*time.Second, "Upper bound on the Kafka requests of one reconcile.")
	flag.IntVar(&opts.ClusterConcurrency, "kafkacluster-concurrency", 4, "KafkaClusters probed in parallel.")
	flag.IntVar(&opts.QueueConcurrency, "sharequeue-concurrency", 1024, "ShareQueues reconciled in parallel. Reconciles mostly wait on Kafka and on status writes; with --kafka-batching their requests to one cluster are shared, so more of them in parallel means fewer, larger requests.")
	flag.DurationVar(&opts.KafkaBatching.Linger, "kafka-batch-linger", 500*time.Millisecond, "With --kafka-batching, how long the first admin call of a batch waits for others before the request is sent while calls keep coming (after a quiet spell: a twentieth of it).")
	flag.IntVar(&opts.KafkaBatching.MaxItems, "kafka-batch-max-items", 1000, "With --kafka-batching, the most topics or groups in one Kafka request.")
	flag.BoolVar(&opts.KafkaBatching.Enabled, "kafka-batching", true, "Coalesce the Kafka admin requests of concurrent ShareQueue reconciles on one cluster into shared requests (false: one request per reconcile and API, the naive path).")
	flag.DurationVar(&opts.FinalizerTimeout, "finalizer-timeout", 10*time.Minute, "How long deleting a deletionPolicy: Delete ShareQueue waits for an unreachable cluster before releasing its finalizer (leaving Kafka untouched).")
	var kubeQPS float64
	var kubeBurst int
	flag.Float64Var(&kubeQPS, "kube-api-qps", 200, "Requests per second the manager may send to the apiserver (status patches and Events dominate at scale).")
	flag.IntVar(&kubeBurst, "kube-api-burst", 400, "Burst of apiserver requests above --kube-api-qps.")
	var wh webhook.Options
	var republisherImage string
	flag.StringVar(&wh.CertManagement, "webhook-cert-management", webhook.CertsOff, "Serve the republisher-injecting webhook with certificates managed by the manager (self: CA and serving pair in --webhook-secret-name, rotated, caBundle injected), by someone else (external: tls.crt/tls.key in --webhook-cert-dir, e.g. cert-manager), or not at all (off).")
	flag.IntVar(&wh.Port, "webhook-port", 9443, "Port the webhook server listens on.")
	flag.StringVar(&wh.CertDir, "webhook-cert-dir", filepath.Join(os.TempDir(), "k8s-webhook-server", "serving-certs"), "Directory of the webhook's tls.crt and tls.key.")
	flag.StringVar(&wh.ServiceName, "webhook-service-name", "kafka-queue-operator-webhook", "Service the apiserver calls for the webhook (its DNS name goes into self-managed certificates).")
	flag.StringVar(&wh.SecretName, "webhook-secret-name", "kafka-queue-operator-webhook-cert", "Secret holding self-managed webhook certificates.")
	flag.StringVar(&wh.ConfigName, "webhook-config-name", "kafka-queue-operator-republisher", "MutatingWebhookConfiguration whose caBundle self-managed certificates keep current.")
	flag.StringVar(&republisherImage, "republisher-image", "", "Image of the injected republisher sidecar (the operator's own image, which contains /republisher).")
	var memLimitRatio float64
	flag.Float64Var(&memLimitRatio, "memory-limit-ratio", memlimit.DefaultRatio, "When GOMEMLIMIT is not set, the Go runtime's soft memory limit as this share of the container's cgroup memory limit (memory.max, or memory.limit_in_bytes on cgroup v1), so the GC collects harder before the OOM killer would act; 0 turns it off. Nothing is set without a cgroup limit. The chart sets GOMEMLIMIT itself (docs/capacity-planning.md).")
	showVersion := flag.Bool("version", false, "Print the version and exit.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println("manager", version.Get())
		return
	}
	if err := controllers.ValidateDepthIntervals(opts.DepthInterval, opts.DepthStatusInterval); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := memlimit.ValidateRatio(memLimitRatio); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for _, ns := range strings.Split(watchNamespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			opts.Scope.Namespaces = append(opts.Scope.Namespaces, ns)
		}
	}
	if watchSelector != "" {
		sel, err := labels.Parse(watchSelector)
		if err != nil {
			fmt.Fprintf(os.Stderr, "--watch-label-selector %q: %v\n", watchSelector, err)
			os.Exit(2)
		}
		opts.Scope.Selector = sel
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	setupLog := ctrl.Log.WithName("setup")
	if ml, err := memlimit.Apply("/", memLimitRatio); err != nil {
		setupLog.Error(err, "reading the container's memory limit; the Go runtime keeps no soft memory limit")
	} else if ml.Source != "" {
		setupLog.Info("Go soft memory limit", "bytes", ml.Limit, "source", ml.Source, "cgroupLimitBytes", ml.CgroupLimit)
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kqv1.AddToScheme(scheme))

	// client-go's request latency and client-side rate-limiter wait, by verb: whether a slow
	// status write waits on --kube-api-qps or on the apiserver (issue 18).
	metrics.RegisterRESTClientMetrics(metrics.MetricRequestLatency, metrics.MetricRateLimiterLatency)
	restCfg := ctrl.GetConfigOrDie()
	restCfg.QPS, restCfg.Burst = float32(kubeQPS), kubeBurst
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme: scheme,
		Metrics: metricsserver.Options{
			BindAddress: metricsAddr,
			TLSOpts:     []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
		},
		// managedFields stripped, Pods only when labelled kafkaqueues.io/queue, and the
		// watched namespaces and shard selector (controllers.CacheOptions).
		Cache:                   controllers.CacheOptions(opts.Scope),
		HealthProbeBindAddress:  probeAddr,
		PprofBindAddress:        pprofAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        leaderElectID,
		LeaderElectionNamespace: leaderElectNS,
		LeaseDuration:           &leaseDuration,
		RenewDeadline:           &renewDeadline,
		RetryPeriod:             &retryPeriod,
		// The process exits as soon as the manager stops, so a Pod being deleted (rolling
		// update, drain) gives the lease up and the next replica leads at once instead of
		// after the lease duration (15s).
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		setupLog.Error(err, "building manager")
		os.Exit(1)
	}
	pool := kafka.NewPool()
	defer pool.Close()
	if wh.CertManagement != webhook.CertsOff && wh.CertManagement != "" {
		opts.WebhookConfigName = wh.ConfigName
	}
	ownNS := leaderElectNS
	if ownNS == "" {
		ownNS = os.Getenv("POD_NAMESPACE")
	}
	opts.ManagerName = ownNS + "/" + leaderElectID
	opts.KEDAScaler.PodName, opts.KEDAScaler.PodNamespace = os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE")
	if err := controllers.SetupAll(mgr, pool, opts); err != nil {
		setupLog.Error(err, "setting up controllers")
		os.Exit(1)
	}
	wh.Namespace = leaderElectNS
	if wh.Namespace == "" {
		wh.Namespace = os.Getenv("POD_NAMESPACE")
	}
	// The injector reads the Pod's queue, route and cluster. A shard's cache holds only its
	// own queues, so a sharded manager reads them from the apiserver instead.
	var injectorReader client.Reader = mgr.GetClient()
	if opts.Scope.Selector != nil {
		injectorReader = mgr.GetAPIReader()
	}
	wh.Injector = &webhook.PodInjector{Reader: injectorReader, Image: republisherImage}
	if err := webhook.Setup(mgr, wh); err != nil {
		setupLog.Error(err, "setting up the webhook")
		os.Exit(1)
	}
	utilruntime.Must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	utilruntime.Must(mgr.AddReadyzCheck("readyz", healthz.Ping))
	if wh.CertManagement != webhook.CertsOff && wh.CertManagement != "" {
		// Not ready until the webhook serves with a valid certificate.
		utilruntime.Must(mgr.AddReadyzCheck("webhook", webhook.ReadyCheck(wh)))
	}
	setupLog.Info("starting manager", "version", version.Get().String())
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		setupLog.Error(err, "manager exited")
		os.Exit(1)
	}
}
