//go:build soak

package soak

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/internal/republisher"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

const (
	// Traffic queues: on main, apps are plain franz-go share consumers (kgo.ShareGroup,
	// through internal/kafka's ShareMember) and the brokers dead-letter (KIP-1191); on old,
	// apps talk to a republisher sidecar process over HTTP.
	trafficMain = 6
	trafficOld  = 3
	// produceEvery paces each traffic queue's producer (4 records/s per queue).
	produceEvery = 250 * time.Millisecond
	// Poison: one id in poisonEvery is rejected by the app, the next one is released by the
	// app at every delivery until the delivery limit dead-letters it.
	poisonEvery = 20
)

// kind is what the application does with a record, fixed by its id.
type kind byte

const (
	kindOK      kind = 'o' // accept
	kindReject  kind = 'j' // reject: dead-lettered at once
	kindRelease kind = 'r' // release at every delivery: dead-lettered at the limit
)

func kindOf(seq int) kind {
	switch seq % poisonEvery {
	case 0:
		return kindReject
	case 1:
		return kindRelease
	}
	return kindOK
}

// Record content: "soak|<queue>|<seq>|<kind>"; the id is "<queue>/<seq>".
func encode(queue string, seq int) []byte {
	return []byte(fmt.Sprintf("soak|%s|%d|%c", queue, seq, kindOf(seq)))
}

func decode(v []byte) (id, queue string, k kind, ok bool) {
	parts := strings.Split(string(v), "|")
	if len(parts) != 4 || parts[0] != "soak" || len(parts[3]) != 1 {
		return "", "", 0, false
	}
	return parts[1] + "/" + parts[2], parts[1], kind(parts[3][0]), true
}

// idState is what happened to one id.
type idState struct {
	k                kind
	produced         int // 0 sent, 1 confirmed (acks=all), -1 failed (may or may not be in the log)
	deliveries       int
	acceptTried      bool
	acceptConfirmed  bool
	unconfirmedAcks  int
	deadLettered     int // copies seen in the dead-letter topic
	dltProvenanceBad string
	queue            string
	lastDelivery     time.Time
}

// ledger is the applications' view of every id.
type ledger struct {
	mu  sync.Mutex
	ids map[string]*idState
	bad []string
	// redeliveredAfterUnconfirmed counts deliveries of an id whose earlier ack was not
	// confirmed (allowed: share groups are at least once).
	redeliveredAfterUnconfirmed int
	refusedAcks                 int
	unknownAcks                 int
	produceFailed               int
	strays                      []string
	// brokerWindows are the spans during which one of main's brokers was stopping, down or
	// starting (broker faults), widened by brokerWindowSlack; see missing.
	brokerWindows [][2]time.Time
	// byOffset maps "topic/partition/offset" of every confirmed record to its id, for dead
	// letters that carry the provenance headers but not the record's value.
	byOffset      map[string]string
	valuelessDLTs int
}

// brokerWindowSlack widens each broker fault's window: a final delivery acknowledged just
// before a broker began its shutdown may be dead-lettered by it during the shutdown.
const brokerWindowSlack = 10 * time.Second

func (l *ledger) brokerWindow(from, to time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.brokerWindows = append(l.brokerWindows, [2]time.Time{from.Add(-brokerWindowSlack), to.Add(brokerWindowSlack)})
}

func (l *ledger) inBrokerWindowLocked(t time.Time) bool {
	for _, w := range l.brokerWindows {
		if !t.Before(w[0]) && !t.After(w[1]) {
			return true
		}
	}
	return false
}

func newLedger() *ledger { return &ledger{ids: map[string]*idState{}, byOffset: map[string]string{}} }

func (l *ledger) sent(id string, k kind) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ids[id] = &idState{k: k, queue: id[:strings.LastIndexByte(id, '/')]}
}

func (l *ledger) produceResult(id string, r *kgo.Record, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.ids[id].produced = -1
		l.produceFailed++
		return
	}
	l.ids[id].produced = 1
	l.byOffset[fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset)] = id
}

// byProvenance finds the id of a dead letter without the record's value by the source
// topic, partition and offset its headers name; "" when they name no record of the soak.
func (l *ledger) byProvenance(topic, partition, offset string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	id := l.byOffset[topic+"/"+partition+"/"+offset]
	if id != "" {
		l.valuelessDLTs++
	}
	return id
}

// delivered records one delivery to an app. A delivery after a confirmed accept is a
// violation: the brokers said they took the accept.
func (l *ledger) delivered(id string, count int32, via string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.ids[id]
	if st == nil {
		l.strays = append(l.strays, id)
		return
	}
	if st.acceptConfirmed {
		l.bad = append(l.bad, fmt.Sprintf("%s delivered again (delivery count %d, via %s) after its accept was confirmed", id, count, via))
	}
	if st.unconfirmedAcks > 0 {
		l.redeliveredAfterUnconfirmed++
	}
	st.deliveries++
	st.lastDelivery = time.Now()
}

// acked records an ack's outcome: nil confirmed, refused (the brokers said no), or unknown.
func (l *ledger) acked(id string, accept bool, err error, refused bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.ids[id]
	if st == nil {
		return
	}
	if accept {
		st.acceptTried = true
	}
	switch {
	case err == nil:
		if accept {
			st.acceptConfirmed = true
		}
	case refused:
		l.refusedAcks++
		st.unconfirmedAcks++
	default:
		l.unknownAcks++
		st.unconfirmedAcks++
	}
}

func (l *ledger) deadLettered(id, provenanceProblem string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.ids[id]
	if st == nil {
		l.strays = append(l.strays, "dead letter "+id)
		return
	}
	st.deadLettered++
	if provenanceProblem != "" && st.dltProvenanceBad == "" {
		st.dltProvenanceBad = provenanceProblem
		l.bad = append(l.bad, fmt.Sprintf("%s dead-lettered without its provenance: %s", id, provenanceProblem))
	}
}

// missing lists the confirmed-produced ids not yet accounted for: an ok id neither accepted
// by an app nor dead-lettered, a poison id not dead-lettered.
//
// One exception, a Kafka finding (docs/kafka-findings.md): on main the brokers write the
// dead letter (KIP-1191) after the share-partition leader archives the record, and a leader
// that shuts down or is killed meanwhile loses that write: the record is archived with no
// copy and no client is told. A poison id on main that was delivered, whose last delivery
// fell inside a broker fault's window, and that never reached the dead-letter topic is
// counted in brokerDLQLost, not as missing.
func (l *ledger) missing() (out []string, brokerDLQLost []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, st := range l.ids {
		if st.produced != 1 {
			continue
		}
		switch {
		case st.k == kindOK && !st.acceptTried && st.deadLettered == 0:
			out = append(out, fmt.Sprintf("%s (ok, %d deliveries)", id, st.deliveries))
		case st.k != kindOK && st.deadLettered == 0:
			what := fmt.Sprintf("%s (poison %c, %d deliveries, last at %s)", id, st.k, st.deliveries, st.lastDelivery.UTC().Format("15:04:05.000"))
			if strings.HasPrefix(st.queue, "t-main-") && st.deliveries > 0 && l.inBrokerWindowLocked(st.lastDelivery) {
				brokerDLQLost = append(brokerDLQLost, what)
				continue
			}
			out = append(out, what)
		}
	}
	sort.Strings(out)
	sort.Strings(brokerDLQLost)
	return out, brokerDLQLost
}

func (l *ledger) violations() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := append([]string(nil), l.bad...)
	if len(l.strays) > 0 {
		out = append(out, fmt.Sprintf("%d records the soak did not produce were delivered or dead-lettered, e.g. %v", len(l.strays), l.strays[:min(5, len(l.strays))]))
	}
	return out
}

func (l *ledger) summary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var produced, confirmed, ok, poison, accepted, acceptedTwice, dlt, dltDup, okInDLT, deliveries int
	for _, st := range l.ids {
		produced++
		if st.produced != 1 {
			continue
		}
		confirmed++
		deliveries += st.deliveries
		if st.k == kindOK {
			ok++
			if st.acceptTried {
				accepted++
			}
			if st.acceptTried && st.deliveries > 1 {
				acceptedTwice++
			}
			if st.deadLettered > 0 {
				okInDLT++
			}
		} else {
			poison++
		}
		if st.deadLettered > 0 {
			dlt++
		}
		if st.deadLettered > 1 {
			dltDup++
		}
	}
	return fmt.Sprintf("%d dead letters without the record's value, matched by provenance; ", l.valuelessDLTs) + fmt.Sprintf("%d produced (%d confirmed, %d failed produce); %d ok ids: %d accepted, %d of them delivered more than once, %d dead-lettered; %d poison ids; %d ids in a dead-letter topic (%d more than once); %d deliveries; acks refused %d, unconfirmed %d; deliveries after an unconfirmed ack %d",
		produced, confirmed, l.produceFailed, ok, accepted, acceptedTwice, okInDLT, poison, dlt, dltDup, deliveries, l.refusedAcks, l.unknownAcks, l.redeliveredAfterUnconfirmed)
}

// traffic is the producers, applications, sidecars and dead-letter readers.
type traffic struct {
	prodCancel, consCancel context.CancelFunc
	prodWG, consWG         sync.WaitGroup
	sidecars               []*exec.Cmd
	// sidecarHealth is each sidecar's /readyz URL, by its queue.
	sidecarHealth map[string]string
}

type trafficQueue struct {
	name, cluster, dlt string
	bootstrap          []string
	attempts           int32
}

func (s *soak) trafficQueues(ctx context.Context) []trafficQueue {
	var out []trafficQueue
	for _, q := range s.pop.all() {
		if !q.traffic {
			continue
		}
		var r kqv1.DeadLetterRoute
		if err := s.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: q.name + "-dlq"}, &r); err != nil || r.Status.TopicName == "" {
			s.t.Fatalf("route of traffic queue %s: %v (topicName %q)", q.name, err, r.Status.TopicName)
		}
		tq := trafficQueue{name: q.name, cluster: q.cluster, dlt: r.Status.TopicName, attempts: q.attempts}
		if q.cluster == "main" {
			tq.bootstrap = s.main.BootstrapServers()
		} else {
			tq.bootstrap = s.old.BootstrapServers()
		}
		out = append(out, tq)
	}
	return out
}

func (s *soak) startTraffic(ctx context.Context) {
	s.tr = &traffic{}
	pctx, pcancel := context.WithCancel(ctx)
	cctx, ccancel := context.WithCancel(ctx)
	s.tr.prodCancel, s.tr.consCancel = pcancel, ccancel
	for _, tq := range s.trafficQueues(ctx) {
		s.tr.prodWG.Add(1)
		go func() { defer s.tr.prodWG.Done(); s.produce(pctx, tq) }()
		s.tr.consWG.Add(1)
		go func() { defer s.tr.consWG.Done(); s.readDeadLetters(cctx, tq) }()
		if tq.cluster == "main" {
			s.tr.consWG.Add(1)
			go func() { defer s.tr.consWG.Done(); s.consumeDirect(cctx, tq) }()
			continue
		}
		addr, err := rig.FreeLoopbackAddr()
		if err != nil {
			s.t.Fatal(err)
		}
		healthAddr, err := rig.FreeLoopbackAddr()
		if err != nil {
			s.t.Fatal(err)
		}
		if s.tr.sidecarHealth == nil {
			s.tr.sidecarHealth = map[string]string{}
		}
		s.tr.sidecarHealth[tq.name] = "http://" + healthAddr + "/readyz"
		logf, err := os.Create(filepath.Join(s.dir, "republisher-"+tq.name+".log"))
		if err != nil {
			s.t.Fatal(err)
		}
		cmd := exec.Command(s.republisherBin, "--bootstrap-servers="+strings.Join(tq.bootstrap, ","), "--topic="+tq.name, "--group="+tq.name,
			"--dead-letter-topic="+tq.dlt, "--max-delivery-attempts="+strconv.Itoa(int(tq.attempts)), "--listen="+addr,
			"--metrics-bind-address=0", "--health-bind-address="+healthAddr, "--members=2", "--lease=30s")
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			s.t.Fatal(err)
		}
		go func() { _ = cmd.Wait(); logf.Close() }()
		s.tr.sidecars = append(s.tr.sidecars, cmd)
		s.tr.consWG.Add(1)
		go func() { defer s.tr.consWG.Done(); s.consumeSidecar(cctx, tq, "http://"+addr) }()
	}
	s.flog.note("traffic: %d queues on main (direct share consumers, broker dead-lettering), %d on old (republisher sidecars), %s per record per queue, 1 in %d rejected and 1 in %d released to the limit",
		trafficMain, trafficOld, produceEvery, poisonEvery, poisonEvery)
}

func (s *soak) stopProducers() {
	if s.tr == nil || s.tr.prodCancel == nil {
		return
	}
	s.tr.prodCancel()
	s.tr.prodWG.Wait()
	s.tr.prodCancel = nil
}

func (s *soak) stopConsumers() {
	if s.tr == nil || s.tr.consCancel == nil {
		return
	}
	s.tr.consCancel()
	s.tr.consWG.Wait()
	for _, c := range s.tr.sidecars {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	s.tr.consCancel = nil
}

// produce writes one record every produceEvery with acks=all and idempotence (kgo's
// defaults); an id counts as produced once the brokers confirmed it.
func (s *soak) produce(ctx context.Context, tq trafficQueue) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(tq.bootstrap...), kgo.DefaultProduceTopic(tq.name),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.RecordDeliveryTimeout(2*time.Minute))
	if err != nil {
		s.t.Error(err)
		return
	}
	defer cl.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(produceEvery)
	defer tick.Stop()
	for seq := 0; ; seq++ {
		select {
		case <-ctx.Done():
			// Let records already handed to the client finish (or fail) with a fresh context.
			fctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			_ = cl.Flush(fctx)
			cancel()
			return
		case <-tick.C:
		}
		v := encode(tq.name, seq)
		id, _, k, _ := decode(v)
		s.led.sent(id, k)
		wg.Add(1)
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(id), Value: v}, func(r *kgo.Record, err error) {
			defer wg.Done()
			s.led.produceResult(id, r, err)
		})
	}
}

// consumeDirect is an application on main: a franz-go share consumer that accepts ok ids,
// rejects reject ids and releases release ids, and waits for each ack's outcome (kgo reports
// it per partition through kgo.ShareAckCallback; ShareMember maps that to each record).
func (s *soak) consumeDirect(ctx context.Context, tq trafficQueue) {
	for ctx.Err() == nil {
		m, err := kafka.NewShareMember(kafka.Config{BootstrapServers: tq.bootstrap, ClientID: "soak-app-" + tq.name}, tq.name, tq.name, 50, time.Second)
		if err != nil {
			s.flog.note("app %s: %v", tq.name, err)
			time.Sleep(time.Second)
			continue
		}
		for ctx.Err() == nil {
			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			recs, err := m.Poll(pctx, 50)
			cancel()
			if err != nil && ctx.Err() == nil {
				time.Sleep(500 * time.Millisecond)
				continue
			}
			type pending struct {
				id     string
				accept bool
				ch     <-chan error
			}
			var ps []pending
			for _, r := range recs {
				id, _, k, ok := decode(r.Value)
				if !ok {
					continue
				}
				s.led.delivered(id, r.DeliveryCount, "share consumer")
				t := kafka.AckAccept
				switch k {
				case kindReject:
					t = kafka.AckReject
				case kindRelease:
					t = kafka.AckRelease
				}
				ps = append(ps, pending{id: id, accept: t == kafka.AckAccept, ch: m.AcknowledgeAsync(r, t)})
			}
			for _, p := range ps {
				err := <-p.ch
				var refused *kafka.AckError
				s.led.acked(p.id, p.accept, err, errors.As(err, &refused))
			}
		}
		fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = m.Flush(fctx)
		cancel()
		m.Close()
	}
}

// consumeSidecar is an application on old: it receives from its republisher over HTTP and
// acks the same way; an ack the sidecar answers 200 for was taken by the brokers.
func (s *soak) consumeSidecar(ctx context.Context, tq trafficQueue, url string) {
	c := &republisher.Client{BaseURL: url}
	for ctx.Err() == nil {
		resp, err := c.Receive(ctx, republisher.ReceiveRequest{MaxRecords: 50, WaitMs: 2000})
		if err != nil {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		var req republisher.AckRequest
		ids := map[string]string{}
		accept := map[string]bool{}
		for _, r := range resp.Records {
			id, _, k, ok := decode(r.Value)
			if !ok {
				continue
			}
			s.led.delivered(id, r.DeliveryCount, "republisher")
			t := "accept"
			switch k {
			case kindReject:
				t = "reject"
			case kindRelease:
				t = "release"
			}
			ids[r.ID], accept[r.ID] = id, t == "accept"
			req.Acks = append(req.Acks, republisher.Ack{ID: r.ID, Type: t})
		}
		if len(req.Acks) == 0 {
			continue
		}
		actx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := c.Ack(actx, req)
		cancel()
		got := map[string]republisher.AckResult{}
		for _, r := range out.Results {
			got[r.ID] = r
		}
		for rid, id := range ids {
			r, ok := got[rid]
			switch {
			case ok && r.Code == 200:
				s.led.acked(id, accept[rid], nil, false)
			case ok && (r.Code == 409 || r.Code == 410):
				s.led.acked(id, accept[rid], fmt.Errorf("%d %s", r.Code, r.Reason), true)
			default:
				s.led.acked(id, accept[rid], fmt.Errorf("no answer: %v", err), false)
			}
		}
	}
}

// readDeadLetters reads the queue's dead-letter topic from the start for the whole run and
// matches each dead letter to its id by content, checking its provenance: the brokers'
// __dlq.errors.topic (KIP-1191) on main, the republisher's kqo.source.topic on old.
func (s *soak) readDeadLetters(ctx context.Context, tq trafficQueue) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(tq.bootstrap...), kgo.ConsumeTopics(tq.dlt), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		s.t.Error(err)
		return
	}
	defer cl.Close()
	provenance, srcPartition, srcOffset := "__dlq.errors.topic", "__dlq.errors.partition", "__dlq.errors.offset"
	if tq.cluster == "old" {
		provenance, srcPartition, srcOffset = republisher.HeaderSourceTopic, republisher.HeaderSourcePartition, republisher.HeaderSourceOffset
	}
	header := func(r *kgo.Record, key string) string {
		for _, h := range r.Headers {
			if h.Key == key {
				return string(h.Value)
			}
		}
		return ""
	}
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) {
			id, queue, _, ok := decode(r.Value)
			if !ok {
				// A dead letter without the record's value (seen from the brokers with
				// copy.record.enable=true, seed 777): match it by the source topic,
				// partition and offset its headers name.
				if id := s.led.byProvenance(header(r, provenance), header(r, srcPartition), header(r, srcOffset)); id != "" && header(r, provenance) == tq.name {
					s.flog.note("dead letter %s/%d@%d has no value (%d bytes); its headers name %s/%s@%s, id %s", r.Topic, r.Partition, r.Offset, len(r.Value),
						header(r, provenance), header(r, srcPartition), header(r, srcOffset), id)
					s.led.deadLettered(id, "")
					return
				}
				s.led.deadLettered(fmt.Sprintf("undecodable %s/%d@%d %q headers %v", r.Topic, r.Partition, r.Offset, r.Value, r.Headers), "")
				return
			}
			problem := ""
			var src string
			for _, h := range r.Headers {
				if h.Key == provenance {
					src = string(h.Value)
				}
			}
			if src != queue {
				problem = fmt.Sprintf("header %s=%q, want %q (headers %v)", provenance, src, queue, headerKeys(r.Headers))
			}
			s.led.deadLettered(id, problem)
		})
	}
}

func headerKeys(hs []kgo.RecordHeader) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Key)
	}
	return out
}

// waitDrained waits until every confirmed-produced id is accounted for.
func (s *soak) waitDrained(ctx context.Context, bound time.Duration) error {
	start := time.Now()
	lastNote := start
	for {
		miss, lost := s.led.missing()
		if time.Since(lastNote) > 30*time.Second && len(miss)+len(lost) > 0 {
			lastNote = time.Now()
			s.flog.note("draining: %d ids not yet accounted for, e.g. %v; %d poison ids on main not dead-lettered yet, last delivered during a broker fault", len(miss), miss[:min(5, len(miss))], len(lost))
		}
		if len(miss) == 0 && (len(lost) == 0 || time.Since(start) > time.Minute) {
			s.flog.note("drained %s after the producers stopped: every confirmed id accepted or dead-lettered, except %d poison ids on main whose dead letter the brokers never wrote, each last delivered during a broker fault (docs/kafka-findings.md): %v",
				time.Since(start).Round(time.Second), len(lost), lost)
			s.mu.Lock()
			s.brokerDLQLost = len(lost)
			s.mu.Unlock()
			return nil
		}
		if time.Since(start) > bound {
			return fmt.Errorf("records lost: %d confirmed ids neither accepted nor dead-lettered %s after the producers stopped, e.g. %v\nfault log: %s",
				len(miss), bound, miss[:min(10, len(miss))], s.flog.path)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}
