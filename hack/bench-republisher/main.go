// Command bench-republisher measures the republisher sidecar against a real broker and prints
// its throughput beside a plain franz-go producer's, in the same run:
//
//   - produce: N records with a plain idempotent acks=all franz-go producer (the baseline: the
//     dead-letter topic's write path without a republisher);
//   - accept: an application receives and accepts N records through the HTTP API;
//   - dead-letter: an application rejects N records through the HTTP API, so the republisher
//     writes each to the dead-letter topic before accepting it.
//
// It is a measurement: nothing is asserted.
//
//	go run ./hack/bench-republisher [-n 20000] [-batch 100]
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/internal/republisher"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

func main() {
	n := flag.Int("n", 20000, "records per phase")
	batch := flag.Int("batch", 100, "records per receive (the sidecar's --max-records)")
	members := flag.Int("members", 4, "share-group members in the sidecar (--members)")
	flag.Parse()
	if err := run(*n, *batch, *members); err != nil {
		fmt.Fprintln(os.Stderr, "bench-republisher:", err)
		os.Exit(1)
	}
}

func run(n, batch, members int) error {
	ctx := context.Background()
	fmt.Fprintln(os.Stderr, "bench-republisher: starting a broker")
	k, err := rig.StartKafka(ctx, rig.KafkaOptions{})
	if err != nil {
		return err
	}
	defer k.Stop()
	cfg := kafka.Config{BootstrapServers: k.BootstrapServers()}
	admin, err := kafka.NewClient(cfg)
	if err != nil {
		return err
	}
	defer admin.Close()
	topics := []kafka.NewTopic{}
	for _, t := range []string{"base", "accept", "dead", "dead.dlq", "accept.dlq"} {
		topics = append(topics, kafka.NewTopic{Name: t, Partitions: 3, ReplicationFactor: 1})
	}
	if _, err := admin.CreateTopics(ctx, topics); err != nil {
		return err
	}
	for _, g := range []string{"accept", "dead"} {
		if _, err := admin.IncrementalAlterConfigs(ctx, []kafka.Alteration{{Resource: kafka.ResourceKey{Type: kafka.GroupResource, Name: g},
			Configs: []kafka.AlterConfig{{Name: "share.auto.offset.reset", Op: kafka.OpSet, Value: "earliest"}, {Name: "share.delivery.count.limit", Op: kafka.OpSet, Value: "6"}}}}); err != nil {
			return err
		}
	}
	value := bytes.Repeat([]byte("x"), 256)

	// Baseline: a plain franz-go producer, acks=all and idempotent, the same record size.
	prod, err := kgo.NewClient(kgo.SeedBrokers(k.BootstrapServers()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return err
	}
	defer prod.Close()
	produceAll := func(topic string) (time.Duration, error) {
		start := time.Now()
		var failed atomic.Pointer[error]
		for i := 0; i < n; i++ {
			prod.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			})
		}
		if err := prod.Flush(ctx); err != nil {
			return 0, err
		}
		if e := failed.Load(); e != nil {
			return 0, *e
		}
		return time.Since(start), nil
	}
	base, err := produceAll("base")
	if err != nil {
		return err
	}
	for _, t := range []string{"accept", "dead"} {
		if _, err := produceAll(t); err != nil {
			return err
		}
	}

	phase := func(topic, ackType string) (time.Duration, error) {
		rp, err := republisher.New(cfg, republisher.Options{Topic: topic, Group: topic, DeadLetterTopic: topic + ".dlq", MaxDeliveryAttempts: 5, Members: members, MaxRecords: batch})
		if err != nil {
			return 0, err
		}
		defer rp.Shutdown(context.Background())
		srv := httptest.NewServer(rp.Handler())
		defer srv.Close()
		app := &republisher.Client{BaseURL: srv.URL}
		// One application worker per member, as an app would run its receive loops.
		var done atomic.Int64
		start := time.Now()
		errc := make(chan error, members)
		for w := 0; w < members; w++ {
			go func() {
				for done.Load() < int64(n) {
					if time.Since(start) > 10*time.Minute {
						errc <- fmt.Errorf("%s: only %d of %d records after 10m", topic, done.Load(), n)
						return
					}
					got, err := app.Receive(ctx, republisher.ReceiveRequest{MaxRecords: batch, WaitMs: 500})
					if err != nil {
						errc <- err
						return
					}
					if len(got.Records) == 0 {
						continue
					}
					req := republisher.AckRequest{}
					for _, r := range got.Records {
						req.Acks = append(req.Acks, republisher.Ack{ID: r.ID, Type: ackType})
					}
					res, err := app.Ack(ctx, req)
					if err != nil {
						errc <- err
						return
					}
					for _, r := range res.Results {
						if r.Error != "" {
							errc <- fmt.Errorf("%s %s: %s", ackType, r.ID, r.Error)
							return
						}
					}
					done.Add(int64(len(got.Records)))
				}
				errc <- nil
			}()
		}
		for w := 0; w < members; w++ {
			if err := <-errc; err != nil {
				return 0, err
			}
		}
		return time.Since(start), nil
	}
	acc, err := phase("accept", "accept")
	if err != nil {
		return err
	}
	dead, err := phase("dead", "reject")
	if err != nil {
		return err
	}
	rate := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
	fmt.Printf("\n== republisher vs a plain franz-go producer: %d records of %d B, 1 broker, receive batches of %d, %d members and as many app workers\n", n, len(value), batch, members)
	fmt.Printf("%-52s %10s %12s %8s\n", "path", "time", "records/s", "ratio")
	fmt.Printf("%-52s %10s %12.0f %8.2f\n", "plain producer (acks=all, idempotent)", base.Round(time.Millisecond), rate(base), 1.0)
	fmt.Printf("%-52s %10s %12.0f %8.2f\n", "republisher: receive + accept over HTTP", acc.Round(time.Millisecond), rate(acc), rate(acc)/rate(base))
	fmt.Printf("%-52s %10s %12.0f %8.2f\n", "republisher: receive + reject → dead-letter write", dead.Round(time.Millisecond), rate(dead), rate(dead)/rate(base))
	return nil
}
