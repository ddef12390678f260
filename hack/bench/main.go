// Command bench measures the operator against the local rig (real kube-apiserver, one real
// Kafka broker). For each N and each path it starts a fresh rig, runs the manager binary as its
// own process (or processes), creates N ShareQueues and prints: the time from the first create
// until all are Ready and from the last create until all are Ready, Kafka requests by API (read
// from the managers' kafkaqueues_kafka_broker_requests_total, so franz-go's own Metadata and
// FindCoordinator count too), apiserver writes (client-go's rest_client_requests_total, Events
// included), ShareQueue reconciles by result, CPU seconds per 1,000 queues, the same counts
// over one no-op resync window, with -idle an idle window (CPU, Kafka and apiserver requests
// per minute), and each manager's peak RSS and CPU seconds (from /proc). It ends with the
// naive/batched and sharded/batched ratios. It is a measurement, not a test: nothing is
// asserted.
//
//	go run ./hack/bench -n 100,1000,10000 [-paths batched,naive,sharded] [-shards 2] [-resync 30s] [-idle 10m]
//
// The paths:
//
//   - batched: one manager, --kafka-batching=true (the default).
//   - naive: one manager, --kafka-batching=false (one Kafka request per reconcile and API).
//   - sharded: -shards managers (s0, s1, …), batched, each with
//     --watch-label-selector='kafkaqueues.io/shard in (sK)' and its own metrics port; the
//     KafkaCluster is labelled s0 (so s0 probes it and the others only read it) and queue i is
//     labelled s(i mod -shards). No leader election, as on the other paths.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/controllers"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// result is one run: one N and one path.
type result struct {
	n                 int
	path              string
	created, ready    time.Duration // from the first create: until the last create returned, until all were Ready
	managers          []managerResult
	kafka, idleKafka  map[string]float64 // all managers'
	writes, idleWrite float64            // all managers'
	cpu               float64            // all managers'
	// depth is the depth poller's Kafka requests in the no-op window, by API, and
	// depthRounds its rounds there; idleWindow is that window's length.
	depth       map[string]float64
	depthRounds float64
	idleWindow  time.Duration
	// depthStatusWrites are the depth poller's status.depth patches in the no-op window
	// (part of idleWrite): each queue's first one, spread over --depth-status-interval.
	depthStatusWrites float64
	// reconciles are all managers' ShareQueue reconciles during the run, by result
	// (controller_runtime_reconcile_total): resyncs and requeues during a long run show here.
	reconciles map[string]float64
	// queueWait/queueWaits and reconcileTime/reconcileTimes are the sums and counts of the
	// ShareQueue workqueue's wait (workqueue_queue_duration_seconds) and reconcile time
	// (controller_runtime_reconcile_time_seconds) during the run: a long wait means the
	// workers (--sharequeue-concurrency) were all busy, a long reconcile that each waited on
	// Kafka or the apiserver.
	queueWait, queueWaits, reconcileTime, reconcileTimes float64
	// callSeconds and calls are the sums and counts of the operator's Kafka admin calls'
	// latency by API during the run (kafkaqueues_kafka_request_duration_seconds: each
	// reconcile's wait for its answer, a batch's linger included).
	callSeconds, calls map[string]float64
	// stepSeconds and steps are the sums and counts of the ShareQueue reconciles' time by
	// step during the run (kafkaqueues_reconcile_step_duration_seconds{kind="ShareQueue"}),
	// the status patch as step "patch status": where a reconcile's time goes.
	stepSeconds, steps map[string]float64
	// limiterSeconds/limiterWaits and requestSeconds/requests are the sums and counts, by
	// verb, of client-go's wait for the client-side rate limiter (--kube-api-qps) and of its
	// apiserver requests' latency during the run.
	limiterSeconds, limiterWaits, requestSeconds, requests map[string]float64
	// machineBusy is the whole machine's busy CPU during the run, in cores (/proc/stat):
	// the apiserver, etcd, the broker and the bench share the machine with the managers.
	machineBusy float64
	// noop is whether the no-op resync window ran (-resync > 0).
	noop bool
	// idle is the -idle window (nil when off).
	idle *idleResult
}

// idleResult is what all managers did in the -idle window, nothing changing.
type idleResult struct {
	window     time.Duration
	cpu        float64
	kafka      map[string]float64 // requests written, by API
	apiserver  map[string]float64 // client-go requests, by verb
	reconciles map[string]float64 // by controller
}

// managerResult is what one manager process of a run did.
type managerResult struct {
	shard             string // s0, s1, … on the sharded path; "" for the one manager of the others
	queues            int    // ShareQueues in its shard
	kafka, idleKafka  map[string]float64
	writes, idleWrite float64
	rssKB             int64
	cpu               float64
}

// manager is one running manager process.
type manager struct {
	managerResult
	cmd                   *exec.Cmd
	log                   string
	metricsURL, pprofAddr string
	before                map[string]float64
	cpuBefore             float64
}

func main() {
	ns := flag.String("n", "100,1000", "comma-separated queue counts")
	paths := flag.String("paths", "batched,naive", "which paths to run: batched (one manager, --kafka-batching=true), naive (one manager, --kafka-batching=false), sharded (-shards batched managers, one --watch-label-selector each)")
	shards := flag.Int("shards", 2, "managers on the sharded path: s0…s<shards-1>, each with --watch-label-selector='"+controllers.ShardLabel+" in (sK)'; the KafkaCluster is labelled s0, queue i s(i mod shards)")
	resync := flag.Duration("resync", 30*time.Second, "managers' --queue-resync-interval; the no-op window is one interval and a quarter. 0 keeps the manager's default (10m) and skips the no-op window (an -idle window of 10m covers one resync of every queue)")
	idle := flag.Duration("idle", 0, "after the no-op window, watch the managers for this long with nothing changing and print CPU seconds (and % of one core), Kafka requests/min by API, apiserver requests/min by verb and reconciles (0: off; issue 18 asks for 10m)")
	profile := flag.String("profile", "", "directory to write each manager's CPU profile (first 60s of the run), heap profile (when all are Ready) and, with -idle, CPU profile of the idle window (idle-profile) to, per N, path and shard")
	extra := flag.String("manager-args", "", "extra flags for every manager, space-separated (e.g. --sharequeue-concurrency=64)")
	managerEnv := flag.String("manager-env", "", "extra environment for every manager, space-separated NAME=VALUE (e.g. GOMEMLIMIT=135MiB, what the chart sets from limits.memory)")
	flag.Parse()
	ctrl.SetLogger(logr.Discard()) // the harness's clients log nothing; the managers log to their own files
	if *shards < 1 {
		fail(fmt.Errorf("bad -shards %d", *shards))
	}

	bin := filepath.Join(os.TempDir(), fmt.Sprintf("kqo-bench-manager-%d", os.Getpid()))
	build := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	build.Dir, build.Stdout, build.Stderr = rig.RepoRoot(), os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fail(fmt.Errorf("building the manager: %w", err))
	}
	defer os.Remove(bin)

	var results []result
	for _, s := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fail(fmt.Errorf("bad -n %q", s))
		}
		for _, p := range strings.Split(*paths, ",") {
			p = strings.TrimSpace(p)
			if p != "batched" && p != "naive" && p != "sharded" {
				fail(fmt.Errorf("bad -paths entry %q", p))
			}
			shardNames := []string{""}
			if p == "sharded" {
				shardNames = nil
				for i := 0; i < *shards; i++ {
					shardNames = append(shardNames, fmt.Sprintf("s%d", i))
				}
			}
			r, err := run(bin, n, p, shardNames, *resync, *idle, strings.Fields(*extra), strings.Fields(*managerEnv), *profile)
			if err != nil {
				fail(err)
			}
			r.print()
			results = append(results, r)
		}
	}
	printRatios(results)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

// run measures one N and path. shards names the managers' shards; one "" is a single
// unsharded manager.
func run(bin string, n int, path string, shards []string, resync, idle time.Duration, extra, managerEnv []string, profileDir string) (result, error) {
	res := result{n: n, path: path, noop: resync > 0}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fmt.Fprintf(os.Stderr, "bench: N=%d %s: starting a broker and an apiserver\n", n, path)
	k, err := rig.StartKafka(ctx, rig.KafkaOptions{BrokerProps: map[string]string{"num.partitions": "1"}})
	if err != nil {
		return res, err
	}
	defer k.Stop()
	env, cfg, err := rig.StartAPIServer()
	if err != nil {
		return res, err
	}
	defer func() { _ = env.Stop() }()
	dir, err := os.MkdirTemp("", "kqo-bench-")
	if err != nil {
		return res, err
	}
	defer func() {
		if os.Getenv("KQO_BENCH_KEEP") == "" {
			os.RemoveAll(dir)
		} else {
			fmt.Fprintln(os.Stderr, "bench: kept", dir)
		}
	}()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := rig.WriteKubeconfig(cfg, kubeconfig); err != nil {
		return res, err
	}

	var mgrs []*manager
	defer func() {
		for _, m := range mgrs {
			_ = m.cmd.Process.Signal(syscall.SIGTERM)
			_ = m.cmd.Wait()
		}
	}()
	for i, shard := range shards {
		m := &manager{managerResult: managerResult{shard: shard}}
		for q := 0; q < n; q++ {
			if q%len(shards) == i {
				m.queues++
			}
		}
		metricsAddr, err := rig.FreeLoopbackAddr()
		if err != nil {
			return res, err
		}
		m.metricsURL = "http://" + metricsAddr + "/metrics"
		args := append([]string{"--kubeconfig", kubeconfig, "--metrics-bind-address", metricsAddr, "--health-probe-bind-address=0",
			"--cluster-probe-interval=1h", fmt.Sprintf("--kafka-batching=%t", path != "naive"), "--zap-log-level=error"}, extra...)
		if resync > 0 {
			args = append(args, "--queue-resync-interval="+resync.String())
		}
		if shard != "" {
			args = append(args, "--watch-label-selector="+controllers.ShardLabel+" in ("+shard+")")
		}
		if profileDir != "" {
			if m.pprofAddr, err = rig.FreeLoopbackAddr(); err != nil {
				return res, err
			}
			args = append(args, "--pprof-bind-address="+m.pprofAddr)
		}
		m.cmd = exec.Command(bin, args...)
		m.cmd.Env = append(os.Environ(), managerEnv...)
		m.log = filepath.Join(dir, "manager"+suffix(shard)+".log")
		logf, err := os.Create(m.log)
		if err != nil {
			return res, err
		}
		defer logf.Close()
		m.cmd.Stdout, m.cmd.Stderr = logf, logf
		m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := m.cmd.Start(); err != nil {
			return res, err
		}
		mgrs = append(mgrs, m)
	}
	// profileAs writes one pprof profile of a manager as <N>-<path>[-<shard>]-<name>.pprof.
	profileAs := func(m *manager, kind, query, name string) {
		if m.pprofAddr == "" {
			return
		}
		if err := fetch("http://"+m.pprofAddr+"/debug/pprof/"+kind+query, filepath.Join(profileDir, fmt.Sprintf("%d-%s%s-%s.pprof", n, path, suffix(m.shard), name))); err != nil {
			fmt.Fprintln(os.Stderr, "bench: profile:", err)
		}
	}
	profile := func(m *manager, kind, query string) { profileAs(m, kind, query, kind) }

	scheme := runtime.NewScheme()
	_ = kqv1.AddToScheme(scheme)
	ccfg := rest.CopyConfig(cfg)
	ccfg.QPS, ccfg.Burst = 2000, 4000
	c, err := client.NewWithWatch(ccfg, client.Options{Scheme: scheme})
	if err != nil {
		return res, err
	}
	kc := &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "local"}, Spec: kqv1.KafkaClusterSpec{BootstrapServers: k.BootstrapServers()}}
	if shards[0] != "" {
		kc.Labels = map[string]string{controllers.ShardLabel: shards[0]}
	}
	if err := c.Create(ctx, kc); err != nil {
		return res, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for !meta.IsStatusConditionTrue(kc.Status.Conditions, kqv1.ConditionReady) {
		if time.Now().After(deadline) {
			return res, fmt.Errorf("KafkaCluster not Ready after 2m (manager log: %s)", mgrs[0].log)
		}
		time.Sleep(200 * time.Millisecond)
		_ = c.Get(ctx, client.ObjectKeyFromObject(kc), kc)
	}
	// Every manager is running its reconcilers (caches synced) once it has reconciled the
	// KafkaCluster: probed it (its shard's) or seen that it is another shard's.
	for _, m := range mgrs {
		for {
			metrics, err := scrape(m.metricsURL)
			if err == nil && reconciledClusters(metrics) > 0 {
				break
			}
			if time.Now().After(deadline) {
				return res, fmt.Errorf("manager%s has not reconciled the KafkaCluster after 2m (log: %s)", suffix(m.shard), m.log)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// Count Ready queues from a watch (cheap for the apiserver at any N); when the
	// apiserver closes it, list again and resume.
	var readyCount atomic.Int64
	go countReady(ctx, c, &readyCount)

	for _, m := range mgrs {
		if m.before, err = scrape(m.metricsURL); err != nil {
			return res, err
		}
		if m.cpuBefore, _, err = procStats(m.cmd.Process.Pid); err != nil {
			return res, err
		}
	}
	fmt.Fprintf(os.Stderr, "bench: N=%d %s: creating queues\n", n, path)
	machineBefore := machineCPU()
	start := time.Now()
	var cpuProfiles sync.WaitGroup
	for _, m := range mgrs {
		cpuProfiles.Add(1)
		go func() { defer cpuProfiles.Done(); profile(m, "profile", "?seconds=60") }()
	}
	if profileDir != "" {
		// The apiserver's own CPU profile of the same minute (kube-apiserver serves
		// /debug/pprof with --profiling, its default): what a status write costs it.
		cpuProfiles.Add(1)
		go func() {
			defer cpuProfiles.Done()
			if err := fetchAPIServerProfile(cfg, "?seconds=60", filepath.Join(profileDir, fmt.Sprintf("%d-%s-apiserver-profile.pprof", n, path))); err != nil {
				fmt.Fprintln(os.Stderr, "bench: apiserver profile:", err)
			}
		}()
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	var createErr atomic.Value
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
			if shard := shards[i%len(shards)]; shard != "" {
				sq.Labels = map[string]string{controllers.ShardLabel: shard}
			}
			if err := c.Create(ctx, sq); err != nil {
				createErr.Store(err)
			}
		}(i)
	}
	wg.Wait()
	res.created = time.Since(start)
	if err, _ := createErr.Load().(error); err != nil {
		return res, err
	}
	for readyCount.Load() < int64(n) {
		if time.Since(start) > 45*time.Minute {
			return res, fmt.Errorf("only %d of %d Ready after 45m (manager logs: %s)", readyCount.Load(), n, filepath.Join(dir, "manager*.log"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.ready = time.Since(start)
	res.machineBusy = (machineCPU() - machineBefore) / res.ready.Seconds()
	for _, m := range mgrs {
		profile(m, "heap", "")
		after, err := scrape(m.metricsURL)
		if err != nil {
			return res, err
		}
		cpuAfter, _, err := procStats(m.cmd.Process.Pid)
		if err != nil {
			return res, err
		}
		m.cpu = cpuAfter - m.cpuBefore
		m.kafka = diff(m.before, after, "kafkaqueues_kafka_broker_requests_total")
		m.writes = writesOf(diff(m.before, after, "rest_client_requests_total"))
		res.reconciles = addCounts(res.reconciles, reconcilesOf(m.before, after, "sharequeue", "result"))
		res.callSeconds = addCounts(res.callSeconds, diff(m.before, after, "kafkaqueues_kafka_request_duration_seconds_sum"))
		res.calls = addCounts(res.calls, diff(m.before, after, "kafkaqueues_kafka_request_duration_seconds_count"))
		for _, h := range []struct {
			metric     string
			sum, count *map[string]float64
		}{
			{"rest_client_rate_limiter_duration_seconds", &res.limiterSeconds, &res.limiterWaits},
			{"rest_client_request_duration_seconds", &res.requestSeconds, &res.requests},
		} {
			*h.sum = addCounts(*h.sum, byLabel(m.before, after, h.metric+"_sum", "verb", ""))
			*h.count = addCounts(*h.count, byLabel(m.before, after, h.metric+"_count", "verb", ""))
		}
		const steps = "kafkaqueues_reconcile_step_duration_seconds"
		res.stepSeconds = addCounts(res.stepSeconds, byLabel(m.before, after, steps+"_sum", "step", `kind="ShareQueue"`))
		res.steps = addCounts(res.steps, byLabel(m.before, after, steps+"_count", "step", `kind="ShareQueue"`))
		for _, h := range []struct {
			metric, label string
			sum, count    *float64
		}{
			{"workqueue_queue_duration_seconds", `name="sharequeue"`, &res.queueWait, &res.queueWaits},
			{"controller_runtime_reconcile_time_seconds", `controller="sharequeue"`, &res.reconcileTime, &res.reconcileTimes},
		} {
			*h.sum += seriesDelta(m.before, after, h.metric+"_sum{", h.label)
			*h.count += seriesDelta(m.before, after, h.metric+"_count{", h.label)
		}
	}

	// Let in-flight work settle, then watch one resync window in which every queue is
	// re-checked against Kafka and nothing has changed.
	window := "watching a no-op resync window"
	if resync <= 0 {
		window = "letting in-flight work settle (no no-op window at -resync 0)"
	}
	fmt.Fprintf(os.Stderr, "bench: N=%d %s: all Ready after %s; %s\n", n, path, res.ready.Round(time.Millisecond), window)
	// Queues whose share-group coordinator was still loading (a fresh cluster creates
	// __consumer_offsets on the first FindCoordinator) look again after at most 15s and
	// record the group's state: a change, not churn. Wait that out first.
	time.Sleep(min(max(resync, 15*time.Second), 15*time.Second) + 5*time.Second)
	idleBefore := make([]map[string]float64, len(mgrs))
	for i, m := range mgrs {
		if idleBefore[i], err = scrape(m.metricsURL); err != nil {
			return res, err
		}
	}
	idleStart := time.Now()
	time.Sleep(resync + resync/4)
	res.kafka, res.idleKafka, res.depth = map[string]float64{}, map[string]float64{}, map[string]float64{}
	for i, m := range mgrs {
		idleAfter, err := scrape(m.metricsURL)
		if err != nil {
			return res, err
		}
		res.idleWindow = time.Since(idleStart)
		if resync > 0 {
			rounds, byAPI := depthCost(idleBefore[i], idleAfter)
			res.depthRounds += rounds
			res.depthStatusWrites += idleAfter["kafkaqueues_depth_status_writes_total"] - idleBefore[i]["kafkaqueues_depth_status_writes_total"]
			for api, v := range byAPI {
				res.depth[api] += v
			}
			m.idleKafka = diff(idleBefore[i], idleAfter, "kafkaqueues_kafka_broker_requests_total")
			m.idleWrite = writesOf(diff(idleBefore[i], idleAfter, "rest_client_requests_total"))
		}
		for api, v := range m.kafka {
			res.kafka[api] += v
		}
		for api, v := range m.idleKafka {
			res.idleKafka[api] += v
		}
		res.writes += m.writes
		res.idleWrite += m.idleWrite
		res.cpu += m.cpu
	}
	if idle > 0 {
		// Nothing changing means after the depth poller's first status.depth write to every
		// queue (a new queue's first figures, spread over --depth-status-interval, 5 m):
		// wait for n of them (at most 10 m) and one more poll round.
		settle := time.Now()
		for time.Since(settle) < 10*time.Minute {
			t := 0.0
			for _, m := range mgrs {
				if after, err := scrape(m.metricsURL); err == nil {
					t += after["kafkaqueues_depth_status_writes_total"]
				}
			}
			if t >= float64(n) {
				time.Sleep(35 * time.Second)
				break
			}
			time.Sleep(5 * time.Second)
		}
		fmt.Fprintf(os.Stderr, "bench: N=%d %s: the first status.depth writes took %s more\n", n, path, time.Since(settle).Round(time.Second))
		var idleProfiles sync.WaitGroup
		for _, m := range mgrs {
			idleProfiles.Add(1)
			go func() {
				defer idleProfiles.Done()
				profileAs(m, "profile", fmt.Sprintf("?seconds=%d", int(idle.Seconds())), "idle-profile")
			}()
		}
		res.idle, err = watchIdle(mgrs, idle, n, path)
		idleProfiles.Wait()
		if err != nil {
			return res, err
		}
	}
	for _, m := range mgrs {
		if _, m.rssKB, err = procStats(m.cmd.Process.Pid); err != nil {
			return res, err
		}
		res.managers = append(res.managers, m.managerResult)
	}
	if *outage > 0 {
		if err := runOutage(ctx, k, mgrs, n, &readyCount, *outage); err != nil {
			return res, err
		}
	}
	cpuProfiles.Wait()
	return res, nil
}

// depthCost is the depth poller's share of a window's Kafka requests: its rounds
// (kafkaqueues_depth_polls_total); one Metadata per round (it sends exactly one);
// DescribeShareGroupOffsets and ListOffsets as written to the brokers (nothing else sends
// them in a no-op window); Fetch as its own calls (kafkaqueues_kafka_requests_total, one per
// leader; the claims topic's consumer also fetches, which the broker count would include).
// FindCoordinator, cached by franz-go, is left out.
func depthCost(before, after map[string]float64) (float64, map[string]float64) {
	rounds := 0.0
	for series, v := range after {
		if strings.HasPrefix(series, "kafkaqueues_depth_polls_total{") {
			rounds += v - before[series]
		}
	}
	broker := diff(before, after, "kafkaqueues_kafka_broker_requests_total")
	calls := diff(before, after, "kafkaqueues_kafka_requests_total")
	return rounds, map[string]float64{"Metadata": rounds, "DescribeShareGroupOffsets": broker["DescribeShareGroupOffsets"],
		"ListOffsets": broker["ListOffsets"], "Fetch": calls["Fetch"]}
}

// reconciledClusters is how many KafkaCluster reconciles a manager's metrics count, any result.
func reconciledClusters(metrics map[string]float64) float64 {
	t := 0.0
	for series, v := range metrics {
		if strings.HasPrefix(series, "controller_runtime_reconcile_total{") && labelOf(series, "controller") == "kafkacluster" {
			t += v
		}
	}
	return t
}

// watchIdle watches the managers for d with nothing changing (all queues Ready, no spec
// edits) and sums what they spent: CPU seconds from /proc, Kafka requests written, client-go
// apiserver requests by verb, reconciles by controller.
func watchIdle(mgrs []*manager, d time.Duration, n int, path string) (*idleResult, error) {
	fmt.Fprintf(os.Stderr, "bench: N=%d %s: watching an idle window of %s\n", n, path, d)
	before := make([]map[string]float64, len(mgrs))
	cpu := make([]float64, len(mgrs))
	var err error
	for i, m := range mgrs {
		if before[i], err = scrape(m.metricsURL); err != nil {
			return nil, err
		}
		if cpu[i], _, err = procStats(m.cmd.Process.Pid); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	time.Sleep(d)
	out := &idleResult{window: time.Since(start)}
	for i, m := range mgrs {
		after, err := scrape(m.metricsURL)
		if err != nil {
			return nil, err
		}
		c, _, err := procStats(m.cmd.Process.Pid)
		if err != nil {
			return nil, err
		}
		out.cpu += c - cpu[i]
		out.kafka = addCounts(out.kafka, diff(before[i], after, "kafkaqueues_kafka_broker_requests_total"))
		out.apiserver = addCounts(out.apiserver, diff(before[i], after, "rest_client_requests_total"))
		out.reconciles = addCounts(out.reconciles, reconcilesOf(before[i], after, "", "controller"))
	}
	return out, nil
}

// reconcilesOf is after-before of controller_runtime_reconcile_total, for one controller
// ("" for all), keyed by the label by ("result" or "controller").
func reconcilesOf(before, after map[string]float64, controller, by string) map[string]float64 {
	out := map[string]float64{}
	for series, v := range after {
		if !strings.HasPrefix(series, "controller_runtime_reconcile_total{") || controller != "" && labelOf(series, "controller") != controller {
			continue
		}
		if d := v - before[series]; d != 0 {
			out[labelOf(series, by)] += d
		}
	}
	return out
}

// byLabel is a metric's increase between before and after, summed by one label's value,
// over the series that contain must ("" for all).
func byLabel(before, after map[string]float64, metric, label, must string) map[string]float64 {
	out := map[string]float64{}
	for series, v := range after {
		if strings.HasPrefix(series, metric+"{") && strings.Contains(series, must) {
			if d := v - before[series]; d != 0 {
				out[labelOf(series, label)] += d
			}
		}
	}
	return out
}

// seriesDelta is after-before summed over the series that start with prefix and contain label.
func seriesDelta(before, after map[string]float64, prefix, label string) float64 {
	t := 0.0
	for series, v := range after {
		if strings.HasPrefix(series, prefix) && strings.Contains(series, label) {
			t += v - before[series]
		}
	}
	return t
}

// addCounts adds b into a (allocating a when nil) and returns a.
func addCounts(a, b map[string]float64) map[string]float64 {
	if a == nil {
		a = map[string]float64{}
	}
	for k, v := range b {
		a[k] += v
	}
	return a
}

// suffix is "-" and the shard's name, or "" for an unsharded manager.
func suffix(shard string) string {
	if shard == "" {
		return ""
	}
	return "-" + shard
}

// countReady keeps n equal to the number of Ready ShareQueues until ctx ends.
func countReady(ctx context.Context, c client.WithWatch, n *atomic.Int64) {
	for ctx.Err() == nil {
		var list kqv1.ShareQueueList
		if err := c.List(ctx, &list); err != nil {
			time.Sleep(time.Second)
			continue
		}
		ready := map[string]bool{}
		t := int64(0)
		set := func(name string, r, present bool) {
			if ready[name] {
				t--
			}
			delete(ready, name)
			if present {
				ready[name] = r
				if r {
					t++
				}
			}
			n.Store(t)
		}
		for i := range list.Items {
			set(list.Items[i].Name, meta.IsStatusConditionTrue(list.Items[i].Status.Conditions, kqv1.ConditionReady), true)
		}
		n.Store(t)
		w, err := c.Watch(ctx, &kqv1.ShareQueueList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for ev := range w.ResultChan() {
			if sq, ok := ev.Object.(*kqv1.ShareQueue); ok {
				set(sq.Name, meta.IsStatusConditionTrue(sq.Status.Conditions, kqv1.ConditionReady), ev.Type != watch.Deleted)
			}
		}
		w.Stop()
	}
}

// writeAPIs are the Kafka requests that change cluster state.
var writeAPIs = map[string]bool{
	"CreateTopics": true, "DeleteTopics": true, "CreatePartitions": true, "AlterConfigs": true,
	"IncrementalAlterConfigs": true, "DeleteGroups": true, "UpdateFeatures": true, "AlterPartitionAssignments": true,
}

// adminAPIs are what a request-per-queue operator sends per queue; franz-go's own
// housekeeping (ApiVersions, SASL, Metadata refreshes it makes by itself) is in the totals.
func sum(m map[string]float64, keep func(string) bool) float64 {
	t := 0.0
	for k, v := range m {
		if keep(k) {
			t += v
		}
	}
	return t
}

func (r result) print() {
	all := func(string) bool { return true }
	writes := func(k string) bool { return writeAPIs[k] }
	managers := "1 manager"
	if len(r.managers) > 1 {
		managers = fmt.Sprintf("%d managers, all figures but the per-manager lines summed over them", len(r.managers))
	}
	fmt.Printf("\n== N=%d ShareQueues, %s path, 1 broker, %s\n", r.n, r.path, managers)
	fmt.Printf("all created after %s, all Ready after %s (%.1f queues/s), %s after the last create\n", r.created.Round(time.Millisecond), r.ready.Round(time.Millisecond), float64(r.n)/r.ready.Seconds(), (r.ready - r.created).Round(time.Millisecond))
	fmt.Printf("Kafka requests during the run: %.0f (%.3f per queue; writes %.0f) %s\n", sum(r.kafka, all), sum(r.kafka, all)/float64(r.n), sum(r.kafka, writes), fmtCounts(r.kafka))
	fmt.Printf("apiserver writes during the run: %.0f (%.2f per queue)\n", r.writes, r.writes/float64(r.n))
	fmt.Printf("creates at %.1f/s; CPU %.2f s per 1,000 queues; ShareQueue reconciles during the run %.0f (%.2f per queue) %s\n", float64(r.n)/r.created.Seconds(), r.cpu*1000/float64(r.n),
		sum(r.reconciles, all), sum(r.reconciles, all)/float64(r.n), fmtCounts(r.reconciles))
	fmt.Printf("machine during the run: %.2f of %d cores busy (managers %.2f; the rest is the apiserver, etcd, the broker and the bench)\n", r.machineBusy, goruntime.NumCPU(), r.cpu/r.ready.Seconds())
	if r.queueWaits > 0 && r.reconcileTimes > 0 {
		fmt.Printf("ShareQueue workqueue during the run: mean wait %.2f s before a worker took an item, mean reconcile %.2f s\n", r.queueWait/r.queueWaits, r.reconcileTime/r.reconcileTimes)
	}
	means := func(sums, counts map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for k, n := range counts {
			if n > 0 {
				out[k] = sums[k] / n
			}
		}
		return out
	}
	if len(r.calls) > 0 {
		fmt.Printf("Kafka admin calls during the run, mean wait per call in s (batch linger included) %s\n", fmtCountsPrec(means(r.callSeconds, r.calls), 2))
	}
	if len(r.requests) > 0 {
		fmt.Printf("apiserver requests during the run by verb: count %s, mean s waiting for --kube-api-qps %s, mean s per request %s\n",
			fmtCounts(r.requests), fmtCountsPrec(means(r.limiterSeconds, r.limiterWaits), 3), fmtCountsPrec(means(r.requestSeconds, r.requests), 3))
	}
	if len(r.steps) > 0 {
		fmt.Printf("ShareQueue reconcile steps during the run, mean s per run of the step %s\n", fmtCountsPrec(means(r.stepSeconds, r.steps), 3))
		fmt.Printf("ShareQueue reconcile steps during the run, total s (over all workers) %s\n", fmtCountsPrec(r.stepSeconds, 0))
	}
	if r.noop {
		fmt.Printf("one no-op resync window: Kafka requests %.0f %s, Kafka writes %.0f, apiserver writes %.0f\n", sum(r.idleKafka, all), fmtCounts(r.idleKafka), sum(r.idleKafka, writes), r.idleWrite)
	}
	if r.idle != nil {
		i, mins := r.idle, r.idle.window.Minutes()
		perMin := func(m map[string]float64) map[string]float64 {
			out := map[string]float64{}
			for k, v := range m {
				out[k] = v / mins
			}
			return out
		}
		fmt.Printf("idle window %s (nothing changing): manager CPU %.2f s (%.2f%% of one core); Kafka requests %.1f/min %s; apiserver requests %.1f/min %s, writes %.0f; reconciles %s\n",
			i.window.Round(time.Second), i.cpu, 100*i.cpu/i.window.Seconds(), sum(i.kafka, all)/mins, fmtCountsPrec(perMin(i.kafka), 1),
			sum(i.apiserver, all)/mins, fmtCountsPrec(perMin(i.apiserver), 1), writesOf(i.apiserver), fmtCounts(i.reconciles))
	}
	if mins := r.idleWindow.Minutes(); r.noop && mins > 0 {
		perMin := map[string]float64{}
		for api, v := range r.depth {
			perMin[api] = v / mins
		}
		fmt.Printf("depth poller (--depth-interval, fresh metrics for %d queues): %.1f rounds/min, %.1f Kafka requests/min %s; status.depth patches in the window %.0f (of the apiserver writes above)\n",
			r.n, r.depthRounds/mins, sum(perMin, all), fmtCountsPrec(perMin, 1), r.depthStatusWrites)
	}
	for _, m := range r.managers {
		if m.shard == "" {
			fmt.Printf("manager (unsharded, all %d queues): peak RSS %.1f MiB, CPU during the run %.1f s\n", m.queues, float64(m.rssKB)/1024, m.cpu)
			continue
		}
		fmt.Printf("manager %s (--watch-label-selector='%s in (%s)', %d queues): peak RSS %.1f MiB, CPU during the run %.1f s, Kafka requests %.0f %s, apiserver writes %.0f\n",
			m.shard, controllers.ShardLabel, m.shard, m.queues, float64(m.rssKB)/1024, m.cpu, sum(m.kafka, all), fmtCounts(m.kafka), m.writes)
	}
}

func printRatios(rs []result) {
	byN := map[int]map[string]result{}
	var order []int
	for _, r := range rs {
		if byN[r.n] == nil {
			byN[r.n] = map[string]result{}
			order = append(order, r.n)
		}
		byN[r.n][r.path] = r
	}
	all := func(string) bool { return true }
	header := false
	for _, n := range order {
		b, okB := byN[n]["batched"]
		nv, okN := byN[n]["naive"]
		if !okB || !okN {
			continue
		}
		if !header {
			fmt.Printf("\n== naive / batched\n%8s %12s %12s %8s %14s %14s %8s %10s\n", "N", "naive", "batched", "time x", "naive req/q", "batched req/q", "req x", "CPU x")
			header = true
		}
		kn, kb := sum(nv.kafka, all), sum(b.kafka, all)
		fmt.Printf("%8d %12s %12s %8.1f %14.3f %14.3f %8.1f %10.1f\n", n, nv.ready.Round(100*time.Millisecond), b.ready.Round(100*time.Millisecond),
			nv.ready.Seconds()/b.ready.Seconds(), kn/float64(n), kb/float64(n), kn/kb, nv.cpu/b.cpu)
	}
	header = false
	for _, n := range order {
		b, okB := byN[n]["batched"]
		s, okS := byN[n]["sharded"]
		if !okB || !okS {
			continue
		}
		if !header {
			fmt.Printf("\n== sharded / batched: %d shard managers beside 1 manager (Ready: from the first create; tail: from the last create; RSS: peak, per manager; CPU: summed)\n", len(s.managers))
			fmt.Printf("%8s %10s %10s %7s %10s %10s %13s %13s %7s %12s %-24s %8s %8s %6s\n", "N", "batched", "sharded", "time x", "b tail", "s tail",
				"batched req/q", "sharded req/q", "req x", "batched RSS", "sharded RSS", "b CPU", "s CPU", "CPU x")
			header = true
		}
		rss := make([]string, len(s.managers))
		for i, m := range s.managers {
			rss[i] = fmt.Sprintf("%s %.0f", m.shard, float64(m.rssKB)/1024)
		}
		kb, ks := sum(b.kafka, all), sum(s.kafka, all)
		fmt.Printf("%8d %10s %10s %7.2f %10s %10s %13.3f %13.3f %7.2f %8.0f MiB %-24s %6.1f s %6.1f s %6.2f\n", n, b.ready.Round(100*time.Millisecond), s.ready.Round(100*time.Millisecond),
			s.ready.Seconds()/b.ready.Seconds(), (b.ready - b.created).Round(100*time.Millisecond), (s.ready - s.created).Round(100*time.Millisecond),
			kb/float64(n), ks/float64(n), ks/kb, float64(b.managers[0].rssKB)/1024, strings.Join(rss, ", ")+" MiB", b.cpu, s.cpu, s.cpu/b.cpu)
	}
}

// scrape reads the manager's Prometheus text metrics into name{labels} → value.
func scrape(url string) (map[string]float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// diff returns after-before of one metric's series, keyed by its "api" or "method" label.
func diff(before, after map[string]float64, metric string) map[string]float64 {
	out := map[string]float64{}
	for series, v := range after {
		if !strings.HasPrefix(series, metric+"{") {
			continue
		}
		d := v - before[series]
		if d == 0 {
			continue
		}
		label := labelOf(series, "api")
		if label == "" {
			label = labelOf(series, "method")
		}
		out[label] += d
	}
	return out
}

func labelOf(series, name string) string {
	i := strings.Index(series, name+`="`)
	if i < 0 {
		return ""
	}
	rest := series[i+len(name)+2:]
	return rest[:strings.IndexByte(rest, '"')]
}

func writesOf(byMethod map[string]float64) float64 {
	t := 0.0
	for m, v := range byMethod {
		if m != "GET" && m != "HEAD" {
			t += v
		}
	}
	return t
}

func fmtCounts(m map[string]float64) string { return fmtCountsPrec(m, 0) }

// fmtCountsPrec is fmtCounts with prec decimals.
func fmtCountsPrec(m map[string]float64, prec int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%.*f", k, prec, m[k])
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// machineCPU is the machine's busy CPU seconds since boot, all cores (/proc/stat: every
// field of the cpu line but idle and iowait); 0 when it cannot be read.
func machineCPU() float64 {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(stat), "\n")
	f := strings.Fields(line)
	busy := 0.0
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		x, _ := strconv.ParseFloat(v, 64)
		busy += x
	}
	return busy / 100 // USER_HZ
}

// procStats returns a process's CPU seconds (utime+stime) and peak RSS in KiB (VmHWM).
func procStats(pid int) (cpu float64, hwmKB int64, err error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// Fields after the parenthesised command: utime and stime are the 14th and 15th fields.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	cpu = (ut + st) / 100 // USER_HZ
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			hwmKB, _ = strconv.ParseInt(strings.Fields(line)[1], 10, 64)
		}
	}
	return cpu, hwmKB, nil
}

// fetchAPIServerProfile writes the apiserver's CPU profile (/debug/pprof/profile+query) to
// file, authenticated as cfg.
func fetchAPIServerProfile(cfg *rest.Config, query, file string) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	return fetchWith(hc, strings.TrimSuffix(cfg.Host, "/")+"/debug/pprof/profile"+query, file)
}

func fetch(url, file string) error { return fetchWith(http.DefaultClient, url, file) }

// fetchWith writes the body of a GET of url with hc to file.
func fetchWith(hc *http.Client, url, file string) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func ptr[T any](v T) *T { return &v }
