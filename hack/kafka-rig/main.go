// Command kafka-rig starts N local KRaft brokers from the Maven Central jars (no Docker) and
// keeps them running until interrupted, then stops them cleanly and removes their data.
//
//	go run ./hack/kafka-rig                                  # one Kafka 4.4.0 broker
//	go run ./hack/kafka-rig --brokers 3                      # three brokers, RF 3 internal topics
//	go run ./hack/kafka-rig --release-version 4.1            # share.version starts at 0
//	go run ./hack/kafka-rig --version 4.2.0 --prop group.share.max.record.lock.duration.ms=40000
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

type props map[string]string

func (p props) String() string { return fmt.Sprint(map[string]string(p)) }
func (p props) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("want key=value, got %q", v)
	}
	p[k] = val
	return nil
}

func main() {
	opts := rig.KafkaOptions{BrokerProps: props{}}
	flag.StringVar(&opts.Version, "version", rig.DefaultKafkaVersion, "Apache Kafka release (4.0.0 … 4.4.0)")
	flag.IntVar(&opts.Brokers, "brokers", 1, "number of combined broker+controller nodes")
	flag.StringVar(&opts.ReleaseVersion, "release-version", "", "format storage at this metadata release (e.g. 4.1)")
	flag.Var(props(opts.BrokerProps), "prop", "extra server.properties entry key=value (repeatable)")
	flag.StringVar(&opts.Dir, "dir", "", "data and log directory (default: a temp dir, removed on exit)")
	flag.Parse()
	opts.Log = func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	k, err := rig.StartKafka(ctx, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafka-rig:", err)
		os.Exit(1)
	}
	fmt.Println(k.Bootstrap())
	for _, n := range k.Nodes {
		fmt.Fprintf(os.Stderr, "node %d: 127.0.0.1:%d, log %s\n", n.ID, n.Port, n.LogFile)
	}
	fmt.Fprintln(os.Stderr, "running; Ctrl-C stops the brokers")
	<-ctx.Done()
	k.Stop()
}
