// Command bench-republisher measures the republisher sidecar against the share consumers a user
// would run instead, on one broker in one run, so the ratios compare like with like: the same
// broker, topic shape (-partitions), share-group members (-members), record count (-n) and
// size (-size), and batch size (-batch: the sidecar's --max-records, franz-go's
// ShareMaxRecords with ShareMaxRecordsStrict, the Java consumer's max.poll.records with
// share.acquire.mode=record_limit). Each path consumes its own topic (produced with the same
// records before any path runs) in its own share group (share.auto.offset.reset=earliest):
//
//   - produce: N records with a plain idempotent acks=all franz-go producer (the dead-letter
//     topic's write path without a republisher);
//   - franz-go: a direct franz-go share consumer accept loop: -members kgo clients
//     (kgo.ShareGroup), each polling up to -batch records and accepting each before its next
//     poll, which carries the acknowledgements (what an application does without a sidecar);
//   - java: Apache Kafka's own org.apache.kafka.tools.ShareConsumerPerformance, from the
//     kafka-tools jar of the broker's version (hack/kafka-classpath.sh VERSION tools),
//     -members threads (--threads), implicit acknowledgement; its own nMsg.sec is reported;
//   - accept: an application receives and accepts N records through the sidecar's HTTP API,
//     -workers receive-then-ack loops (default one per member);
//   - dead-letter: the application rejects N records, so the sidecar writes each to the
//     dead-letter topic before accepting it.
//
// Records/s is N over the time from the consumer's start (members not yet joined) to the N-th
// record: joining is part of every path. For the franz-go and sidecar paths the table also
// gives the time to the first record (joining the group and the first fetch) and N over the
// time after it, the steady rate (the Java tool reports only its total). Ratios are the sidecar's rate over each baseline's.
// -broker-prop and -group-prop set broker (server.properties) and group configs, so every row
// of docs/capacity-planning.md is one command. It is a measurement: nothing is asserted.
//
//	go run ./hack/bench-republisher [-n 20000] [-size 256] [-batch 100] [-members 4] [-partitions 3]
//	    [-paths produce,franz-go,java,accept,dead-letter] [-fetch-wait 500ms]
//	    [-broker-prop name=value]... [-group-prop name=value]... [-workers W] [-rounds R] [-cpuprofile FILE]
package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/internal/republisher"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// props collects repeated name=value flags.
type props map[string]string

func (p props) String() string { return fmt.Sprint(map[string]string(p)) }

func (p props) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want name=value, got %q", s)
	}
	p[k] = v
	return nil
}

// sorted returns "name=value" pairs in name order.
func (p props) sorted() []string {
	out := []string{}
	for k, v := range p {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

type params struct {
	n, size, batch, members, partitions int
	paths                               []string
	fetchWait                           time.Duration
	version                             string
	brokerProps, groupProps             props
	cpuProfile                          string
	rounds                              int
	workers                             int
}

var allPaths = []string{"produce", "franz-go", "java", "accept", "dead-letter"}

func main() {
	p := params{brokerProps: props{}, groupProps: props{}}
	flag.IntVar(&p.n, "n", 20000, "records per path")
	flag.IntVar(&p.size, "size", 256, "record value size in bytes")
	flag.IntVar(&p.batch, "batch", 100, "records per poll/receive: the sidecar's --max-records, franz-go's ShareMaxRecords, Java's max.poll.records")
	flag.IntVar(&p.members, "members", 4, "share-group members of each consumer: the sidecar's --members (and as many app workers), franz-go clients, Java --threads")
	flag.IntVar(&p.partitions, "partitions", 3, "partitions of every topic")
	paths := flag.String("paths", strings.Join(allPaths, ","), "comma-separated paths to run, in this order: "+strings.Join(allPaths, ","))
	flag.DurationVar(&p.fetchWait, "fetch-wait", 500*time.Millisecond, "direct consumers' fetch max wait (franz-go FetchMaxWait, Java fetch.max.wait.ms); the sidecar's is fixed at 500ms")
	flag.StringVar(&p.version, "kafka-version", rig.DefaultKafkaVersion, "Kafka release of the broker and of the kafka-tools jar")
	flag.Var(p.brokerProps, "broker-prop", "broker config name=value (server.properties), repeatable")
	flag.Var(p.groupProps, "group-prop", "group config name=value set on every path's share group, repeatable (e.g. share.partition.max.record.locks=4000)")
	flag.IntVar(&p.workers, "workers", 0, "application workers driving the sidecar over HTTP, each a receive-then-ack loop (default: -members)")
	flag.IntVar(&p.rounds, "rounds", 1, "run the consumption paths this many times, interleaved (fresh topics each round); the table gives each path's median (the upper one for an even count)")
	flag.StringVar(&p.cpuProfile, "cpuprofile", "", "write a CPU profile of this process (the sidecar paths run in it) to FILE")
	flag.Parse()
	p.paths = strings.Split(*paths, ",")
	if p.workers <= 0 {
		p.workers = p.members
	}
	for _, x := range p.paths {
		if !slices.Contains(allPaths, x) {
			fmt.Fprintf(os.Stderr, "bench-republisher: unknown path %q (want %s)\n", x, strings.Join(allPaths, ","))
			os.Exit(2)
		}
	}
	if err := run(p); err != nil {
		fmt.Fprintln(os.Stderr, "bench-republisher:", err)
		os.Exit(1)
	}
}

type result struct {
	path, what string
	d          time.Duration
	rate       float64
	first      time.Duration // from the start to the first record (0: not known)
	note       string
}

func run(p params) error {
	ctx := context.Background()
	var javaCP string
	if slices.Contains(p.paths, "java") {
		cp, err := rig.KafkaToolsClasspath(p.version)
		if err != nil {
			return err
		}
		javaCP = cp
	}
	fmt.Fprintln(os.Stderr, "bench-republisher: starting a broker")
	k, err := rig.StartKafka(ctx, rig.KafkaOptions{Version: p.version, BrokerProps: p.brokerProps})
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
	// Every round consumes its own topics, one per path, in groups of the same names.
	var names []string
	for round := 1; round <= p.rounds; round++ {
		for _, t := range p.paths {
			if t != "produce" || round == 1 {
				names = append(names, topicName(t, round))
			}
		}
	}
	topics := []kafka.NewTopic{}
	for _, t := range names {
		topics = append(topics, kafka.NewTopic{Name: t, Partitions: int32(p.partitions), ReplicationFactor: 1})
		if strings.HasPrefix(t, "accept") || strings.HasPrefix(t, "dead-letter") {
			topics = append(topics, kafka.NewTopic{Name: t + ".dlq", Partitions: int32(p.partitions), ReplicationFactor: 1})
		}
	}
	if _, err := admin.CreateTopics(ctx, topics); err != nil {
		return err
	}
	for _, g := range names {
		if g == "produce" {
			continue
		}
		set := []kafka.AlterConfig{{Name: "share.auto.offset.reset", Op: kafka.OpSet, Value: "earliest"}, {Name: "share.delivery.count.limit", Op: kafka.OpSet, Value: "6"}}
		for _, kv := range p.groupProps.sorted() {
			name, v, _ := strings.Cut(kv, "=")
			set = append(set, kafka.AlterConfig{Name: name, Op: kafka.OpSet, Value: v})
		}
		if _, err := admin.IncrementalAlterConfigs(ctx, []kafka.Alteration{{Resource: kafka.ResourceKey{Type: kafka.GroupResource, Name: g}, Configs: set}}); err != nil {
			return fmt.Errorf("group %s configs: %w", g, err)
		}
	}
	value := bytes.Repeat([]byte("x"), p.size)

	prod, err := kgo.NewClient(kgo.SeedBrokers(k.BootstrapServers()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return err
	}
	defer prod.Close()
	produceAll := func(topic string) (time.Duration, error) {
		start := time.Now()
		var failed atomic.Pointer[error]
		for i := 0; i < p.n; i++ {
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
	var results []result
	for _, t := range names {
		d, err := produceAll(t)
		if err != nil {
			return err
		}
		if t == "produce" {
			results = append(results, result{path: t, what: "plain producer (acks=all, idempotent)", d: d})
		}
	}

	if p.cpuProfile != "" {
		f, err := os.Create(p.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	byRound := map[string][]result{}
	for round := 1; round <= p.rounds; round++ {
		for _, path := range p.paths {
			t := topicName(path, round)
			if path == "produce" {
				continue
			}
			var r result
			var err error
			fmt.Fprintf(os.Stderr, "bench-republisher: round %d: %s\n", round, path)
			switch path {
			case "franz-go":
				r.d, r.first, err = franzAcceptLoop(ctx, k.BootstrapServers(), t, p)
				r.what = "direct franz-go share consumer (accept loop)"
			case "java":
				r, err = javaShareConsumerPerformance(ctx, javaCP, k.BootstrapServers(), t, p)
			case "accept":
				r.d, r.first, err = sidecar(ctx, cfg, t, "accept", p)
				r.what = "republisher: receive + accept over HTTP"
			case "dead-letter":
				r.d, r.first, err = sidecar(ctx, cfg, t, "reject", p)
				r.what = "republisher: receive + reject → dead-letter write"
			}
			if err != nil {
				return fmt.Errorf("%s: %w", t, err)
			}
			r.path = path
			r.rate = rateOf(r, p.n)
			byRound[path] = append(byRound[path], r)
			fmt.Fprintf(os.Stderr, "bench-republisher: round %d: %s: %.0f records/s\n", round, path, r.rate)
		}
	}
	for _, path := range p.paths {
		if rs := byRound[path]; len(rs) > 0 {
			slices.SortFunc(rs, func(a, b result) int { return cmp.Compare(a.rate, b.rate) })
			results = append(results, rs[len(rs)/2])
		}
	}

	byPath := map[string]float64{}
	for i := range results {
		results[i].rate = rateOf(results[i], p.n)
		byPath[results[i].path] = results[i].rate
	}
	fmt.Printf("\n== republisher vs direct share consumers: Kafka %s, 1 broker, %d partitions, %d members, %d records of %d B, batches of %d, fetch wait %s, %d app workers on the sidecar, median of %d rounds\n",
		p.version, p.partitions, p.members, p.n, p.size, p.batch, p.fetchWait, p.workers, p.rounds)
	if len(p.brokerProps) > 0 {
		fmt.Printf("   broker: %s\n", strings.Join(p.brokerProps.sorted(), " "))
	}
	if len(p.groupProps) > 0 {
		fmt.Printf("   groups: %s\n", strings.Join(p.groupProps.sorted(), " "))
	}
	fmt.Printf("%-52s %10s %12s %12s %12s %10s %14s\n", "path", "time", "records/s", "÷ franz-go", "÷ java", "1st record", "after 1st/s")
	ratio := func(rate float64, base string) string {
		if b, ok := byPath[base]; ok && b > 0 {
			return fmt.Sprintf("%.2f", rate/b)
		}
		return "-"
	}
	for _, r := range results {
		firstAt, after := "-", "-"
		if r.first > 0 && r.d > r.first {
			firstAt = r.first.Round(time.Millisecond).String()
			after = fmt.Sprintf("%.0f", float64(p.n)/(r.d-r.first).Seconds())
		}
		fmt.Printf("%-52s %10s %12.0f %12s %12s %10s %14s%s\n", r.what, r.d.Round(time.Millisecond), r.rate, ratio(r.rate, "franz-go"), ratio(r.rate, "java"), firstAt, after, r.note)
	}
	return nil
}

// franzAcceptLoop consumes n records of topic in share group g with p.members franz-go share
// consumers, accepting every record before the next poll, and returns the time from the
// clients' creation to the n-th record.
func franzAcceptLoop(ctx context.Context, bootstrap []string, g string, p params) (time.Duration, time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	var got atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, p.members)
	var end, first atomic.Int64
	for w := 0; w < p.members; w++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.ShareGroup(g), kgo.ConsumeTopics(g),
			kgo.ShareMaxRecords(int32(p.batch)), kgo.ShareMaxRecordsStrict(), kgo.FetchMaxWait(p.fetchWait))
		if err != nil {
			return 0, 0, err
		}
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for got.Load() < int64(p.n) && ctx.Err() == nil {
				fs := cl.PollRecords(ctx, p.batch)
				var ferr error
				fs.EachError(func(t string, part int32, err error) {
					if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
						ferr = fmt.Errorf("%s/%d: %w", t, part, err)
					}
				})
				if ferr != nil {
					errc <- ferr
					return
				}
				fs.EachRecord(func(r *kgo.Record) { r.Ack(kgo.AckAccept) })
				if fs.NumRecords() > 0 {
					first.CompareAndSwap(0, int64(time.Since(start)))
				}
				if c := got.Add(int64(fs.NumRecords())); c >= int64(p.n) {
					end.CompareAndSwap(0, int64(time.Since(start)))
					cancel() // members still waiting in a poll would wait out the timeout
				}
			}
			// The last batch's accepts ride on no further poll: send them.
			if err := cl.FlushAcks(context.Background()); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		return 0, 0, err
	}
	if end.Load() == 0 {
		return 0, 0, fmt.Errorf("only %d of %d records after 10m", got.Load(), p.n)
	}
	return time.Duration(end.Load()), time.Duration(first.Load()), nil
}

// javaShareConsumerPerformance runs Apache Kafka's ShareConsumerPerformance on topic (group
// of the same name) and returns its own records/s (nMsg.sec, timed from its consumers' start),
// with the process's wall time (JVM start included) as the time.
func javaShareConsumerPerformance(ctx context.Context, cp string, bootstrap []string, topic string, p params) (result, error) {
	args := []string{"-cp", cp, "org.apache.kafka.tools.ShareConsumerPerformance",
		"--bootstrap-server", strings.Join(bootstrap, ","), "--topic", topic, "--group", topic,
		"--num-records", strconv.Itoa(p.n), "--threads", strconv.Itoa(p.members), "--timeout", "60000",
		"--command-property", "max.poll.records=" + strconv.Itoa(p.batch),
		"--command-property", "share.acquire.mode=record_limit",
		"--command-property", "fetch.max.wait.ms=" + strconv.FormatInt(p.fetchWait.Milliseconds(), 10)}
	cmd := exec.CommandContext(ctx, "java", args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("ShareConsumerPerformance: %w\n%s", err, out.String())
	}
	wall := time.Since(start)
	// Header "start.time, end.time, data.consumed.in.MB, MB.sec, nMsg.sec, data.consumed.in.nMsg"
	// then one line of values (Kafka 4.4).
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	f := strings.Split(lines[len(lines)-1], ", ")
	if len(f) < 6 || strings.Contains(out.String(), "WARNING") {
		return result{}, fmt.Errorf("ShareConsumerPerformance: unexpected output:\n%s", out.String())
	}
	rate, err := strconv.ParseFloat(f[4], 64)
	if err != nil {
		return result{}, fmt.Errorf("ShareConsumerPerformance: nMsg.sec %q: %w", f[4], err)
	}
	if got, err := strconv.Atoi(f[5]); err != nil || got < p.n {
		return result{}, fmt.Errorf("ShareConsumerPerformance: consumed %q of %d records", f[5], p.n)
	}
	return result{what: "Kafka ShareConsumerPerformance (Java, kafka-tools)", d: wall, rate: rate, note: "  (time: JVM wall; rate: its nMsg.sec)"}, nil
}

// sidecar runs a republisher on topic (group of the same name) and drives it with p.workers
// application workers through the HTTP API, acknowledging each batch with ackType;
// it returns the time from the republisher's creation to the n-th acknowledged record.
func sidecar(ctx context.Context, cfg kafka.Config, topic, ackType string, p params) (time.Duration, time.Duration, error) {
	start := time.Now()
	rp, err := republisher.New(cfg, republisher.Options{Topic: topic, Group: topic, DeadLetterTopic: topic + ".dlq", MaxDeliveryAttempts: 5, Members: p.members, MaxRecords: p.batch})
	if err != nil {
		return 0, 0, err
	}
	var first atomic.Int64
	defer rp.Shutdown(context.Background())
	srv := httptest.NewServer(rp.Handler())
	defer srv.Close()
	app := &republisher.Client{BaseURL: srv.URL}
	// As the injected sidecar's startup probe does: the application starts once a member
	// reaches the brokers (a receive before that is refused, not answered empty).
	for rp.Unready() != "" {
		if time.Since(start) > 2*time.Minute {
			return 0, 0, fmt.Errorf("%s: the republisher not ready after 2m: %s", topic, rp.Unready())
		}
		time.Sleep(50 * time.Millisecond)
	}
	var done atomic.Int64
	errc := make(chan error, p.workers)
	for w := 0; w < p.workers; w++ {
		go func() {
			for done.Load() < int64(p.n) {
				if time.Since(start) > 10*time.Minute {
					errc <- fmt.Errorf("%s: only %d of %d records after 10m", topic, done.Load(), p.n)
					return
				}
				got, err := app.Receive(ctx, republisher.ReceiveRequest{MaxRecords: p.batch, WaitMs: 500})
				if err != nil {
					errc <- err
					return
				}
				if len(got.Records) == 0 {
					continue
				}
				first.CompareAndSwap(0, int64(time.Since(start)))
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
	for w := 0; w < p.workers; w++ {
		if err := <-errc; err != nil {
			return 0, 0, err
		}
	}
	return time.Since(start), time.Duration(first.Load()), nil
}

// topicName is the topic (and share group) a path consumes in a round.
func topicName(path string, round int) string {
	if round == 1 {
		return path
	}
	return fmt.Sprintf("%s-r%d", path, round)
}

// rateOf is r's records/s: its own (the Java tool's) or n over its time.
func rateOf(r result, n int) float64 {
	if r.rate != 0 {
		return r.rate
	}
	return float64(n) / r.d.Seconds()
}
