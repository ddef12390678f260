package kafka

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"
)

// manualCoalescer builds a coalescer whose timer is driven by the test: flushes run only
// when fire is called, so what lands in each request is deterministic.
type manualCoalescer[P any, V any] struct {
	*coalescer[string, P, V]
	mu    sync.Mutex
	armed []func()
	sent  [][]string // keys of each request, in order
}

func newManual[P any, V any](t *testing.T, opts coalescerOpts, weight func(P) int, answer func(keys []string) (map[string]V, error)) *manualCoalescer[P, V] {
	t.Helper()
	m := &manualCoalescer[P, V]{}
	if opts.timeout == 0 {
		opts.timeout = time.Second
	}
	if opts.maxInFlight == 0 {
		opts.maxInFlight = 1
	}
	if opts.maxItems == 0 {
		opts.maxItems = 1000
	}
	m.coalescer = newCoalescer(opts, func(_ context.Context, items []batchItem[string, P]) (map[string]V, error) {
		keys := keysOf(items)
		m.mu.Lock()
		m.sent = append(m.sent, keys)
		m.mu.Unlock()
		return answer(keys)
	}, weight)
	m.afterFunc = func(_ time.Duration, f func()) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.armed = append(m.armed, f)
	}
	return m
}

// fire runs the flushes armed so far (and any they arm) until none is left.
func (m *manualCoalescer[P, V]) fire() {
	for {
		m.mu.Lock()
		if len(m.armed) == 0 {
			m.mu.Unlock()
			return
		}
		f := m.armed[0]
		m.armed = m.armed[1:]
		m.mu.Unlock()
		f()
	}
}

// waitQueued waits until n items are queued.
func (m *manualCoalescer[P, V]) waitQueued(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m.coalescer.mu.Lock()
		got := len(m.coalescer.queue)
		m.coalescer.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d items queued, want %d", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

type callResult[V any] struct {
	out map[string]V
	err error
}

func startCalls[P any, V any](m *manualCoalescer[P, V], ctx context.Context, calls [][]string, payload func(string) P) []chan callResult[V] {
	chans := make([]chan callResult[V], len(calls))
	for i, keys := range calls {
		chans[i] = make(chan callResult[V], 1)
		go func(keys []string, ch chan callResult[V]) {
			var ps []P
			if payload != nil {
				for _, k := range keys {
					ps = append(ps, payload(k))
				}
			}
			out, err := m.do(ctx, keys, ps)
			ch <- callResult[V]{out, err}
		}(keys, chans[i])
	}
	return chans
}

func echo(keys []string) (map[string]string, error) {
	out := map[string]string{}
	for _, k := range keys {
		out[k] = "v:" + k
	}
	return out, nil
}

func TestCoalescerSharesOneRequestAndReturnsEachCallerItsOwnItems(t *testing.T) {
	m := newManual[struct{}](t, coalescerOpts{api: "Metadata"}, nil, echo)
	var calls [][]string
	for i := 0; i < 50; i++ {
		calls = append(calls, []string{fmt.Sprintf("t%02d", i), "shared"})
	}
	chans := startCalls(m, context.Background(), calls, nil)
	m.waitQueued(t, 100)
	m.fire()
	for i, ch := range chans {
		r := <-ch
		if r.err != nil {
			t.Fatalf("call %d: %v", i, r.err)
		}
		want := map[string]string{calls[i][0]: "v:" + calls[i][0], "shared": "v:shared"}
		if fmt.Sprint(r.out) != fmt.Sprint(want) {
			t.Fatalf("call %d got %v, want %v", i, r.out, want)
		}
	}
	if len(m.sent) != 1 || len(m.sent[0]) != 51 {
		t.Fatalf("requests %d (first has %d keys), want 1 request of 51 distinct keys", len(m.sent), len(m.sent[0]))
	}
}

func TestCoalescerWritesSendAKeyOncePerRequest(t *testing.T) {
	m := newManual[int](t, coalescerOpts{api: "CreatePartitions", exclusive: true}, nil, echo)
	chans := startCalls(m, context.Background(), [][]string{{"a"}, {"a"}, {"b"}}, func(string) int { return 1 })
	m.waitQueued(t, 3)
	m.fire()
	for _, ch := range chans {
		if r := <-ch; r.err != nil {
			t.Fatal(r.err)
		}
	}
	if len(m.sent) != 2 {
		t.Fatalf("requests %v, want 2 (a twice may not share one)", m.sent)
	}
	for _, req := range m.sent {
		seen := map[string]bool{}
		for _, k := range req {
			if seen[k] {
				t.Fatalf("key %s twice in request %v", k, req)
			}
			seen[k] = true
		}
	}
}

func TestCoalescerSplitsByItemsAndWeight(t *testing.T) {
	t.Run("maxItems", func(t *testing.T) {
		m := newManual[struct{}](t, coalescerOpts{api: "Metadata", maxItems: 10}, nil, echo)
		var calls [][]string
		for i := 0; i < 25; i++ {
			calls = append(calls, []string{fmt.Sprint(i)})
		}
		chans := startCalls(m, context.Background(), calls, nil)
		m.waitQueued(t, 25)
		m.fire()
		for _, ch := range chans {
			<-ch
		}
		var sizes []int
		for _, r := range m.sent {
			sizes = append(sizes, len(r))
		}
		if fmt.Sprint(sizes) != "[10 10 5]" {
			t.Fatalf("request sizes %v, want [10 10 5]", sizes)
		}
	})
	t.Run("records per write", func(t *testing.T) {
		// Topics of 2000 partitions: two fit under maxRecordsPerWrite, a third does not.
		m := newManual[NewTopic](t, coalescerOpts{api: "CreateTopics", exclusive: true}, func(nt NewTopic) int { return 1 + int(nt.Partitions) }, echo)
		chans := startCalls(m, context.Background(), [][]string{{"a"}, {"b"}, {"c"}}, func(k string) NewTopic { return NewTopic{Name: k, Partitions: 2000} })
		m.waitQueued(t, 3)
		m.fire()
		for _, ch := range chans {
			<-ch
		}
		if len(m.sent) != 2 || len(m.sent[0]) != 2 {
			t.Fatalf("requests %v, want [[two] [one]]", m.sent)
		}
	})
	t.Run("one item heavier than the limit still goes alone", func(t *testing.T) {
		m := newManual[NewTopic](t, coalescerOpts{api: "CreateTopics", exclusive: true}, func(nt NewTopic) int { return 1 + int(nt.Partitions) }, echo)
		chans := startCalls(m, context.Background(), [][]string{{"huge"}}, func(k string) NewTopic { return NewTopic{Name: k, Partitions: 9000} })
		m.waitQueued(t, 1)
		m.fire()
		if r := <-chans[0]; r.err != nil || len(m.sent) != 1 {
			t.Fatalf("err %v, requests %v", r.err, m.sent)
		}
	})
}

func TestCoalescerItemErrorsStayWithTheirItem(t *testing.T) {
	bad := errors.New("INVALID_CONFIG: bad value")
	m := newManual[[]AlterConfig](t, coalescerOpts{api: "IncrementalAlterConfigs", exclusive: true}, nil, func(keys []string) (map[string]error, error) {
		out := map[string]error{}
		for _, k := range keys {
			if k == "bad" {
				out[k] = bad
			} else {
				out[k] = nil
			}
		}
		return out, nil
	})
	chans := startCalls(m, context.Background(), [][]string{{"ok1"}, {"bad"}, {"ok2"}}, func(string) []AlterConfig { return nil })
	m.waitQueued(t, 3)
	m.fire()
	for i, ch := range chans {
		r := <-ch
		if r.err != nil {
			t.Fatalf("call %d: request error %v; item errors must not become request errors", i, r.err)
		}
		for k, e := range r.out {
			if (k == "bad") != (e != nil) {
				t.Fatalf("call %d: item %s error %v", i, k, e)
			}
		}
	}
	if len(m.sent) != 1 {
		t.Fatalf("requests %v, want 1", m.sent)
	}
}

func TestCoalescerRequestErrorReachesOnlyThatRequestsCallers(t *testing.T) {
	var n int
	boom := errors.New("broker went away")
	m := newManual[struct{}](t, coalescerOpts{api: "Metadata", maxItems: 2}, nil, func(keys []string) (map[string]string, error) {
		n++
		if n == 1 {
			return nil, boom
		}
		return echo(keys)
	})
	chans := startCalls(m, context.Background(), [][]string{{"a"}, {"b"}, {"c"}}, nil)
	m.waitQueued(t, 3)
	m.fire()
	var failed, ok []string
	for i, ch := range chans {
		r := <-ch
		name := []string{"a", "b", "c"}[i]
		switch {
		case errors.Is(r.err, boom):
			failed = append(failed, name)
		case r.err == nil && r.out[name] == "v:"+name:
			ok = append(ok, name)
		default:
			t.Fatalf("call %s: %v %v", name, r.out, r.err)
		}
	}
	sort.Strings(failed)
	if len(failed) != 2 || len(ok) != 1 {
		t.Fatalf("failed %v ok %v; want the first request's two callers failed and the third answered", failed, ok)
	}
}

func TestCoalescerCallerThatGivesUpDoesNotFailOthers(t *testing.T) {
	m := newManual[struct{}](t, coalescerOpts{api: "Metadata"}, nil, echo)
	ctx, cancel := context.WithCancel(context.Background())
	gone := startCalls(m, ctx, [][]string{{"a"}}, nil)
	stays := startCalls(m, context.Background(), [][]string{{"b"}}, nil)
	m.waitQueued(t, 2)
	cancel()
	if r := <-gone[0]; !errors.Is(r.err, context.Canceled) || !IsNotSent(r.err) || !IsRetriable(r.err) || IsUnreachable(r.err) {
		t.Fatalf("cancelled caller got %v, want a retriable context.Canceled marked ErrNotSent (its item was never sent), not an unreachable cluster", r.err)
	}
	m.fire()
	if r := <-stays[0]; r.err != nil || r.out["b"] != "v:b" {
		t.Fatalf("other caller got %v %v", r.out, r.err)
	}
	// The caller that gave up withdrew its queued item: no request carries it (a
	// CreateTopics nobody waits for would create the topic anyway).
	m.mu.Lock()
	defer m.mu.Unlock()
	if fmt.Sprint(m.sent) != "[[b]]" {
		t.Errorf("requests sent %v, want [[b]]", m.sent)
	}
}

func TestCoalescerMissingAnswerIsAnError(t *testing.T) {
	m := newManual[struct{}](t, coalescerOpts{api: "Metadata"}, nil, func([]string) (map[string]string, error) { return map[string]string{}, nil })
	chans := startCalls(m, context.Background(), [][]string{{"a"}}, nil)
	m.waitQueued(t, 1)
	m.fire()
	if r := <-chans[0]; r.err == nil {
		t.Fatal("a key the broker did not answer must be an error, not a zero value")
	}
}
