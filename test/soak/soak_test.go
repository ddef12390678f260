//go:build soak

// Package soak is the chaos soak of issue 20 (docs/soak.md): a real apiserver, a 3-broker
// Kafka 4.4 cluster and a 1-broker cluster formatted at release 4.1, the manager as its own
// process, 300 ShareQueues with DeadLetterRoutes in both modes, and applications moving
// records with known content, while a seeded schedule injects faults in episodes. After each
// episode's settle window the truth checker (internal/verify) must find no false claim; at
// the end every produced record is accepted or dead-lettered with its provenance, no topic of
// a live Retain queue was deleted or replaced, and the manager's memory and Kafka request
// rate are reported.
//
// Run it with `make soak` (SOAK_DURATION, SOAK_SEED); it is behind the build tag soak so
// `go test ./...` does not run it.
package soak

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/verify"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

var (
	flagDuration = flag.Duration("soak.duration", 30*time.Minute, "How long faults are injected (the fault phase); setup, drain and the final check come on top.")
	flagSeed     = flag.Uint64("soak.seed", 0, "Seed of the fault schedule and of the queue population; 0 picks one from the clock (printed first, so the run can be replayed).")
	flagQueues   = flag.Int("soak.queues", 300, "ShareQueues in the population, traffic queues included.")
	flagLogDir   = flag.String("soak.log-dir", "", "Where the fault log and the processes' logs go; empty: a new directory under $TMPDIR, kept after the run.")
)

const (
	ns = "soak"

	// Manager timing the settle bound follows from (passed as flags, see startManager).
	probeInterval  = 20 * time.Second // --cluster-probe-interval: brokers, features, bounds re-read
	resyncInterval = 60 * time.Second // --queue-resync-interval: every queue re-checked against Kafka
	// settleBound is S: after the last fault of an episode ends, the truth checker must be
	// clean within S. A claim goes stale when Kafka changes under it; the manager sees a
	// cluster change within one probe interval (20 s) and re-checks every queue at least once
	// per resync interval (60 s), and a reconcile that fails on the way is retried with
	// controller-runtime's backoff (seconds while Kafka answers again). S = probe + resync
	// + 40 s for the reconciles of 300 queues and the apiserver writes on 2 loaded cores.
	settleBound = probeInterval + resyncInterval + 40*time.Second
	// checkEvery is how often the checker runs inside a settle window.
	checkEvery = 10 * time.Second
	// drainBound is how long after the producers stop every record must be accounted for.
	drainBound = 4 * time.Minute
	// mainLagMax is replica.lag.time.max.ms on the 3-broker cluster: a broker stopped longer
	// than this drops out of every ISR (the isr-loss fault stops one for longer).
	mainLagMax = 10 * time.Second
	// Broker bound the bound-change fault narrows and widens again
	// (group.share.max.record.lock.duration.ms, KIP-1240): queues asking for 50 s are out
	// of bounds while it is 45 s.
	boundConfig = "group.share.max.record.lock.duration.ms"
	boundWide   = "60000"
	boundNarrow = "45000"
)

// TestSoak is the soak: see the package comment and docs/soak.md.
func TestSoak(t *testing.T) {
	rig.SkipWithoutRig(t, "the local apiserver and Kafka rig")
	ctrllog.SetLogger(logr.Discard()) // envtest logs through it; the soak's own log is the fault log
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano()) % 1_000_000_000
	}
	dir := *flagLogDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "kqo-soak-"); err != nil {
			t.Fatal(err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	flog, err := newFaultLog(filepath.Join(dir, "faults.log"), t)
	if err != nil {
		t.Fatal(err)
	}
	defer flog.close()
	flog.note("seed %d, fault phase %s, %d queues, settle bound S=%s, logs in %s (replay: make soak SOAK_SEED=%d SOAK_DURATION=%s)",
		seed, *flagDuration, *flagQueues, settleBound, dir, seed, *flagDuration)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := startRig(t, ctx, dir, flog, seed)
	defer s.stop()

	// Population and traffic.
	s.createPopulation(ctx)
	s.waitAllReady(ctx, 6*time.Minute)
	flog.note("population ready: %d queues, %d routes", s.pop.count(), s.pop.routeCount())
	if err := s.checkClean(ctx, "after setup", time.Now(), false); err != nil {
		t.Fatal(err)
	}

	s.startTraffic(ctx)
	s.startWatchers(ctx)

	// Fault phase: episodes until the duration is used up.
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	phaseEnd := time.Now().Add(*flagDuration)
	s.res.markPhase("faults")
	for ep := 1; time.Now().Before(phaseEnd) && !t.Failed(); ep++ {
		s.runEpisode(ctx, ep, rng)
	}
	s.res.markPhase("drain")

	// Drain: producers stop, applications keep consuming until every record is accounted for.
	s.stopProducers()
	flog.note("producers stopped: %s", s.led.summary())
	if err := s.waitDrained(ctx, drainBound); err != nil {
		t.Error(err)
	}
	s.stopConsumers()
	if err := s.checkClean(ctx, "final (with receive)", time.Now(), true); err != nil {
		t.Error(err)
	}
	if err := s.converged(ctx); err != nil {
		t.Error(err)
	}
	s.stopWatchers()

	for _, v := range s.led.violations() {
		t.Errorf("records: %s", v)
	}
	for _, v := range s.ids.violations() {
		t.Errorf("retain topics: %s", v)
	}
	if v := s.res.verdict(); v != "" {
		t.Error(v)
	}
	flog.note("fault counts: %s", flog.counts())
	flog.note("settle times after the last fault: %s", s.settleSummary())
	flog.note("records: %s; %d poison ids on main archived by the brokers without a dead letter during a broker fault", s.led.summary(), s.brokerDLQLost)
	flog.note("retain topics: %d tracked, %d polls (%d failed)", s.ids.tracked(), s.ids.polls(), s.ids.failedPolls())
	flog.note("resources: %s", s.res.summary())
	s.mgrMu.Lock()
	flog.note("manager: started %d times, %d of them after it exited on its own", s.mgr.starts, s.mgrExits)
	s.mgrMu.Unlock()
	if t.Failed() {
		flog.note("FAILED; replay with: make soak SOAK_SEED=%d SOAK_DURATION=%s", seed, *flagDuration)
	} else {
		flog.note("PASSED")
	}
}

// checkClean runs the truth checker until it finds no false claim and nothing unverifiable,
// for at most settleBound after since. It returns the last report's problems otherwise.
func (s *soak) checkClean(ctx context.Context, what string, since time.Time, receive bool) error {
	var last string
	for {
		rep, err := verify.Check(ctx, s.c, verify.Options{Receive: receive})
		switch {
		case err != nil:
			last = "check failed: " + err.Error()
		case len(rep.Findings) == 0 && len(rep.Unverifiable) == 0:
			took := time.Since(since)
			s.flog.note("truth check %s: clean after %s (%d objects, %d claims)", what, took.Round(time.Second), rep.Objects, rep.Claims)
			if strings.HasPrefix(what, "episode") {
				s.addSettle(took)
			}
			return nil
		default:
			var b strings.Builder
			fmt.Fprintf(&b, "%d false claims, %d unverifiable of %d claims", len(rep.Findings), len(rep.Unverifiable), rep.Claims)
			for i, f := range rep.Findings {
				if i == 20 {
					fmt.Fprintf(&b, "\n  … %d more", len(rep.Findings)-i)
					break
				}
				b.WriteString("\n  false: " + f.String())
			}
			for i, u := range rep.Unverifiable {
				if i == 10 {
					fmt.Fprintf(&b, "\n  … %d more unverifiable", len(rep.Unverifiable)-i)
					break
				}
				b.WriteString("\n  unverifiable: " + u)
			}
			last = b.String()
		}
		if time.Since(since) > settleBound {
			s.flog.note("truth check %s: NOT clean %s after the last fault (bound %s): %s", what, time.Since(since).Round(time.Second), settleBound, last)
			return fmt.Errorf("truth check %s: not clean within the settle bound %s: %s\nfault log: %s", what, settleBound, last, s.flog.path)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(checkEvery):
		}
	}
}

func (s *soak) addSettle(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settles = append(s.settles, d)
}

func (s *soak) settleSummary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.settles) == 0 {
		return "none"
	}
	ds := slices.Clone(s.settles)
	slices.Sort(ds)
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return fmt.Sprintf("%d windows, median %s, max %s, mean %s (bound %s)", len(ds), ds[len(ds)/2].Round(time.Second),
		ds[len(ds)-1].Round(time.Second), (sum / time.Duration(len(ds))).Round(time.Second), settleBound)
}

// queueSpec is what the soak asked for one ShareQueue (and its route), so deletions can be
// undone with the same spec.
type queueSpec struct {
	name, cluster string
	partitions    int32
	rf            int32
	retain        bool
	lock          time.Duration // 0: broker default
	attempts      int32         // 0: broker default
	route         bool
	traffic       bool
}

func (q queueSpec) object() *kqv1.ShareQueue {
	sq := &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: q.name}, Spec: kqv1.ShareQueueSpec{
		ClusterRef: kqv1.ClusterReference{Name: q.cluster},
		Topic:      kqv1.QueueTopicSpec{Partitions: q.partitions},
	}}
	if q.rf > 0 {
		sq.Spec.Topic.ReplicationFactor = ptr.To(q.rf)
		if q.rf >= 3 {
			sq.Spec.Topic.Config = kqv1.TopicConfigs{"min.insync.replicas": "2"}
		}
	}
	if q.retain {
		sq.Spec.DeletionPolicy = kqv1.DeletionPolicyRetain
	} else {
		sq.Spec.DeletionPolicy = kqv1.DeletionPolicyDelete
	}
	if q.lock > 0 {
		sq.Spec.Delivery.LockDuration = &metav1.Duration{Duration: q.lock}
	}
	if q.attempts > 0 {
		sq.Spec.Delivery.MaxDeliveryAttempts = ptr.To(q.attempts)
	}
	if q.traffic {
		// The group must start at the log's start: with the default (latest) the records
		// produced before the applications first joined would never be delivered.
		sq.Spec.Delivery.AutoOffsetReset = ptr.To("earliest")
	}
	return sq
}

func (q queueSpec) routeObject() *kqv1.DeadLetterRoute {
	r := &kqv1.DeadLetterRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: q.name + "-dlq"}, Spec: kqv1.DeadLetterRouteSpec{
		QueueRef:   kqv1.QueueReference{Name: q.name},
		CopyRecord: true, // the broker's dead letter then carries the value: matched by content
	}}
	if q.cluster == "main" {
		r.Spec.Mode = kqv1.DeadLetterModeBrokerNative
	} else {
		r.Spec.Mode = kqv1.DeadLetterModeRepublisher
	}
	if q.rf > 0 {
		r.Spec.Topic.ReplicationFactor = ptr.To(q.rf)
	}
	return r
}

// population is the soak's own record of the queues it made.
type population struct {
	mu     sync.Mutex
	queues map[string]queueSpec
	busy   map[string]bool // a fault is working on it
}

func (p *population) count() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.queues) }
func (p *population) routeCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, q := range p.queues {
		if q.route {
			n++
		}
	}
	return n
}

// take picks up to n idle (no traffic, no fault on it) queues matching keep, in name order
// shuffled by rng, and marks them busy until release.
func (p *population) take(rng *rand.Rand, n int, keep func(queueSpec) bool) []queueSpec {
	p.mu.Lock()
	defer p.mu.Unlock()
	var names []string
	for name, q := range p.queues {
		if !q.traffic && !p.busy[name] && (keep == nil || keep(q)) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	var out []queueSpec
	for _, name := range names[:min(n, len(names))] {
		p.busy[name] = true
		out = append(out, p.queues[name])
	}
	return out
}

func (p *population) release(qs []queueSpec) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, q := range qs {
		delete(p.busy, q.name)
	}
}

func (p *population) update(q queueSpec) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.queues[q.name] = q
}

func (p *population) all() []queueSpec {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []queueSpec
	for _, q := range p.queues {
		out = append(out, q)
	}
	slices.SortFunc(out, func(a, b queueSpec) int { return strings.Compare(a.name, b.name) })
	return out
}

// createPopulation creates the traffic queues and the idle population from the seed: on
// "main" (4.4, 3 brokers) nine in ten idle queues, a fifth of them with a BrokerNative route;
// on "old" (release 4.1, 1 broker) the rest, a third with a Republisher route. Partitions
// 1–3, both deletion policies, some with a 50 s lock (out of bounds while the bound-change
// fault narrows the brokers' maximum to 45 s).
func (s *soak) createPopulation(ctx context.Context) {
	rng := rand.New(rand.NewPCG(s.seed, 0x9091))
	var specs []queueSpec
	for i := range trafficMain {
		specs = append(specs, queueSpec{name: fmt.Sprintf("t-main-%d", i), cluster: "main", partitions: 2, rf: 3, retain: true, attempts: 4, route: true, traffic: true})
	}
	for i := range trafficOld {
		specs = append(specs, queueSpec{name: fmt.Sprintf("t-old-%d", i), cluster: "old", partitions: 2, retain: true, attempts: 4, route: true, traffic: true})
	}
	for i := range max(0, *flagQueues-len(specs)) {
		q := queueSpec{name: fmt.Sprintf("q-%03d", i), cluster: "main", partitions: int32(1 + rng.IntN(3)), retain: rng.IntN(2) == 0}
		if rng.IntN(10) == 0 {
			q.cluster = "old"
			q.route = rng.IntN(3) == 0
		} else {
			q.route = rng.IntN(5) == 0
			q.rf = int32(1 + rng.IntN(3))
		}
		switch rng.IntN(4) {
		case 0:
			q.lock = 50 * time.Second
		case 1:
			q.lock = 20 * time.Second
		}
		if rng.IntN(2) == 0 {
			q.attempts = int32(2 + rng.IntN(6))
		}
		specs = append(specs, q)
	}
	s.pop = &population{queues: map[string]queueSpec{}, busy: map[string]bool{}}
	work := make(chan queueSpec)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := range work {
				if err := s.createQueue(ctx, q); err != nil {
					s.t.Error(err)
				}
			}
		}()
	}
	for _, q := range specs {
		s.pop.update(q)
		work <- q
	}
	close(work)
	wg.Wait()
	if s.t.Failed() {
		s.t.FailNow()
	}
}

func (s *soak) createQueue(ctx context.Context, q queueSpec) error {
	if err := s.retryK8s(ctx, func() error { return ignoreExists(s.c.Create(ctx, q.object())) }); err != nil {
		return fmt.Errorf("creating queue %s: %w", q.name, err)
	}
	if q.route {
		if err := s.retryK8s(ctx, func() error { return ignoreExists(s.c.Create(ctx, q.routeObject())) }); err != nil {
			return fmt.Errorf("creating route %s-dlq: %w", q.name, err)
		}
	}
	return nil
}

// waitAllReady waits until every queue and route is Ready.
func (s *soak) waitAllReady(ctx context.Context, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		var sqs kqv1.ShareQueueList
		var dlrs kqv1.DeadLetterRouteList
		var notReady []string
		err := s.c.List(ctx, &sqs, client.InNamespace(ns))
		if err == nil {
			err = s.c.List(ctx, &dlrs, client.InNamespace(ns))
		}
		if err == nil {
			for _, q := range sqs.Items {
				if !meta.IsStatusConditionTrue(q.Status.Conditions, kqv1.ConditionReady) {
					notReady = append(notReady, "sq/"+q.Name+": "+condSummary(q.Status.Conditions))
				}
			}
			for _, r := range dlrs.Items {
				if !meta.IsStatusConditionTrue(r.Status.Conditions, kqv1.ConditionReady) {
					notReady = append(notReady, "dlr/"+r.Name+": "+condSummary(r.Status.Conditions))
				}
			}
			if len(notReady) == 0 && len(sqs.Items) == s.pop.count() {
				return
			}
		}
		if time.Now().After(deadline) {
			slices.Sort(notReady)
			s.t.Fatalf("population not Ready within %s (list error %v, %d queues listed): %d not Ready, e.g. %s\nmanager log: %s",
				timeout, err, len(sqs.Items), len(notReady), strings.Join(notReady[:min(10, len(notReady))], "; "), s.mgr.logPath)
		}
		time.Sleep(3 * time.Second)
	}
}

// converged checks that the faults left nothing stuck: every queue and route is Ready, except
// the queues that ask for a 50 s lock while the brokers' maximum is narrowed to 45 s, which
// must say Ready=False with reason OutOfBrokerBounds.
func (s *soak) converged(ctx context.Context) error {
	s.mu.Lock()
	narrowed := s.boundNarrowed
	s.mu.Unlock()
	var sqs kqv1.ShareQueueList
	var dlrs kqv1.DeadLetterRouteList
	if err := s.retryK8s(ctx, func() error { return s.c.List(ctx, &sqs, client.InNamespace(ns)) }); err != nil {
		return err
	}
	if err := s.retryK8s(ctx, func() error { return s.c.List(ctx, &dlrs, client.InNamespace(ns)) }); err != nil {
		return err
	}
	var bad []string
	pop := map[string]queueSpec{}
	for _, q := range s.pop.all() {
		pop[q.name] = q
	}
	outOfBounds := 0
	for _, q := range sqs.Items {
		spec := pop[q.Name]
		ready := meta.FindStatusCondition(q.Status.Conditions, kqv1.ConditionReady)
		switch {
		case narrowed && spec.cluster == "main" && spec.lock == 50*time.Second:
			outOfBounds++
			if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != kqv1.ReasonOutOfBrokerBounds {
				bad = append(bad, "sq/"+q.Name+" (50s lock, brokers' max 45s) "+condSummary(q.Status.Conditions))
			}
		case ready == nil || ready.Status != metav1.ConditionTrue:
			bad = append(bad, "sq/"+q.Name+" "+condSummary(q.Status.Conditions))
		}
	}
	for _, r := range dlrs.Items {
		if !meta.IsStatusConditionTrue(r.Status.Conditions, kqv1.ConditionReady) {
			// A route of an out-of-bounds queue may wait for it.
			if q := pop[r.Spec.QueueRef.Name]; narrowed && q.cluster == "main" && q.lock == 50*time.Second {
				continue
			}
			bad = append(bad, "dlr/"+r.Name+" "+condSummary(r.Status.Conditions))
		}
	}
	if len(sqs.Items) != len(pop) {
		bad = append(bad, fmt.Sprintf("%d ShareQueues listed, the soak made %d", len(sqs.Items), len(pop)))
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		return fmt.Errorf("not converged at the end: %d objects, e.g. %s", len(bad), strings.Join(bad[:min(10, len(bad))], "; "))
	}
	s.flog.note("converged: %d queues and %d routes Ready (%d queues OutOfBrokerBounds as expected)", len(sqs.Items)-outOfBounds, len(dlrs.Items), outOfBounds)
	return nil
}

func condSummary(cs []metav1.Condition) string {
	c := meta.FindStatusCondition(cs, kqv1.ConditionReady)
	if c == nil {
		return "no Ready condition"
	}
	return fmt.Sprintf("%s/%s %s", c.Status, c.Reason, c.Message)
}
