package chart

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// networkPolicy (issue 33): off by default; on, one policy for the main and shard managers'
// Pods — in, the webhook, metrics and probe ports (from the peers given); out, DNS, the
// apiserver ports and the Kafka ports (to the peers given), and the extra rules — accepted by
// a real apiserver through helm install. hostNetwork puts the managers on the node's network.
func TestChartNetworkPolicyAndHostNetwork(t *testing.T) {
	t.Parallel()
	out, err := render()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "kind: NetworkPolicy") || strings.Contains(out, "hostNetwork") {
		t.Error("the default install renders a NetworkPolicy or host networking")
	}
	args := []string{"--set", "networkPolicy.enabled=true", "--set", "shards={s0}",
		"--set", "networkPolicy.ingress.metricsFrom[0].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=monitoring",
		"--set", "networkPolicy.egress.kafkaTo[0].ipBlock.cidr=10.20.0.0/16",
		"--set", "networkPolicy.egress.extra[0].ports[0].port=8443", "--set", "hostNetwork=true"}
	out, err = render(args...)
	if err != nil {
		t.Fatal(err)
	}
	var np networkingv1.NetworkPolicy
	for _, u := range objects(t, out) {
		if u.GetKind() == "NetworkPolicy" {
			b, _ := json.Marshal(u.Object)
			dec := json.NewDecoder(strings.NewReader(string(b)))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&np); err != nil {
				t.Fatalf("the NetworkPolicy does not fit networking/v1: %v", err)
			}
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	deployments := 0
	for _, u := range objects(t, out) {
		if u.GetKind() != "Deployment" {
			continue
		}
		deployments++
		var d appsv1.Deployment
		b, _ := json.Marshal(u.Object)
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		if !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("the NetworkPolicy does not select Deployment %s's Pods (%v)", d.Name, d.Spec.Template.Labels)
		}
		if !d.Spec.Template.Spec.HostNetwork || d.Spec.Template.Spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
			t.Errorf("Deployment %s: hostNetwork %v, dnsPolicy %q", d.Name, d.Spec.Template.Spec.HostNetwork, d.Spec.Template.Spec.DNSPolicy)
		}
	}
	if deployments != 2 {
		t.Fatalf("%d Deployments, want the main one and one shard", deployments)
	}
	port := func(r []networkingv1.NetworkPolicyPort) []int32 {
		var out []int32
		for _, p := range r {
			out = append(out, p.Port.IntVal)
		}
		return out
	}
	var in [][]int32
	for _, r := range np.Spec.Ingress {
		in = append(in, port(r.Ports))
		if len(port(r.Ports)) == 1 && port(r.Ports)[0] == 8080 && (len(r.From) != 1 || r.From[0].NamespaceSelector == nil) {
			t.Errorf("metrics ingress from %+v, want the monitoring namespace", r.From)
		}
	}
	if got := fmt.Sprint(in); got != "[[9443] [8080] [8081]]" {
		t.Errorf("ingress ports %v, want webhook 9443, metrics 8080, probes 8081", in)
	}
	var kafkaRule *networkingv1.NetworkPolicyEgressRule
	for i, r := range np.Spec.Egress {
		if p := port(r.Ports); len(p) > 0 && p[0] == 9092 {
			kafkaRule = &np.Spec.Egress[i]
		}
	}
	if kafkaRule == nil || len(kafkaRule.To) != 1 || kafkaRule.To[0].IPBlock == nil || kafkaRule.To[0].IPBlock.CIDR != "10.20.0.0/16" {
		t.Errorf("Kafka egress %+v, want ports from 9092 to 10.20.0.0/16", kafkaRule)
	}
	if len(np.Spec.Egress) != 4 {
		t.Errorf("%d egress rules, want DNS, apiserver, Kafka and the extra one", len(np.Spec.Egress))
	}

	// A real apiserver takes it (its validation of ports, peers and CIDRs).
	cfg, admin := freshCluster(t)
	sh := newUserShell(t, cfg)
	sh.Run("helm install kqo-crds charts/kafka-queue-operator-crds -n kqo-system --create-namespace")
	sh.Run("helm install kqo charts/kafka-queue-operator -n kqo-system " + strings.Join(quoteArgs(args), " "))
	var live networkingv1.NetworkPolicy
	if err := admin.Get(context.Background(), client.ObjectKey{Namespace: "kqo-system", Name: "kqo-kafka-queue-operator"}, &live); err != nil {
		t.Fatalf("the NetworkPolicy was not created: %v", err)
	}
}

// quoteArgs quotes --set values for the shell.
func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.HasPrefix(a, "--") {
			out[i] = a
		} else {
			out[i] = "'" + a + "'"
		}
	}
	return out
}
