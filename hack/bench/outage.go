package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// outage is -outage: after the no-op window, stop the only broker for this long and start it
// again (0: off). `make bench BENCH_ARGS="-outage 60s"`.
var outage = flag.Duration("outage", 0, "after the no-op window, stop the broker for this long, start it again, and report recovery (0: off)")

// stuckAfter is how long after the restart a queue not Ready counts as stuck.
const stuckAfter = 5 * time.Minute

// runOutage stops the broker (same port and data dir on restart), samples every manager's
// metrics each second, starts the broker after d, and prints: the time from the restart until
// all n queues are Ready again, the most queues not Ready during the outage, per-second Kafka
// requests written (peak and mean), connection attempts, the operator's Kafka calls and the
// ShareQueue reconciles during the outage, reconciles gated by the shared backoff, and the
// queues still not Ready stuckAfter after the restart.
func runOutage(ctx context.Context, k *rig.Kafka, mgrs []*manager, n int, ready *atomic.Int64, d time.Duration) error {
	node := k.Nodes[0]
	sum := func(prefix string) (float64, error) {
		t := 0.0
		for _, m := range mgrs {
			s, err := scrape(m.metricsURL)
			if err != nil {
				return 0, err
			}
			for series, v := range s {
				if strings.HasPrefix(series, prefix) {
					t += v
				}
			}
		}
		return t, nil
	}
	type sample struct{ requests, connects, calls, reconciles, gated float64 }
	take := func() (sample, error) {
		var s sample
		var err error
		for _, x := range []struct {
			dst    *float64
			prefix string
		}{
			{&s.requests, "kafkaqueues_kafka_broker_requests_total{"},
			{&s.connects, "kafkaqueues_kafka_broker_connects_total{"},
			{&s.calls, "kafkaqueues_kafka_requests_total{"},
			{&s.reconciles, `controller_runtime_reconcile_total{controller="sharequeue"`},
			{&s.gated, "kafkaqueues_kafka_gated_reconciles_total{"},
		} {
			if *x.dst, err = sum(x.prefix); err != nil {
				return s, err
			}
		}
		return s, nil
	}
	before, err := take()
	if err != nil {
		return err
	}
	fmt.Printf("outage: stopping the broker for %s with %d of %d queues Ready\n", d, ready.Load(), n)
	k.StopNode(node)
	stopped := time.Now()
	prev, peak, maxNotReady := before, 0.0, int64(0)
	for time.Since(stopped) < d {
		time.Sleep(time.Second)
		s, err := take()
		if err != nil {
			return err
		}
		peak = max(peak, s.requests-prev.requests)
		maxNotReady = max(maxNotReady, int64(n)-ready.Load())
		prev = s
	}
	during := prev
	if err := k.StartNode(ctx, node, nil); err != nil {
		return fmt.Errorf("starting the broker again: %w", err)
	}
	restarted := time.Now()
	secs := restarted.Sub(stopped).Seconds()
	for ready.Load() < int64(n) && time.Since(restarted) < stuckAfter {
		time.Sleep(100 * time.Millisecond)
	}
	recovered := time.Since(restarted)
	after, err := take()
	if err != nil {
		return err
	}
	fmt.Printf("outage %s (broker down %.1fs): at most %d of %d queues not Ready during it\n", d, secs, maxNotReady, n)
	fmt.Printf("  during the outage: Kafka requests written %.0f (peak %.0f/s, mean %.2f/s), connection attempts %.0f, operator Kafka calls %.0f, ShareQueue reconciles %.0f (%.0f gated by the cluster's backoff)\n",
		during.requests-before.requests, peak, (during.requests-before.requests)/secs, during.connects-before.connects,
		during.calls-before.calls, during.reconciles-before.reconciles, during.gated-before.gated)
	if ready.Load() < int64(n) {
		fmt.Printf("  STUCK: %d of %d queues not Ready %s after the broker restarted\n", int64(n)-ready.Load(), n, stuckAfter)
	} else {
		fmt.Printf("  all %d Ready %s after the broker restarted; recovery cost %.0f Kafka requests, %.0f ShareQueue reconciles\n",
			n, recovered.Round(100*time.Millisecond), after.requests-during.requests, after.reconciles-during.reconciles)
	}
	return nil
}
