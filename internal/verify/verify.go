// Package verify is the truth checker: it reads every KafkaCluster, ShareQueue and
// DeadLetterRoute and compares each claim their status makes with what Kafka holds right now
// (issue 20). A claim that Kafka contradicts is a Finding. `kqctl verify` and the soak test
// (test/soak) both run it.
//
// A claim is a status field, or a condition with status True, that says something about
// Kafka. A False or Unknown condition claims nothing (it is not checked), and neither do the
// figures that move on their own (status.group members and state, status.depth, lag). The
// claims checked:
//
// KafkaCluster, when Connected or Ready is True: status.clusterID; status.brokerCount and the
// ids of status.brokers against the live brokers of one Metadata response;
// status.finalizedFeatures and status.shareVersion against the finalized features brokers
// report in ApiVersions now; status.brokerNativeDLQ = (share.version >= 2, KIP-1191);
// conditions[ShareGroupsEnabled] True ⇒ share.version >= 1 (KIP-932);
// status.shareStateTopic with exists true ⇒ __share_group_state exists with those partitions
// and replication factor (smallest replica count over partitions).
//
// ShareQueue, when TopicReady or Ready is True: the topic status.topicName exists, and
// status.topicId, status.partitions and status.replicationFactor equal the live values.
// GroupConfigured True: every status.effective value with source GroupOverride is the
// group's live config (DescribeConfigs, resource GROUP), and every value with source Clamped
// is that config (override, else default) clamped to the live brokers' group.share.min/max.*
// bounds (KIP-1240; see checkClamped) — durations compared in ms,
// share.delivery.count.limit = maxDeliveryAttempts + reservedAttempts — and every value with
// source BrokerDefault is not overridden on the group, its value (when shown) the default
// the group's describe reports. status.deadLetter with active true:
// the DeadLetterRoute it names says the same topic and mode with RouteActive True, and the
// topic exists. Ready True: the share group is usable — a new member joins it
// (ShareGroupHeartbeat) and is assigned a partition of the topic; with Options.Receive it
// also fetches once and releases what it got. OffsetReset Complete (the newest for its
// group, of a queue that still has that group and is older than the reset): every partition
// whose start offset it read back (status.partitions[].after) holds state in the group now, at
// that offset or later (a share-partition start offset only moves forward). status.depth claiming waiting records (a
// backlog, no unread partitions): its oldestRecordTime is present and not later than the
// oldest waiting record Kafka has now (kafka.Depth; Kafka's oldest only gets later).
//
// DeadLetterRoute: RouteActive True ⇒ the topic status.topicName exists, and in
// BrokerNative mode the group's errors.deadletterqueue.topic.name (KIP-1191) is that topic,
// in Republisher mode the queue's group's share.delivery.count.limit keeps a reserved
// attempt (= the queue's maxDeliveryAttempts + reservedAttempts, reservedAttempts >= 1) and
// its share.renew.acknowledge.enable, where brokers have it (KIP-1222, 4.3+), is not false.
// TopicReady True ⇒ the topic exists. Ready True ⇒ TopicReady is True and the topic exists.
// A True condition whose field is empty (no status.topicName, no status.groupID or
// status.effective under GroupConfigured) is false.
//
// An object being deleted claims nothing. A false claim is confirmed by reading its object
// again: deleted, being deleted, or its claims rewritten since the List (not only its depth,
// group, capacity or condition messages), it is unverifiable instead. A topic Metadata
// reports unknown is asked about again (missingAsks) before it is missing. A
// join or receive Kafka did not answer (network error, retriable code, timeout) is
// unverifiable; one Kafka refused is false.
//
// Kafka is read here, independently of the controllers' observe code, so that their bugs
// show: one Metadata request per 1,000 topics and one DescribeConfigs per 500 groups for
// each cluster, and one join per Ready queue (Options.Parallel at a time).
package verify

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/connection"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// Options select what Check reads.
type Options struct {
	// Namespace limits ShareQueues and DeadLetterRoutes to one namespace ("" = all). The
	// KafkaClusters they reference are checked wherever they are.
	Namespace string
	// Receive makes the usability check of a Ready queue also fetch once as a share
	// consumer of the queue's group (and release what it got), not only join it.
	Receive bool
	// Timeout bounds each Kafka request (default 10s).
	Timeout time.Duration
	// Bootstrap overrides a KafkaCluster's spec.bootstrapServers, keyed "namespace/name"
	// (for running outside the cluster network).
	Bootstrap map[string][]string
	// Parallel is how many share-group joins (and receives) run at once (default 64).
	Parallel int
	// JoinWait is how long a join waits for the coordinator to assign a partition, and a
	// receive for records (default 10s).
	JoinWait time.Duration
	// SkipJoin leaves out the usability check of Ready queues (no share-group member is
	// created); every other claim is still checked.
	SkipJoin bool
}

// Finding is one false claim: a status says Claim and Kafka shows Observed.
type Finding struct {
	// Kind, Namespace and Name identify the object whose status made the claim.
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Field is the status field or condition that made the claim, e.g. "status.partitions"
	// or "conditions[Ready]".
	Field string `json:"field"`
	// Claim is what the status says; Observed is what Kafka holds now.
	Claim    string `json:"claim"`
	Observed string `json:"observed"`
}

func (f Finding) String() string {
	return fmt.Sprintf("%s %s/%s %s: status says %s, Kafka has %s", f.Kind, f.Namespace, f.Name, f.Field, f.Claim, f.Observed)
}

// Report is one Check's outcome.
type Report struct {
	// Objects is how many objects were read, Claims how many claims were compared.
	Objects int `json:"objects"`
	Claims  int `json:"claims"`
	// Findings are the false claims; empty means every checked claim held.
	Findings []Finding `json:"findings"`
	// Unverifiable names claims that could not be compared (a cluster that did not answer),
	// with why. They are not findings.
	Unverifiable []string `json:"unverifiable"`
	// ClaimsByKind counts the compared claims per kind (KafkaCluster, ShareQueue,
	// DeadLetterRoute).
	ClaimsByKind map[string]int `json:"claimsByKind"`
}

// Summary is the one-line outcome: "checked N objects, M claims: K false, U unverifiable".
func (r Report) Summary() string {
	return fmt.Sprintf("checked %d objects, %d claims: %d false, %d unverifiable", r.Objects, r.Claims, len(r.Findings), len(r.Unverifiable))
}

// Kinds as they appear in Finding.Kind.
const (
	KindKafkaCluster    = "KafkaCluster"
	KindShareQueue      = "ShareQueue"
	KindDeadLetterRoute = "DeadLetterRoute"
	KindOffsetReset     = "OffsetReset"
)

// Request sizes: topics per Metadata request and resources per DescribeConfigs request.
const (
	topicsPerRequest  = 1000
	configsPerRequest = 500
)

// Check compares every status claim with Kafka. The error is for failures to read the
// Kubernetes API, not for false claims.
func Check(ctx context.Context, c client.Reader, opts Options) (Report, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 64
	}
	if opts.JoinWait <= 0 {
		opts.JoinWait = 10 * time.Second
	}
	var kcs kqv1.KafkaClusterList
	var sqs kqv1.ShareQueueList
	var dlrs kqv1.DeadLetterRouteList
	var in []client.ListOption
	if opts.Namespace != "" {
		in = append(in, client.InNamespace(opts.Namespace))
	}
	for _, l := range []client.ObjectList{&kcs, &sqs, &dlrs} {
		if err := c.List(ctx, l, in...); err != nil {
			return Report{}, fmt.Errorf("verify: listing %T: %w", l, err)
		}
	}
	ck := &checker{c: c, opts: opts, rep: Report{ClaimsByKind: map[string]int{}, Findings: []Finding{}, Unverifiable: []string{}}}
	// OffsetResets are checked when they can be read (a user may list queues and not them).
	var ors kqv1.OffsetResetList
	if err := c.List(ctx, &ors, in...); err != nil {
		ck.rep.Unverifiable = append(ck.rep.Unverifiable, fmt.Sprintf("OffsetResets not checked: listing them failed: %v", err))
		ors.Items = nil
	}
	ck.rep.Objects = len(kcs.Items) + len(sqs.Items) + len(dlrs.Items) + len(ors.Items)
	ck.listed = make(map[string]client.Object, ck.rep.Objects)
	for i := range kcs.Items {
		ck.listed[KindKafkaCluster+" "+kcs.Items[i].Namespace+"/"+kcs.Items[i].Name] = &kcs.Items[i]
	}
	for i := range sqs.Items {
		ck.listed[KindShareQueue+" "+sqs.Items[i].Namespace+"/"+sqs.Items[i].Name] = &sqs.Items[i]
	}
	for i := range dlrs.Items {
		ck.listed[KindDeadLetterRoute+" "+dlrs.Items[i].Namespace+"/"+dlrs.Items[i].Name] = &dlrs.Items[i]
	}
	for i := range ors.Items {
		ck.listed[KindOffsetReset+" "+ors.Items[i].Namespace+"/"+ors.Items[i].Name] = &ors.Items[i]
	}
	worlds := map[string]*world{}
	get := func(ns, name string) *world {
		key := ns + "/" + name
		if w, ok := worlds[key]; ok {
			return w
		}
		w := &world{key: key, queues: map[string]*kqv1.ShareQueue{}, routes: map[string]*kqv1.DeadLetterRoute{}, resets: map[string]*kqv1.OffsetReset{}}
		worlds[key] = w
		return w
	}
	for i := range kcs.Items {
		kc := &kcs.Items[i]
		get(kc.Namespace, kc.Name).kc = kc
	}
	queues := map[string]*kqv1.ShareQueue{}
	for i := range sqs.Items {
		sq := &sqs.Items[i]
		queues[sq.Namespace+"/"+sq.Name] = sq
		if sq.DeletionTimestamp != nil {
			continue // being deleted: its finalizer may already have removed topic and group
		}
		get(sq.Namespace, sq.Spec.ClusterRef.Name).queues[sq.Namespace+"/"+sq.Name] = sq
	}
	routes := map[string]*kqv1.DeadLetterRoute{}
	for i := range dlrs.Items {
		r := &dlrs.Items[i]
		routes[r.Namespace+"/"+r.Name] = r
		if r.DeletionTimestamp != nil {
			continue
		}
		cluster := r.Status.ClusterName
		if q := queues[r.Namespace+"/"+r.Spec.QueueRef.Name]; cluster == "" && q != nil {
			cluster = q.Spec.ClusterRef.Name
		}
		if cluster == "" {
			if routeClaims(r) {
				ck.unverifiable(KindDeadLetterRoute, r.Namespace, r.Name, "no KafkaCluster resolved (status.clusterName empty and queue %s not found)", r.Spec.QueueRef.Name)
			}
			continue
		}
		get(r.Namespace, cluster).routes[r.Namespace+"/"+r.Name] = r
	}
	for i := range ors.Items {
		or := &ors.Items[i]
		if q := queues[or.Namespace+"/"+or.Spec.QueueRef.Name]; q != nil && q.DeletionTimestamp == nil && resetClaims(or) {
			get(q.Namespace, q.Spec.ClusterRef.Name).resets[or.Namespace+"/"+or.Name] = or
		}
	}
	for _, k := range sortedKeys(worlds) {
		w := worlds[k]
		w.allQueues, w.allRoutes = queues, routes
		if err := ck.checkWorld(ctx, w); err != nil {
			return Report{}, err
		}
	}
	for _, k := range sortedKeys(ck.opts.Bootstrap) {
		if _, ok := worlds[k]; !ok {
			ck.rep.Unverifiable = append(ck.rep.Unverifiable, fmt.Sprintf("Options.Bootstrap (--bootstrap-server) names KafkaCluster %s, which no checked object uses: a typo?", k))
		}
	}
	if err := ck.confirm(ctx); err != nil {
		return Report{}, err
	}
	sort.SliceStable(ck.rep.Findings, func(i, j int) bool {
		a, b := ck.rep.Findings[i], ck.rep.Findings[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace+"/"+a.Name != b.Namespace+"/"+b.Name {
			return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
		}
		return a.Field < b.Field
	})
	sort.Strings(ck.rep.Unverifiable)
	return ck.rep, nil
}

// world is one KafkaCluster and the queues and routes on it.
type world struct {
	key    string
	kc     *kqv1.KafkaCluster // nil when the referenced KafkaCluster does not exist
	queues map[string]*kqv1.ShareQueue
	routes map[string]*kqv1.DeadLetterRoute
	// resets are the Complete OffsetResets of the queues on this cluster (resetClaims).
	resets map[string]*kqv1.OffsetReset
	// allQueues and allRoutes are every object read, by namespace/name.
	allQueues map[string]*kqv1.ShareQueue
	allRoutes map[string]*kqv1.DeadLetterRoute

	info    kafka.ClusterInfo
	topics  map[string]kafka.Topic
	groups  map[string]kafka.ResourceConfigs
	topicsE error // the Metadata request failed
	groupsE error // the DescribeConfigs request failed
	// brokers are the live brokers' configs (read only when a status claims a Clamped value),
	// and brokersE why they could not be read.
	brokers  map[int32]kafka.BrokerConfigs
	brokersE error
	// depth is the queues' depth as Kafka reports it now, by group (read only for queues
	// whose status.depth claims a backlog), and depthE why it could not be read.
	depth  map[string]kafka.QueueDepth
	depthE error
}

type checker struct {
	c    client.Reader
	opts Options
	mu   sync.Mutex
	rep  Report
	// listed is each object as the List read it, by "Kind namespace/name".
	listed map[string]client.Object
}

// claim records one compared claim, and a Finding when it does not hold.
func (ck *checker) claim(kind, ns, name, field, claim, observed string, holds bool) {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	ck.rep.Claims++
	ck.rep.ClaimsByKind[kind]++
	if !holds {
		ck.rep.Findings = append(ck.rep.Findings, Finding{Kind: kind, Namespace: ns, Name: name, Field: field, Claim: claim, Observed: observed})
	}
}

func (ck *checker) unverifiable(kind, ns, name, format string, args ...any) {
	ck.mu.Lock()
	defer ck.mu.Unlock()
	ck.rep.Unverifiable = append(ck.rep.Unverifiable, fmt.Sprintf("%s %s/%s: %s", kind, ns, name, fmt.Sprintf(format, args...)))
}

func isTrue(conds []metav1.Condition, typ string) bool { return meta.IsStatusConditionTrue(conds, typ) }

func clusterClaims(kc *kqv1.KafkaCluster) bool {
	return kc.DeletionTimestamp == nil && (isTrue(kc.Status.Conditions, kqv1.ConditionConnected) || isTrue(kc.Status.Conditions, kqv1.ConditionReady))
}

func queueClaims(sq *kqv1.ShareQueue) bool {
	c := sq.Status.Conditions
	return isTrue(c, kqv1.ConditionTopicReady) || isTrue(c, kqv1.ConditionReady) || isTrue(c, kqv1.ConditionGroupConfigured)
}

func routeClaims(r *kqv1.DeadLetterRoute) bool {
	c := r.Status.Conditions
	return isTrue(c, kqv1.ConditionRouteActive) || isTrue(c, kqv1.ConditionTopicReady) || isTrue(c, kqv1.ConditionReady)
}

// checkWorld reads one cluster's Kafka state in batches and checks its objects against it.
func (ck *checker) checkWorld(ctx context.Context, w *world) error {
	ns, name, _ := strings.Cut(w.key, "/")
	skipAll := func(format string, args ...any) {
		why := fmt.Sprintf(format, args...)
		if w.kc != nil && clusterClaims(w.kc) {
			ck.unverifiable(KindKafkaCluster, ns, name, "%s", why)
		}
		for _, k := range sortedKeys(w.queues) {
			if q := w.queues[k]; queueClaims(q) {
				ck.unverifiable(KindShareQueue, q.Namespace, q.Name, "%s", why)
			}
		}
		for _, k := range sortedKeys(w.routes) {
			if r := w.routes[k]; routeClaims(r) {
				ck.unverifiable(KindDeadLetterRoute, r.Namespace, r.Name, "%s", why)
			}
		}
	}
	if w.kc == nil {
		skipAll("KafkaCluster %s not found", w.key)
		return nil
	}
	cfg, err := connection.KafkaConfig(ctx, ck.c, w.kc)
	if err != nil {
		skipAll("KafkaCluster %s: %v", w.key, err)
		return nil
	}
	if bs, ok := ck.opts.Bootstrap[w.key]; ok {
		cfg.BootstrapServers = bs
	}
	cfg.ClientID = "kqctl-verify"
	cfg.RequestTimeout = ck.opts.Timeout
	cl, err := kafka.NewClient(cfg)
	if err != nil {
		skipAll("KafkaCluster %s: %v", w.key, err)
		return nil
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, ck.opts.Timeout)
	w.info, err = cl.DescribeCluster(rctx)
	cancel()
	if err != nil {
		skipAll("KafkaCluster %s did not answer (bootstrap %s): %v", w.key, strings.Join(cfg.BootstrapServers, ","), err)
		return nil
	}

	// What the statuses name: topics and groups, each read once.
	topics := map[string]bool{}
	groups := map[string]bool{}
	if st := w.kc.Status.ShareStateTopic; clusterClaims(w.kc) && st != nil && st.Exists {
		topics["__share_group_state"] = true
	}
	for _, q := range w.queues {
		if q.Status.TopicName != "" {
			topics[q.Status.TopicName] = true
		}
		if dl := q.Status.DeadLetter; dl != nil && dl.TopicName != "" {
			topics[dl.TopicName] = true
		}
		if q.Status.GroupID != "" && isTrue(q.Status.Conditions, kqv1.ConditionGroupConfigured) {
			groups[q.Status.GroupID] = true
		}
	}
	for _, r := range w.routes {
		if r.Status.TopicName != "" {
			topics[r.Status.TopicName] = true
		}
		if g := ck.routeGroup(r, w); g != "" && isTrue(r.Status.Conditions, kqv1.ConditionRouteActive) {
			groups[g] = true
		}
	}
	w.topics, w.topicsE = readTopics(ctx, cl, ck.opts.Timeout, sortedKeys(topics))
	w.groups, w.groupsE = readGroups(ctx, cl, ck.opts.Timeout, sortedKeys(groups))
	if claimsClamped(w.queues) {
		w.brokers, w.brokersE = readBrokerConfigs(ctx, cl, ck.opts.Timeout, w.info.Brokers)
	}
	w.depth, w.depthE = readDepth(ctx, cl, ck.opts.Timeout, w.queues)

	ck.checkCluster(w)
	var joins []*kqv1.ShareQueue
	for _, k := range sortedKeys(w.queues) {
		if ck.checkQueue(w, w.queues[k]) {
			joins = append(joins, w.queues[k])
		}
	}
	for _, k := range sortedKeys(w.routes) {
		ck.checkRoute(w, w.routes[k])
	}
	ck.checkResets(ctx, cl, w)
	ck.runJoins(ctx, cl, joins)
	return nil
}

// readDepth reads, in one kafka.Depth round, the depth of the queues whose status.depth
// claims a backlog (depthClaims).
func readDepth(ctx context.Context, cl *kafka.Client, timeout time.Duration, queues map[string]*kqv1.ShareQueue) (map[string]kafka.QueueDepth, error) {
	var qs []kafka.DepthQuery
	for _, k := range sortedKeys(queues) {
		sq := queues[k]
		if !depthClaims(sq) {
			continue
		}
		reset := ""
		if e := sq.Status.Effective; e != nil && e.AutoOffsetReset != nil {
			reset = e.AutoOffsetReset.Value
		}
		qs = append(qs, kafka.DepthQuery{Topic: sq.Status.TopicName, Group: sq.Status.GroupID, AutoOffsetReset: reset})
	}
	if len(qs) == 0 {
		return nil, nil
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rep, err := cl.Depth(rctx, qs, nil)
	return rep.Queues, err
}

// depthClaims says whether sq's status.depth claims a complete backlog of waiting records
// (and so the time of the oldest of them).
func depthClaims(sq *kqv1.ShareQueue) bool {
	d := sq.Status.Depth
	return sq.DeletionTimestamp.IsZero() && sq.Status.TopicName != "" && sq.Status.GroupID != "" &&
		d != nil && d.Error == "" && d.Backlog != nil && *d.Backlog > 0 && len(d.UnreadPartitions) == 0
}

// missingAsks and missingPause: a topic Metadata reports unknown is asked about again, up to
// missingAsks times in all, missingPause apart, before it counts as missing. Each Metadata
// goes to one broker, and a broker's metadata trails the controller's: measured on a
// 3-broker 4.4 cluster, topics the operator had created and seen (TopicReady True) were
// UNKNOWN_TOPIC_OR_PARTITION at the broker the check asked (docs/kafka-findings.md).
const (
	missingAsks  = 5
	missingPause = 500 * time.Millisecond
)

func readTopics(ctx context.Context, cl *kafka.Client, timeout time.Duration, names []string) (map[string]kafka.Topic, error) {
	out := make(map[string]kafka.Topic, len(names))
	for ask := 1; len(names) > 0; ask++ {
		for chunk := range slices.Chunk(names, topicsPerRequest) {
			rctx, cancel := context.WithTimeout(ctx, timeout)
			ts, err := cl.DescribeTopics(rctx, chunk...)
			cancel()
			if err != nil {
				return nil, err
			}
			for k, v := range ts {
				out[k] = v
			}
		}
		var missing []string
		for _, n := range names {
			if t, ok := out[n]; ok && t.Err != nil && kafka.IsNotFound(t.Err) {
				missing = append(missing, n)
			}
		}
		if ask == missingAsks || len(missing) == 0 || !kafka.SleepCtx(ctx, missingPause) {
			break
		}
		names = missing
	}
	return out, nil
}

func readGroups(ctx context.Context, cl *kafka.Client, timeout time.Duration, ids []string) (map[string]kafka.ResourceConfigs, error) {
	out := make(map[string]kafka.ResourceConfigs, len(ids))
	for chunk := range slices.Chunk(ids, configsPerRequest) {
		keys := make([]kafka.ResourceKey, len(chunk))
		for i, id := range chunk {
			keys[i] = kafka.ResourceKey{Type: kafka.GroupResource, Name: id}
		}
		rctx, cancel := context.WithTimeout(ctx, timeout)
		rs, err := cl.DescribeConfigs(rctx, keys)
		cancel()
		if err != nil {
			return nil, err
		}
		for k, v := range rs {
			out[k.Name] = v
		}
	}
	return out, nil
}

// sortedKeys lists a map's keys in order, so checks and their output are deterministic.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// topic looks a topic up: its metadata, or why it cannot be compared ("" with ok when it
// was read, missing reports IsNotFound).
func (w *world) topic(name string) (t kafka.Topic, missing bool, why string) {
	if w.topicsE != nil {
		return t, false, fmt.Sprintf("Metadata for topic %s failed: %v", name, w.topicsE)
	}
	t, ok := w.topics[name]
	if !ok {
		return t, false, "topic " + name + " was not read"
	}
	if t.Err != nil {
		if kafka.IsNotFound(t.Err) {
			return t, true, ""
		}
		return t, false, fmt.Sprintf("topic %s: %v", name, t.Err)
	}
	return t, false, ""
}

// groupConfigs returns a group's live configs, or why they cannot be compared.
func (w *world) groupConfigs(id string) (map[string]kafka.ConfigEntry, string) {
	if w.groupsE != nil {
		return nil, fmt.Sprintf("DescribeConfigs for group %s failed: %v", id, w.groupsE)
	}
	rc, ok := w.groups[id]
	if !ok {
		return nil, "group " + id + " configs were not read"
	}
	if rc.Err != nil {
		return nil, fmt.Sprintf("group %s configs: %v", id, rc.Err)
	}
	return rc.Configs, ""
}

func (ck *checker) checkCluster(w *world) {
	kc := w.kc
	if !clusterClaims(kc) {
		return
	}
	ns, name, st, ci := kc.Namespace, kc.Name, &kc.Status, w.info
	claim := func(field, says, has string) { ck.claim(KindKafkaCluster, ns, name, field, says, has, says == has) }
	if st.ClusterID != "" {
		claim("status.clusterID", st.ClusterID, ci.ClusterID)
	}
	claim("status.brokerCount", strconv.Itoa(int(st.BrokerCount)), strconv.Itoa(len(ci.Brokers)))
	if len(st.Brokers) > 0 {
		var says, has []string
		for _, b := range st.Brokers {
			says = append(says, strconv.Itoa(int(b.ID)))
		}
		for _, b := range ci.Brokers {
			has = append(has, strconv.Itoa(int(b.ID)))
		}
		claim("status.brokers", "ids "+strings.Join(says, ","), "ids "+strings.Join(has, ","))
	}
	if len(st.FinalizedFeatures) > 0 {
		var says, has []string
		for _, f := range st.FinalizedFeatures {
			if f.Level > 0 {
				says = append(says, fmt.Sprintf("%s=%d", f.Name, f.Level))
			}
		}
		for _, n := range sortedKeys(ci.Finalized) {
			has = append(has, fmt.Sprintf("%s=%d", n, ci.Finalized[n]))
		}
		sort.Strings(says)
		claim("status.finalizedFeatures", strings.Join(says, ","), strings.Join(has, ","))
	}
	sv := ci.FeatureLevel("share.version")
	claim("status.shareVersion", strconv.Itoa(int(st.ShareVersion)), strconv.Itoa(int(sv)))
	ck.claim(KindKafkaCluster, ns, name, "status.brokerNativeDLQ", strconv.FormatBool(st.BrokerNativeDLQ),
		fmt.Sprintf("%t (share.version %d)", sv >= 2, sv), st.BrokerNativeDLQ == (sv >= 2))
	if isTrue(st.Conditions, kqv1.ConditionShareGroupsEnabled) {
		ck.claim(KindKafkaCluster, ns, name, "conditions[ShareGroupsEnabled]", "True (share.version >= 1)", fmt.Sprintf("share.version %d", sv), sv >= 1)
	}
	if sst := st.ShareStateTopic; sst != nil && sst.Exists {
		t, missing, why := w.topic("__share_group_state")
		switch {
		case why != "":
			ck.unverifiable(KindKafkaCluster, ns, name, "status.shareStateTopic: %s", why)
		case missing:
			ck.claim(KindKafkaCluster, ns, name, "status.shareStateTopic.exists", "true", "no topic __share_group_state", false)
		default:
			ck.claim(KindKafkaCluster, ns, name, "status.shareStateTopic.exists", "true", "true", true)
			if sst.Partitions != 0 {
				claim("status.shareStateTopic.partitions", strconv.Itoa(int(sst.Partitions)), strconv.Itoa(int(t.Partitions)))
			}
			if sst.ReplicationFactor != 0 {
				claim("status.shareStateTopic.replicationFactor", strconv.Itoa(int(sst.ReplicationFactor)), strconv.Itoa(int(t.ReplicationFactor)))
			}
		}
	}
}

// confirm re-reads every object a finding is about: one deleted, or being deleted, since
// the List (its finalizer removes topic and group) no longer makes the claim that was
// compared, and neither does one whose claims were rewritten since (the operator reconciled
// during the check); their findings become unverifiable, with why. A rewrite of only the
// figures that move on their own (claimsOf) keeps the finding: the status still claims it.
func (ck *checker) confirm(ctx context.Context) error {
	why, depthWhy := map[string]string{}, map[string]string{}
	for _, f := range ck.rep.Findings {
		k := f.Kind + " " + f.Namespace + "/" + f.Name
		if _, done := why[k]; done {
			continue
		}
		why[k] = ""
		listed := ck.listed[k]
		fresh := listed.DeepCopyObject().(client.Object)
		err := ck.c.Get(ctx, client.ObjectKeyFromObject(listed), fresh)
		switch {
		case apierrors.IsNotFound(err):
			why[k] = "deleted during the check"
		case err != nil:
			// Not confirmed, but observed: the finding stays (the report is not dropped).
			ck.rep.Unverifiable = append(ck.rep.Unverifiable, fmt.Sprintf("%s: the finding below could not be confirmed against the status now: %v", k, err))
		case fresh.GetDeletionTimestamp() != nil:
			why[k] = "being deleted since the check began"
		case fresh.GetResourceVersion() != listed.GetResourceVersion() && !equality.Semantic.DeepEqual(claimsOf(listed), claimsOf(fresh)):
			why[k] = fmt.Sprintf("status rewritten during the check (resourceVersion %s, now %s): check again", listed.GetResourceVersion(), fresh.GetResourceVersion())
		default:
			// Depth is left out of claimsOf (it moves on its own), but a depth finding is
			// only confirmed by the same status.depth.
			if lq, ok := listed.(*kqv1.ShareQueue); ok && !equality.Semantic.DeepEqual(lq.Status.Depth, fresh.(*kqv1.ShareQueue).Status.Depth) {
				depthWhy[k] = "status.depth rewritten during the check: check again"
			}
		}
	}
	kept := ck.rep.Findings[:0]
	for _, f := range ck.rep.Findings {
		w := why[f.Kind+" "+f.Namespace+"/"+f.Name]
		if w == "" && strings.HasPrefix(f.Field, "status.depth") {
			w = depthWhy[f.Kind+" "+f.Namespace+"/"+f.Name]
		}
		if w != "" {
			ck.rep.Unverifiable = append(ck.rep.Unverifiable, fmt.Sprintf("%s %s/%s: %s: %s (status said %s, Kafka has %s)", f.Kind, f.Namespace, f.Name, f.Field, w, f.Claim, f.Observed))
			continue
		}
		kept = append(kept, f)
	}
	ck.rep.Findings = kept
	return nil
}

// claimsOf is the part of an object that makes claims: its spec references and status
// without the figures that move on their own (a ShareQueue's status.group, status.depth and
// status.capacity) and with each condition reduced to its type and status (messages and
// transition times are rewritten by reconciles that change no claim).
func claimsOf(o client.Object) any {
	conds := func(cs []metav1.Condition) []string {
		out := make([]string, len(cs))
		for i, c := range cs {
			out[i] = c.Type + "=" + string(c.Status)
		}
		return out
	}
	switch o := o.(type) {
	case *kqv1.ShareQueue:
		st := *o.Status.DeepCopy()
		st.Group, st.Depth, st.Capacity, st.Conditions = nil, nil, nil, nil
		return []any{o.Spec.ClusterRef, st, conds(o.Status.Conditions)}
	case *kqv1.KafkaCluster:
		st := *o.Status.DeepCopy()
		st.Conditions = nil
		return []any{st, conds(o.Status.Conditions)}
	case *kqv1.DeadLetterRoute:
		st := *o.Status.DeepCopy()
		st.Conditions = nil
		return []any{o.Spec.QueueRef, st, conds(o.Status.Conditions)}
	}
	return o
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	return meta.FindStatusCondition(conds, typ)
}

// claimsClamped says whether any queue's status shows an effective value with source
// Clamped (only then are the brokers' bounds read).
func claimsClamped(queues map[string]*kqv1.ShareQueue) bool {
	for _, q := range queues {
		if q.Status.Effective == nil {
			continue
		}
		for _, f := range effectiveFields(q.Status.Effective) {
			if f.v != nil && f.v.Source == kqv1.SourceClamped {
				return true
			}
		}
	}
	return false
}

// readBrokerConfigs reads every live broker's configs (one DescribeConfigs each).
func readBrokerConfigs(ctx context.Context, cl *kafka.Client, timeout time.Duration, brokers []kafka.Broker) (map[int32]kafka.BrokerConfigs, error) {
	out := make(map[int32]kafka.BrokerConfigs, len(brokers))
	for _, b := range brokers {
		rctx, cancel := context.WithTimeout(ctx, timeout)
		bc, err := cl.DescribeBrokerConfigs(rctx, b.ID)
		cancel()
		if err != nil {
			return nil, err
		}
		out[b.ID] = bc
	}
	return out, nil
}

// bounds returns the brokers' group.share.min.<suffix> and group.share.max.<suffix> (nil
// when the brokers do not report one), or why they cannot be compared: not read, or not the
// same on every live broker.
func (w *world) bounds(suffix string) (lo, hi *int64, why string) {
	if w.brokersE != nil {
		return nil, nil, fmt.Sprintf("the brokers' configs could not be read: %v", w.brokersE)
	}
	if len(w.brokers) == 0 {
		return nil, nil, "no live broker's configs were read"
	}
	first := true
	for _, id := range slices.Sorted(maps.Keys(w.brokers)) {
		bc := w.brokers[id]
		var l, h *int64
		if n, ok := bc.Int("group.share.min." + suffix); ok {
			l = &n
		}
		if n, ok := bc.Int("group.share.max." + suffix); ok {
			h = &n
		}
		if first {
			lo, hi, first = l, h, false
			continue
		}
		if boundText(l) != boundText(lo) || boundText(h) != boundText(hi) {
			return nil, nil, fmt.Sprintf("the brokers disagree on group.share.min/max.%s (broker %d: %s..%s, another: %s..%s)", suffix, id, boundText(l), boundText(h), boundText(lo), boundText(hi))
		}
	}
	return lo, hi, ""
}
