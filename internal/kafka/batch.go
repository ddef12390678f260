package kafka

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Batching configures how a Client coalesces concurrent admin calls (issue: many ShareQueue
// reconciles on one cluster). When it is on, DescribeTopics, DescribeConfigs, CreateTopics,
// GrowPartitions, IncrementalAlterConfigs, DescribeShareGroups and OtherGroupTypes calls made at about the same
// time by different goroutines are sent as one Kafka request, and each caller gets back only
// its own items with their own item errors. A request-level failure (transport, timeout) is
// returned to every caller whose items were in that request.
type Batching struct {
	// Enabled turns coalescing on. Off, every call is its own request (the naive path).
	Enabled bool
	// Linger is how long the first call of a batch waits for others before the request is
	// sent; default 500ms. A call after a quiet spell (no call of that API in the previous 10
	// lingers) waits only Linger/20. While
	// MaxInFlight requests of the same API are in flight, calls also queue. A batch that
	// reaches MaxItems goes at once.
	Linger time.Duration
	// MaxItems bounds the resources (topics, groups) in one request; default 1000.
	MaxItems int
	// MaxInFlight bounds the concurrent requests of one API; default 2.
	MaxInFlight int
}

func (b Batching) withDefaults() Batching {
	if b.Linger <= 0 {
		b.Linger = 500 * time.Millisecond
	}
	if b.MaxItems <= 0 {
		b.MaxItems = 1000
	}
	if b.MaxInFlight <= 0 {
		b.MaxInFlight = 2
	}
	return b
}

// maxRecordsPerWrite keeps one CreateTopics or IncrementalAlterConfigs request well under the
// KRaft controller's limit of 10000 records per user operation (a topic costs one TopicRecord,
// one PartitionRecord per partition and one ConfigRecord per config).
const maxRecordsPerWrite = 5000

// batchers holds one coalescer per batched API of a Client.
type batchers struct {
	topics    *coalescer[string, struct{}, Topic]
	configs   *coalescer[ResourceKey, struct{}, ResourceConfigs]
	create    *coalescer[string, NewTopic, CreatedTopic]
	grow      *coalescer[string, int32, error]
	alter     *coalescer[ResourceKey, []AlterConfig, error]
	shareDesc *coalescer[string, struct{}, ShareGroup]
	// groupTypes answers every queued id from one ListGroups: its type, or "".
	groupTypes *coalescer[string, struct{}, string]
}

func newBatchers(c *Client, b Batching, timeout time.Duration) *batchers {
	b = b.withDefaults()
	mk := func(api string, exclusive bool) coalescerOpts {
		return coalescerOpts{api: api, linger: b.Linger, maxItems: b.MaxItems, maxInFlight: b.MaxInFlight, exclusive: exclusive, timeout: timeout}
	}
	return &batchers{
		topics: newCoalescer(mk("Metadata", false), func(ctx context.Context, items []batchItem[string, struct{}]) (map[string]Topic, error) {
			return c.describeTopics(ctx, keysOf(items)...)
		}, nil),
		configs: newCoalescer(mk("DescribeConfigs", false), func(ctx context.Context, items []batchItem[ResourceKey, struct{}]) (map[ResourceKey]ResourceConfigs, error) {
			return c.describeConfigs(ctx, keysOf(items))
		}, nil),
		create: newCoalescer(mk("CreateTopics", true), func(ctx context.Context, items []batchItem[string, NewTopic]) (map[string]CreatedTopic, error) {
			ts := make([]NewTopic, len(items))
			for i, it := range items {
				ts[i] = it.payload
			}
			return c.createTopics(ctx, ts, false)
		}, func(t NewTopic) int { return 1 + max(int(t.Partitions), 1) + len(t.Configs) }),
		grow: newCoalescer(mk("CreatePartitions", true), func(ctx context.Context, items []batchItem[string, int32]) (map[string]error, error) {
			totals := make(map[string]int32, len(items))
			for _, it := range items {
				totals[it.key] = it.payload
			}
			return c.growPartitions(ctx, totals, false)
		}, func(n int32) int { return int(n) }),
		alter: newCoalescer(mk("IncrementalAlterConfigs", true), func(ctx context.Context, items []batchItem[ResourceKey, []AlterConfig]) (map[ResourceKey]error, error) {
			alts := make([]Alteration, len(items))
			for i, it := range items {
				alts[i] = Alteration{Resource: it.key, Configs: it.payload}
			}
			return c.incrementalAlterConfigs(ctx, alts, false)
		}, func(cs []AlterConfig) int { return max(len(cs), 1) }),
		shareDesc: newCoalescer(mk("ShareGroupDescribe", false), func(ctx context.Context, items []batchItem[string, struct{}]) (map[string]ShareGroup, error) {
			return c.describeShareGroups(ctx, keysOf(items)...)
		}, nil),
		groupTypes: newCoalescer(mk("ListGroups", false), func(ctx context.Context, items []batchItem[string, struct{}]) (map[string]string, error) {
			return c.otherGroupTypes(ctx, keysOf(items)...)
		}, nil),
	}
}

// --- coalescer

type coalescerOpts struct {
	api         string
	linger      time.Duration
	maxItems    int
	maxInFlight int
	// exclusive: a key appears at most once per request (writes); later calls for a key
	// already in the request wait for the next one. Otherwise (reads) calls for the same key
	// share one item.
	exclusive bool
	// timeout bounds one batched request; it is not any single caller's context, so a
	// caller that gives up does not fail the others.
	timeout time.Duration
}

type batchItem[K comparable, P any] struct {
	key     K
	payload P
}

// pending is one caller's item waiting for a request.
type pending[K comparable, P any, V any] struct {
	batchItem[K, P]
	wait *waiter[K, V]
}

// waiter collects the results of one caller's items, which may span requests.
type waiter[K comparable, V any] struct {
	mu   sync.Mutex
	left int
	out  map[K]V
	err  error
	done chan struct{}
}

func (w *waiter[K, V]) deliver(key K, v V, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil && w.err == nil {
		w.err = err
	} else if err == nil {
		w.out[key] = v
	}
	w.left--
	if w.left == 0 {
		close(w.done)
	}
}

// coalescer queues items of one Kafka API and sends them in shared requests: the first item
// arms a timer of opts.linger; when it fires (or a request returns with items still queued)
// up to maxItems items, and at most maxWeight of weight, go in one request.
type coalescer[K comparable, P any, V any] struct {
	opts      coalescerOpts
	send      func(context.Context, []batchItem[K, P]) (map[K]V, error)
	weight    func(P) int // nil: every item weighs 1 and only maxItems applies
	mu        sync.Mutex
	queue     []pending[K, P, V]
	armed     bool
	inFlight  int
	lastCall  time.Time // when do was last called
	idle      bool      // the last call came after a quiet spell
	afterFunc func(time.Duration, func())
}

func newCoalescer[K comparable, P any, V any](opts coalescerOpts, send func(context.Context, []batchItem[K, P]) (map[K]V, error), weight func(P) int) *coalescer[K, P, V] {
	return &coalescer[K, P, V]{opts: opts, send: send, weight: weight, afterFunc: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
}

// do queues keys (with payloads, when not nil) and waits for all of their results. It
// returns the first request-level error of the requests that carried them, or ctx's error.
func (q *coalescer[K, P, V]) do(ctx context.Context, keys []K, payloads []P) (map[K]V, error) {
	w := &waiter[K, V]{left: len(keys), out: make(map[K]V, len(keys)), done: make(chan struct{})}
	q.mu.Lock()
	now := time.Now()
	q.idle = now.Sub(q.lastCall) > 10*q.opts.linger
	q.lastCall = now
	for i, k := range keys {
		var p P
		if payloads != nil {
			p = payloads[i]
		}
		q.queue = append(q.queue, pending[K, P, V]{batchItem[K, P]{k, p}, w})
	}
	if len(q.queue) >= q.opts.maxItems && q.inFlight < q.opts.maxInFlight {
		q.afterFunc(0, q.flush) // a full batch does not wait for the linger
	} else {
		q.armLocked()
	}
	q.mu.Unlock()
	select {
	case <-w.done:
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.out, w.err
	case <-ctx.Done():
		// Items not yet taken into a request are withdrawn: a caller that gave up (its
		// reconcile's --kafka-timeout) must not leave writes behind that a later request
		// makes anyway, nor make the batches of the callers after it larger and slower.
		if q.withdraw(w) == len(keys) {
			// None was sent: the caller may rely on it (ErrNotSent).
			return nil, wrap(q.opts.api, "", fmt.Errorf("%w: %w", ErrNotSent, ctx.Err()))
		}
		return nil, wrap(q.opts.api, "", ctx.Err())
	}
}

// withdraw removes w's items that are still queued (those already sent cannot be recalled)
// and returns how many it removed.
func (q *coalescer[K, P, V]) withdraw(w *waiter[K, V]) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	rest := q.queue[:0]
	for _, p := range q.queue {
		if p.wait != w {
			rest = append(rest, p)
		}
	}
	n := len(q.queue) - len(rest)
	clear(q.queue[len(rest):])
	q.queue = rest
	return n
}

func (q *coalescer[K, P, V]) armLocked() {
	if q.armed || len(q.queue) == 0 || q.inFlight >= q.opts.maxInFlight {
		return
	}
	q.armed = true
	q.afterFunc(q.lingerLocked(), q.flush)
}

// lingerLocked is Linger, except on a quiet client: a call to an API that saw no other call
// in the previous 10 lingers waits only Linger/20, so a lone reconcile is not held back for
// a batch that will not come, while a burst (continuous calls) gets full batches.
func (q *coalescer[K, P, V]) lingerLocked() time.Duration {
	if q.idle {
		return q.opts.linger / 20
	}
	return q.opts.linger
}

// take removes the next request's items from the queue.
func (q *coalescer[K, P, V]) takeLocked() (items []batchItem[K, P], waiting map[K][]*waiter[K, V]) {
	waiting = map[K][]*waiter[K, V]{}
	weight := 0
	rest := q.queue[:0:0]
	for _, p := range q.queue {
		if ws, dup := waiting[p.key]; dup {
			if q.opts.exclusive {
				rest = append(rest, p)
			} else {
				waiting[p.key] = append(ws, p.wait)
			}
			continue
		}
		wgt := 1
		if q.weight != nil {
			wgt = q.weight(p.payload)
		}
		if len(items) > 0 && (len(items) >= q.opts.maxItems || (q.weight != nil && weight+wgt > maxRecordsPerWrite)) {
			rest = append(rest, p)
			continue
		}
		weight += wgt
		items = append(items, p.batchItem)
		waiting[p.key] = []*waiter[K, V]{p.wait}
	}
	q.queue = rest
	return items, waiting
}

func (q *coalescer[K, P, V]) flush() {
	q.mu.Lock()
	q.armed = false
	items, waiting := q.takeLocked()
	if len(items) == 0 {
		q.mu.Unlock()
		return
	}
	q.inFlight++
	// A backlog beyond one request goes out at once, up to maxInFlight requests.
	q.armLocked()
	q.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), q.opts.timeout)
	res, err := q.send(ctx, items)
	cancel()
	for k, ws := range waiting {
		v, ok := res[k]
		e := err
		if e == nil && !ok {
			e = fmt.Errorf("kafka: %s answered without %v", q.opts.api, k)
		}
		for _, w := range ws {
			w.deliver(k, v, e)
		}
	}

	q.mu.Lock()
	q.inFlight--
	q.armLocked()
	q.mu.Unlock()
}

func keysOf[K comparable, P any](items []batchItem[K, P]) []K {
	ks := make([]K, len(items))
	for i, it := range items {
		ks[i] = it.key
	}
	return ks
}
