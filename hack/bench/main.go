// Command bench measures the operator against the local rig (real kube-apiserver, one real
// Kafka broker): for each N it creates N ShareQueues and prints the time until all are Ready,
// Kafka requests by API, apiserver writes, and the same counts for one no-op resync window,
// plus process peak RSS and CPU seconds. It is a measurement, not a test: nothing is asserted.
//
//	go run ./hack/bench -n 100,1000 [-kube-qps 50] [-resync 20s]
//
// The manager runs in-process (its RSS and CPU include this harness's small client).
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/controllers"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// writeCounter counts mutating apiserver requests made through a rest.Config.
type writeCounter struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (w writeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.n.Add(1)
	}
	return w.rt.RoundTrip(r)
}

func main() {
	ns := flag.String("n", "100,1000", "comma-separated queue counts")
	kubeQPS := flag.Float64("kube-qps", 100, "manager apiserver client QPS, burst 2x (the manager's --kube-api-qps default)")
	resync := flag.Duration("resync", 20*time.Second, "queue resync interval; the no-op window is one interval")
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel)))
	counts := strings.Split(*ns, ",")
	if len(counts) > 1 {
		// One process per N: controller-runtime allows one controller of a name per process,
		// and RSS is then per run.
		for _, s := range counts {
			cmd := exec.Command(os.Args[0], "-n", strings.TrimSpace(s), "-kube-qps", fmt.Sprint(*kubeQPS), "-resync", resync.String())
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			if err := cmd.Run(); err != nil {
				fmt.Fprintln(os.Stderr, "bench:", err)
				os.Exit(1)
			}
		}
		return
	}
	for _, s := range counts {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if err := run(n, *kubeQPS, *resync); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
}

func run(n int, qps float64, resync time.Duration) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k, err := rig.StartKafka(ctx, rig.KafkaOptions{BrokerProps: map[string]string{"num.partitions": "1"}})
	if err != nil {
		return err
	}
	defer k.Stop()
	env, cfg, err := rig.StartAPIServer()
	if err != nil {
		return err
	}
	defer func() { _ = env.Stop() }()
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = kqv1.AddToScheme(scheme)

	var writes atomic.Int64
	mcfg := rest.CopyConfig(cfg)
	mcfg.QPS, mcfg.Burst = float32(qps), int(2*qps)
	mcfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return writeCounter{rt, &writes} }
	mgr, err := ctrl.NewManager(mcfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		return err
	}
	counter := &kafka.RequestCounter{}
	pool := kafka.NewPool(counter)
	defer pool.Close()
	if err := controllers.SetupAll(mgr, pool, controllers.Options{ProbeInterval: time.Hour, ResyncInterval: resync}); err != nil {
		return err
	}
	mctx, mcancel := context.WithCancel(ctx)
	mgrDone := make(chan struct{})
	go func() { _ = mgr.Start(mctx); close(mgrDone) }()
	// Stop the manager before the apiserver and broker it talks to.
	defer func() { mcancel(); <-mgrDone }()

	ccfg := rest.CopyConfig(cfg)
	ccfg.QPS, ccfg.Burst = 1000, 2000
	c, err := client.New(ccfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	kc := &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "local"}, Spec: kqv1.KafkaClusterSpec{BootstrapServers: k.BootstrapServers()}}
	if err := c.Create(ctx, kc); err != nil {
		return err
	}
	for !meta.IsStatusConditionTrue(kc.Status.Conditions, kqv1.ConditionReady) {
		time.Sleep(200 * time.Millisecond)
		_ = c.Get(ctx, client.ObjectKeyFromObject(kc), kc)
	}

	kafkaBefore, writesBefore := counter.Snapshot(), writes.Load()
	cpuBefore := cpuSeconds()
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("q-%05d", i)}, Spec: kqv1.ShareQueueSpec{
				ClusterRef: kqv1.ClusterReference{Name: "local"},
				Delivery:   kqv1.DeliverySpec{LockDuration: &metav1.Duration{Duration: 30 * time.Second}, MaxDeliveryAttempts: ptr(int32(5))},
			}}
			_ = c.Create(ctx, sq)
		}(i)
	}
	wg.Wait()
	created := time.Since(start)
	for {
		var list kqv1.ShareQueueList
		if err := c.List(ctx, &list); err != nil {
			return err
		}
		ready := 0
		for _, q := range list.Items {
			if meta.IsStatusConditionTrue(q.Status.Conditions, kqv1.ConditionReady) {
				ready++
			}
		}
		if ready == n {
			break
		}
		if time.Since(start) > 30*time.Minute {
			return fmt.Errorf("only %d of %d Ready after 30m", ready, n)
		}
		time.Sleep(500 * time.Millisecond)
	}
	elapsed := time.Since(start)
	runKafka := kafka.Diff(kafkaBefore, counter.Snapshot())
	runWrites := writes.Load() - writesBefore
	runCPU := cpuSeconds() - cpuBefore

	// Let in-flight work settle, then watch one full resync window.
	time.Sleep(3 * time.Second)
	idleKafkaBefore, idleWritesBefore := counter.Snapshot(), writes.Load()
	time.Sleep(resync + resync/4)
	idleKafka := kafka.Diff(idleKafkaBefore, counter.Snapshot())
	idleWrites := writes.Load() - idleWritesBefore

	total := 0
	for _, v := range runKafka {
		total += v
	}
	fmt.Printf("\n== N=%d ShareQueues, 1 broker, manager kube QPS %.0f\n", n, qps)
	fmt.Printf("created all in %s; all Ready after %s (%.1f queues/s)\n", created.Round(time.Millisecond), elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())
	fmt.Printf("Kafka requests during the run: %d (%.2f per queue; admin writes %d) %s\n", total, float64(total)/float64(n), kafka.Writes(runKafka), fmtCounts(runKafka))
	fmt.Printf("apiserver writes by the manager during the run: %d (%.2f per queue)\n", runWrites, float64(runWrites)/float64(n))
	fmt.Printf("one no-op resync window (%s): Kafka requests %s, Kafka writes %d, apiserver writes %d\n", (resync + resync/4).String(), fmtCounts(idleKafka), kafka.Writes(idleKafka), idleWrites)
	fmt.Printf("process peak RSS %s, CPU during the run %.1fs\n", peakRSS(), runCPU)
	return nil
}

func fmtCounts(m map[string]int) string {
	var parts []string
	for _, k := range kafka.SortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			return strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:"))
		}
	}
	return "unknown"
}

func ptr[T any](v T) *T { return &v }
