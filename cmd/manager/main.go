// Command manager runs the kafka-queue-operator controllers.
package main

import (
	"crypto/tls"
	"flag"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/controllers"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

func main() {
	var (
		metricsAddr   string
		probeAddr     string
		leaderElect   bool
		leaderElectNS string
		opts          controllers.Options
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Address the Prometheus metrics endpoint binds to; \"0\" disables it.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz endpoints bind to.")
	flag.BoolVar(&leaderElect, "leader-elect", false, "Elect a leader so only one replica reconciles at a time.")
	flag.StringVar(&leaderElectNS, "leader-election-namespace", "", "Namespace of the leader-election Lease (default: the Pod's namespace).")
	flag.DurationVar(&opts.ProbeInterval, "cluster-probe-interval", 3*time.Minute, "How often each KafkaCluster is re-probed (brokers, features, bounds).")
	flag.DurationVar(&opts.ResyncInterval, "queue-resync-interval", 10*time.Minute, "How often each ShareQueue is re-checked against Kafka.")
	flag.DurationVar(&opts.KafkaTimeout, "kafka-timeout", 30*time.Second, "Upper bound on the Kafka requests of one reconcile.")
	flag.IntVar(&opts.ClusterConcurrency, "kafkacluster-concurrency", 4, "KafkaClusters probed in parallel.")
	flag.IntVar(&opts.QueueConcurrency, "sharequeue-concurrency", 8, "ShareQueues reconciled in parallel.")
	flag.DurationVar(&opts.FinalizerTimeout, "finalizer-timeout", 10*time.Minute, "How long deleting a deletionPolicy: Delete ShareQueue waits for an unreachable cluster before releasing its finalizer (leaving Kafka untouched).")
	var kubeQPS float64
	var kubeBurst int
	flag.Float64Var(&kubeQPS, "kube-api-qps", 100, "Requests per second the manager may send to the apiserver (status patches and Events dominate at scale).")
	flag.IntVar(&kubeBurst, "kube-api-burst", 200, "Burst of apiserver requests above --kube-api-qps.")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	setupLog := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(kqv1.AddToScheme(scheme))

	restCfg := ctrl.GetConfigOrDie()
	restCfg.QPS, restCfg.Burst = float32(kubeQPS), kubeBurst
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme: scheme,
		Metrics: metricsserver.Options{
			BindAddress: metricsAddr,
			TLSOpts:     []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
		},
		HealthProbeBindAddress:  probeAddr,
		LeaderElection:          leaderElect,
		LeaderElectionID:        "kafka-queue-operator.kafkaqueues.io",
		LeaderElectionNamespace: leaderElectNS,
	})
	if err != nil {
		setupLog.Error(err, "building manager")
		os.Exit(1)
	}
	pool := kafka.NewPool()
	defer pool.Close()
	if err := controllers.SetupAll(mgr, pool, opts); err != nil {
		setupLog.Error(err, "setting up controllers")
		os.Exit(1)
	}
	utilruntime.Must(mgr.AddHealthzCheck("healthz", healthz.Ping))
	utilruntime.Must(mgr.AddReadyzCheck("readyz", healthz.Ping))
	setupLog.Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		setupLog.Error(err, "manager exited")
		os.Exit(1)
	}
}
