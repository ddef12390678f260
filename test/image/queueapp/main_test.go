package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestDecide(t *testing.T) {
	for _, c := range []struct {
		value string
		dc    int32
		want  string
	}{
		{"17", 1, ""}, // 17 % 7 == 3: abandoned on the first delivery
		{"17", 2, "accept"},
		{"3", 1, ""},
		{"10", 1, "reject"}, // %10 wins over %7 == 3
		{"20", 3, "reject"},
		{"1", 1, "accept"},
		{" 5\n", 1, "accept"},
		{"-3", 1, "accept"},
		{"x", 1, "reject"},
		{"", 1, "reject"},
	} {
		got, _, _ := decide([]byte(c.value), c.dc)
		if got != c.want {
			t.Errorf("decide(%q, %d) = %q, want %q", c.value, c.dc, got, c.want)
		}
	}
}

// fakeSidecar serves the republisher API from memory. A record handed out and not
// acknowledged by the next receive has lapsed: it is delivered again with deliveryCount+1.
type fakeSidecar struct {
	t              *testing.T
	mu             sync.Mutex
	healthFailures int              // /healthz answers 503 this many times first
	pending        []receivedRecord // to hand out
	out            map[string]receivedRecord
	refuseOnce     map[string]bool     // values whose first accept is answered 410
	taken          map[string][]string // value -> acknowledgement types taken
	deliveries     map[string][]int32  // value -> deliveryCounts handed out
	receives       int
	onReceive      func(batch int) // called before a non-empty answer
	// unavailable answers that many receives 503, as a sidecar whose brokers are away does.
	unavailable int
}

func newFake(t *testing.T, values ...string) *fakeSidecar {
	f := &fakeSidecar{t: t, out: map[string]receivedRecord{}, refuseOnce: map[string]bool{},
		taken: map[string][]string{}, deliveries: map[string][]int32{}}
	for i, v := range values {
		f.pending = append(f.pending, receivedRecord{Topic: "q", Offset: int64(i), DeliveryCount: 1, Value: []byte(v)})
	}
	return f
}

func (f *fakeSidecar) settled() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending) == 0 && len(f.out) == 0
}

func (f *fakeSidecar) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch r.URL.Path {
	case "/healthz":
		if f.healthFailures > 0 {
			f.healthFailures--
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	case "/v1/receive":
		if f.healthFailures > 0 {
			f.t.Errorf("receive before /healthz answered 200")
		}
		var in map[string]int
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in["maxRecords"] != 50 || in["waitMs"] != 2000 || len(in) != 2 {
			f.t.Errorf("receive body %v (%v), want maxRecords 50, waitMs 2000", in, err)
		}
		f.receives++
		if f.unavailable > 0 {
			f.unavailable--
			time.Sleep(5 * time.Millisecond)
			http.Error(w, `{"error":"cannot fetch: connection refused"}`, http.StatusServiceUnavailable)
			return
		}
		for id, rec := range f.out { // lapsed
			delete(f.out, id)
			rec.DeliveryCount++
			f.pending = append(f.pending, rec)
		}
		n := min(len(f.pending), 50)
		batch := f.pending[:n]
		f.pending = slices.Clone(f.pending[n:])
		for i := range batch {
			batch[i].ID = fmt.Sprintf("%s:%d:%d:%d", batch[i].Topic, batch[i].Partition, batch[i].Offset, batch[i].DeliveryCount)
			f.out[batch[i].ID] = batch[i]
			v := string(batch[i].Value)
			f.deliveries[v] = append(f.deliveries[v], batch[i].DeliveryCount)
		}
		if n == 0 {
			time.Sleep(5 * time.Millisecond) // a short long-poll keeps the test fast
		} else if f.onReceive != nil {
			f.onReceive(n)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"records": batch})
	case "/v1/ack":
		var in struct{ Acks []ack }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			f.t.Errorf("ack body: %v", err)
		}
		var results []ackResult
		code := http.StatusOK
		for _, a := range in.Acks {
			res := ackResult{ID: a.ID, Code: http.StatusOK}
			rec, ok := f.out[a.ID]
			v := string(rec.Value)
			switch {
			case !ok:
				res.Code, res.Reason = http.StatusNotFound, "UnknownDelivery"
			case a.Type == "accept" && f.refuseOnce[v]:
				delete(f.refuseOnce, v)
				delete(f.out, a.ID)
				rec.DeliveryCount++
				f.pending = append(f.pending, rec)
				res.Code, res.Reason = http.StatusGone, "LeaseExpired"
			default:
				delete(f.out, a.ID)
				f.taken[v] = append(f.taken[v], a.Type)
			}
			if res.Code != http.StatusOK && code == http.StatusOK {
				code = res.Code
			}
			results = append(results, res)
		}
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]any{"results": results})
	default:
		http.NotFound(w, r)
	}
}

type ledgerRecs struct {
	mu   sync.Mutex
	recs []*kgo.Record
}

func (l *ledgerRecs) write(_ context.Context, recs []*kgo.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, recs...)
	return nil
}

func testApp(t *testing.T, f *fakeSidecar) (*app, *ledgerRecs) {
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	l := &ledgerRecs{}
	return &app{sidecar: srv.URL, topic: "ledger", pod: "pod-1", client: srv.Client(), ledger: l.write,
		log: slog.New(slog.NewJSONHandler(io.Discard, nil))}, l
}

// runUntil runs a until done reports true, then ends its context and waits for it to
// return; with done nil it waits for a to return by itself (its context ended elsewhere).
func runUntil(t *testing.T, a *app, ctx context.Context, cancel context.CancelFunc, done func() bool) {
	t.Helper()
	finished := make(chan struct{})
	go func() { a.run(ctx); close(finished) }()
	deadline := time.After(20 * time.Second)
	if done != nil {
		for !done() {
			select {
			case <-finished:
				t.Fatal("run returned early")
			case <-deadline:
				t.Fatal("the fake sidecar's records never settled")
			case <-time.After(5 * time.Millisecond):
			}
		}
		cancel()
	}
	select {
	case <-finished:
	case <-deadline:
		t.Fatal("run did not return")
	}
}

func TestRunAcknowledgesAndLedgers(t *testing.T) {
	var values []string
	for i := 1; i <= 25; i++ {
		values = append(values, strconv.Itoa(i))
	}
	f := newFake(t, append(values, "x")...)
	f.healthFailures = 3
	f.refuseOnce["11"] = true
	a, l := testApp(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runUntil(t, a, ctx, cancel, f.settled)

	ledgered := map[string]int{}
	for _, r := range l.recs {
		if r.Topic != "ledger" || string(r.Key) != string(r.Value) || len(r.Headers) != 2 || r.Headers[0].Key != "pod" || string(r.Headers[0].Value) != "pod-1" || r.Headers[1].Key != "delivery-count" {
			t.Errorf("ledger record %+v: want topic ledger, key = value, headers pod=pod-1 and delivery-count", r)
			continue
		}
		// The delivery the accept was for: abandoned values (v%7==3) are accepted on a later one.
		n, err := strconv.Atoi(string(r.Headers[1].Value))
		v, _ := strconv.Atoi(string(r.Value))
		if err != nil || n < 1 || (v%7 == 3 && n < 2) {
			t.Errorf("ledger record of %d: delivery-count %q", v, r.Headers[1].Value)
		}
		ledgered[string(r.Value)]++
	}
	for i := 1; i <= 25; i++ {
		v := strconv.Itoa(i)
		want, wantLedger := "accept", 1
		if i%10 == 0 {
			want, wantLedger = "reject", 0
		}
		if got := f.taken[v]; !slices.Equal(got, []string{want}) {
			t.Errorf("value %s: acknowledgements taken %q, want [%s]", v, got, want)
		}
		if ledgered[v] != wantLedger {
			t.Errorf("value %s: %d ledger records, want %d", v, ledgered[v], wantLedger)
		}
		wantDeliveries := []int32{1}
		if i%7 == 3 && i%10 != 0 || i == 11 { // abandoned, or accept refused once
			wantDeliveries = []int32{1, 2}
		}
		if got := f.deliveries[v]; !slices.Equal(got, wantDeliveries) {
			t.Errorf("value %s: delivered with counts %v, want %v", v, got, wantDeliveries)
		}
	}
	if got := f.taken["x"]; !slices.Equal(got, []string{"reject"}) {
		t.Errorf("malformed value: acknowledgements %q, want [reject]", got)
	}
	want := counts{Received: 26 + 3 + 1, Accepted: 23, Rejected: 3, Abandoned: 3, Malformed: 1, Refused: 1, Ledgered: 23}
	if a.n != want {
		t.Errorf("counts %+v, want %+v", a.n, want)
	}
}

// A signal during a receive: the records it brings are still acknowledged and written to
// the ledger, and no further receive is made.
func TestRunFinishesBatchInHandOnStop(t *testing.T) {
	f := newFake(t, "1", "2", "3", "10")
	a, l := testApp(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.onReceive = func(int) { cancel() }
	runUntil(t, a, ctx, cancel, nil)
	// run has returned, so the fake's maps are quiet.
	if f.receives != 1 {
		t.Errorf("%d receives, want 1", f.receives)
	}
	if !slices.Equal(f.taken["1"], []string{"accept"}) || !slices.Equal(f.taken["2"], []string{"accept"}) || !slices.Equal(f.taken["10"], []string{"reject"}) {
		t.Errorf("taken %v, want 1 and 2 accepted, 10 rejected", f.taken)
	}
	if len(f.taken["3"]) != 0 {
		t.Errorf("3 (abandoned on its first delivery) was acknowledged: %v", f.taken["3"])
	}
	if len(l.recs) != 2 {
		t.Errorf("%d ledger records, want 2 (1 and 2)", len(l.recs))
	}
}

// With KQO_APP_EXIT_IDLE, run returns by itself once receives were empty for that long, as a
// batch Job does, having handled every record first; receives the sidecar refuses (503,
// brokers away) are not an empty queue and do not count towards the idle time.
func TestRunExitsWhenIdle(t *testing.T) {
	f := newFake(t, "1", "2", "4")
	f.unavailable = 3 // each refused receive is retried after 500 ms: 1.5 s, longer than exitIdle
	a, l := testApp(t, f)
	a.exitIdle = 100 * time.Millisecond
	runUntil(t, a, context.Background(), func() {}, nil)
	if len(l.recs) != 3 || !f.settled() {
		t.Errorf("exited with %d of 3 records in the ledger (settled %v)", len(l.recs), f.settled())
	}
	if f.unavailable != 0 {
		t.Errorf("exited with %d refused receives still to come: a refused receive counted as idle", f.unavailable)
	}
}
