package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ClaimKind is what a claim is on: a topic or a share group (Kafka keeps them in separate
// namespaces, so a topic and a group may share a name), or a topic's collision name
// (TopicCollisionName: Kafka allows one topic per collision name).
type ClaimKind string

// The claim kinds.
const (
	ClaimTopic          ClaimKind = "topic"
	ClaimGroup          ClaimKind = "group"
	ClaimTopicCollision ClaimKind = "topic-collision"
)

// claimKey is a claim record's key: one per (kind, name, claimant), so compaction keeps every
// claimant's latest record and a tombstone removes one claimant only. Encoded as JSON with
// the fields in this order (compaction compares the bytes).
type claimKey struct {
	Kind ClaimKind `json:"kind"`
	Name string    `json:"name"`
	UID  string    `json:"uid"`
}

// Claimant is a claim record's value: the ShareQueue that claims a topic or group.
type Claimant struct {
	// Namespace and Name are the ShareQueue's.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// UID is the ShareQueue's metadata.uid: a queue deleted and recreated under the same name
	// is another claimant.
	UID string `json:"uid"`
	// Created is the ShareQueue's creationTimestamp (second precision, as the apiserver keeps
	// it). Among live claimants the oldest owns, ties broken by namespace/name, the same rule
	// as among the queues one manager sees.
	Created time.Time `json:"created"`
	// Manager names the manager that wrote the record (--leader-election-id and namespace, or
	// whatever the caller passes); informational.
	Manager string `json:"manager,omitempty"`
}

// Claim is one live claim.
type Claim struct {
	Kind ClaimKind
	// Name is the topic name or the group id.
	Name string
	Claimant
}

// ClaimChange is called for every claim record applied after the initial load: a new or
// rewritten claim (released false) or a tombstone (released true).
type ClaimChange func(c Claim, released bool)

// Claims is one manager's view of a claims topic on one Kafka cluster: a compacted,
// single-partition topic where each manager records which ShareQueue claims a topic or share
// group before it writes to either. Managers that cannot see each other's ShareQueues (other
// namespaces, shards or installs sharing the Kafka cluster) read the same records and so
// agree on one owner. Kafka itself offers no place for such a marker: brokers refuse unknown
// topic and group config names (INVALID_CONFIG, "Unknown topic config name").
//
// The view is built by a consumer that reads the partition from the start and keeps
// tailing it; Ensure and Release write with acks=all and return once the consumer has read
// their own record back, so every record written before it is in the view too.
type Claims struct {
	topic    string
	cl       *kgo.Client
	onChange ClaimChange
	cancel   context.CancelFunc
	done     chan struct{}

	mu      sync.Mutex
	claims  map[claimKey]Claimant
	byName  map[claimName][]claimKey // the claims on each topic and group (usually one)
	byQueue map[string][]claimKey    // the claims of each namespace/name (usually two)
	next    int64                    // offset after the last record read
	loadEnd int64                    // end offset when the view started: no callbacks before it
	moved   chan struct{}            // closed and replaced whenever next advances
	err     error                    // the last fetch error, cleared by the next successful fetch

	pendMu  sync.Mutex
	pending []pendingWrite // the next batch of writes (write, flush)

	// gone: the topic this view read was deleted (a write refused with
	// UNKNOWN_TOPIC_OR_PARTITION, a fetch with UNKNOWN_TOPIC_ID) or deleted and created
	// again (the consumer reports data loss, or the log's offsets went back). The view no longer matches the log: the client's next Claims call replaces it,
	// creating the topic again if needed, and the queues' next claims are written anew.
	gone atomic.Bool
}

// ClaimsTopicConfigs are the claims topic's configs: compacted, so it holds one record per
// live claim whatever the history. The newest record always sits in the active segment,
// which compaction never touches, so a reader can always reach the end offset.
var ClaimsTopicConfigs = map[string]string{"cleanup.policy": "compact"}

// Claims returns the client's view of the claims topic, creating the topic when missing
// (1 partition, replication factor min(3, brokers), min.insync.replicas 2 with 3 replicas)
// and reading it to its current end first. Later calls return the same view (onChange is
// the first call's). An authorization failure (IsAuthorization) is remembered for a minute
// and returned without asking the brokers again. Errors: the topic cannot be created or described, or it cannot be read
// to its end before ctx ends.
func (c *Client) Claims(ctx context.Context, topic string, onChange ClaimChange) (*Claims, error) {
	v, err := c.startClaims(ctx, topic, onChange)
	if err != nil {
		return nil, err
	}
	// Waited for outside the lock: every caller gives up at its own deadline.
	return v, v.waitLoaded(ctx)
}

// startClaims returns the client's view of topic, starting it (and creating the topic) first
// if there is none.
func (c *Client) startClaims(ctx context.Context, topic string, onChange ClaimChange) (*Claims, error) {
	c.claimsMu.Lock()
	defer c.claimsMu.Unlock()
	if v, ok := c.claims[topic]; ok {
		if !v.gone.Load() {
			return v, nil
		}
		// Closed aside: its poll may be handing a change to a reconciler that waits on us.
		delete(c.claims, topic)
		go v.close()
	}
	if d, ok := c.claimsDenied[topic]; ok && time.Since(d.at) < claimsDeniedFor {
		return nil, d.err
	}
	if err := c.ensureClaimsTopic(ctx, topic); err != nil {
		if IsAuthorization(err) {
			// Every queue of the cluster would ask again at once: the answer is kept a while.
			if c.claimsDenied == nil {
				c.claimsDenied = map[string]deniedAt{}
			}
			c.claimsDenied[topic] = deniedAt{err: err, at: time.Now()}
		}
		return nil, err
	}
	start, end, err := c.claimsOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	opts, _, err := baseOpts(c.cfg)
	if err != nil {
		return nil, err
	}
	opts = append(opts,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), // write batches them (claimsLinger)
		kgo.FetchMaxWait(5*time.Second),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: claims reader: %w", err)
	}
	pctx, cancel := context.WithCancel(context.Background())
	v := &Claims{topic: topic, cl: cl, onChange: onChange, cancel: cancel, done: make(chan struct{}),
		claims: map[claimKey]Claimant{}, byName: map[claimName][]claimKey{}, byQueue: map[string][]claimKey{}, next: start, loadEnd: end, moved: make(chan struct{})}
	go v.poll(pctx)
	if c.claims == nil {
		c.claims = map[string]*Claims{}
	}
	c.claims[topic] = v
	return v, nil
}

// claimsDeniedFor is how long Claims answers an authorization failure from memory.
const claimsDeniedFor = time.Minute

type deniedAt struct {
	err error
	at  time.Time
}

// ensureClaimsTopic creates the claims topic unless it exists.
func (c *Client) ensureClaimsTopic(ctx context.Context, topic string) error {
	topics, err := c.describeTopics(ctx, topic)
	if err != nil {
		return err
	}
	if t, ok := topics[topic]; ok && t.Err == nil {
		return nil
	}
	brokers, err := c.adm.BrokerMetadata(ctx)
	if err != nil {
		return wrap("Metadata", "", err)
	}
	rf := min(3, len(brokers.Brokers))
	configs := map[string]string{}
	for k, v := range ClaimsTopicConfigs {
		configs[k] = v
	}
	if rf >= 3 {
		configs["min.insync.replicas"] = "2"
	}
	created, err := c.createTopics(ctx, []NewTopic{{Name: topic, Partitions: 1, ReplicationFactor: int16(max(rf, 1)), Configs: configs}}, false)
	if err != nil {
		return err
	}
	if ct := created[topic]; ct.Err != nil && !errors.Is(ct.Err, kerr.TopicAlreadyExists) {
		return ct.Err
	}
	return nil
}

// claimsOffsets is the claims topic's log start and end offsets. Records before the start
// are gone (retention or DeleteRecords on a topic someone created without compaction): a
// view starts there, so a log emptied that way (start == end) is loaded at once rather than
// waited for. A topic just created is unknown to the broker answering until the metadata
// reaches it: that is retried until ctx ends.
func (c *Client) claimsOffsets(ctx context.Context, topic string) (int64, int64, error) {
	for {
		starts, ends, err := c.startAndEndOffsets(ctx, topic)
		if err == nil {
			s, sok := starts.Lookup(topic, 0)
			e, eok := ends.Lookup(topic, 0)
			if sok && eok {
				return s.Offset, e.Offset, nil
			}
			err = kerr.UnknownTopicOrPartition
		}
		if !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.LeaderNotAvailable) && !errors.Is(err, kerr.NotLeaderForPartition) {
			return 0, 0, wrap("ListOffsets", "topic "+topic, err)
		}
		select {
		case <-ctx.Done():
			return 0, 0, wrap("ListOffsets", "topic "+topic, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// closeClaims stops every claims view of the client.
func (c *Client) closeClaims() {
	c.claimsMu.Lock()
	defer c.claimsMu.Unlock()
	for k, v := range c.claims {
		v.close()
		delete(c.claims, k)
	}
}

// ClaimsView returns the client's claims view of topic if one was started and its topic was
// not deleted since (nil otherwise).
func (c *Client) ClaimsView(topic string) *Claims {
	c.claimsMu.Lock()
	defer c.claimsMu.Unlock()
	if v := c.claims[topic]; v != nil && !v.gone.Load() {
		return v
	}
	return nil
}

func (v *Claims) close() {
	v.cancel()
	<-v.done
	v.cl.Close()
}

func (v *Claims) poll(ctx context.Context) {
	defer close(v.done)
	for {
		fs := v.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		var ferr error
		gone := false
		fs.EachError(func(_ string, _ int32, err error) {
			ferr = err
			// The topic was deleted (UNKNOWN_TOPIC_ID: the consumer keeps asking for the old
			// topic id, and franz-go hands the error back at once, in a loop, even once a
			// topic of that name exists again), or the log no longer holds what the view
			// read (data loss: deleted and created again, or truncated). The view is
			// retired and the client's next Claims call builds a new one.
			var dl *kgo.ErrDataLoss
			if errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, kerr.UnknownTopicOrPartition) || errors.As(err, &dl) {
				gone = true
			}
		})
		type change struct {
			c        Claim
			released bool
		}
		var changes []change
		v.mu.Lock()
		advanced := false
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < v.next {
				// Offsets only go back when the topic was deleted and created again (the
				// consumer, out of range, starts over): claims this view holds may be gone.
				v.gone.Store(true)
			}
			k, who, released, ok := parseClaim(r)
			if !ok {
				v.next, advanced = r.Offset+1, true
				return // not a claim record: someone else's write, ignored
			}
			if released {
				who = v.claims[k]
				v.del(k)
			} else {
				v.put(k, who)
			}
			if r.Offset >= v.loadEnd && v.onChange != nil {
				who.UID = k.UID
				changes = append(changes, change{Claim{Kind: k.Kind, Name: k.Name, Claimant: who}, released})
			}
			v.next, advanced = r.Offset+1, true
		})
		if ferr != nil {
			v.err = wrap("Fetch", "topic "+v.topic, ferr)
		} else if advanced {
			v.err = nil
		}
		if gone {
			v.gone.Store(true)
		}
		if advanced || gone {
			close(v.moved) // waiters see gone and give up
			v.moved = make(chan struct{})
		}
		v.mu.Unlock()
		for _, ch := range changes {
			v.onChange(ch.c, ch.released)
		}
		if gone {
			return
		}
		if ferr != nil && !advanced {
			// An error fetch returns at once: not in a loop.
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

// errClaimsGone is the error of a view whose topic was deleted.
var errClaimsGone = errors.New("the claims topic was deleted or lost records; its view is read again")

// parseClaim decodes a claims record: a claim, or a tombstone (released). ok is false for
// a record that is not one (someone else's write on the topic): a key that is not a claim
// key, or a value that names no queue. Such a record would otherwise be a claimant with no
// name and the zero creation time, older than every queue, that no apiserver lookup can
// confirm or release.
func parseClaim(r *kgo.Record) (k claimKey, who Claimant, released, ok bool) {
	if json.Unmarshal(r.Key, &k) != nil || (k.Kind != ClaimTopic && k.Kind != ClaimGroup && k.Kind != ClaimTopicCollision) || k.Name == "" || k.UID == "" {
		return k, who, false, false
	}
	if r.Value == nil {
		return k, who, true, true
	}
	if json.Unmarshal(r.Value, &who) != nil || who.Namespace == "" || who.Name == "" || who.Created.IsZero() {
		return k, who, false, false
	}
	return k, who, false, true
}

// waitPast waits until the view has read the record at offset (next > offset).
func (v *Claims) waitPast(ctx context.Context, offset int64) error {
	for {
		v.mu.Lock()
		next, moved, ferr := v.next, v.moved, v.err
		v.mu.Unlock()
		if v.gone.Load() {
			return fmt.Errorf("reading claims topic %s to offset %d (at %d): %w", v.topic, offset, next, errClaimsGone)
		}
		if next > offset {
			return nil
		}
		select {
		case <-moved:
		case <-ctx.Done():
			if ferr != nil {
				return fmt.Errorf("reading claims topic %s to offset %d (at %d): %w", v.topic, offset, next, ferr)
			}
			return fmt.Errorf("reading claims topic %s to offset %d (at %d): %w", v.topic, offset, next, ctx.Err())
		}
	}
}

func (v *Claims) waitLoaded(ctx context.Context) error {
	return v.waitPast(ctx, v.loadEnd-1)
}

// Topic is the claims topic's name.
func (v *Claims) Topic() string { return v.topic }

// claimName is what a claim is on.
type claimName struct {
	kind ClaimKind
	name string
}

// put and del keep claims and its indexes together (v.mu held). The indexes are small slices,
// not maps: at 10,000 queues a map per topic, group and queue cost about 9 MiB more.
func (v *Claims) put(k claimKey, who Claimant) {
	v.del(k)
	v.claims[k] = who
	n, q := claimName{k.Kind, k.Name}, who.Namespace+"/"+who.Name
	v.byName[n] = append(v.byName[n], k)
	v.byQueue[q] = append(v.byQueue[q], k)
}

func (v *Claims) del(k claimKey) {
	who, ok := v.claims[k]
	if !ok {
		return
	}
	delete(v.claims, k)
	n, q := claimName{k.Kind, k.Name}, who.Namespace+"/"+who.Name
	if v.byName[n] = slices.DeleteFunc(v.byName[n], func(o claimKey) bool { return o == k }); len(v.byName[n]) == 0 {
		delete(v.byName, n)
	}
	if v.byQueue[q] = slices.DeleteFunc(v.byQueue[q], func(o claimKey) bool { return o == k }); len(v.byQueue[q]) == 0 {
		delete(v.byQueue, q)
	}
}

func (v *Claims) collect(keys []claimKey) []Claim {
	out := make([]Claim, 0, len(keys))
	for _, k := range keys {
		who := v.claims[k]
		who.UID = k.UID
		out = append(out, Claim{Kind: k.Kind, Name: k.Name, Claimant: who})
	}
	return out
}

// Of returns the live claims on a topic or group, in no particular order.
func (v *Claims) Of(kind ClaimKind, name string) []Claim {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.collect(v.byName[claimName{kind, name}])
}

// ByQueue returns the live claims whose claimant is the ShareQueue namespace/name (any UID).
func (v *Claims) ByQueue(namespace, name string) []Claim {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.collect(v.byQueue[namespace+"/"+name])
}

// All returns every live claim in the view, in no particular order.
func (v *Claims) All() []Claim {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]Claim, 0, len(v.claims))
	for k, who := range v.claims {
		who.UID = k.UID
		out = append(out, Claim{Kind: k.Kind, Name: k.Name, Claimant: who})
	}
	return out
}

// Len is the number of live claims in the view.
func (v *Claims) Len() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.claims)
}

// Ensure records that who claims each of claims (kind and name; their Claimant is ignored)
// and returns once the view has read the records back. A claim the view already holds with
// the same claimant is not written again, so a steady state writes nothing. Errors: the
// produce failed (e.g. TOPIC_AUTHORIZATION_FAILED, NOT_ENOUGH_REPLICAS) or the record was not
// read back before ctx ended.
func (v *Claims) Ensure(ctx context.Context, who Claimant, claims ...Claim) error {
	var recs []*kgo.Record
	v.mu.Lock()
	for _, c := range claims {
		k := claimKey{Kind: c.Kind, Name: c.Name, UID: who.UID}
		if have, ok := v.claims[k]; ok && have.Namespace == who.Namespace && have.Name == who.Name && have.Created.Equal(who.Created) {
			continue
		}
		key, _ := json.Marshal(k)
		val, _ := json.Marshal(who)
		recs = append(recs, &kgo.Record{Topic: v.topic, Partition: 0, Key: key, Value: val})
	}
	v.mu.Unlock()
	return v.write(ctx, recs)
}

// Release removes claims (tombstones for each one's kind, name and UID) and returns once the
// view has read them back. Claims the view does not hold are skipped.
func (v *Claims) Release(ctx context.Context, claims ...Claim) error {
	var recs []*kgo.Record
	v.mu.Lock()
	for _, c := range claims {
		k := claimKey{Kind: c.Kind, Name: c.Name, UID: c.UID}
		if _, ok := v.claims[k]; !ok {
			continue
		}
		key, _ := json.Marshal(k)
		recs = append(recs, &kgo.Record{Topic: v.topic, Partition: 0, Key: key})
	}
	v.mu.Unlock()
	return v.write(ctx, recs)
}

// claimsLinger is how long the first write of a batch waits for others: reconciles claim in
// bulk when many queues are created at once, and their records then share one Produce request
// and one read-back instead of one each.
const claimsLinger = 100 * time.Millisecond

// pendingWrite is one caller's records in the next batch, and where its outcome goes.
type pendingWrite struct {
	recs []*kgo.Record
	done chan error
}

// write adds recs to the next batch and waits for the batch's outcome: written with acks=all
// and read back by the view. A caller whose ctx ends stops waiting; its records may still be
// written (a claim written twice is the same claim).
func (v *Claims) write(ctx context.Context, recs []*kgo.Record) error {
	if len(recs) == 0 {
		return nil
	}
	done := make(chan error, 1)
	v.pendMu.Lock()
	v.pending = append(v.pending, pendingWrite{recs: recs, done: done})
	first := len(v.pending) == 1
	v.pendMu.Unlock()
	if first {
		time.AfterFunc(claimsLinger, v.flush)
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("writing to claims topic %s: %w", v.topic, ctx.Err())
	}
}

// flush writes the pending batch in one ProduceSync and waits until the view has read it.
func (v *Claims) flush() {
	v.pendMu.Lock()
	batch := v.pending
	v.pending = nil
	v.pendMu.Unlock()
	var all []*kgo.Record
	for _, p := range batch {
		all = append(all, p.recs...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := v.cl.ProduceSync(ctx, all...)
	err := res.FirstErr()
	if err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			v.gone.Store(true) // deleted under us: the next Claims call creates it again
		}
		err = wrap("Produce", "topic "+v.topic, err)
	} else {
		last := int64(-1)
		for _, r := range res {
			last = max(last, r.Record.Offset)
		}
		err = v.waitPast(ctx, last)
	}
	for _, p := range batch {
		p.done <- err
	}
}

// ReadClaims reads a claims topic once, from the start to its current end, with a client of
// its own, and returns the live claims (kqctl and tests). A missing topic has no claims.
func ReadClaims(ctx context.Context, cfg Config, topic string) ([]Claim, error) {
	opts, _, err := baseOpts(cfg)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		return nil, fmt.Errorf("kafka: claims reader: %w", err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("ListOffsets", "topic "+topic, err)
	}
	end, next := int64(0), int64(0)
	if o, ok := ends.Lookup(topic, 0); ok {
		end = o.Offset
	}
	// Records before the log start are gone: a log emptied by retention has nothing to read.
	starts, err := kadm.NewClient(cl).ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, wrap("ListOffsets", "topic "+topic, err)
	}
	if o, ok := starts.Lookup(topic, 0); ok {
		next = o.Offset
	}
	live := map[claimKey]Claimant{}
	for next < end {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("reading claims topic %s to offset %d (at %d): %w", topic, end, next, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			if k, who, released, ok := parseClaim(r); !ok {
				return
			} else if released {
				delete(live, k)
			} else {
				live[k] = who
			}
		})
	}
	out := make([]Claim, 0, len(live))
	for k, who := range live {
		who.UID = k.UID
		out = append(out, Claim{Kind: k.Kind, Name: k.Name, Claimant: who})
	}
	return out, nil
}
