package controllers

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

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
