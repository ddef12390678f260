// Package republisher is the sidecar that gives a share group a dead-letter topic on clusters
// without the brokers' own (KIP-1191 needs share.version 2). It is the queue's share consumer
// and hands records to the application over a local HTTP API (see api/republisher/openapi.yaml).
//
// A record is dead-lettered — produced to the dead-letter topic with acks=all and idempotence,
// with provenance headers, and only then accepted at the source — when the application rejects
// it, when it releases it on its last allowed attempt, or when its lease lapses on its last
// allowed attempt. The operator sets the group's share.delivery.count.limit to
// maxDeliveryAttempts + 1 in this mode. The sidecar follows the limit the brokers apply (read
// from the group's configs at start and every Options.LimitRefresh, so a maxDeliveryAttempts
// changed on a live queue is followed without a new Pod): with limit L the application gets
// L - 1 attempts, and a record that arrives with a delivery count of L (the brokers' last
// attempt) is dead-lettered without being handed out: if the sidecar dies during the
// application's last attempt, the brokers deliver the record once more and it is
// dead-lettered then, so nothing is archived without a copy. Duplicates in the dead-letter topic are possible
// (a crash between the produce and the accept) and carry the same source headers.
package republisher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// Provenance headers written on every dead-lettered record.
const (
	HeaderSourceTopic     = "kqo.source.topic"
	HeaderSourcePartition = "kqo.source.partition"
	HeaderSourceOffset    = "kqo.source.offset"
	HeaderGroup           = "kqo.group"
	HeaderDeliveryCount   = "kqo.delivery.count"
	HeaderReason          = "kqo.reason"
	// HeaderFirstSeen is when this republisher process first acquired the source record
	// (RFC 3339, UTC); a record first seen by an earlier process carries the restart time.
	HeaderFirstSeen = "kqo.first.seen"
)

// Reasons a record is dead-lettered (the kqo.reason header and the metric label).
const (
	ReasonRejected      = "rejected"
	ReasonReleasedLast  = "released-on-last-attempt"
	ReasonLeaseExpired  = "lease-expired-on-last-attempt"
	ReasonOverAttempted = "delivery-count-above-limit"
)

// Options configure a Republisher.
type Options struct {
	// Topic is the queue's topic; Group its share group.
	Topic, Group string
	// DeadLetterTopic receives dead records.
	DeadLetterTopic string
	// MaxDeliveryAttempts is the ShareQueue's spec.delivery.maxDeliveryAttempts when the Pod
	// was made: the attempts the application gets until the group's share.delivery.count.limit
	// is first read from the brokers (taken as MaxDeliveryAttempts + 1 until then). After that
	// the brokers' limit L decides: the application gets L - 1 attempts and the L-th, the
	// brokers' last, is reserved for the dead-letter write.
	MaxDeliveryAttempts int32
	// LimitRefresh is how often the group's share.delivery.count.limit is read from the
	// brokers (DescribeConfigs on the group); default 15s.
	LimitRefresh time.Duration
	// Lease is how long the application holds a received record before it lapses (a renew
	// starts it again). While it runs the brokers' acquisition lock is renewed as needed.
	// Default 30s.
	Lease time.Duration
	// Members is how many share-group members (batches held at once) the sidecar runs;
	// default 4.
	Members int
	// MaxRecords bounds one receive; default 100.
	MaxRecords int
	// Registerer receives the metrics; nil skips them.
	Registerer prometheus.Registerer
}

// Delivery is one record handed to the application.
type Delivery struct {
	ID            string
	Record        *kafka.ShareRecord
	LeaseExpires  time.Time
	DeliveryCount int32
}

// fetchWait bounds how long one share fetch waits at the broker, so a receive that gives up
// rarely leaves a fetch in flight whose records would sit in a member until its next poll.
const fetchWait = 500 * time.Millisecond

// ErrUnknownID is returned (wrapped in an *AckRefusal with code 404) for an ack whose id
// this sidecar never handed out, or settled longer ago than it remembers (goneTTL).
var ErrUnknownID = errors.New("republisher: unknown or expired delivery id")

// Why an acknowledgement was not taken (AckRefusal.Reason, the API's results[].reason).
const (
	// RefusalUnknownDelivery (404): the id was never handed out here, or is forgotten.
	RefusalUnknownDelivery = "UnknownDelivery"
	// RefusalLeaseExpired (410): the application's lease lapsed first; the sidecar released
	// the record (or dead-lettered it on its last attempt).
	RefusalLeaseExpired = "LeaseExpired"
	// RefusalLockExpired (410): the brokers' acquisition lock (share.record.lock.duration.ms,
	// KIP-932) ended before the acknowledgement; the brokers deliver the record again.
	RefusalLockExpired = "LockExpired"
	// RefusalDeliveredAgain (410): the brokers delivered the record again (a higher delivery
	// count) while this delivery was held: this delivery is stale.
	RefusalDeliveredAgain = "DeliveredAgain"
	// RefusalAlreadyAcknowledged (410): this delivery was acknowledged before.
	RefusalAlreadyAcknowledged = "AlreadyAcknowledged"
	// RefusalBrokerRefused (409): the brokers refused the acknowledgement (e.g.
	// INVALID_RECORD_STATE: the lock had ended, another member holds the record, or renew
	// acknowledgements are off, share.renew.acknowledge.enable=false, KIP-1222).
	RefusalBrokerRefused = "BrokerRefused"
	// RefusalDeadLetterPending (409): the record's dead-letter write failed and is retried.
	RefusalDeadLetterPending = "DeadLetterPending"
	// RefusalUnconfirmed (503): no answer from the brokers in time; the acknowledgement may
	// or may not have been taken.
	RefusalUnconfirmed = "Unconfirmed"
)

// AckRefusal is an acknowledgement the sidecar did not take, or the brokers refused. Code is
// the HTTP status the API answers with it (404, 409, 410 or 503), Reason one of the
// Refusal* constants.
type AckRefusal struct {
	ID     string
	Code   int
	Reason string
	Detail string
	Err    error
}

func (e *AckRefusal) Error() string {
	return fmt.Sprintf("republisher: delivery %s: %s: %s", e.ID, e.Reason, e.Detail)
}

func (e *AckRefusal) Unwrap() error { return e.Err }

// gone is what the sidecar remembers of a delivery it no longer holds, for goneTTL.
type gone struct {
	code   int
	reason string
	detail string
	at     time.Time
}

// goneTTL is how long a settled or stale delivery's id is remembered for precise refusals.
const goneTTL = 10 * time.Minute

type member struct {
	m    *kafka.ShareMember
	busy bool // records of its last poll are still held
	held int
}

type held struct {
	id        string
	rec       *kafka.ShareRecord
	mem       *member
	lease     time.Time // the application's lease
	firstSeen time.Time
	// brokerDeadline is when the brokers' acquisition lock ends; lockFor is how long one
	// acquisition or renewal holds it (share.record.lock.duration.ms, as first observed).
	brokerDeadline time.Time
	lockFor        time.Duration
	// deadReason is set when a dead-letter write failed and is being retried.
	deadReason string
	retrying   bool
	// parked marks a record whose receive answer never reached the application (Return):
	// still locked by its member, it goes to the next receive as it is.
	parked bool
	// superseded marks an entry whose record the brokers delivered again under the same id
	// (see supersedeLocked).
	superseded bool
	// renewing is set while a renew of the brokers' lock is in flight (one at a time: the
	// client drops a renew marked while another is pending).
	renewing bool
	// renewRefused is set once the brokers refused a sweep's renew (e.g. renew
	// acknowledgements are off for the group): the sweep stops trying, and the lock lapses.
	renewRefused bool
}

// lockLapsed reports whether the brokers' lock, as last confirmed, has ended at now.
func (h *held) lockLapsed(now time.Time) bool {
	return !h.brokerDeadline.IsZero() && !now.Before(h.brokerDeadline)
}

// Republisher is the sidecar's core. Its methods are safe for concurrent use.
type Republisher struct {
	opts     Options
	members  []*member
	next     int // round-robin start, so every member polls regularly
	producer *kafka.Producer
	free     chan struct{} // signalled when a member becomes free
	mu       sync.Mutex
	held     map[string]*held
	// bySource maps a source record (sourceKey) to its held delivery; gone remembers
	// deliveries no longer held (by id) for goneTTL, so a late ack is refused precisely.
	bySource map[string]*held
	gone     map[string]gone
	// firstSeen is when this process first acquired each source record (topic/partition/
	// offset), kept across redeliveries until the record is settled here; entries of records
	// that went elsewhere are pruned after firstSeenTTL.
	firstSeen map[string]time.Time
	// parked lists records given back by Return, oldest first; entries no longer held or
	// no longer parked are skipped.
	parked []*held
	// draining stops receives (Drain); closed follows in Shutdown.
	draining bool
	closed   bool
	// pollCtx ends when Drain starts, cutting every long-poll short; receives counts the
	// Receive calls in flight, which Drain waits for.
	pollCtx   context.Context
	stopPolls context.CancelFunc
	receives  sync.WaitGroup
	m         metrics

	// admin checks that Options.Group is not a classic, consumer or streams group before the
	// members join (openMembers). membersUp is closed once they exist (or the check was given
	// up at shutdown); opened once openMembers has returned. problem (under mu) says why they
	// do not run, "" while none is known.
	admin     *kafka.Client
	membersUp chan struct{}
	opened    chan struct{}
	stopOpen  context.CancelFunc
	problem   string
	// openErr (under mu) is why the last attempt to open the members failed (the group type
	// check or the members' creation), nil once they are open.
	openErr error
	// limitObserved (under mu) is set once the brokers' limit was read.
	limitObserved bool

	// limit is the group's share.delivery.count.limit the sidecar follows: the brokers' value
	// as last read (watchLimit), MaxDeliveryAttempts + 1 before the first read. Records with
	// a delivery count of limit or more are on the brokers' last attempt (reserved); the
	// application gets the attempts below it. limitTried is closed once the first read has
	// succeeded or failed (the members join after it, so no record is handed out under the
	// fallback when the brokers answer), limitDone once watchLimit has returned.
	// limitProblem (under mu) says why the limit leaves no attempt to reserve.
	limit        atomic.Int32
	limitTried   chan struct{}
	limitDone    chan struct{}
	limitProblem string
}

// DeliveryCountLimitConfig is the group config whose value the sidecar follows.
const DeliveryCountLimitConfig = "share.delivery.count.limit"

// defaultLimitRefresh is Options.LimitRefresh's default.
const defaultLimitRefresh = 15 * time.Second

// ErrGroupNotShare is returned (wrapped, with the group and its type) by Receive while the
// queue's group id names a group of another type: no member joins until it is gone.
var ErrGroupNotShare = errors.New("republisher: the group is not a share group")

// Backoff of the group-type check (openMembers): from groupCheckMin, doubling, up to
// groupCheckMax while the group is another type's, and up to groupCheckErrMax while the
// check itself fails (brokers not reachable yet).
const (
	groupCheckMin    = time.Second
	groupCheckMax    = time.Minute
	groupCheckErrMax = 5 * time.Second
)

// New connects the members and the producer. It does not wait for the brokers.
func New(cfg kafka.Config, opts Options) (*Republisher, error) {
	if opts.Topic == "" || opts.Group == "" || opts.DeadLetterTopic == "" {
		return nil, errors.New("republisher: topic, group and dead-letter topic are required")
	}
	if opts.MaxDeliveryAttempts < 1 {
		return nil, fmt.Errorf("republisher: maxDeliveryAttempts %d must be at least 1", opts.MaxDeliveryAttempts)
	}
	if opts.Lease <= 0 {
		opts.Lease = 30 * time.Second
	}
	if opts.Members <= 0 {
		opts.Members = 4
	}
	if opts.MaxRecords <= 0 {
		opts.MaxRecords = 100
	}
	if opts.LimitRefresh <= 0 {
		opts.LimitRefresh = defaultLimitRefresh
	}
	r := &Republisher{opts: opts, free: make(chan struct{}, opts.Members), held: map[string]*held{}, bySource: map[string]*held{}, gone: map[string]gone{}, firstSeen: map[string]time.Time{}, m: newMetrics(opts.Registerer)}
	r.pollCtx, r.stopPolls = context.WithCancel(context.Background())
	p, err := kafka.NewProducer(cfg)
	if err != nil {
		return nil, err
	}
	r.producer = p
	admin, err := kafka.NewClient(cfg)
	if err != nil {
		r.closeClients()
		return nil, err
	}
	r.admin = admin
	r.membersUp, r.opened = make(chan struct{}), make(chan struct{})
	r.limit.Store(fallbackLimit(opts.MaxDeliveryAttempts))
	r.m.limit.Set(float64(r.limit.Load()))
	r.limitTried, r.limitDone = make(chan struct{}), make(chan struct{})
	octx, cancel := context.WithCancel(context.Background())
	r.stopOpen = cancel
	go r.watchLimit(octx)
	go r.openMembers(octx, cfg)
	return r, nil
}

// fallbackLimit is the limit assumed before the brokers' is read: the operator sets the
// group's share.delivery.count.limit to maxDeliveryAttempts + 1 in Republisher mode.
func fallbackLimit(attempts int32) int32 {
	if attempts >= math.MaxInt32 {
		return math.MaxInt32
	}
	return attempts + 1
}

// deliveryLimit is the brokers' share.delivery.count.limit the sidecar follows now.
func (r *Republisher) deliveryLimit() int32 { return r.limit.Load() }

// reserved reports whether a delivery count is the brokers' last attempt (or beyond it): such
// a record is never handed to the application; it is dead-lettered.
func (r *Republisher) reserved(count int32) bool { return count >= r.deliveryLimit() }

// appLast reports whether a delivery count is the application's last attempt (or later): a
// release of it is a dead-letter, as the brokers' next attempt would be the reserved one.
func (r *Republisher) appLast(count int32) bool { return count >= r.deliveryLimit()-1 }

// DeliveryLimit returns the group's share.delivery.count.limit the sidecar follows and
// whether it was read from the brokers (false: MaxDeliveryAttempts + 1, not yet read).
func (r *Republisher) DeliveryLimit() (limit int32, observed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.deliveryLimit(), r.limitObserved
}

// readLimit reads the group's effective share.delivery.count.limit: DescribeConfigs on the
// GROUP resource answers with the group's override (source GROUP_CONFIG) or, without one, the
// brokers' default group.share.delivery.count.limit (source DEFAULT_CONFIG, Kafka 4.4).
func (r *Republisher) readLimit(ctx context.Context) (int32, kafka.ConfigSource, error) {
	key := kafka.ResourceKey{Type: kafka.GroupResource, Name: r.opts.Group}
	res, err := r.admin.DescribeConfigs(ctx, []kafka.ResourceKey{key})
	if err != nil {
		return 0, 0, err
	}
	rc := res[key]
	if rc.Err != nil {
		return 0, 0, rc.Err
	}
	e, ok := rc.Configs[DeliveryCountLimitConfig]
	if !ok || e.Value == "" {
		return 0, 0, fmt.Errorf("the brokers do not report %s for group %s (a group config since Kafka 4.3)", DeliveryCountLimitConfig, r.opts.Group)
	}
	n, err := strconv.ParseInt(e.Value, 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("group %s's %s is %q: %w", r.opts.Group, DeliveryCountLimitConfig, e.Value, err)
	}
	return int32(n), e.Source, nil
}

// watchLimit reads the group's share.delivery.count.limit at start and every LimitRefresh
// until ctx ends, so the reserved attempt follows the brokers' last one when the queue's
// maxDeliveryAttempts changes while the Pod runs (the sidecar's KQO_MAX_DELIVERY_ATTEMPTS is
// fixed at Pod creation). A failed read keeps the last value (before the first,
// MaxDeliveryAttempts + 1) and is retried within groupCheckErrMax. A change is logged.
// Between a change at the brokers and its read (up to LimitRefresh) the old value is used.
func (r *Republisher) watchLimit(ctx context.Context) {
	defer close(r.limitDone)
	first, tried := true, false
	defer func() {
		if !tried {
			close(r.limitTried)
		}
	}()
	var lastErr string
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		l, src, err := r.readLimit(rctx)
		cancel()
		wait := r.opts.LimitRefresh
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if msg := err.Error(); msg != lastErr {
				lastErr = msg
				slog.Warn("cannot read the group's delivery count limit; keeping the one in use", "group", r.opts.Group, "config", DeliveryCountLimitConfig,
					"limit", r.deliveryLimit(), "error", err)
			}
			wait = min(wait, groupCheckErrMax)
		default:
			lastErr = ""
			r.setLimit(l, src, first)
			first = false
		}
		if !tried {
			tried = true
			close(r.limitTried)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// setLimit makes l the limit followed, logging a change (and a first read that differs from
// MaxDeliveryAttempts + 1). Below 2 no attempt is left to reserve: every delivery is the
// brokers' last, so every record is dead-lettered on arrival, and Unready says why.
func (r *Republisher) setLimit(l int32, src kafka.ConfigSource, first bool) {
	old := r.limit.Swap(l)
	r.m.limit.Set(float64(l))
	problem := ""
	if l < 2 {
		problem = fmt.Sprintf("group %s's %s is %d (%s): no delivery attempt is left for the application once the last is reserved for the dead-letter write; every record is dead-lettered on arrival (set maxDeliveryAttempts so that the limit is at least 2)",
			r.opts.Group, DeliveryCountLimitConfig, l, src)
	}
	r.mu.Lock()
	r.limitObserved, r.limitProblem = true, problem
	r.mu.Unlock()
	switch {
	case old != l && first:
		slog.Warn("the group's delivery count limit differs from maxDeliveryAttempts + 1; following the brokers' limit", "group", r.opts.Group,
			"config", DeliveryCountLimitConfig, "limit", l, "source", src.String(), "maxDeliveryAttempts", r.opts.MaxDeliveryAttempts, "applicationAttempts", max(l-1, 0))
	case old != l:
		slog.Info("the group's delivery count limit changed; following it", "group", r.opts.Group, "config", DeliveryCountLimitConfig,
			"from", old, "to", l, "source", src.String(), "applicationAttempts", max(l-1, 0))
	case first:
		slog.Info("read the group's delivery count limit", "group", r.opts.Group, "config", DeliveryCountLimitConfig, "limit", l, "source", src.String(), "applicationAttempts", max(l-1, 0))
	}
	if problem != "" && (old != l || first) {
		slog.Error(problem, "group", r.opts.Group)
	}
}

// Unready says why /readyz should answer 503 ("" when nothing is known to be wrong): the
// group id names a group of another type (Problem), or the group's delivery count limit is
// below 2, leaving no attempt to reserve for the dead-letter write.
func (r *Republisher) Unready() string {
	r.mu.Lock()
	problem := cmp.Or(r.problem, r.limitProblem)
	r.mu.Unlock()
	if problem != "" {
		return problem
	}
	fp, _ := r.fetchProblem()
	return fp
}

// fetchProblem says why no member of the group can fetch ("" when one can): the members are
// not created yet (and why), none has been answered by the brokers yet (joining the group),
// or the last failure to reach them (kafka.ShareMember.Connected). failed is true when a
// failure is known (not while only joining). franz-go retries a refused connection or
// authentication quietly while its polls return nothing, so without this an unreachable
// cluster looked like an empty queue.
func (r *Republisher) fetchProblem() (problem string, failed bool) {
	r.mu.Lock()
	members, openErr := r.members, r.openErr
	r.mu.Unlock()
	if len(members) == 0 {
		if openErr != nil {
			return fmt.Sprintf("the members of share group %s are not created yet: %v", r.opts.Group, openErr), true
		}
		return fmt.Sprintf("the members of share group %s are not created yet (reading the group's %s and checking its type)", r.opts.Group, DeliveryCountLimitConfig), false
	}
	var last error
	for _, m := range members {
		ok, err := m.m.Connected()
		if ok {
			return "", false
		}
		if err != nil {
			last = err
		}
	}
	if last == nil {
		return fmt.Sprintf("no member of share group %s has been answered by the brokers yet (joining the group)", r.opts.Group), false
	}
	return fmt.Sprintf("no member of share group %s can fetch from the brokers: %v", r.opts.Group, last), true
}

// openMembers joins the share group once the group id is known not to be another type's.
// A franz-go share member whose group id is a classic, consumer or streams group's sends
// ShareGroupHeartbeat in a tight loop (thousands a second, measured on Kafka 4.4) while its
// polls return no error, so the members are not created until kafka.OtherGroupTypes says
// the id is free: while it is another type's, Problem and Receive say so and the check is
// repeated with exponential backoff (logged once per attempt). A group that becomes another
// type's after the members joined is not detected.
//
// It first waits for the first read of the group's delivery count limit (watchLimit), so the
// first records are judged by the brokers' limit rather than the MaxDeliveryAttempts + 1
// fallback.
func (r *Republisher) openMembers(ctx context.Context, cfg kafka.Config) {
	defer close(r.opened)
	defer close(r.membersUp)
	select {
	case <-r.limitTried:
	case <-ctx.Done():
		return
	}
	delay := groupCheckMin
	for {
		types, err := r.admin.OtherGroupTypes(ctx, r.opts.Group)
		var problem string
		switch {
		case err == nil && types[r.opts.Group] == "":
			members, err := r.newMembers(cfg)
			if err == nil {
				r.mu.Lock()
				r.members, r.problem, r.openErr = members, "", nil
				r.mu.Unlock()
				return
			}
			r.setOpenErr(fmt.Errorf("creating the members: %w", err))
			slog.Error("cannot create the share-group members; retrying", "group", r.opts.Group, "error", err, "retryIn", delay)
		case err == nil:
			problem = kafka.NotShareGroupMessage(r.opts.Group, types[r.opts.Group])
			slog.Warn("not joining: "+problem+"; delete that group or use another group id", "group", r.opts.Group, "type", types[r.opts.Group], "retryIn", delay)
		default:
			if ctx.Err() != nil {
				return
			}
			r.setOpenErr(fmt.Errorf("checking that the group is a share group: %w", err))
			slog.Warn("cannot check that the group is a share group; retrying", "group", r.opts.Group, "error", err, "retryIn", delay)
		}
		r.mu.Lock()
		r.problem = problem
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		limit := groupCheckErrMax
		if problem != "" {
			limit = groupCheckMax
		}
		delay = min(2*delay, limit)
	}
}

func (r *Republisher) setOpenErr(err error) {
	r.mu.Lock()
	r.openErr = err
	r.mu.Unlock()
}

func (r *Republisher) newMembers(cfg kafka.Config) ([]*member, error) {
	var out []*member
	for i := 0; i < r.opts.Members; i++ {
		m, err := kafka.NewShareMember(cfg, r.opts.Group, r.opts.Topic, int32(r.opts.MaxRecords), fetchWait)
		if err != nil {
			for _, o := range out {
				o.m.Close()
			}
			return nil, err
		}
		out = append(out, &member{m: m})
	}
	return out, nil
}

// Problem says why the sidecar does not consume ("" when nothing is known to be wrong): the
// group id names a group of another type (openMembers). /readyz reports it.
func (r *Republisher) Problem() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.problem
}

// ErrCannotFetch is returned (wrapped, with the cause) by Receive when it got no records
// while no member of the group could fetch from the brokers: an empty answer would tell the
// application that the queue is empty.
var ErrCannotFetch = errors.New("republisher: cannot fetch from the brokers")

// ErrShuttingDown is returned by Receive once Drain or Shutdown has begun.
var ErrShuttingDown = errors.New("republisher: shutting down")

// Receive waits up to wait for records and hands out at most max of them, each with a lease.
// Records past the application's attempts are dead-lettered here and never handed out. After
// Drain it returns ErrShuttingDown, and a poll that Drain cut short hands out nothing.
func (r *Republisher) Receive(ctx context.Context, max int, wait time.Duration) ([]Delivery, error) {
	if max <= 0 || max > r.opts.MaxRecords {
		max = r.opts.MaxRecords
	}
	r.mu.Lock()
	if r.draining {
		r.mu.Unlock()
		return nil, ErrShuttingDown
	}
	r.receives.Add(1)
	r.mu.Unlock()
	defer r.receives.Done()
	if ds := r.takeParked(max); len(ds) > 0 {
		return ds, nil
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	defer context.AfterFunc(r.pollCtx, cancel)()
	mem, err := r.takeMember(ctx)
	if err != nil {
		return nil, err
	}
	if mem == nil {
		return nil, r.cannotFetch()
	}
	var recs []*kafka.ShareRecord
	for len(recs) == 0 && ctx.Err() == nil {
		if recs, err = mem.m.Poll(ctx, max); err != nil {
			r.releaseMember(mem)
			return nil, err
		}
	}
	if len(recs) == 0 {
		r.releaseMember(mem)
		return nil, r.cannotFetch()
	}
	// A record whose lock ran out while it waited inside the client (fetched after an earlier
	// receive gave up) is no longer ours: give it back rather than hand out a stale attempt.
	// Not on the reserved attempt, where a release archives it: that one is dead-lettered.
	fresh := recs[:0]
	for _, rec := range recs {
		if !r.reserved(rec.DeliveryCount) && !rec.LockDeadline.IsZero() && time.Until(rec.LockDeadline) < time.Second {
			mem.m.AcknowledgeAsync(rec, kafka.AckRelease)
			continue
		}
		fresh = append(fresh, rec)
	}
	recs = fresh
	now := time.Now()
	var out []Delivery
	var dead []*held
	r.mu.Lock()
	draining := r.draining
	for _, rec := range recs {
		r.m.received.Inc()
		seen := r.firstSeenLocked(rec, now)
		id := deliveryID(rec)
		if old := r.held[id]; old != nil {
			r.supersedeLocked(old)
		}
		if old := r.bySource[sourceKey(rec)]; old != nil && old.id != id {
			// The brokers handed the record out again (its lock ended): the held delivery
			// is stale, and an ack of it must not answer OK.
			r.staleLocked(old, http.StatusGone, RefusalDeliveredAgain, fmt.Sprintf("the brokers delivered the record again as attempt %d; this delivery's lock had ended", rec.DeliveryCount))
		}
		if r.reserved(rec.DeliveryCount) {
			dead = append(dead, &held{id: id, rec: rec, mem: mem, firstSeen: seen, brokerDeadline: rec.LockDeadline, lockFor: rec.LockDeadline.Sub(now)})
			continue
		}
		if draining {
			// Shutdown began during the poll: nobody will ack it, give it back now.
			mem.m.AcknowledgeAsync(rec, kafka.AckRelease)
			continue
		}
		h := &held{id: id, rec: rec, mem: mem, firstSeen: seen, lease: now.Add(r.opts.Lease), brokerDeadline: rec.LockDeadline, lockFor: rec.LockDeadline.Sub(now)}
		r.holdLocked(h)
		mem.held++
		out = append(out, Delivery{ID: h.id, Record: rec, LeaseExpires: h.lease, DeliveryCount: rec.DeliveryCount})
	}
	mem.held += len(dead) // dead-lettered below, each settles once
	handed := mem.held > 0
	r.m.heldRecords.Set(float64(len(r.held)))
	r.mu.Unlock()
	for _, h := range dead {
		_ = r.settle(ctx, h, ReasonOverAttempted)
	}
	if !handed {
		r.releaseMember(mem)
	}
	if draining {
		return nil, ErrShuttingDown
	}
	return out, nil
}

// cannotFetch is Receive's answer when a poll ended without records: ErrCannotFetch naming
// the cause while no member can fetch for a known reason (refused connection or
// authentication, a group error, members that could not be created), ErrShuttingDown once
// Drain has begun, else nil (an empty queue; also while the members are still joining, which
// is not a failure: the startup probe holds the application back until they have joined).
func (r *Republisher) cannotFetch() error {
	r.mu.Lock()
	draining := r.draining
	r.mu.Unlock()
	if draining {
		return ErrShuttingDown
	}
	if p, failed := r.fetchProblem(); failed {
		return fmt.Errorf("%w: %s", ErrCannotFetch, p)
	}
	return nil
}

// supersedeLocked drops a held entry whose record the brokers have delivered again under the
// same id: its acquisition ended without raising the delivery count (seen on Kafka 4.4 when a
// broker restarts with records locked). The new copy takes the id, so an application's ack
// of it applies to the copy the brokers now lock; the old entry's member no longer waits
// for it. An entry whose dead-letter write is running is left to that write to finish.
func (r *Republisher) supersedeLocked(old *held) {
	r.unholdLocked(old)
	old.superseded, old.parked = true, false
	if old.deadReason != "" && old.retrying {
		return
	}
	r.doneLocked(old.mem)
}

// Return gives back deliveries whose receive answer never reached the application (its
// client went away first). They stay locked by their member, their broker locks renewed,
// and the next Receive hands them out again with a fresh lease and the same delivery count:
// no attempt is spent on them, and a record on its last attempt is not dead-lettered for a
// lease nobody held. One that no receive takes within a lease lapses as usual.
func (r *Republisher) Return(ds []Delivery) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range ds {
		h := r.held[d.ID]
		if h == nil || h.parked || h.deadReason != "" {
			continue
		}
		h.parked, h.lease = true, now.Add(r.opts.Lease)
		r.parked = append(r.parked, h)
		r.m.returned.Inc()
	}
}

// takeParked hands out up to max records given back by Return.
func (r *Republisher) takeParked(max int) []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Delivery
	now := time.Now()
	for len(r.parked) > 0 && len(out) < max {
		h := r.parked[0]
		r.parked = r.parked[1:]
		if !h.parked || r.held[h.id] != h {
			continue // acked, lapsed or shut down meanwhile
		}
		if h.lockLapsed(now) && !r.reserved(h.rec.DeliveryCount) {
			r.staleLocked(h, http.StatusGone, RefusalLockExpired, "the brokers' lock ended while the record waited for a receive")
			continue
		}
		h.parked, h.lease = false, now.Add(r.opts.Lease)
		out = append(out, Delivery{ID: h.id, Record: h.rec, LeaseExpires: h.lease, DeliveryCount: h.rec.DeliveryCount})
	}
	if len(r.parked) == 0 {
		r.parked = nil
	}
	return out
}

// Ack acknowledges one held delivery: accept, release, reject or renew. It returns nil only
// when the brokers took the acknowledgement (for a renew: extended the lock, and the lease
// starts again); otherwise an *AckRefusal saying why: the id is unknown (404); the delivery
// is stale — its lease or the brokers' lock ended, or the record was delivered again — (410);
// the brokers refused it, or its dead-letter write is being retried (409); no answer came
// (503). An acknowledgement known to be stale is not sent: the brokers refuse every
// acknowledgement of a partition in a request that carries a stale one.
func (r *Republisher) Ack(ctx context.Context, id string, t kafka.AckType) error {
	if t < kafka.AckAccept || t > kafka.AckRenew {
		return fmt.Errorf("republisher: unknown ack type %d", t)
	}
	r.mu.Lock()
	h, ok := r.held[id]
	if !ok {
		g, known := r.gone[id]
		r.mu.Unlock()
		if known {
			return &AckRefusal{ID: id, Code: g.code, Reason: g.reason, Detail: g.detail}
		}
		return &AckRefusal{ID: id, Code: http.StatusNotFound, Reason: RefusalUnknownDelivery, Detail: "this sidecar did not hand out this delivery, or forgot it", Err: ErrUnknownID}
	}
	if h.deadReason != "" {
		r.mu.Unlock()
		return &AckRefusal{ID: id, Code: http.StatusConflict, Reason: RefusalDeadLetterPending, Detail: fmt.Sprintf("being dead-lettered (%s); the write is retried", h.deadReason)}
	}
	now := time.Now()
	if h.lockLapsed(now) && !r.reserved(h.rec.DeliveryCount) {
		detail := fmt.Sprintf("the brokers' lock ended at %s (share.record.lock.duration.ms); they deliver the record again", h.brokerDeadline.UTC().Format(time.RFC3339Nano))
		r.staleLocked(h, http.StatusGone, RefusalLockExpired, detail)
		r.mu.Unlock()
		return &AckRefusal{ID: id, Code: http.StatusGone, Reason: RefusalLockExpired, Detail: detail}
	}
	if t == kafka.AckRenew {
		r.mu.Unlock()
		if err := r.renew(ctx, h); err != nil {
			return r.refusal(id, err, "renew")
		}
		r.mu.Lock()
		if r.held[id] == h {
			h.lease = time.Now().Add(r.opts.Lease)
		}
		r.mu.Unlock()
		return nil
	}
	r.unholdLocked(h)
	r.m.heldRecords.Set(float64(len(r.held)))
	r.mu.Unlock()
	last := r.appLast(h.rec.DeliveryCount)
	switch t {
	case kafka.AckAccept:
		err := r.acknowledge(ctx, h, kafka.AckAccept, "accept")
		r.forget(h.rec)
		if err != nil {
			return r.refusal(id, err, "accept")
		}
		r.m.acks.WithLabelValues("accept").Inc()
	case kafka.AckReject:
		return r.counted("reject", r.settle(ctx, h, ReasonRejected))
	case kafka.AckRelease:
		if last {
			return r.counted("release", r.settle(ctx, h, ReasonReleasedLast))
		}
		err := r.acknowledge(ctx, h, kafka.AckRelease, "release")
		if err != nil {
			return r.refusal(id, err, "release")
		}
		r.m.acks.WithLabelValues("release").Inc()
	}
	return nil
}

// counted counts an acknowledgement of type typ in kafkaqueues_republisher_acks_total once it
// was taken (err nil), and passes err on. Counting before the brokers answered made a refused
// acknowledgement count as one (issue 30, case 4).
func (r *Republisher) counted(typ string, err error) error {
	if err == nil {
		r.m.acks.WithLabelValues(typ).Inc()
	}
	return err
}

// refusal turns a failed acknowledgement into the API's answer: refused by the brokers (409)
// or unconfirmed (503).
func (r *Republisher) refusal(id string, err error, what string) error {
	var ae *kafka.AckError
	if errors.As(err, &ae) {
		if what != "renew" { // renew counts its own
			r.m.refused.WithLabelValues(what).Inc()
		}
		return &AckRefusal{ID: id, Code: http.StatusConflict, Reason: RefusalBrokerRefused, Err: err,
			Detail: fmt.Sprintf("the brokers refused the %s (%v): the record's lock had ended, another consumer holds it, or (renew) the group's share.renew.acknowledge.enable is false; a record not accepted is delivered again", what, ae.Err)}
	}
	var rf *AckRefusal
	if errors.As(err, &rf) {
		return rf
	}
	return &AckRefusal{ID: id, Code: http.StatusServiceUnavailable, Reason: RefusalUnconfirmed, Err: err,
		Detail: fmt.Sprintf("the brokers did not confirm the %s in time (%v); it may or may not have been taken", what, err)}
}

// acknowledge sends a terminal acknowledgement of h's record and waits for the brokers'
// answer (as ShareMember.Acknowledge), but counts the record settled for its member as soon
// as the ack is marked, not once it is answered: the mark is on the record, so the member's
// next poll carries it in its ShareFetch (or the flush sends it first) and never accepts the
// record in its place. Waiting for the answer before the member could fetch again cost one
// ShareAcknowledge round trip per batch, the gap between the sidecar and a direct franz-go
// accept loop in make bench-republisher (docs/capacity-planning.md).
func (r *Republisher) acknowledge(ctx context.Context, h *held, t kafka.AckType, what string) error {
	answer := h.mem.m.AcknowledgeAsync(h.rec, t)
	r.mu.Lock()
	r.doneLocked(h.mem)
	r.mu.Unlock()
	var err error
	select {
	case err = <-answer:
	case <-ctx.Done():
		err = fmt.Errorf("%w: %w", kafka.ErrAckUnconfirmed, ctx.Err())
	}
	r.mu.Lock()
	r.rememberLocked(h, err, what)
	r.mu.Unlock()
	return err
}

// settled ends a delivery acknowledged by the application: remembered for late acks, and
// its member freed once its batch is done.
func (r *Republisher) settled(h *held, err error, what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rememberLocked(h, err, what)
	r.doneLocked(h.mem)
}

// rememberLocked keeps the outcome of h's acknowledgement for late acks of its id.
func (r *Republisher) rememberLocked(h *held, err error, what string) {
	if err == nil {
		r.goneLocked(h.id, http.StatusGone, RefusalAlreadyAcknowledged, "already acknowledged ("+what+")")
	} else {
		r.goneLocked(h.id, http.StatusConflict, RefusalBrokerRefused, fmt.Sprintf("an earlier %s was refused: %v", what, err))
	}
}

// holdLocked records h as held; unholdLocked forgets it (if it is still the held entry).
func (r *Republisher) holdLocked(h *held) {
	r.held[h.id] = h
	r.bySource[sourceKey(h.rec)] = h
}

func (r *Republisher) unholdLocked(h *held) {
	if r.held[h.id] == h {
		delete(r.held, h.id)
	}
	if k := sourceKey(h.rec); r.bySource[k] == h {
		delete(r.bySource, k)
	}
}

func (r *Republisher) goneLocked(id string, code int, reason, detail string) {
	r.gone[id] = gone{code: code, reason: reason, detail: detail, at: time.Now()}
}

// staleLocked drops a held delivery the brokers no longer lock for it (its lock ended, or the
// record was delivered again): nothing is sent for it (the brokers would refuse it, and with
// it every acknowledgement of its partition in the same request), a later ack of its id is
// refused with code and reason, and its member no longer waits for it. One whose dead-letter
// write is running is left to that write.
func (r *Republisher) staleLocked(h *held, code int, reason, detail string) {
	r.unholdLocked(h)
	r.goneLocked(h.id, code, reason, detail)
	r.m.stale.WithLabelValues(reason).Inc()
	r.m.heldRecords.Set(float64(len(r.held)))
	if h.parked {
		h.parked = false
	}
	if h.deadReason != "" && h.retrying {
		h.superseded = true
		return
	}
	h.superseded = true
	r.doneLocked(h.mem)
}

// Sweep handles held records: a lapsed lease on the last attempt is dead-lettered, other
// lapsed leases are released for another delivery, and a record whose application lease
// outlasts the brokers' lock has the lock renewed before it runs out. A record whose lock
// ended anyway (the brokers refused the renew) is no longer this sidecar's: it is dropped,
// and the application's later ack of it is refused (LockExpired) — except on the reserved
// attempt, where the brokers archive it and the dead-letter write is the only copy. Call it
// periodically (Run does, every second).
func (r *Republisher) Sweep(ctx context.Context) {
	now := time.Now()
	var lapsed, retry, renew []*held
	r.mu.Lock()
	for _, h := range r.held {
		reserved := r.reserved(h.rec.DeliveryCount)
		if h.lockLapsed(now) && !reserved && !(h.deadReason != "" && h.retrying) {
			r.staleLocked(h, http.StatusGone, RefusalLockExpired, fmt.Sprintf("the brokers' lock ended at %s (share.record.lock.duration.ms) and was not renewed; they deliver the record again", h.brokerDeadline.UTC().Format(time.RFC3339Nano)))
			continue
		}
		if h.deadReason == "" && now.After(h.lease) {
			h.parked = false
			r.unholdLocked(h)
			r.goneLocked(h.id, http.StatusGone, RefusalLeaseExpired, "the lease lapsed before the acknowledgement; the sidecar gave the record back (or dead-lettered it on its last attempt)")
			lapsed = append(lapsed, h)
			continue
		}
		if h.deadReason != "" && !h.retrying {
			h.retrying = true // stays held (and its lock renewed) while the write is retried
			retry = append(retry, h)
		}
		margin := min(h.lockFor/2, 5*time.Second)
		if !h.renewing && !h.renewRefused && !h.brokerDeadline.IsZero() && h.lease.After(h.brokerDeadline) && now.After(h.brokerDeadline.Add(-margin)) {
			renew = append(renew, h)
		}
	}
	for k, t := range r.firstSeen {
		if now.Sub(t) > firstSeenTTL {
			delete(r.firstSeen, k)
		}
	}
	for id, g := range r.gone {
		if now.Sub(g.at) > goneTTL {
			delete(r.gone, id)
		}
	}
	r.m.heldRecords.Set(float64(len(r.held)))
	r.mu.Unlock()
	for _, h := range renew {
		go func(h *held) {
			if err := r.renew(context.Background(), h); err != nil {
				var ae *kafka.AckError
				if errors.As(err, &ae) {
					r.mu.Lock()
					h.renewRefused = true
					r.mu.Unlock()
				}
				slog.Warn("the brokers did not renew the lock of a held record; it lapses at its deadline", "topic", h.rec.Topic, "partition", h.rec.Partition,
					"offset", h.rec.Offset, "deliveryCount", h.rec.DeliveryCount, "lockEnds", h.brokerDeadline, "error", err)
			}
		}(h)
	}
	for _, h := range retry {
		go func(h *held) { _ = r.settle(context.Background(), h, h.deadReason) }(h)
	}
	for _, h := range lapsed {
		if r.appLast(h.rec.DeliveryCount) {
			_ = r.counted("lease-expired", r.settle(ctx, h, ReasonLeaseExpired))
			continue
		}
		r.mu.Lock()
		done := h.mem.m.AcknowledgeAsync(h.rec, kafka.AckRelease)
		r.doneLocked(h.mem)
		r.mu.Unlock()
		go func() { _ = r.counted("lease-expired", <-done) }()
	}
}

// renew extends the brokers' lock on a held record (AckRenew, KIP-1222, Kafka 4.2+) and waits
// for their answer; only a renew they took moves brokerDeadline (to the send time plus the
// lock duration). One renew per record is in flight at a time; a second caller waits for it
// and sends its own.
func (r *Republisher) renew(ctx context.Context, h *held) error {
	for {
		r.mu.Lock()
		if !h.renewing {
			h.renewing = true
			r.mu.Unlock()
			break
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", kafka.ErrAckUnconfirmed, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	sent := time.Now()
	err := r.counted("renew", h.mem.m.Acknowledge(ctx, h.rec, kafka.AckRenew))
	r.mu.Lock()
	h.renewing = false
	if err == nil && h.lockFor > 0 {
		h.brokerDeadline = sent.Add(h.lockFor)
	}
	r.mu.Unlock()
	var ae *kafka.AckError
	if errors.As(err, &ae) {
		r.m.refused.WithLabelValues("renew").Inc()
	}
	return err
}

// Run sweeps lapsed leases every second until ctx ends.
func (r *Republisher) Run(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.Sweep(ctx)
		}
	}
}

// Drain stops handing out records: receives in flight end at once (their polls are cut
// short, and records a poll returns now are released or, past the attempts, dead-lettered),
// and new ones get ErrShuttingDown. It waits for the receives in flight until ctx ends. Acks
// still work. Call it before stopping the HTTP server, so long-polls do not hold that up.
func (r *Republisher) Drain(ctx context.Context) {
	r.mu.Lock()
	r.draining = true
	r.mu.Unlock()
	r.stopPolls()
	done := make(chan struct{})
	go func() { r.receives.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Shutdown drains (see Drain), releases every held record (so other members get them at
// once), makes a last dead-letter write for records whose write is pending, flushes the acks
// and closes the clients.
func (r *Republisher) Shutdown(ctx context.Context) {
	r.Drain(ctx)
	r.mu.Lock()
	r.closed = true
	r.parked = nil
	var pending []*held
	for _, h := range r.held {
		r.unholdLocked(h)
		if h.deadReason != "" {
			// Any ending other than accept archives a record on the reserved attempt, and a
			// release here would only spend an attempt: make one last dead-letter write.
			pending = append(pending, h)
			continue
		}
		h.rec.Ack(kafka.AckRelease) // below the brokers' limit: delivered again
	}
	r.m.heldRecords.Set(0)
	r.mu.Unlock()
	for _, h := range pending {
		reason := h.deadReason
		h.deadReason = ""
		if err := r.settle(ctx, h, reason); err != nil {
			slog.Error("stopping with a record whose dead-letter write still fails; the brokers may archive it without a copy",
				"topic", h.rec.Topic, "partition", h.rec.Partition, "offset", h.rec.Offset, "deliveryCount", h.rec.DeliveryCount, "error", err)
		}
	}
	r.stopOpen()
	<-r.opened
	<-r.limitDone
	for _, m := range r.members {
		_ = m.m.Flush(ctx)
	}
	r.closeClients()
}

// settle dead-letters a record: produce it with provenance headers, then accept it at the
// source. If the write fails, the record is kept (its broker lock renewed) and the write is
// retried by Sweep: releasing it instead could spend the reserved last attempt and let the
// brokers archive it with no copy.
//
// A record is dead-lettered only while this sidecar holds its lock, so a record another
// consumer holds is never dead-lettered: below the reserved attempt, a record whose lock
// ended (or was delivered again) is not written — the brokers deliver it again, and on the
// reserved attempt it comes back here — and the answer is a LockExpired refusal; a lock with
// less than half its duration left is renewed first (a refused renew: a BrokerRefused
// refusal, and the record is released). On the reserved attempt the brokers archive a record
// whose lock ends, so nobody else can hold it and it is written regardless.
func (r *Republisher) settle(ctx context.Context, h *held, reason string) error {
	rec := h.rec
	if !r.reserved(rec.DeliveryCount) {
		now := time.Now()
		r.mu.Lock()
		lapsed, superseded := h.lockLapsed(now), h.superseded
		short := !h.brokerDeadline.IsZero() && h.brokerDeadline.Sub(now) < h.lockFor/2
		r.mu.Unlock()
		if lapsed || superseded {
			detail := fmt.Sprintf("not dead-lettered: the brokers' lock ended at %s before the write, so they deliver the record again (as attempt %d; past the application's attempts it is dead-lettered then)", h.brokerDeadline.UTC().Format(time.RFC3339Nano), rec.DeliveryCount+1)
			r.mu.Lock()
			h.deadReason, h.retrying = "", false // this write ends here: staleLocked frees the member
			r.staleLocked(h, http.StatusGone, RefusalLockExpired, detail)
			r.mu.Unlock()
			return &AckRefusal{ID: h.id, Code: http.StatusGone, Reason: RefusalLockExpired, Detail: detail}
		}
		if short {
			if err := r.renew(ctx, h); err != nil {
				// Not ours for long enough to write it safely: give it back while the lock
				// still holds (another attempt is left below the reserved one).
				rerr := h.mem.m.Acknowledge(ctx, rec, kafka.AckRelease)
				r.settled(h, rerr, "release")
				return r.refusal(h.id, fmt.Errorf("renewing the lock before the dead-letter write: %w", err), "renew")
			}
		}
	}
	headers := append([]kafka.Header{}, rec.Headers...)
	headers = append(headers,
		kafka.Header{Key: HeaderSourceTopic, Value: []byte(rec.Topic)},
		kafka.Header{Key: HeaderSourcePartition, Value: []byte(strconv.Itoa(int(rec.Partition)))},
		kafka.Header{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(rec.Offset, 10))},
		kafka.Header{Key: HeaderGroup, Value: []byte(r.opts.Group)},
		kafka.Header{Key: HeaderDeliveryCount, Value: []byte(strconv.Itoa(int(rec.DeliveryCount)))},
		kafka.Header{Key: HeaderReason, Value: []byte(reason)},
		kafka.Header{Key: HeaderFirstSeen, Value: []byte(h.firstSeen.UTC().Format(time.RFC3339Nano))},
	)
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := r.producer.Produce(pctx, r.opts.DeadLetterTopic, rec.Key, rec.Value, headers); err != nil {
		r.m.produceErrors.Inc()
		slog.Warn("dead-letter write failed; keeping the record and retrying", "topic", rec.Topic, "partition", rec.Partition,
			"offset", rec.Offset, "deliveryCount", rec.DeliveryCount, "reason", reason, "deadLetterTopic", r.opts.DeadLetterTopic, "error", err)
		now := time.Now()
		r.mu.Lock()
		h.deadReason, h.retrying = reason, false
		h.lease = now.Add(100 * 365 * 24 * time.Hour) // no lapse: the lock is renewed until the write succeeds
		switch cur := r.held[h.id]; {
		case r.closed:
		case h.superseded || (cur != nil && cur != h):
			// The brokers delivered the record again (supersedeLocked, staleLocked): that
			// copy is live and goes through the application again; this acquisition has
			// nothing to keep.
			r.doneLocked(h.mem)
		default:
			r.holdLocked(h)
			r.m.heldRecords.Set(float64(len(r.held)))
		}
		r.mu.Unlock()
		return &AckRefusal{ID: h.id, Code: http.StatusConflict, Reason: RefusalDeadLetterPending, Err: err,
			Detail: fmt.Sprintf("dead-lettering %s/%d@%d to %s: %v (kept; the write is retried)", rec.Topic, rec.Partition, rec.Offset, r.opts.DeadLetterTopic, err)}
	}
	r.m.deadLettered.WithLabelValues(reason).Inc()
	r.forget(rec)
	r.mu.Lock()
	r.unholdLocked(h)
	r.m.heldRecords.Set(float64(len(r.held)))
	r.mu.Unlock()
	err := r.acknowledge(ctx, h, kafka.AckAccept, "dead-letter accept")
	if err != nil && !r.reserved(rec.DeliveryCount) {
		// Written, but the source accept was not taken: the brokers deliver it again, and
		// the dead-letter topic will hold it twice (at least once).
		slog.Error("dead-lettered, but the brokers did not take the source accept; the record is delivered again", "topic", rec.Topic,
			"partition", rec.Partition, "offset", rec.Offset, "deliveryCount", rec.DeliveryCount, "reason", reason, "error", err)
		return r.refusal(h.id, err, "accept after the dead-letter write")
	}
	return nil
}

// takeMember returns a member whose last batch is fully acknowledged, waiting for one until
// ctx ends (nil, nil).
func (r *Republisher) takeMember(ctx context.Context) (*member, error) {
	if p := r.Problem(); p != "" {
		return nil, fmt.Errorf("%w: %s", ErrGroupNotShare, p)
	}
	select {
	case <-r.membersUp:
	case <-ctx.Done():
		if p := r.Problem(); p != "" {
			return nil, fmt.Errorf("%w: %s", ErrGroupNotShare, p)
		}
		return nil, nil
	}
	for {
		r.mu.Lock()
		if r.draining {
			r.mu.Unlock()
			return nil, ErrShuttingDown
		}
		for i := range r.members {
			m := r.members[(r.next+i)%len(r.members)]
			if !m.busy {
				m.busy = true
				r.next = (r.next + i + 1) % len(r.members)
				r.mu.Unlock()
				return m, nil
			}
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, nil
		case <-r.free:
		}
	}
}

// doneLocked counts one settled record of mem; the member is free again when none of its
// batch is left. (Acknowledgements flush themselves: ShareMember.Acknowledge.)
func (r *Republisher) doneLocked(mem *member) {
	mem.held--
	if mem.held <= 0 && mem.busy {
		mem.held = 0
		mem.busy = false
		select {
		case r.free <- struct{}{}:
		default:
		}
	}
}

func (r *Republisher) releaseMember(mem *member) {
	r.mu.Lock()
	mem.busy = false
	r.mu.Unlock()
	select {
	case r.free <- struct{}{}:
	default:
	}
}

func (r *Republisher) closeClients() {
	for _, m := range r.members {
		m.m.Close()
	}
	if r.producer != nil {
		r.producer.Close()
	}
	if r.admin != nil {
		r.admin.Close()
	}
}

// firstSeenTTL bounds how long a released record's first-seen time is remembered.
const firstSeenTTL = time.Hour

func sourceKey(rec *kafka.ShareRecord) string {
	// strconv rather than fmt: this runs several times per record (10 % of the sidecar's CPU
	// samples in make bench-republisher).
	b := make([]byte, 0, len(rec.Topic)+24)
	b = append(b, rec.Topic...)
	b = append(strconv.AppendInt(append(b, ':'), int64(rec.Partition), 10), ':')
	return string(strconv.AppendInt(b, rec.Offset, 10))
}

// firstSeenLocked returns when this process first acquired rec, recording now if never.
func (r *Republisher) firstSeenLocked(rec *kafka.ShareRecord, now time.Time) time.Time {
	k := sourceKey(rec)
	if t, ok := r.firstSeen[k]; ok {
		return t
	}
	r.firstSeen[k] = now
	return now
}

// forget drops a settled record's first-seen time.
func (r *Republisher) forget(rec *kafka.ShareRecord) {
	r.mu.Lock()
	delete(r.firstSeen, sourceKey(rec))
	r.mu.Unlock()
}

// deliveryID names one delivery attempt of one record.
func deliveryID(rec *kafka.ShareRecord) string {
	return sourceKey(rec) + ":" + strconv.Itoa(int(rec.DeliveryCount))
}

type metrics struct {
	received      prometheus.Counter
	acks          *prometheus.CounterVec
	deadLettered  *prometheus.CounterVec
	produceErrors prometheus.Counter
	heldRecords   prometheus.Gauge
	returned      prometheus.Counter
	refused       *prometheus.CounterVec
	stale         *prometheus.CounterVec
	limit         prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) metrics {
	m := metrics{
		received: prometheus.NewCounter(prometheus.CounterOpts{Name: "kafkaqueues_republisher_records_received_total",
			Help: "Records acquired from the share group (including those dead-lettered on arrival)."}),
		acks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafkaqueues_republisher_acks_total",
			Help: "Acknowledgements the brokers took, by type: accept, release, reject, renew, lease-expired (a release the sidecar sent for the application); refused or unconfirmed ones are not counted (see kafkaqueues_republisher_acks_refused_total)."}, []string{"type"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafkaqueues_republisher_dead_lettered_total",
			Help: "Records written to the dead-letter topic, by reason."}, []string{"reason"}),
		produceErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "kafkaqueues_republisher_dlq_produce_errors_total",
			Help: "Dead-letter writes that failed (the source record is kept, its lock renewed, and the write retried)."}),
		heldRecords: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kafkaqueues_republisher_held_records",
			Help: "Records handed to the application and not yet acknowledged."}),
		returned: prometheus.NewCounter(prometheus.CounterOpts{Name: "kafkaqueues_republisher_records_returned_total",
			Help: "Received records whose answer never reached the application (its client went away); handed to the next receive without spending an attempt."}),
	}
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafkaqueues_republisher_acks_refused_total",
		Help: "Acknowledgements the brokers refused (e.g. INVALID_RECORD_STATE), by type: accept, release, renew, dead-letter accept."}, []string{"type"})
	m.stale = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafkaqueues_republisher_stale_deliveries_total",
		Help: "Held deliveries dropped because the brokers no longer lock them for this sidecar, by reason: LockExpired, DeliveredAgain."}, []string{"reason"})
	m.limit = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kafkaqueues_republisher_delivery_count_limit",
		Help: "The group's share.delivery.count.limit the sidecar follows: as last read from the brokers (maxDeliveryAttempts + 1 before the first read). The application gets one attempt fewer; the last is reserved for the dead-letter write."})
	if reg != nil {
		reg.MustRegister(m.received, m.acks, m.deadLettered, m.produceErrors, m.heldRecords, m.returned, m.refused, m.stale, m.limit)
	}
	return m
}
