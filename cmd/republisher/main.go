// Command republisher is the dead-letter sidecar for clusters without broker-native DLQs
// (share.version below 2). It consumes a ShareQueue's share group for the application, serves
// records over a local HTTP API (api/republisher/openapi.yaml) and writes dead records to the
// route's topic before accepting them. Every flag also reads an environment variable, which is
// how the injecting webhook configures it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/internal/republisher"
)

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v, ok := os.LookupEnv(name); ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

func main() {
	var (
		bootstrap   = flag.String("bootstrap-servers", envOr("KQO_BOOTSTRAP_SERVERS", ""), "Kafka bootstrap servers, comma-separated (env KQO_BOOTSTRAP_SERVERS).")
		topic       = flag.String("topic", envOr("KQO_TOPIC", ""), "The queue's topic (env KQO_TOPIC).")
		group       = flag.String("group", envOr("KQO_GROUP", ""), "The queue's share group (env KQO_GROUP).")
		dlq         = flag.String("dead-letter-topic", envOr("KQO_DEAD_LETTER_TOPIC", ""), "Where dead records go (env KQO_DEAD_LETTER_TOPIC).")
		maxAttempts = flag.Int("max-delivery-attempts", envInt("KQO_MAX_DELIVERY_ATTEMPTS", 5), "Attempts the application gets: the ShareQueue's spec.delivery.maxDeliveryAttempts (env KQO_MAX_DELIVERY_ATTEMPTS). The group's share.delivery.count.limit must be one more.")
		lease       = flag.Duration("lease", 30*time.Second, "How long the application holds a received record before it lapses; a renew starts it again, and the brokers' lock is renewed meanwhile (env KQO_LEASE).")
		members     = flag.Int("members", envInt("KQO_MEMBERS", 4), "Share-group members, i.e. batches the application can hold at once (env KQO_MEMBERS).")
		maxRecords  = flag.Int("max-records", envInt("KQO_MAX_RECORDS", 100), "Most records one receive returns (env KQO_MAX_RECORDS).")
		listen      = flag.String("listen", envOr("KQO_LISTEN", "127.0.0.1:8787"), "Address of the application API; loopback by default, as the app is in the same Pod (env KQO_LISTEN).")
		metricsAddr = flag.String("metrics-bind-address", envOr("KQO_METRICS_BIND_ADDRESS", ":9787"), "Address of /metrics; \"0\" disables it (env KQO_METRICS_BIND_ADDRESS).")
	)
	if v, ok := os.LookupEnv("KQO_LEASE"); ok {
		if d, err := time.ParseDuration(v); err == nil {
			*lease = d
		}
	}
	flag.Parse()
	if err := run(*bootstrap, republisher.Options{Topic: *topic, Group: *group, DeadLetterTopic: *dlq, MaxDeliveryAttempts: int32(*maxAttempts),
		Lease: *lease, Members: *members, MaxRecords: *maxRecords}, *listen, *metricsAddr); err != nil {
		fmt.Fprintln(os.Stderr, "republisher:", err)
		os.Exit(1)
	}
}

func run(bootstrap string, opts republisher.Options, listen, metricsAddr string) error {
	if bootstrap == "" {
		return errors.New("--bootstrap-servers (KQO_BOOTSTRAP_SERVERS) is required")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts.Registerer = reg
	rp, err := republisher.New(kafka.Config{BootstrapServers: strings.Split(bootstrap, ","), ClientID: "kafka-queue-republisher"}, opts)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go rp.Run(ctx)

	api := &http.Server{Addr: listen, Handler: rp.Handler(), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 2)
	go func() { errc <- api.ListenAndServe() }()
	var metrics *http.Server
	if metricsAddr != "0" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		metrics = &http.Server{Addr: metricsAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- metrics.ListenAndServe() }()
	}
	fmt.Fprintf(os.Stderr, "republisher: serving %s for group %s on %s, dead letters to %s\n", opts.Topic, opts.Group, listen, opts.DeadLetterTopic)
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	// End the long-polls and stop handing out records, stop taking requests (acks in flight
	// finish), then give every held record back and close. Each step has its own bound, so a
	// slow one does not leave the last without time to flush the acks; together they fit a
	// Pod's default 30s grace period.
	within(3*time.Second, rp.Drain)
	within(5*time.Second, func(ctx context.Context) { _ = api.Shutdown(ctx) })
	if metrics != nil {
		within(time.Second, func(ctx context.Context) { _ = metrics.Shutdown(ctx) })
	}
	within(20*time.Second, rp.Shutdown)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// within runs f with a context that ends after d.
func within(d time.Duration, f func(context.Context)) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	f(ctx)
}
