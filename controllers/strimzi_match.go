package controllers

// Matching a Strimzi Kafka resource to a KafkaCluster: its listeners' addresses against
// spec.bootstrapServers, so a KafkaTopic counts only on the same Kafka.

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

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
