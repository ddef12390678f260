package controllers

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The shared backoff of each KafkaCluster ("circuit"), for request-level Kafka failures only
// (kafka.IsUnreachable: the brokers unreachable, a transport error, a deadline; never a
// broker's per-item answer such as INVALID_CONFIG or UNKNOWN_TOPIC_OR_PARTITION).
//
// Without it every ShareQueue backed off on its own per-item limiter (1 s doubling to 2 min,
// no jitter): during an outage each queue kept trying on its own schedule, holding a worker
// for up to --kafka-timeout each time, and after the brokers came back a queue could sit up
// to 2 min in its own backoff. With it:
//
//   - the first request-level failure puts the cluster in backoff; while it lasts a queue or
//     route reconcile of that cluster makes no Kafka call (it reports Ready=False,
//     KafkaUnavailable, naming the next attempt and the last error) and waits;
//   - when the next attempt is due, the gate wakes one waiting object (the trial, the
//     half-open state of a circuit breaker); only it passes. Its failure doubles the step,
//     its success ends the backoff;
//   - the first success (a trial, the KafkaCluster prober, any reconcile) re-enqueues every
//     waiting object at once and the prober of the cluster, so recovery takes one backoff
//     step plus one reconcile round.
//
// The steps come from client-go's flowcontrol.Backoff (the kubelet's image-pull and
// crash-loop backoff): gateBaseStep (1 s) doubling, plus up to gateJitter (50 %) of the
// previous step at random, to gateMaxStep (10 s). 1 s: a broker restart or a leader move
// is often over within a second or two, so the first retry comes soon. 10 s: a trial is one
// reconcile's requests (a handful) per cluster per step, so even at the cap an outage costs
// a cluster about 0.1 attempts per second per manager, whatever the number of queues; and
// recovery takes at most one step plus one reconcile round. Measured at 1,000 queues and a
// 60 s outage (hack/bench -outage): with a 30 s cap the queues were all Ready 37.7 s after
// the broker restarted, no better than the per-queue backoff it replaced (30 s), because a
// long outage leaves the step at the cap. client-go's workqueue (1000 s) and
// controller-runtime's caps are for per-item failures, not for a shared outage. The jitter
// keeps many managers (shards, installs) that lost the same cluster at the same moment from
// retrying in lock step.
const (
	gateBaseStep = time.Second
	gateMaxStep  = 10 * time.Second
	gateJitter   = 0.5
)

// Gate waiter kinds.
const (
	gateQueue = "ShareQueue"
	gateRoute = "DeadLetterRoute"
)

var (
	// One series per KafkaCluster this manager talks to.
	kafkaBackoffSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kafkaqueues_kafka_backoff_seconds",
		Help: "Current step of a KafkaCluster's shared backoff after request-level Kafka failures (0: not backing off).",
	}, []string{"cluster"})
	kafkaGatedReconciles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kafkaqueues_kafka_gated_reconciles_total",
		Help: "Reconciles that made no Kafka call because their KafkaCluster was backing off, by kind.",
	}, []string{"kind"})
	kafkaBrokerConnects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kafkaqueues_kafka_broker_connects_total",
		Help: "Connection attempts of the operator's Kafka clients to brokers, by result (ok, error).",
	}, []string{"result"})
)

func init() {
	metrics.Registry.MustRegister(kafkaBackoffSeconds, kafkaGatedReconciles, kafkaBrokerConnects)
}

// countBrokerConnect counts one connection attempt (a kafka.BrokerConnectFunc).
func countBrokerConnect(err error) {
	if err != nil {
		kafkaBrokerConnects.WithLabelValues("error").Inc()
		return
	}
	kafkaBrokerConnects.WithLabelValues("ok").Inc()
}

// gateWaiter is an object waiting on its cluster's backoff.
type gateWaiter struct {
	Kind string // gateQueue or gateRoute
	types.NamespacedName
}

// gateVerdict is the gate's answer: OK, or when the next attempt is due and why.
type gateVerdict struct {
	OK bool
	// Next is when the cluster's next attempt is due; Step the current step; LastErr the
	// last request-level failure.
	Next    time.Time
	Step    time.Duration
	LastErr string
}

// message says what a gated object waits for.
func (v gateVerdict) message(cluster string) string {
	return fmt.Sprintf("KafkaCluster %s is backing off after its brokers could not be reached (shared by all its queues and routes; %s step, at most %s): next attempt at %s; last error: %s",
		cluster, v.Step.Round(time.Millisecond), gateMaxStep, v.Next.UTC().Format(time.RFC3339), v.LastErr)
}

// kafkaGate holds the backoff of every KafkaCluster, by clusterKey. Safe for concurrent use.
type kafkaGate struct {
	clock   clock.WithDelayedExecution
	backoff *flowcontrol.Backoff
	// trialTimeout is how long a trial may take before another waiter gets one (the trial's
	// reconcile may end before reaching Kafka: deleted, paused, another wait).
	trialTimeout time.Duration
	// wake enqueues one waiting object (by Kind); recover enqueues the cluster's prober.
	wake    func(gateWaiter)
	recover func(cluster string)

	mu    sync.Mutex
	state map[string]*gateState
}

type gateState struct {
	next    time.Time
	lastErr string
	// trial is the waiter allowed through until trialUntil (zero: none).
	trial      gateWaiter
	trialUntil time.Time
	waiting    map[gateWaiter]struct{}
	timer      clock.Timer
}

func newKafkaGate(c clock.WithDelayedExecution, trialTimeout time.Duration) *kafkaGate {
	b := flowcontrol.NewFakeBackOffWithJitter(gateBaseStep, gateMaxStep, c, gateJitter)
	// A step is reset by success only (flowcontrol's default resets after 2×max without an
	// update, which a slow trial could reach in the middle of an outage).
	b.HasExpiredFunc = func(time.Time, time.Time, time.Duration) bool { return false }
	return &kafkaGate{
		clock: c, trialTimeout: trialTimeout, state: map[string]*gateState{}, backoff: b,
		wake: func(gateWaiter) {}, recover: func(string) {},
	}
}

// admit reports whether w may make Kafka requests for cluster now. While the cluster is
// backing off only the trial passes (w, when the gate woke it, or the first caller once the
// next attempt is due and no trial is in flight); the others are recorded as waiting.
func (g *kafkaGate) admit(cluster string, w gateWaiter) gateVerdict {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.state[cluster]
	if s == nil {
		return gateVerdict{OK: true}
	}
	now := g.clock.Now()
	if s.trial == w && now.Before(s.trialUntil) {
		delete(s.waiting, w)
		return gateVerdict{OK: true}
	}
	if !now.Before(s.next) && (s.trial == (gateWaiter{}) || !now.Before(s.trialUntil)) {
		s.trial, s.trialUntil = w, now.Add(g.trialTimeout)
		delete(s.waiting, w)
		return gateVerdict{OK: true}
	}
	s.waiting[w] = struct{}{}
	return g.verdict(cluster, s)
}

func (g *kafkaGate) verdict(cluster string, s *gateState) gateVerdict {
	return gateVerdict{Next: s.next, Step: g.backoff.Get(cluster), LastErr: s.lastErr}
}

// failure records a request-level failure of w's Kafka requests (w zero: the prober's). It
// starts the backoff, or doubles the step when the failure is the trial's (or the next
// attempt was due); failures of requests that were in flight when the backoff began only
// record w as waiting, so N concurrent reconciles failing together count once.
func (g *kafkaGate) failure(cluster string, w gateWaiter, err error) gateVerdict {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock.Now()
	s := g.state[cluster]
	if s == nil {
		s = &gateState{waiting: map[gateWaiter]struct{}{}}
		g.state[cluster] = s
		g.step(cluster, s, now)
	} else if (w != gateWaiter{} && s.trial == w) || !now.Before(s.next) {
		g.step(cluster, s, now)
	}
	s.lastErr = err.Error()
	if (w != gateWaiter{}) {
		s.waiting[w] = struct{}{}
	}
	return g.verdict(cluster, s)
}

// step moves the cluster to its next backoff step and arms the trial timer. g.mu is held.
func (g *kafkaGate) step(cluster string, s *gateState, now time.Time) {
	g.backoff.Next(cluster, now)
	d := g.backoff.Get(cluster)
	s.next, s.trial, s.trialUntil = now.Add(d), gateWaiter{}, time.Time{}
	kafkaBackoffSeconds.WithLabelValues(cluster).Set(d.Seconds())
	g.arm(cluster, s, d)
}

// arm (re)starts the timer that hands the trial to a waiter after d. g.mu is held.
func (g *kafkaGate) arm(cluster string, s *gateState, d time.Duration) {
	if s.timer != nil {
		s.timer.Stop()
	}
	// In its own goroutine: a clock may run AfterFunc callbacks under its own lock (the
	// fake clock of the tests does), and fire reads the clock.
	s.timer = g.clock.AfterFunc(d, func() { go g.fire(cluster, s) })
}

// fire hands the trial to one waiting object and wakes it; with no trial report within
// trialTimeout, another gets it.
func (g *kafkaGate) fire(cluster string, s *gateState) {
	g.mu.Lock()
	if g.state[cluster] != s {
		g.mu.Unlock()
		return // recovered meanwhile
	}
	now := g.clock.Now()
	if s.trial != (gateWaiter{}) && now.Before(s.trialUntil) {
		g.arm(cluster, s, s.trialUntil.Sub(now))
		g.mu.Unlock()
		return
	}
	var w gateWaiter
	for w = range s.waiting {
		break
	}
	if w == (gateWaiter{}) {
		// Nobody waits: the next caller passes as the trial (admit).
		s.trial = gateWaiter{}
		g.mu.Unlock()
		return
	}
	delete(s.waiting, w)
	s.trial, s.trialUntil = w, now.Add(g.trialTimeout)
	g.arm(cluster, s, g.trialTimeout)
	g.mu.Unlock()
	g.wake(w)
}

// success ends the cluster's backoff: every waiting object is re-enqueued at once, and the
// cluster's prober (so a Connected=False status is corrected now, not on its own schedule).
func (g *kafkaGate) success(cluster string) {
	g.mu.Lock()
	s := g.state[cluster]
	if s == nil {
		g.mu.Unlock()
		return
	}
	delete(g.state, cluster)
	if s.timer != nil {
		s.timer.Stop()
	}
	g.backoff.Reset(cluster)
	kafkaBackoffSeconds.WithLabelValues(cluster).Set(0)
	waiting := s.waiting
	g.mu.Unlock()
	g.recover(cluster)
	for w := range waiting {
		g.wake(w)
	}
}

// down records that the cluster's prober could not reach it (msg its condition's message):
// the backoff starts if it had not.
func (g *kafkaGate) down(cluster, msg string) {
	g.mu.Lock()
	started := g.state[cluster] != nil
	g.mu.Unlock()
	if !started {
		g.failure(cluster, gateWaiter{}, errors.New(msg))
	}
}

// forget drops a deleted cluster's state and series.
func (g *kafkaGate) forget(cluster string) {
	g.mu.Lock()
	if s := g.state[cluster]; s != nil && s.timer != nil {
		s.timer.Stop()
	}
	delete(g.state, cluster)
	g.mu.Unlock()
	g.backoff.Reset(cluster)
	kafkaBackoffSeconds.DeleteLabelValues(cluster)
}

// gateJitterFor spreads a gated object's safety requeue (after) by up to a quarter, so the
// waiters of one cluster do not all come back in the same instant.
func gateJitterFor(after time.Duration) time.Duration {
	return after + time.Duration(rand.Int64N(int64(after/4)+1))
}
