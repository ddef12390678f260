package controllers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// Preview is what the operator would do for a ShareQueue manifest, computed with the same
// pure plan the reconciler uses, from the KafkaCluster's status and live Kafka state.
type Preview struct {
	Queue string
	// Changes are the Kafka writes the operator would make, one line each.
	Changes []string
	// Conditions are the TopicReady, GroupConfigured and ConfigValid verdicts.
	Conditions map[string]string
	Effective  kqv1.EffectiveDelivery
	Capacity   *kqv1.QueueCapacity
	// Conflict names another ShareQueue that owns the topic or group, the DeadLetterRoute
	// whose dead-letter topic the queue's topic is, a consumer, classic or streams group
	// holding the group id, or the Strimzi KafkaTopic managing the topic, if any. With another owner nothing is written; under Strimzi the group's writes
	// stay in Changes and only the topic's are dropped, as the reconciler does.
	Conflict string
	// Refused are the brokers' refusals of the planned writes, sent with ValidateOnly (the
	// TopicReady / GroupConfigured KafkaRejected messages); empty when they would succeed.
	Refused []string
	// Unchecked says why some writes or checks could not be made (a retriable Kafka error, or
	// no permission to list Strimzi KafkaTopics).
	Unchecked string
}

// RoutePreview is what the operator would do for a DeadLetterRoute manifest.
type RoutePreview struct {
	Route string
	// Queue is the source ShareQueue (namespace/name).
	Queue string
	// Mode is the mode the route resolves to on its cluster (spec.mode Auto resolved), empty
	// when spec.mode cannot work there.
	Mode kqv1.DeadLetterMode
	// TopicName is the dead-letter topic.
	TopicName string
	// Changes are the route's own Kafka writes; the queue's reserved attempt (Republisher
	// mode) is the queue's change and is listed under the ShareQueue.
	Changes []string
	// QueueChanges are the writes the reconcile of a live queue not in the run makes once this
	// route exists (its reserved attempt, in Republisher mode).
	QueueChanges []string
	// Conditions are the TopicReady and RouteActive verdicts once the route's and its queue's
	// planned writes are made.
	Conditions map[string]string
	// Conflict names the route that already owns the queue (a queue has one route).
	Conflict  string
	Refused   []string
	Unchecked string
}

// ClusterPreview is what the operator would report and do for a KafkaCluster manifest, from
// one probe of its brokers.
type ClusterPreview struct {
	Cluster string
	// Changes are the writes its policies lead to (share.version finalized,
	// __share_group_state reassigned or its min.insync.replicas set).
	Changes []string
	// Conditions are the Connected, ShareGroupsEnabled and ShareStateReplicated verdicts.
	Conditions map[string]string
	// Status is the status the probe gives, with share.version at the level being finalized;
	// the queues and routes of this run on this cluster are planned against it.
	Status kqv1.KafkaClusterStatus
}

// Previewer plans the manifests of one kqctl plan run (PreviewCluster, Preview, PreviewRoute),
// with one Kafka client per KafkaCluster for all of them; Close releases the clients. It
// reads the apiserver once per kind (ShareQueues, DeadLetterRoutes, Strimzi KafkaTopics, in
// all namespaces, or the manifest's namespace when the caller may not list them all, which is
// then reported as not checked) with the caller's own rights, and remembers what the run
// planned, so later manifests see earlier ones: a queue sees its route, a route its queue,
// both their new KafkaCluster and its Secrets. Tell it about the run's manifests first
// (ExpectQueue, ExpectRoute, AddSecret, AddKafkaTopic, Refused) so ownership among new
// objects is decided as the operator will decide it.
type Previewer struct {
	// Client reads the KafkaClusters, Secrets, ShareQueues, DeadLetterRoutes and KafkaTopics.
	Client  client.Client
	pool    *kafka.Pool
	strimzi *strimziTopics
	// secrets are the Secret manifests of this run, by namespace/name, read before the
	// apiserver's (a first install's credentials).
	secrets map[string]*corev1.Secret
	// refused are the run's manifests the apiserver refused ("Kind namespace/name").
	refused map[string]bool
	// expected are the run's new ShareQueues (ExpectQueue), for ownership among them.
	expected []*kqv1.ShareQueue
	// clusters are the KafkaCluster manifests planned in this run, with their probed status.
	clusters map[string]*kqv1.KafkaCluster
	// failed is the first connection or read failure of each KafkaCluster in this run: later
	// manifests on it fail at once with that error instead of waiting out the timeout again.
	failed map[string]error
	// queues are the ShareQueues planned in this run, by namespace/name; unplanned says why
	// a queue of the run has no plan (its conflict, or the error).
	queues    map[string]*plannedQueue
	unplanned map[string]unplannedQueue
	// routes are the DeadLetterRoute manifests of this run (ExpectRoute), by the queue they
	// name (namespace/name).
	routes map[string][]*kqv1.DeadLetterRoute

	// groupTypes are the group ids of another group type per KafkaCluster (clusterKey), and
	// asked the ids already asked about: one ListGroups per cluster for the run's queues.
	groupTypes map[string]map[string]string
	asked      map[string]map[string]bool
	// strimziChecked and strimziFound remember the KafkaTopic CRD lookup for the run.
	strimziChecked, strimziFound bool

	liveQueues map[string][]kqv1.ShareQueue // by namespace; "" for all namespaces
	liveRoutes map[string][]kqv1.DeadLetterRoute
	// narrowed notes the kinds listed in one namespace only (no right to list them all).
	narrowed map[string]string
}

// unplannedQueue is why a queue of the run has no plan.
type unplannedQueue struct {
	conflict string // another resource owns its topic or group
	err      error
}

// plannedQueue is a ShareQueue planned in this run.
type plannedQueue struct {
	sq   *kqv1.ShareQueue
	plan queuePlan
}

// ErrClusterFailedBefore marks an error that is a KafkaCluster's earlier failure in the same
// run, repeated without contacting the brokers again.
var ErrClusterFailedBefore = errors.New("not retried in this run")

// NewPreviewer returns a Previewer reading through c.
func NewPreviewer(c client.Client) *Previewer {
	return &Previewer{Client: c, pool: kafka.NewPool(), strimzi: newUncachedStrimziTopics(c), secrets: map[string]*corev1.Secret{},
		refused: map[string]bool{}, clusters: map[string]*kqv1.KafkaCluster{}, failed: map[string]error{}, queues: map[string]*plannedQueue{},
		unplanned: map[string]unplannedQueue{}, routes: map[string][]*kqv1.DeadLetterRoute{}, liveQueues: map[string][]kqv1.ShareQueue{},
		liveRoutes: map[string][]kqv1.DeadLetterRoute{}, narrowed: map[string]string{}, groupTypes: map[string]map[string]string{}, asked: map[string]map[string]bool{}}
}

// Close closes the Kafka clients.
func (p *Previewer) Close() { p.pool.Close() }

// PreviewQueue plans one manifest with a Previewer of its own (Previewer.Preview).
func PreviewQueue(ctx context.Context, c client.Client, sq *kqv1.ShareQueue) (*Preview, error) {
	p := NewPreviewer(c)
	defer p.Close()
	return p.Preview(ctx, sq)
}

// ExpectQueue tells the Previewer that sq is among the manifests, so ownership among the
// run's new queues is decided as the operator will: created in the same second (one kubectl
// apply), the first by namespace/name owns a topic or group they share. Call it for every
// queue before planning.
func (p *Previewer) ExpectQueue(sq *kqv1.ShareQueue) {
	sq = sq.DeepCopy()
	if sq.Namespace == "" {
		sq.Namespace = "default"
	}
	// Created together: no timestamp yet (a dry run's is not real).
	sq.CreationTimestamp, sq.UID = metav1.Time{}, ""
	p.expected = append(p.expected, sq)
}

// AddSecret makes a Secret manifest of the run readable to PreviewCluster before the
// apiserver's (a first install creates the cluster's credentials with it).
func (p *Previewer) AddSecret(s *corev1.Secret) {
	s = s.DeepCopy()
	if s.Namespace == "" {
		s.Namespace = "default"
	}
	for k, v := range s.StringData {
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		s.Data[k] = []byte(v)
	}
	p.secrets[s.Namespace+"/"+s.Name] = s
}

// AddKafkaTopic counts a Strimzi KafkaTopic manifest of the run among the live ones, so a
// queue naming its topic is planned in Conflict as it will be once both are applied.
func (p *Previewer) AddKafkaTopic(kt *unstructured.Unstructured) {
	p.strimzi.extra = append(p.strimzi.extra, *kt.DeepCopy())
}

// Refused records a manifest of the run that the apiserver refused (kind, namespace, name),
// so what names it is told why it is missing.
func (p *Previewer) Refused(kind, ns, name string) { p.refused[kind+" "+ns+"/"+name] = true }

// ExpectRoute tells the Previewer that dlr is among the manifests, so its queue is planned
// with the route in place (Republisher mode reserves an attempt). Call it for every route
// before planning the queues.
func (p *Previewer) ExpectRoute(dlr *kqv1.DeadLetterRoute) {
	if dlr.Namespace == "" {
		dlr.Namespace = "default"
	}
	k := dlr.Namespace + "/" + dlr.Spec.QueueRef.Name
	dlr = dlr.DeepCopy()
	dlr.CreationTimestamp, dlr.UID, dlr.Status = metav1.Time{}, "", kqv1.DeadLetterRouteStatus{}
	p.routes[k] = append(p.routes[k], dlr)
}

// PreviewCluster probes the brokers of a KafkaCluster manifest (Secrets read from the
// apiserver) and plans it as the KafkaCluster reconciler would; the queues and routes planned
// after it in this run use the status it gives, so a new cluster and its queues can be
// planned together. An error is a Secret that cannot be read or brokers that cannot be
// reached.
func (p *Previewer) PreviewCluster(ctx context.Context, kc *kqv1.KafkaCluster) (*ClusterPreview, error) {
	if kc.Namespace == "" {
		kc.Namespace = "default"
	}
	key := clusterKey(kc)
	if err := p.failed[key]; err != nil {
		return nil, err
	}
	cl, err := clientFor(ctx, secretOverlay{p.Client, p.secrets}, p.pool, kc)
	if err != nil {
		return nil, p.fail(key, err)
	}
	pr, err := (&KafkaClusterReconciler{}).probe(ctx, cl)
	if err != nil {
		err = withAuthError(cl, err)
		return nil, p.fail(key, fmt.Errorf("cannot reach the cluster at %v: %w", kc.Spec.BootstrapServers, err))
	}
	st, conds, act := planCluster(kc, pr)
	out := &ClusterPreview{Cluster: key, Conditions: map[string]string{}}
	if act.FinalizeShareVersion > 0 {
		out.Changes = append(out.Changes, fmt.Sprintf("finalize share.version %d -> %d (featurePolicy Finalize)", st.ShareVersion, act.FinalizeShareVersion))
		// Queues and routes are planned against the level the cluster will have.
		st.ShareVersion = int32(act.FinalizeShareVersion)
		st.BrokerNativeDLQ = st.ShareVersion >= 2
	}
	if len(act.Reassign) > 0 {
		parts := make([]int32, 0, len(act.Reassign))
		for part := range act.Reassign {
			parts = append(parts, part)
		}
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		for _, part := range parts {
			out.Changes = append(out.Changes, fmt.Sprintf("reassign %s partition %d to replicas %v (shareStateTopic.policy Manage)", ShareStateTopic, part, act.Reassign[part]))
		}
	}
	if act.SetStateMinISR != nil {
		out.Changes = append(out.Changes, fmt.Sprintf("set %s min.insync.replicas=%d (shareStateTopic.policy Manage)", ShareStateTopic, *act.SetStateMinISR))
	}
	for typ, in := range map[string]condInput{kqv1.ConditionConnected: conds.Connected, kqv1.ConditionShareGroupsEnabled: conds.ShareGroups, kqv1.ConditionShareStateReplicated: conds.ShareState} {
		if in.Status != "" {
			out.Conditions[typ] = fmt.Sprintf("%s/%s: %s", in.Status, in.Reason, in.Message)
		}
	}
	planned := kc.DeepCopy()
	planned.Status = st
	planned.Status.Conditions = []metav1.Condition{{Type: kqv1.ConditionConnected, Status: metav1.ConditionTrue}}
	p.clusters[key] = planned
	out.Status = st
	return out, nil
}

// fail records err as cluster key's failure in this run and returns it.
func (p *Previewer) fail(key string, err error) error {
	p.failed[key] = fmt.Errorf("KafkaCluster %s failed earlier in this run: %w (%w)", key, err, ErrClusterFailedBefore)
	return err
}

// secretOverlay reads the run's Secret manifests before the apiserver's.
type secretOverlay struct {
	client.Reader
	secrets map[string]*corev1.Secret
}

func (o secretOverlay) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if s, ok := obj.(*corev1.Secret); ok {
		if m := o.secrets[key.Namespace+"/"+key.Name]; m != nil {
			m.DeepCopyInto(s)
			return nil
		}
	}
	return o.Reader.Get(ctx, key, obj, opts...)
}

// cluster returns KafkaCluster ns/name, as planned earlier in this run or from the apiserver,
// and its Kafka client; a cluster that failed earlier in this run fails again at once.
func (p *Previewer) cluster(ctx context.Context, ns, name string) (*kqv1.KafkaCluster, *kafka.Client, error) {
	key := ns + "/" + name
	if err := p.failed[key]; err != nil {
		return nil, nil, err
	}
	kc := p.clusters[key]
	if kc == nil {
		kc = &kqv1.KafkaCluster{}
		if err := p.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, kc); err != nil {
			if apierrors.IsNotFound(err) {
				if p.refused["KafkaCluster "+key] {
					return nil, nil, fmt.Errorf("KafkaCluster %s is in these manifests but the apiserver refused it (above)", key)
				}
				return nil, nil, fmt.Errorf("KafkaCluster %s does not exist and is not in these manifests", key)
			}
			return nil, nil, fmt.Errorf("reading KafkaCluster %s: %w", key, err)
		}
	}
	cl, err := pooledClientFor(ctx, secretOverlay{p.Client, p.secrets}, p.pool, kc)
	if err != nil {
		return nil, nil, p.fail(key, fmt.Errorf("KafkaCluster %s: %w", key, err))
	}
	return kc, cl, nil
}

// listQueues returns the live ShareQueues the caller can list: in all namespaces, else in ns.
// Each list is read once per run.
func (p *Previewer) listQueues(ctx context.Context, ns string) ([]kqv1.ShareQueue, error) {
	return listOnce(ctx, p.Client, p.liveQueues, p.narrowed, ns, "ShareQueues", &kqv1.ShareQueueList{}, func(l *kqv1.ShareQueueList) []kqv1.ShareQueue { return l.Items })
}

// listRoutes is listQueues for DeadLetterRoutes.
func (p *Previewer) listRoutes(ctx context.Context, ns string) ([]kqv1.DeadLetterRoute, error) {
	return listOnce(ctx, p.Client, p.liveRoutes, p.narrowed, ns, "DeadLetterRoutes", &kqv1.DeadLetterRouteList{}, func(l *kqv1.DeadLetterRouteList) []kqv1.DeadLetterRoute { return l.Items })
}

// narrowedNote says which ownership checks saw one namespace only ("" when none).
func (p *Previewer) narrowedNote(ns string) string {
	var kinds []string
	for _, what := range []string{"ShareQueues", "DeadLetterRoutes"} {
		if _, ok := p.narrowed[what+"\x00"+ns]; ok {
			kinds = append(kinds, what)
		}
	}
	if len(kinds) == 0 {
		return ""
	}
	return fmt.Sprintf("you may not list %s in all namespaces: ownership was checked against those in namespace %s only", strings.Join(kinds, " and "), ns)
}

// listOnce lists list's kind in all namespaces, or in ns when that is Forbidden (noted in
// narrowed[what]), keeping the items in memo (key "" for all namespaces) so each is read once
// per run.
func listOnce[L client.ObjectList, T any](ctx context.Context, c client.Reader, memo map[string][]T, narrowed map[string]string, ns, what string, list L, items func(L) []T) ([]T, error) {
	if all, ok := memo[""]; ok {
		return all, nil
	}
	if in, ok := memo[ns]; ok {
		return in, nil
	}
	err := c.List(ctx, list)
	key := ""
	if apierrors.IsForbidden(err) {
		key, err = ns, c.List(ctx, list, client.InNamespace(ns))
		narrowed[what+"\x00"+ns] = ns
	}
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", what, err)
	}
	memo[key] = items(list)
	return memo[key], nil
}

// Preview plans sq (a manifest, or the object a server-side dry run returned; its live
// status, if the object exists, is used for the pinned topic id and managed configs) without
// writing anything anywhere: the planned Kafka writes are sent to the brokers with
// ValidateOnly, and a refusal is in Refused and in the TopicReady / GroupConfigured verdicts,
// as the reconciler reports them in Plan mode. The ownership checks are the reconciler's:
// another ShareQueue naming the topic or group, a DeadLetterRoute whose dead-letter topic it
// is, a Strimzi KafkaTopic managing the topic.
func (p *Previewer) Preview(ctx context.Context, sq *kqv1.ShareQueue) (*Preview, error) {
	c := p.Client
	if sq.Namespace == "" {
		sq.Namespace = "default"
	}
	var live kqv1.ShareQueue
	if err := c.Get(ctx, client.ObjectKeyFromObject(sq), &live); err == nil {
		sq.Status = live.Status
		sq.UID, sq.CreationTimestamp = live.UID, live.CreationTimestamp
	} else {
		// Not created yet (a dry run's uid, timestamp and status are not real): younger than
		// any existing queue, with nothing observed.
		sq.UID, sq.CreationTimestamp, sq.Status = "", metav1.Time{}, kqv1.ShareQueueStatus{}
	}
	queueKey := sq.Namespace + "/" + sq.Name
	out, err := p.preview(ctx, sq)
	switch {
	case err != nil:
		p.unplanned[queueKey] = unplannedQueue{err: err}
	case out.Conflict != "" && p.queues[queueKey] == nil:
		p.unplanned[queueKey] = unplannedQueue{conflict: out.Conflict}
	}
	return out, err
}

// preview is Preview once the live object was read.
func (p *Previewer) preview(ctx context.Context, sq *kqv1.ShareQueue) (*Preview, error) {
	c := p.Client
	kc, cl, err := p.cluster(ctx, sq.Namespace, sq.Spec.ClusterRef.Name)
	if err != nil {
		return nil, fmt.Errorf("spec.clusterRef.name %q: %w", sq.Spec.ClusterRef.Name, err)
	}
	sq.Status.TopicName, sq.Status.GroupID = sq.KafkaTopicName(), sq.KafkaGroupID()
	r := &ShareQueueReconciler{Client: c}
	out := &Preview{Queue: sq.Namespace + "/" + sq.Name, Conditions: map[string]string{}}
	all, err := p.listQueues(ctx, sq.Namespace)
	if err != nil {
		return nil, err
	}
	others := claimantsIn(ctx, c, sq, kc, all)
	if sq.CreationTimestamp.IsZero() && len(others) > 0 {
		out.Conflict = conflictMessage(&others[0]) // a new queue is younger than any existing one
	} else if owner := ownerOf(sq, others); owner != nil {
		out.Conflict = conflictMessage(owner)
	}
	// Among the run's new queues naming the same topic or group, created together (in the
	// same second, as one kubectl apply does), the first by namespace/name owns it (older()).
	if out.Conflict == "" && sq.CreationTimestamp.IsZero() {
		liveKeys := map[string]bool{}
		for _, o := range all {
			liveKeys[o.Namespace+"/"+o.Name] = true
		}
		for _, k := range claimKeys {
			for _, o := range p.expected {
				if key := o.Namespace + "/" + o.Name; key == out.Queue || liveKeys[key] || k.of(sq) == "" || k.of(o) != k.of(sq) || !p.sameClusterAs(ctx, kc, o) || !older(o, sq) {
					continue
				}
				if out.Conflict == "" {
					out.Conflict = fmt.Sprintf("%s on this Kafka cluster is also named by ShareQueue %s/%s in these manifests; applied together (created in the same second) the operator gives it to the first by namespace/name, that one, and this one makes no Kafka change",
						k.claimed(sq, o), o.Namespace, o.Name)
				}
			}
		}
	}
	if out.Conflict == "" {
		routes, err := p.listRoutes(ctx, sq.Namespace)
		if err != nil {
			return nil, err
		}
		if route := deadLetterTopicOwnerIn(ctx, c, kc, sq.Status.TopicName, routes); route != "" {
			out.Conflict = fmt.Sprintf("topic %s on this Kafka cluster is the dead-letter topic of %s; this ShareQueue makes no Kafka change until it is recreated naming another topic (spec.topic.name cannot be changed in place)", sq.Status.TopicName, route)
		}
	}
	if out.Conflict == "" {
		if typed, err := p.groupTypeConflict(ctx, kc, cl, sq.Status.GroupID, "this ShareQueue"); err != nil {
			out.Unchecked = joinNote(out.Unchecked, fmt.Sprintf("the type of group %s not checked: %v", sq.Status.GroupID, withAuthError(cl, err)))
		} else if typed != "" {
			out.Conflict = typed
		}
	}
	strimziOwned := ""
	if out.Conflict == "" {
		if _, err := p.strimziInstalled(); err != nil {
			out.Unchecked = fmt.Sprintf("Strimzi KafkaTopic ownership not checked: %v", err)
		} else if claim, err := p.strimzi.owner(ctx, sq.Status.TopicName, kc); err != nil {
			out.Unchecked = fmt.Sprintf("Strimzi KafkaTopic ownership not checked: %v", err)
		} else if claim != nil {
			strimziOwned = strimziConflictMessage(claim, sq.Status.TopicName, sq.Status.GroupID)
			out.Conflict = strimziOwned
			strimziConflictStatus(&sq.Status, strimziOwned, sq.Generation)
		}
	}
	obs, _, err := r.observe(ctx, cl, sq, kc.Status)
	if err != nil {
		err = withAuthError(cl, err)
		return nil, p.fail(clusterKey(kc), fmt.Errorf("KafkaCluster %s: reading topic %s / group %s: %w", clusterKey(kc), sq.Status.TopicName, sq.Status.GroupID, err))
	}
	if obs.ReserveLastAttempt, err = p.republisherRoute(ctx, sq, kc); err != nil {
		return nil, err
	}
	plan := planQueue(sq, obs)
	if strimziOwned != "" {
		yieldTopic(&plan, obs, strimziOwned)
	}
	if out.Conflict == "" || strimziOwned != "" {
		// The same check as the Plan mode's: the brokers validate the writes.
		v := validatePlan(ctx, cl, &plan)
		if v.Unchecked != nil {
			out.Unchecked = joinNote(out.Unchecked, v.Unchecked.Error())
		}
		res := applyResult{topicID: obs.Topic.ID, partitions: plan.Partitions, rf: obs.Topic.ReplicationFactor, topicErr: v.TopicErr, groupErr: v.GroupErr}
		var st kqv1.ShareQueueStatus
		st.TopicName, st.GroupID = sq.Status.TopicName, sq.Status.GroupID
		st.Conditions = append(st.Conditions, sq.Status.Conditions...)
		queueStatus(&st, sq.Generation, kqv1.ReconcilePlan, &plan, res, nil)
		for _, typ := range []string{kqv1.ConditionTopicReady, kqv1.ConditionGroupConfigured} {
			if cond := findCondition(st.Conditions, typ); cond != nil && cond.Reason == kqv1.ReasonKafkaRejected {
				out.Refused = append(out.Refused, cond.Message)
			}
		}
		// The plan's verdicts describe the queue once the writes are made, which is what a
		// preview shows; only the brokers' refusals replace them.
		for typ, in := range map[string]*condInput{kqv1.ConditionTopicReady: &plan.TopicReady, kqv1.ConditionGroupConfigured: &plan.GroupConfig, kqv1.ConditionConfigValid: &plan.ConfigValid} {
			if cond := findCondition(st.Conditions, typ); cond != nil && cond.Reason == kqv1.ReasonKafkaRejected {
				*in = condInput{cond.Status, cond.Reason, cond.Message}
			}
		}
		p.queues[out.Queue] = &plannedQueue{sq: sq, plan: plan}
	}
	if note := p.narrowedNote(sq.Namespace); note != "" {
		out.Unchecked = joinNote(out.Unchecked, note)
	}
	out.Changes = plan.Changes()
	if out.Conflict != "" && strimziOwned == "" {
		// Owned elsewhere: the reconciler writes nothing (conflictStatus).
		out.Changes = nil
		plan.TopicReady = condInput{metav1.ConditionFalse, kqv1.ReasonConflict, out.Conflict}
		plan.GroupConfig = plan.TopicReady
	}
	for typ, in := range map[string]condInput{kqv1.ConditionTopicReady: plan.TopicReady, kqv1.ConditionGroupConfigured: plan.GroupConfig, kqv1.ConditionConfigValid: plan.ConfigValid} {
		out.Conditions[typ] = fmt.Sprintf("%s/%s: %s", in.Status, in.Reason, in.Message)
	}
	out.Effective, out.Capacity = plan.Effective, plan.Capacity
	return out, nil
}

// groupTypeConflict is the reconcilers' groupTypeConflict with one ListGroups per cluster for
// the run: the first asks about the group ids of every queue of the run on kc as well.
func (p *Previewer) groupTypeConflict(ctx context.Context, kc *kqv1.KafkaCluster, cl *kafka.Client, groupID, who string) (string, error) {
	key := clusterKey(kc)
	if !p.asked[key][groupID] {
		ids := []string{groupID}
		if p.asked[key] == nil {
			for _, o := range p.expected {
				if o.Namespace == kc.Namespace && o.Spec.ClusterRef.Name == kc.Name {
					ids = append(ids, o.KafkaGroupID())
				}
			}
		}
		types, err := cl.OtherGroupTypes(ctx, ids...)
		if err != nil {
			return "", err
		}
		if p.asked[key] == nil {
			p.asked[key], p.groupTypes[key] = map[string]bool{}, map[string]string{}
		}
		for _, id := range ids {
			p.asked[key][id] = true
			if typ := types[id]; typ != "" {
				p.groupTypes[key][id] = typ
			}
		}
	}
	return groupTypeMessage(groupID, p.groupTypes[key][groupID], who), nil
}

// strimziInstalled looks the KafkaTopic CRD up once per run (a missing one would otherwise
// cost a discovery request per queue).
func (p *Previewer) strimziInstalled() (bool, error) {
	if p.strimziChecked {
		return p.strimziFound, nil
	}
	found, err := p.strimzi.detect()
	if err == nil {
		p.strimziChecked, p.strimziFound = true, found
	}
	return found, err
}

// sameClusterAs reports whether queue o's KafkaCluster is kc's Kafka cluster: the same
// object, or one with the same cluster id (planned in this run or live).
func (p *Previewer) sameClusterAs(ctx context.Context, kc *kqv1.KafkaCluster, o *kqv1.ShareQueue) bool {
	if o.Namespace == kc.Namespace && o.Spec.ClusterRef.Name == kc.Name {
		return true
	}
	if other := p.clusters[o.Namespace+"/"+o.Spec.ClusterRef.Name]; other != nil {
		return kc.Status.ClusterID != "" && other.Status.ClusterID == kc.Status.ClusterID
	}
	return sameKafka(ctx, p.Client, kc, o.Namespace, o.Spec.ClusterRef.Name)
}

// owningRoute is the route that will own queue ns/name once the run is applied: the live
// owner (kqv1.OwningRoute), else the owner among the run's new routes (created together, the
// first by name); nil when none names it.
func (p *Previewer) owningRoute(ctx context.Context, ns, name string) (*kqv1.DeadLetterRoute, error) {
	live, err := p.listRoutes(ctx, ns)
	if err != nil {
		return nil, err
	}
	var naming []kqv1.DeadLetterRoute
	for _, r := range live {
		if r.Namespace == ns && r.Spec.QueueRef.Name == name {
			naming = append(naming, r)
		}
	}
	if owner := kqv1.OwningRoute(naming); owner != nil {
		return owner, nil
	}
	for _, r := range p.routes[ns+"/"+name] {
		naming = append(naming, *r)
	}
	return kqv1.OwningRoute(naming), nil
}

// republisherRoute reports whether sq's delivery limit reserves the republisher's attempt:
// the route that will own it resolves to Republisher mode on kc.
func (p *Previewer) republisherRoute(ctx context.Context, sq *kqv1.ShareQueue, kc *kqv1.KafkaCluster) (bool, error) {
	owner, err := p.owningRoute(ctx, sq.Namespace, sq.Name)
	if err != nil || owner == nil {
		return false, err
	}
	mode, _ := resolveDeadLetterMode(owner.Spec.Mode, kc.Status)
	return mode == kqv1.DeadLetterModeRepublisher, nil
}

// PreviewRoute plans a DeadLetterRoute manifest (or the object a server-side dry run
// returned) as the route reconciler would, after the writes planned for its queue in this
// run: the route's topic and group writes are sent to the brokers with ValidateOnly. An
// error is a queue or KafkaCluster that neither exists nor is in the run, or Kafka that
// cannot be read.
func (p *Previewer) PreviewRoute(ctx context.Context, dlr *kqv1.DeadLetterRoute) (*RoutePreview, error) {
	c := p.Client
	if dlr.Namespace == "" {
		dlr.Namespace = "default"
	}
	var live kqv1.DeadLetterRoute
	if err := c.Get(ctx, client.ObjectKeyFromObject(dlr), &live); err == nil {
		dlr.Status = live.Status
		dlr.UID, dlr.CreationTimestamp = live.UID, live.CreationTimestamp
	} else {
		dlr.UID, dlr.CreationTimestamp, dlr.Status = "", metav1.Time{}, kqv1.DeadLetterRouteStatus{}
	}
	queueKey := dlr.Namespace + "/" + dlr.Spec.QueueRef.Name
	out := &RoutePreview{Route: dlr.Namespace + "/" + dlr.Name, Queue: queueKey, Conditions: map[string]string{}}

	// One route per queue: the live owner keeps it; among new routes created together, the
	// first by name (kqv1.OwningRoute).
	owner, err := p.owningRoute(ctx, dlr.Namespace, dlr.Spec.QueueRef.Name)
	if err != nil {
		return nil, err
	}
	if owner != nil && owner.Name != dlr.Name {
		if owner.CreationTimestamp.IsZero() {
			out.Conflict = fmt.Sprintf("ShareQueue %s is also named by DeadLetterRoute %s in these manifests; a queue has one route: applied together (created in the same second) the first by name owns it, that one, and this one writes nothing", dlr.Spec.QueueRef.Name, owner.Name)
		} else {
			out.Conflict = fmt.Sprintf("ShareQueue %s already has DeadLetterRoute %s (created %s); a queue has one route, so this one writes nothing", dlr.Spec.QueueRef.Name, owner.Name, owner.CreationTimestamp.UTC().Format("2006-01-02T15:04:05Z"))
		}
	}

	sq, queuePlanned, err := p.routeQueue(ctx, dlr, out)
	if err != nil {
		return nil, err
	}
	if sq == nil { // the queue does not own its topic or group: out.Conflict says so
		return out, nil
	}
	kc, cl, err := p.cluster(ctx, sq.Namespace, sq.Spec.ClusterRef.Name)
	if err != nil {
		return nil, fmt.Errorf("ShareQueue %s spec.clusterRef.name %q: %w", queueKey, sq.Spec.ClusterRef.Name, err)
	}
	attempts := reservableAttempts(sq, kc.Status)
	obs := routeObservation{Cluster: kc.Status, QueueTopic: sq.KafkaTopicName(), GroupID: sq.KafkaGroupID(), QueueAttempts: attempts}
	topicName := dlr.KafkaTopicName(obs.QueueTopic, kc.Status)
	if out.Conflict == "" {
		if typed, err := p.groupTypeConflict(ctx, kc, cl, obs.GroupID, "this DeadLetterRoute"); err != nil {
			out.Unchecked = joinNote(out.Unchecked, fmt.Sprintf("the type of group %s not checked: %v", obs.GroupID, withAuthError(cl, err)))
		} else if typed != "" {
			out.Conflict = typed
		}
	}
	if out.Conflict != "" {
		out.TopicName = topicName
		return out, nil
	}
	queues, err := p.listQueues(ctx, dlr.Namespace)
	if err != nil {
		return nil, err
	}
	obs.TopicOwner = queueTopicOwnerIn(ctx, c, kc, topicName, queues)
	for k, pq := range p.queues {
		if obs.TopicOwner == "" && k != queueKey && pq.sq.KafkaTopicName() == topicName && sameKafka(ctx, c, kc, pq.sq.Namespace, pq.sq.Spec.ClusterRef.Name) {
			obs.TopicOwner = "ShareQueue " + k + " (in these manifests)"
		}
	}
	livetg, err := readTopicAndGroup(ctx, cl, topicName, obs.GroupID)
	if err != nil {
		err = withAuthError(cl, err)
		return nil, p.fail(clusterKey(kc), fmt.Errorf("KafkaCluster %s: reading topic %s / group %s: %w", clusterKey(kc), topicName, obs.GroupID, err))
	}
	obs.Topic, obs.TopicConfigs, obs.GroupConfigs = livetg.Topic, livetg.TopicConfigs, livetg.GroupConfigs
	if queuePlanned != nil {
		// The route acts after its queue's planned writes: the group's configs as they will be.
		obs.GroupConfigs = withAlters(obs.GroupConfigs, queuePlanned.GroupConfigs, kafka.ConfigSourceGroup)
	}
	plan := planRoute(dlr, obs)
	out.Mode, out.TopicName, out.Changes = plan.Mode, plan.TopicName, plan.Changes()
	topicReady, routeActive := plan.TopicReady, plan.RouteActive
	if !plan.Blocked && !plan.Empty() {
		topicReady, routeActive = validateRoutePlan(ctx, cl, plan, obs.GroupID, out)
	}
	for typ, in := range map[string]condInput{kqv1.ConditionTopicReady: topicReady, kqv1.ConditionRouteActive: routeActive} {
		out.Conditions[typ] = fmt.Sprintf("%s/%s: %s", in.Status, in.Reason, in.Message)
	}
	return out, nil
}

// routeQueue is the source queue of a previewed route: planned in this run, else live (and
// then planned here too, for the writes its reconcile makes for the route, such as the
// reserved attempt), with its plan when there is one. It is nil, with out.Conflict saying
// why, when the queue does not own its topic or group.
func (p *Previewer) routeQueue(ctx context.Context, dlr *kqv1.DeadLetterRoute, out *RoutePreview) (sq *kqv1.ShareQueue, queuePlanned *queuePlan, err error) {
	c := p.Client
	queueKey := out.Queue
	if pq := p.queues[queueKey]; pq != nil {
		sq, queuePlanned = pq.sq, &pq.plan
	} else if why, ok := p.unplanned[queueKey]; ok {
		if why.err != nil {
			return nil, nil, fmt.Errorf("spec.queueRef.name: ShareQueue %s could not be planned: %w", queueKey, why.err)
		}
		out.Conflict = joinNote(out.Conflict, fmt.Sprintf("ShareQueue %s does not own its topic or group, so this route writes nothing until it does: %s", dlr.Spec.QueueRef.Name, why.conflict))
		return nil, nil, nil
	} else {
		sq = &kqv1.ShareQueue{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: dlr.Namespace, Name: dlr.Spec.QueueRef.Name}, sq); err != nil {
			if apierrors.IsNotFound(err) {
				if p.refused["ShareQueue "+queueKey] {
					return nil, nil, fmt.Errorf("spec.queueRef.name: ShareQueue %s is in these manifests but the apiserver refused it (above)", queueKey)
				}
				return nil, nil, fmt.Errorf("spec.queueRef.name: ShareQueue %s does not exist and is not in these manifests", queueKey)
			}
			return nil, nil, fmt.Errorf("reading ShareQueue %s: %w", queueKey, err)
		}
		if _, _, conflict := queueOwnership(sq); conflict != "" {
			out.Conflict = joinNote(out.Conflict, fmt.Sprintf("ShareQueue %s does not own its topic or group, so this route writes nothing until it does: %s", sq.Name, conflict))
			return nil, nil, nil
		}
		if out.Conflict == "" {
			qp, err := p.Preview(ctx, sq.DeepCopy())
			if err != nil {
				return nil, nil, fmt.Errorf("spec.queueRef.name: ShareQueue %s could not be planned: %w", queueKey, err)
			}
			if pq := p.queues[queueKey]; pq != nil {
				queuePlanned = &pq.plan
				out.QueueChanges = qp.Changes
			}
		}
	}
	return sq, queuePlanned, nil
}

// validateRoutePlan sends the route's planned writes to the brokers with ValidateOnly and
// returns TopicReady and RouteActive as the brokers' answers leave them; refusals and what
// could not be checked go to out.
func validateRoutePlan(ctx context.Context, cl *kafka.Client, plan routePlan, group string, out *RoutePreview) (topicReady, routeActive condInput) {
	topicReady, routeActive = plan.TopicReady, plan.RouteActive
	w := topicWrites{Topic: plan.TopicName, Create: plan.CreateTopic, GrowTo: plan.GrowPartitionsTo, TopicConfigs: plan.TopicConfigs, Group: group, GroupConfigs: plan.GroupConfigs}
	if w.Create != nil {
		// As in apply: the group is pointed at the topic once it exists.
		w.GroupConfigs = nil
	}
	v := validateWrites(ctx, cl, w)
	for _, e := range []struct {
		err  error
		cond *condInput
		what string
	}{{v.CreateErr, &topicReady, "creating topic " + plan.TopicName}, {v.GrowErr, &topicReady, "growing topic " + plan.TopicName},
		{v.TopicConfigErr, &topicReady, "topic " + plan.TopicName + " configs"}, {v.GroupConfigErr, &routeActive, "group " + group + " configs"}} {
		switch {
		case e.err == nil, kafka.IsAlreadyExists(e.err):
		case kafka.IsRetriable(e.err):
			out.Unchecked = joinNote(out.Unchecked, fmt.Sprintf("%s: %v", e.what, e.err))
		default:
			msg := fmt.Sprintf("the brokers refuse %s: %v", e.what, e.err)
			out.Refused = append(out.Refused, msg)
			*e.cond = condInput{metav1.ConditionFalse, kqv1.ReasonKafkaRejected, msg}
			routeActive = condInput{metav1.ConditionFalse, kqv1.ReasonKafkaRejected, msg}
		}
	}
	return topicReady, routeActive
}

// withAlters returns configs with the incremental changes applied (a set value gets source).
func withAlters(configs map[string]kafka.ConfigEntry, alters []kafka.AlterConfig, source kafka.ConfigSource) map[string]kafka.ConfigEntry {
	out := make(map[string]kafka.ConfigEntry, len(configs)+len(alters))
	for k, v := range configs {
		out[k] = v
	}
	for _, a := range alters {
		switch a.Op {
		case kafka.OpSet:
			out[a.Name] = kafka.ConfigEntry{Value: a.Value, Source: source}
		case kafka.OpDelete:
			delete(out, a.Name)
		}
	}
	return out
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
