package controllers

import (
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// Strimzi's topic operator manages a Kafka topic declared by a KafkaTopic (kafka.strimzi.io)
// labelled strimzi.io/cluster=<Kafka>, unless it is annotated strimzi.io/managed: "false".
// A ShareQueue whose topic such a KafkaTopic manages on the same Kafka cluster leaves the
// topic to Strimzi: Conflict=True names the KafkaTopic, the plan keeps no topic write (no
// create, no partition change, no topic config write), and the share group's configs, which
// Strimzi does not manage, are still written. docs/strimzi.md is the user's side of this.
const (
	strimziGroup             = "kafka.strimzi.io"
	strimziClusterLabel      = "strimzi.io/cluster"
	strimziManagedAnnotation = "strimzi.io/managed"
)

// strimziTopicNameIndex indexes KafkaTopics by every Kafka topic name they may claim.
const strimziTopicNameIndex = "strimzi.topicNames"

// strimziRecheckInterval is how often a manager that started without Strimzi's KafkaTopic
// CRD looks for it again (one discovery request); once found it is watched for good.
var strimziRecheckInterval = time.Minute

// +kubebuilder:rbac:groups=kafka.strimzi.io,resources=kafkatopics,verbs=get;list;watch
// +kubebuilder:rbac:groups=kafka.strimzi.io,resources=kafkas,verbs=get

// strimziTopics finds the KafkaTopics that manage a ShareQueue's topic. Until Strimzi's
// KafkaTopic CRD is found (at setup, then every strimziRecheckInterval by Start) it finds
// nothing and costs nothing; once found, KafkaTopics are watched (watch) and read from the
// manager's cache.
type strimziTopics struct {
	mapper meta.RESTMapper
	cache  client.Reader // the manager's cache: the watch's informer
	reader client.Reader // uncached, for Strimzi Kafka resources (read only on a name match)
	// index indexes KafkaTopics of this kind by strimziTopicNameIndex (every name one may
	// claim), so a reconcile reads only the KafkaTopics naming its topic, not all of them.
	index func(gvk schema.GroupVersionKind) error
	// watch starts the ShareQueue controller's watch of KafkaTopics of this kind.
	watch func(gvk schema.GroupVersionKind) error
	// ownNamespace is the manager's namespace (POD_NAMESPACE, else the service account's),
	// where a short bootstrap Service name resolves; "" when unknown.
	ownNamespace string

	mu       sync.Mutex
	topicGVK schema.GroupVersionKind // empty until the CRD is found and watched
	// all is every KafkaTopic, listed once, when there is no index (topicsNaming).
	all []unstructured.Unstructured
	// extra are KafkaTopics not yet in the apiserver (kqctl plan: the run's manifests),
	// counted with the listed ones.
	extra []unstructured.Unstructured
}

// newUncachedStrimziTopics returns a strimziTopics reading the apiserver directly through c,
// without index or watch (kqctl plan): the KafkaTopic CRD is looked up once, and every
// KafkaTopic is listed once, at the first check.
func newUncachedStrimziTopics(c client.Client) *strimziTopics {
	return &strimziTopics{mapper: c.RESTMapper(), cache: c, reader: c}
}

// installed returns the KafkaTopic kind being watched, if any.
func (s *strimziTopics) installed() (schema.GroupVersionKind, bool) {
	if s == nil {
		return schema.GroupVersionKind{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.topicGVK, !s.topicGVK.Empty()
}

// detect looks the KafkaTopic kind up (its preferred version: v1beta2, or v1 in newer
// Strimzi) and, when it is there, starts the watch. A missing CRD is not an error.
func (s *strimziTopics) detect() (bool, error) {
	if _, ok := s.installed(); ok {
		return true, nil
	}
	m, err := s.mapper.RESTMapping(schema.GroupKind{Group: strimziGroup, Kind: "KafkaTopic"})
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.topicGVK.Empty() {
		return true, nil
	}
	if s.index != nil {
		if err := s.index(m.GroupVersionKind); err != nil {
			return false, err
		}
	}
	if s.watch != nil {
		if err := s.watch(m.GroupVersionKind); err != nil {
			return false, err
		}
	}
	s.topicGVK = m.GroupVersionKind
	return true, nil
}

// Start is the manager runnable that looks for the CRD until it is found (installed after the
// manager started). It returns at once when the CRD was found at setup.
func (s *strimziTopics) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("strimzi")
	t := time.NewTicker(strimziRecheckInterval)
	defer t.Stop()
	failures := 0
	for {
		if _, ok := s.installed(); ok {
			return nil
		}
		found, err := s.detect()
		switch {
		case found:
			gvk, _ := s.installed()
			logger.Info("Strimzi KafkaTopic CRD found: ShareQueues leave topics managed by KafkaTopics to Strimzi", "version", gvk.Version)
			return nil
		case err != nil:
			// Discovery failing is logged once in a while, not at every check.
			if failures%10 == 0 {
				logger.Info("looking for Strimzi's KafkaTopic CRD failed; retrying", "error", err.Error())
			}
			failures++
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// strimziClaim is the KafkaTopic that manages a queue's topic.
type strimziClaim struct {
	Namespace, Name, Cluster string
}

func (c *strimziClaim) String() string { return c.Namespace + "/" + c.Name }

// owner returns the KafkaTopic managing topic on kc's Kafka cluster (the first by
// namespace/name when several do), or nil: none, or the CRD is not installed.
func (s *strimziTopics) owner(ctx context.Context, topic string, kc *kqv1.KafkaCluster) (*strimziClaim, error) {
	gvk, ok := s.installed()
	if !ok {
		return nil, nil
	}
	items, err := s.topicsNaming(ctx, gvk, topic)
	if err != nil {
		return nil, err
	}
	var claims []strimziClaim
	for i := range items {
		kt := &items[i]
		cluster, managed := strimziManages(kt)
		if !managed || kafkaTopicNameOf(kt) != topic {
			continue
		}
		if s.sameKafka(ctx, kt.GetNamespace(), cluster, kc) {
			claims = append(claims, strimziClaim{Namespace: kt.GetNamespace(), Name: kt.GetName(), Cluster: cluster})
		}
	}
	if len(claims) == 0 {
		return nil, nil
	}
	sort.Slice(claims, func(i, j int) bool { return claims[i].String() < claims[j].String() })
	return &claims[0], nil
}

// topicsNaming returns the KafkaTopics that may claim topic: from the cache's index in the
// manager; without one (kqctl plan reads the apiserver directly), from one List of every
// KafkaTopic made at the first call and kept for the Previewer's run.
func (s *strimziTopics) topicsNaming(ctx context.Context, gvk schema.GroupVersionKind, topic string) ([]unstructured.Unstructured, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if s.index != nil {
		if err := s.cache.List(ctx, list, client.MatchingFields{strimziTopicNameIndex: topic}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing Strimzi KafkaTopics: %w", err)
		}
		return list.Items, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.all == nil {
		if err := s.reader.List(ctx, list); err != nil {
			return nil, fmt.Errorf("listing Strimzi KafkaTopics (kafka.strimzi.io) in all namespaces: %w", err)
		}
		s.all = list.Items
		if s.all == nil {
			s.all = []unstructured.Unstructured{}
		}
	}
	return append(s.all[:len(s.all):len(s.all)], s.extra...), nil
}

// kafkaTopicNameOf is the Kafka topic a KafkaTopic manages: status.topicName (what the topic
// operator reconciled), else spec.topicName, else metadata.name.
func kafkaTopicNameOf(kt *unstructured.Unstructured) string {
	if n, _, _ := unstructured.NestedString(kt.Object, "status", "topicName"); n != "" {
		return n
	}
	if n, _, _ := unstructured.NestedString(kt.Object, "spec", "topicName"); n != "" {
		return n
	}
	return kt.GetName()
}

// strimziManages returns the Strimzi cluster a KafkaTopic belongs to and whether a topic
// operator manages it: it has the strimzi.io/cluster label (a topic operator only watches
// KafkaTopics with its cluster's label) and is not annotated strimzi.io/managed: "false".
// A KafkaTopic being deleted still manages its topic (the topic operator may be deleting it).
func strimziManages(kt client.Object) (cluster string, managed bool) {
	cluster = kt.GetLabels()[strimziClusterLabel]
	if cluster == "" {
		return "", false
	}
	return cluster, !strings.EqualFold(strings.TrimSpace(kt.GetAnnotations()[strimziManagedAnnotation]), "false")
}

// sameKafka reports whether Strimzi Kafka cluster ns/cluster is the Kafka cluster kc reaches.
// Evidence, first found wins:
//   - one of kc's bootstrap servers is that cluster's bootstrap or broker Service
//     (<cluster>-kafka-bootstrap, <cluster>-kafka-<listener>-bootstrap, or a broker's
//     <pod>.<cluster>-kafka-brokers), named in namespace ns (a short name counts as kc's
//     namespace or the manager's);
//   - the Strimzi Kafka resource ns/cluster reports kc's cluster id (status.clusterId), or a
//     listener address (status.listeners[].bootstrapServers or addresses) equal to one of
//     kc's bootstrap servers.
//
// Without any of these it is another cluster: a KafkaTopic never blocks a queue on a cluster
// it cannot be shown to belong to.
func (s *strimziTopics) sameKafka(ctx context.Context, ns, cluster string, kc *kqv1.KafkaCluster) bool {
	for _, b := range kc.Spec.BootstrapServers {
		if strimziServiceHost(b, ns, cluster, kc.Namespace, s.ownNamespace) {
			return true
		}
	}
	k, err := s.kafkaResource(ctx, ns, cluster)
	if err != nil || k == nil {
		if err != nil {
			log.FromContext(ctx).V(1).Info("cannot read the Strimzi Kafka resource; matching by bootstrap Service name only", "kafka", ns+"/"+cluster, "error", err.Error())
		}
		return false
	}
	return strimziKafkaMatches(k, kc)
}

// kafkaResource reads Strimzi Kafka ns/name (nil when its CRD, the object or the permission
// to read it is missing).
func (s *strimziTopics) kafkaResource(ctx context.Context, ns, name string) (*unstructured.Unstructured, error) {
	m, err := s.mapper.RESTMapping(schema.GroupKind{Group: strimziGroup, Kind: "Kafka"})
	if meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	k := &unstructured.Unstructured{}
	k.SetGroupVersionKind(m.GroupVersionKind)
	if err := s.reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, k); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return k, nil
}

// strimziKafkaMatches compares a Strimzi Kafka resource's status with kc: the cluster id, then
// listener addresses against kc's bootstrap servers.
func strimziKafkaMatches(k *unstructured.Unstructured, kc *kqv1.KafkaCluster) bool {
	if id, _, _ := unstructured.NestedString(k.Object, "status", "clusterId"); id != "" && id == kc.Status.ClusterID {
		return true
	}
	ours := map[string]bool{}
	for _, b := range kc.Spec.BootstrapServers {
		ours[normaliseAddress(b)] = true
	}
	listeners, _, _ := unstructured.NestedSlice(k.Object, "status", "listeners")
	for _, l := range listeners {
		lm, ok := l.(map[string]any)
		if !ok {
			continue
		}
		if bs, _, _ := unstructured.NestedString(lm, "bootstrapServers"); bs != "" {
			for _, a := range strings.Split(bs, ",") {
				if ours[normaliseAddress(a)] {
					return true
				}
			}
		}
		addrs, _, _ := unstructured.NestedSlice(lm, "addresses")
		for _, a := range addrs {
			am, ok := a.(map[string]any)
			if !ok {
				continue
			}
			host, _, _ := unstructured.NestedString(am, "host")
			port, _, _ := unstructured.NestedInt64(am, "port")
			if host != "" && port > 0 && ours[normaliseAddress(net.JoinHostPort(host, fmt.Sprint(port)))] {
				return true
			}
		}
	}
	return false
}

// normaliseAddress lower-cases a host:port and drops a trailing dot of the host.
func normaliseAddress(a string) string {
	a = strings.ToLower(strings.TrimSpace(a))
	if h, p, err := net.SplitHostPort(a); err == nil {
		return net.JoinHostPort(strings.TrimSuffix(h, "."), p)
	}
	return strings.TrimSuffix(a, ".")
}

// strimziListenerName is a Strimzi listener name (lower-case letters and digits, at most 11).
var strimziListenerName = regexp.MustCompile(`^[a-z0-9]{1,11}$`)

// strimziServiceHost reports whether bootstrap server addr names a Service of Strimzi cluster
// ns/cluster: <cluster>-kafka-bootstrap or <cluster>-kafka-<listener>-bootstrap, or a broker
// under <cluster>-kafka-brokers, followed by its namespace (and .svc[.<domain>]) or by nothing
// (a short name: it resolves in the manager's namespace, and in kcNamespace for the
// republisher sidecars of the KafkaCluster's queues, so either counts).
func strimziServiceHost(addr, ns, cluster, kcNamespace, ownNamespace string) bool {
	host := strings.ToLower(strings.TrimSpace(addr))
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	labels := strings.Split(strings.TrimSuffix(host, "."), ".")
	prefix := strings.ToLower(cluster) + "-kafka-"
	for i, l := range labels {
		svc := false
		switch {
		case l == prefix+"brokers":
			svc = i == 1 // <pod>.<cluster>-kafka-brokers
		case i == 0 && strings.HasPrefix(l, prefix) && strings.HasSuffix(l, "-bootstrap"):
			mid := strings.TrimSuffix(strings.TrimPrefix(l, prefix), "bootstrap")
			svc = mid == "" || (strings.HasSuffix(mid, "-") && strimziListenerName.MatchString(strings.TrimSuffix(mid, "-")))
		}
		if !svc {
			continue
		}
		rest := labels[i+1:]
		if len(rest) == 0 {
			return ns == kcNamespace || (ownNamespace != "" && ns == ownNamespace)
		}
		return rest[0] == ns && (len(rest) == 1 || rest[1] == "svc")
	}
	return false
}

// strimziConflictMessage is the Conflict message of a queue whose topic Strimzi manages.
func strimziConflictMessage(c *strimziClaim, topic, group string) string {
	return fmt.Sprintf("topic %s on this Kafka cluster is managed by Strimzi KafkaTopic %s (strimzi.io/cluster=%s); this ShareQueue configures share group %s but makes no topic change until that KafkaTopic is annotated strimzi.io/managed: \"false\" (see docs/strimzi.md)",
		topic, c, c.Cluster, group)
}

// strimziConflictStatus sets Conflict=True for a topic Strimzi manages. Unlike a conflict
// with another ShareQueue, the group stays this queue's: GroupConfigured is left to the plan.
// The topic id pin and the topic configs this queue managed are dropped: the topic is no
// longer this queue's, so deletionPolicy Delete never deletes it and a later hand-over back
// adopts it afresh. Pure.
func strimziConflictStatus(st *kqv1.ShareQueueStatus, msg string, gen int64) {
	setCondition(&st.Conditions, kqv1.ConditionConflict, condInput{metav1.ConditionTrue, kqv1.ReasonConflict, msg}, gen)
	st.TopicID, st.ManagedTopicConfigs, st.TopicCreationStarted = "", nil, nil
}

// yieldTopic removes every topic write from a plan whose topic Strimzi manages and reports
// the topic as the KafkaTopic's (TopicReady=False, reason Conflict); the group's writes stay.
// Pure.
func yieldTopic(p *queuePlan, obs queueObservation, msg string) {
	p.Blocked = true
	p.CreateTopic, p.GrowPartitionsTo, p.TopicConfigs = nil, 0, nil
	p.RecreatesTopicID, p.AdoptCreated, p.ManagedTopicConfigs = "", false, nil
	p.Partitions = 0
	if obs.Topic.Err == nil {
		p.Partitions = obs.Topic.Partitions
	}
	topicDrift := "topic " + p.TopicName + ": "
	drift := p.Drift[:0:0]
	for _, d := range p.Drift {
		if !strings.HasPrefix(d, topicDrift) {
			drift = append(drift, d)
		}
	}
	p.Drift = drift
	p.TopicReady = condInput{metav1.ConditionFalse, kqv1.ReasonConflict, msg}
	p.Capacity = capacityOf(p.Partitions, p.Effective.MaxInFlightPerPartition, p.Bounds)
}

// kafkaTopicChanged passes the KafkaTopic updates that can change which topic it claims or
// whether it is managed (the topic operator's own status updates are not).
func kafkaTopicChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return strimziClaimKey(e.ObjectOld) != strimziClaimKey(e.ObjectNew)
	}}
}

func strimziClaimKey(o client.Object) string {
	cluster, managed := strimziManages(o)
	names := strimziTopicNames(o)
	return fmt.Sprintf("%s|%t|%t|%v", cluster, managed, o.GetDeletionTimestamp().IsZero(), names)
}

// strimziTopicNames are the topic names a KafkaTopic may claim (status.topicName,
// spec.topicName, metadata.name), for mapping its events to queues.
func strimziTopicNames(o client.Object) []string {
	names := []string{o.GetName()}
	if u, ok := o.(*unstructured.Unstructured); ok {
		for _, path := range [][]string{{"spec", "topicName"}, {"status", "topicName"}} {
			if n, _, _ := unstructured.NestedString(u.Object, path...); n != "" && n != names[0] {
				names = append(names, n)
			}
		}
	}
	return names
}

// setupStrimzi looks for Strimzi's KafkaTopic CRD now and, through a manager runnable, every
// strimziRecheckInterval until it is found; when found, c watches KafkaTopics so a queue
// re-plans when one claims its topic, is set unmanaged, or goes. Without the CRD nothing is
// watched and nothing is logged beyond a failing discovery.
func (r *ShareQueueReconciler) setupStrimzi(mgr ctrl.Manager, c controller.Controller) error {
	r.strimzi = &strimziTopics{mapper: mgr.GetRESTMapper(), cache: mgr.GetCache(), reader: mgr.GetAPIReader(), ownNamespace: managerNamespace(),
		index: func(gvk schema.GroupVersionKind) error {
			kt := &unstructured.Unstructured{}
			kt.SetGroupVersionKind(gvk)
			return mgr.GetFieldIndexer().IndexField(context.Background(), kt, strimziTopicNameIndex, strimziTopicNames)
		},
		watch: func(gvk schema.GroupVersionKind) error {
			kt := &unstructured.Unstructured{}
			kt.SetGroupVersionKind(gvk)
			return c.Watch(source.Kind[client.Object](mgr.GetCache(), kt, handler.EnqueueRequestsFromMapFunc(r.queuesOfKafkaTopic), kafkaTopicChanged()))
		}}
	if _, err := r.strimzi.detect(); err != nil {
		// Not fatal: the runnable looks again.
		mgr.GetLogger().WithName("strimzi").Info("looking for Strimzi's KafkaTopic CRD failed; retrying", "error", err.Error())
	}
	return mgr.Add(r.strimzi)
}

// queuesOfKafkaTopic maps a KafkaTopic to the ShareQueues naming any topic it may claim.
func (r *ShareQueueReconciler) queuesOfKafkaTopic(ctx context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, name := range strimziTopicNames(o) {
		var list kqv1.ShareQueueList
		if err := r.List(ctx, &list, client.MatchingFields{topicNameIndex: name}); err != nil {
			continue
		}
		for _, sq := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: sq.Namespace, Name: sq.Name}})
		}
	}
	return reqs
}

// checkStrimzi is the ownership step's last check: a topic managed by a Strimzi KafkaTopic
// gets Conflict naming it, and q.strimziOwned makes the plan keep no topic write (yieldTopic);
// the reconcile goes on for the group. It reports whether Strimzi owns the topic.
func (q *queueScope) checkStrimzi(ctx context.Context) (bool, error) {
	sq := q.sq
	claim, err := q.r.strimzi.owner(ctx, sq.Status.TopicName, &q.kc)
	if err != nil || claim == nil {
		return false, err
	}
	q.strimziOwned = strimziConflictMessage(claim, sq.Status.TopicName, sq.Status.GroupID)
	strimziConflictStatus(&sq.Status, q.strimziOwned, q.gen)
	return true, nil
}

// leaveTopicToStrimzi runs after the plan: a topic Strimzi manages keeps no topic write.
func (q *queueScope) leaveTopicToStrimzi(context.Context) error {
	if q.strimziOwned == "" {
		return nil
	}
	yieldTopic(&q.plan, q.obs, q.strimziOwned)
	q.res.partitions = q.plan.Partitions
	return nil
}

// managerNamespace is the namespace the manager runs in: POD_NAMESPACE (the chart sets it),
// else the service account's namespace file; "" outside a Pod.
func managerNamespace() string {
	if ns := strings.TrimSpace(os.Getenv("POD_NAMESPACE")); ns != "" {
		return ns
	}
	b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
