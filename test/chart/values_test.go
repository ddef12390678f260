package chart

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// render runs helm template on the operator chart with the given extra arguments.
func render(args ...string) (string, error) {
	return helm(append([]string{"template", "kqo", chartDir, "--namespace", "kqo-system", "--kube-version", "1.37.2"}, args...)...)
}

// objects decodes rendered YAML.
func objects(t *testing.T, rendered string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := rig.DecodeManifests([]byte(rendered))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// find returns the rendered object of kind and name, converted into out.
func find(t *testing.T, rendered, kind, name string, out any) {
	t.Helper()
	for _, u := range objects(t, rendered) {
		if u.GetKind() == kind && u.GetName() == name {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
}

func TestValuesSchemaRejectsBadValues(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--set", "replicaCount=-1"}, "replicaCount"},
		{[]string{"--set", "webhook.timeoutSeconds=31"}, "timeoutSeconds"},
		{[]string{"--set", "rbac.aggregateClusterRoles=yes"}, "aggregateClusterRoles"},
		{[]string{"--set", "fullnameOverride=" + strings.Repeat("a", 56)}, "fullnameOverride"},
		{[]string{"--set", "podDisruptionBudget.maxUnavailable=150%"}, "maxUnavailable"},
		{[]string{"--set", "serviceAccount.name=Bad_Name"}, "name"},
		{[]string{"--set", "priorityClassName=Bad_Prio"}, "priorityClassName"},
		{[]string{"--set-json", `webhook.namespaceSelector={"matchExpressions":[{"key":"team","operator":"In"}]}`}, "values"},
		{[]string{"--set-json", `webhook.objectSelector={"matchExpressions":[{"key":"bad key!","operator":"Exists"}]}`}, "key"},
		{[]string{"--set-json", `webhook.certManager.issuerRef={"kind":"ClusterIssuer"}`}, "name"},
		{[]string{"--set-json", `kafka.tls={"caSecretRef":{"name":"","key":""}}`}, "caSecretRef"},
		{[]string{"--set", "image.pullPolicy=Sometimes"}, "pullPolicy"},
		{[]string{"--set", "image.repository="}, "repository"},
		{[]string{"--set", "image.digest=latest"}, "digest"},
		{[]string{"--set", "kafka.bootstrapServers={kafka}"}, "bootstrapServers"},
		{[]string{"--set", "kafka.featurePolicy=Upgrade"}, "featurePolicy"},
		{[]string{"--set", "kafka.targetShareVersion=3"}, "targetShareVersion"},
		{[]string{"--set", "kafka.shareStateTopicPolicy=Shrink"}, "shareStateTopicPolicy"},
		{[]string{"--set", "kafka.name=Bad_Name"}, "name"},
		{[]string{"--set", "manager.clusterProbeInterval=soon"}, "clusterProbeInterval"},
		{[]string{"--set", "manager.shareQueueConcurrency=0"}, "shareQueueConcurrency"},
		{[]string{"--set", "manager.logLevel=verbose"}, "logLevel"},
		{[]string{"--set", "metrics.port=8081"}, "port"},
		{[]string{"--set", "leaderElection.enabled=maybe"}, "enabled"},
		{[]string{"--set", "noSuchValue=1"}, "noSuchValue"},
		{[]string{"--set", "kafka.sasl.mechanism=GSSAPI"}, "sasl"},
		{[]string{"--set-json", `kafka.sasl={"mechanism":"OAUTHBEARER","oauthBearer":{"clientCredentials":{"clientId":"a","clientSecretRef":{"name":"s","key":"k"}}}}`}, "tokenEndpoint"},
		{[]string{"--set-json", `kafka.tls={"clientCert":{"certKey":"user.crt"}}`}, "secretName"},
		{[]string{"--set", `podLabels.app\.kubernetes\.io/name=x`}, "podLabels"},
		{[]string{"--set", "nameOverride=Bad_Name"}, "nameOverride"},
		{[]string{"--set", "fullnameOverride=-x"}, "fullnameOverride"},
		{[]string{"--set", "global=1"}, "global"},
		{[]string{"--set", "podSecurityContext=1"}, "podSecurityContext"},
		{[]string{"--set", "securityContext=1"}, "securityContext"},
		{[]string{"--set", "extraArgs={leader-elect}"}, "extraArgs"},
		{[]string{"--set-json", `extraEnv=[{"value":"x"}]`}, "extraEnv"},
		{[]string{"--set-json", `extraEnv=[{"name":"POD_NAMESPACE","value":"x"}]`}, "extraEnv"},
		{[]string{"--set", "podDisruptionBudget.minAvailable=-1"}, "minAvailable"},
		{[]string{"--set", "podDisruptionBudget.maxUnavailable=half"}, "maxUnavailable"},
		{[]string{"--set", "podDisruptionBudget.enabled=yes"}, "enabled"},
		{[]string{"--set-json", `topologySpreadConstraints=[{"maxSkew":0,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule"}]`}, "maxSkew"},
		{[]string{"--set-json", `topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"Sometimes"}]`}, "whenUnsatisfiable"},
		{[]string{"--set", "webhook.failurePolicy=Never"}, "failurePolicy"},
		{[]string{"--set-json", `webhook.namespaceSelector={"matchExpressions":[{"key":"a","operator":"Like"}]}`}, "operator"},
		{[]string{"--set-json", `webhook.objectSelector={"matchLabel":{"a":"b"}}`}, "matchLabel"},
		{[]string{"--set", "webhook.excludedNamespaces={Kube_System}"}, "excludedNamespaces"},
		{[]string{"--set", "watchNamespaces={Team_A}"}, "watchNamespaces"},
		{[]string{"--set", "watchNamespaces={a,a}"}, "watchNamespaces"},
		{[]string{"--set", "shards={S0}"}, "shards"},
		{[]string{"--set", "shards={" + strings.Repeat("s", 41) + "}"}, "shards"},
		{[]string{"--set", "manager.claimsTopic=bad topic"}, "claimsTopic"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := render(tc.args...)
			if err == nil {
				t.Fatalf("%v rendered; want a schema error naming %s", tc.args, tc.want)
			}
			if !strings.Contains(err.Error(), "values don't meet the specifications of the schema") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
	for _, args := range [][]string{
		{"--set", "kafka.bootstrapServers={a:9092,b:9093}", "--set", "kafka.featurePolicy=Finalize", "--set", "kafka.targetShareVersion=1"},
		{"--set", "replicaCount=0"}, // scaled down for maintenance
		{"--set", "image.digest=sha512:" + strings.Repeat("ab", 64)},
		{"--set", "podDisruptionBudget.enabled=true", "--set", "podDisruptionBudget.maxUnavailable=50%"},
	} {
		if _, err := render(args...); err != nil {
			t.Errorf("valid values %v refused: %v", args, err)
		}
	}
	// Combinations the schema cannot see are refused by the templates, naming the values.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "metrics.port=9443"}, "webhook.port and metrics.port are both 9443"},
		{[]string{"--set", "webhook.port=8081"}, "health probe port"},
		{[]string{"--set", "replicaCount=2", "--set", "leaderElection.enabled=false"}, "enable leader election"},
		{[]string{"--set", "watchNamespaces={team-a}", "--set", "kafka.bootstrapServers={a:9092}"}, "add kqo-system to watchNamespaces"},
	} {
		if _, err := render(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one saying %q", tc.args, err, tc.want)
		}
	}
	// Credentials as Strimzi lays them out pass through to the KafkaCluster.
	out, err := render("--set", "kafka.bootstrapServers={a:9092}",
		"--set-json", `kafka.sasl={"mechanism":"SCRAM-SHA-512","secretName":"app","username":"app"}`,
		"--set-json", `kafka.tls={"caSecretRef":{"name":"my-cluster-cluster-ca-cert","key":"ca.crt"},"clientCert":{"secretName":"app","certKey":"user.crt","keyKey":"user.key"}}`)
	if err != nil {
		t.Fatalf("Strimzi-layout credentials refused: %v", err)
	}
	if !strings.Contains(out, "username: app") || !strings.Contains(out, "certKey: user.crt") {
		t.Errorf("credentials not rendered into the KafkaCluster:\n%s", out[strings.Index(out, "kind: KafkaCluster"):])
	}
	// The CRD chart's schema too.
	if _, err := helm("template", "x", crdChartDir, "--kube-version", "1.37.2", "--set", "keep=maybe"); err == nil || !strings.Contains(err.Error(), "keep") {
		t.Errorf("the CRD chart accepted keep=maybe (err %v)", err)
	}
	// Regression: tls {} rendered no tls at all (plaintext), and empty strings rendered
	// fields the CRD refuses.
	out, err = render("--set", "kafka.bootstrapServers={a:9092}",
		"--set-json", `kafka.tls={"clientCertSecretName":"","serverName":""}`, "--set-string", "kafka.name=123")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "  tls: {}\n") || strings.Contains(out, `clientCertSecretName: ""`) || !strings.Contains(out, `name: "123"`) {
		t.Errorf("rendered KafkaCluster:\n%s", out[strings.Index(out, "kind: KafkaCluster"):])
	}
}

// TestChartConventions renders each convention value and checks the object it changes.
func TestChartConventions(t *testing.T) {
	t.Parallel()
	digest := "sha256:" + strings.Repeat("ab", 32)
	out, err := render(
		"--set", "fullnameOverride=queues", "--set", "image.digest="+digest,
		"--set-json", `podSecurityContext={"runAsNonRoot":true,"runAsUser":1000,"seccompProfile":{"type":"RuntimeDefault"}}`,
		"--set-json", `securityContext={"runAsNonRoot":null,"runAsUser":1000}`,
		"--set", "extraArgs={--zap-devel}", "--set-json", `extraEnv=[{"name":"HTTPS_PROXY","value":"http://proxy:3128"}]`,
		"--set", "replicaCount=2", "--set", "podDisruptionBudget.enabled=true",
		"--set-json", `topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"ScheduleAnyway"}]`,
		"--set", "webhook.failurePolicy=Fail", "--set-json", `webhook.namespaceSelector={"matchLabels":{"team":"a"}}`,
		"--set-json", `global={"imageRegistry":"mirror.example"}`,
	)
	if err != nil {
		t.Fatal(err)
	}
	var dep appsv1.Deployment
	find(t, out, "Deployment", "queues", &dep)
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != "ghcr.io/kafkaqueues/kafka-queue-operator@"+digest {
		t.Errorf("image %q, want the digest", c.Image)
	}
	if !strings.Contains(strings.Join(c.Args, " "), "--republisher-image=ghcr.io/kafkaqueues/kafka-queue-operator@"+digest) {
		t.Errorf("the sidecar image is not pinned by the digest: %v", c.Args)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsUser == nil || *pod.SecurityContext.RunAsUser != 1000 {
		t.Errorf("podSecurityContext not applied: %+v", pod.SecurityContext)
	}
	// Helm merges maps: the value's keys join the defaults, and null removes one.
	if sc := c.SecurityContext; sc == nil || sc.RunAsNonRoot != nil || sc.RunAsUser == nil || *sc.RunAsUser != 1000 || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("securityContext not merged with the defaults: %+v", c.SecurityContext)
	}
	if c.Args[len(c.Args)-1] != "--zap-devel" {
		t.Errorf("extraArgs not last: %v", c.Args)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
		if e.Name == "GOMEMLIMIT" && (e.ValueFrom == nil || e.ValueFrom.ResourceFieldRef == nil || e.ValueFrom.ResourceFieldRef.Resource != "limits.memory") {
			t.Errorf("GOMEMLIMIT is not the memory limit from the downward API: %+v", e)
		}
	}
	if _, ok := env["GOMEMLIMIT"]; !ok || env["HTTPS_PROXY"] != "http://proxy:3128" {
		t.Errorf("env %v: want GOMEMLIMIT and extraEnv", env)
	}
	if len(pod.TopologySpreadConstraints) != 1 || pod.TopologySpreadConstraints[0].TopologyKey != "topology.kubernetes.io/zone" {
		t.Errorf("topologySpreadConstraints %+v", pod.TopologySpreadConstraints)
	}
	var pdb policyv1.PodDisruptionBudget
	find(t, out, "PodDisruptionBudget", "queues", &pdb)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 1 || pdb.Spec.Selector.MatchLabels["app.kubernetes.io/instance"] != "kqo" {
		t.Errorf("PodDisruptionBudget %+v", pdb.Spec)
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	find(t, out, "MutatingWebhookConfiguration", "queues-republisher", &mwc)
	wh := mwc.Webhooks[0]
	if wh.FailurePolicy == nil || *wh.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy %v", wh.FailurePolicy)
	}
	if wh.NamespaceSelector.MatchLabels["team"] != "a" || len(wh.NamespaceSelector.MatchExpressions) != 1 {
		t.Fatalf("namespaceSelector %+v: want the value's matchLabels and the exclusions", wh.NamespaceSelector)
	}
	if ex := wh.NamespaceSelector.MatchExpressions[0]; ex.Key != "kubernetes.io/metadata.name" || ex.Operator != "NotIn" || strings.Join(ex.Values, ",") != "kube-system,kqo-system" {
		t.Errorf("namespaceSelector does not exclude kube-system and the release namespace: %+v", ex)
	}
	if wh.ObjectSelector == nil || len(wh.ObjectSelector.MatchExpressions) != 1 || wh.ObjectSelector.MatchExpressions[0].Key != "kafkaqueues.io/queue" {
		t.Errorf("objectSelector %+v: want Pods with the kafkaqueues.io/queue label", wh.ObjectSelector)
	}
	// Writing webhook configurations is limited to the release's own.
	var cr rbacv1.ClusterRole
	find(t, out, "ClusterRole", "queues-manager", &cr)
	for _, r := range cr.Rules {
		for _, res := range r.Resources {
			if res == "mutatingwebhookconfigurations" && strings.Contains(strings.Join(r.Verbs, ","), "update") {
				t.Errorf("the manager ClusterRole may update every mutatingwebhookconfiguration: %+v", r)
			}
		}
	}
	find(t, out, "ClusterRole", "queues-webhook-config", &cr)
	if len(cr.Rules) != 1 || strings.Join(cr.Rules[0].ResourceNames, ",") != "queues-republisher" {
		t.Errorf("webhook-config ClusterRole %+v: want update/patch on queues-republisher only", cr.Rules)
	}
	// Leader election may record its events.
	var role rbacv1.Role
	find(t, out, "Role", "queues-leader-election", &role)
	events := false
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			if res == "events" && slices.Contains(r.APIGroups, "") && slices.Contains(r.Verbs, "create") {
				events = true
			}
		}
	}
	if !events {
		t.Errorf("the leader-election Role cannot create events: %+v", role.Rules)
	}

	// nameOverride changes names and the name label, not the instance label.
	out, err = render("--set", "nameOverride=queue-operator")
	if err != nil {
		t.Fatal(err)
	}
	find(t, out, "Deployment", "kqo-queue-operator", &dep)
	if dep.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != "queue-operator" {
		t.Errorf("nameOverride: selector %v", dep.Spec.Selector.MatchLabels)
	}
	// Regression: minAvailable 0 rendered as 1 (a falsy default), which blocks drains.
	out, err = render("--set", "podDisruptionBudget.enabled=true", "--set", "podDisruptionBudget.minAvailable=0")
	if err != nil {
		t.Fatal(err)
	}
	find(t, out, "PodDisruptionBudget", "kqo-kafka-queue-operator", &pdb)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != 0 {
		t.Errorf("minAvailable 0 rendered as %v", pdb.Spec.MinAvailable)
	}
	// A long release name still gives Service names within 63 characters.
	out, err = helm("template", strings.Repeat("a", 50), chartDir, "--namespace", "kqo-system", "--kube-version", "1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objects(t, out) {
		if u.GetKind() == "Service" && len(u.GetName()) > 63 {
			t.Errorf("Service name %q is %d characters", u.GetName(), len(u.GetName()))
		}
	}
	// extraEnv may set GOMEMLIMIT itself (no duplicate env entry).
	out, err = render("--set-json", `extraEnv=[{"name":"GOMEMLIMIT","value":"200MiB"}]`)
	if err != nil {
		t.Fatal(err)
	}
	find(t, out, "Deployment", "kqo-kafka-queue-operator", &dep)
	n := 0
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "GOMEMLIMIT" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d GOMEMLIMIT entries", n)
	}
	// Defaults: no PodDisruptionBudget with one replica, failurePolicy Ignore.
	out, err = render()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objects(t, out) {
		if u.GetKind() == "PodDisruptionBudget" {
			t.Error("a PodDisruptionBudget is rendered by default (it would block drains with one replica)")
		}
	}
	find(t, out, "MutatingWebhookConfiguration", "kqo-kafka-queue-operator-republisher", &mwc)
	if *mwc.Webhooks[0].FailurePolicy != admissionregistrationv1.Ignore {
		t.Errorf("default failurePolicy %v", *mwc.Webhooks[0].FailurePolicy)
	}
}

// TestChartWorksAsASubchart: a parent chart with this chart as a dependency and globals set.
func TestChartWorksAsASubchart(t *testing.T) {
	t.Parallel()
	parent := filepath.Join(t.TempDir(), "platform")
	if err := os.MkdirAll(filepath.Join(parent, "charts"), 0o755); err != nil {
		t.Fatal(err)
	}
	copyDir(t, chartDir, filepath.Join(parent, "charts", "kafka-queue-operator"))
	copyDir(t, crdChartDir, filepath.Join(parent, "charts", "kafka-queue-operator-crds"))
	// The usual umbrella: each dependency behind a condition on its own enabled value (issue
	// 33: the schemas refused "enabled").
	files := map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: platform\nversion: 1.0.0\ndependencies:\n" +
			"  - name: kafka-queue-operator\n    version: \"*\"\n    condition: kafka-queue-operator.enabled\n" +
			"  - name: kafka-queue-operator-crds\n    version: \"*\"\n    condition: kafka-queue-operator-crds.enabled\n",
		"values.yaml": "global:\n  imageRegistry: mirror.example\n  storageClass: fast\nkafka-queue-operator-crds:\n  enabled: true\nkafka-queue-operator:\n  enabled: true\n  kafka:\n    bootstrapServers: [kafka:9092]\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(parent, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := helm("template", "platform", parent, "--namespace", "platform", "--kube-version", "1.37.2")
	if err != nil {
		t.Fatalf("as a subchart with globals: %v", err)
	}
	if !strings.Contains(out, "kind: KafkaCluster") || !strings.Contains(out, "kind: CustomResourceDefinition") {
		t.Errorf("the subcharts' values did not reach them:\n%s", out)
	}
	off, err := helm("template", "platform", parent, "--namespace", "platform", "--kube-version", "1.37.2",
		"--set", "kafka-queue-operator.enabled=false", "--set", "kafka-queue-operator-crds.enabled=false")
	if err != nil {
		t.Fatalf("both conditions false: %v", err)
	}
	if strings.Contains(off, "kind: Deployment") || strings.Contains(off, "kind: CustomResourceDefinition") {
		t.Errorf("disabled subcharts rendered:\n%s", off)
	}
}

// TestChartScopes: watchNamespaces turns the manager's ClusterRole into a Role per namespace
// (Secrets only there) plus a read-only ClusterRole for cluster-scoped objects, and limits
// the webhook to those namespaces; shards render one Deployment per shard with its own
// selector, Lease and Pod labels the main Deployment's selector does not match, and only the
// main one serves the webhook.
func TestChartScopes(t *testing.T) {
	t.Parallel()
	out, err := render("--set", "watchNamespaces={team-a,team-b}", "--set", "shards={s0,s1}")
	if err != nil {
		t.Fatal(err)
	}
	var clusterRoles, roles []*unstructured.Unstructured
	deployments := map[string]*appsv1.Deployment{}
	for _, o := range objects(t, out) {
		switch o.GetKind() {
		case "ClusterRole":
			clusterRoles = append(clusterRoles, o)
		case "Role":
			roles = append(roles, o)
		case "Deployment":
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
				t.Fatal(err)
			}
			deployments[d.Name] = &d
		}
	}
	for _, cr := range clusterRoles {
		// The roles aggregated into Kubernetes' view/edit/admin grant nothing by themselves:
		// they count where a namespace's RoleBinding of those roles does (no binding here).
		if cr.GetLabels()["rbac.authorization.k8s.io/aggregate-to-view"] == "true" || cr.GetLabels()["rbac.authorization.k8s.io/aggregate-to-admin"] == "true" {
			for _, o := range objects(t, out) {
				if ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name"); ref == cr.GetName() {
					t.Errorf("%s %s binds the aggregated ClusterRole %s", o.GetKind(), o.GetName(), ref)
				}
			}
			continue
		}
		rules, _, _ := unstructured.NestedSlice(cr.Object, "rules")
		for _, r := range rules {
			for _, res := range r.(map[string]any)["resources"].([]any) {
				if res != "namespaces" && res != "mutatingwebhookconfigurations" {
					t.Errorf("ClusterRole %s grants %v cluster-wide with watchNamespaces set", cr.GetName(), res)
				}
			}
		}
	}
	managerRoles := map[string]bool{}
	for _, r := range roles {
		if strings.HasSuffix(r.GetName(), "-manager") {
			managerRoles[r.GetNamespace()] = strings.Contains(fmt.Sprint(r.Object["rules"]), "secrets")
		}
	}
	if !managerRoles["team-a"] || !managerRoles["team-b"] || len(managerRoles) != 2 {
		t.Errorf("manager Roles (namespace: grants secrets) %v, want team-a and team-b", managerRoles)
	}
	if !strings.Contains(out, "operator: In\n        values:\n        - team-a\n        - team-b") {
		t.Errorf("the webhook's namespaceSelector is not limited to the watched namespaces")
	}
	main, s0, s1 := deployments["kqo-kafka-queue-operator"], deployments["kqo-kafka-queue-operator-shard-s0"], deployments["kqo-kafka-queue-operator-shard-s1"]
	if main == nil || s0 == nil || s1 == nil || len(deployments) != 3 {
		t.Fatalf("Deployments %v, want the main one and one per shard", slices.Collect(maps.Keys(deployments)))
	}
	args := func(d *appsv1.Deployment) string { return strings.Join(d.Spec.Template.Spec.Containers[0].Args, " ") }
	for d, want := range map[*appsv1.Deployment][]string{
		main: {"--watch-label-selector=!kafkaqueues.io/shard", "--leader-election-id=kqo-kafka-queue-operator.kafkaqueues.io ", "--webhook-cert-management=self", "--watch-namespaces=team-a,team-b"},
		s0:   {"--watch-label-selector=kafkaqueues.io/shard in (s0)", "--leader-election-id=kqo-kafka-queue-operator.kafkaqueues.io-shard-s0", "--webhook-cert-management=off", "--watch-namespaces=team-a,team-b", "--claims-topic=kafkaqueues.claims"},
		s1:   {"--watch-label-selector=kafkaqueues.io/shard in (s1)", "--leader-election-id=kqo-kafka-queue-operator.kafkaqueues.io-shard-s1"},
	} {
		for _, w := range want {
			if !strings.Contains(args(d)+" ", w) {
				t.Errorf("Deployment %s args %q lack %q", d.Name, args(d), w)
			}
		}
	}
	mainSel, err := metav1.LabelSelectorAsSelector(main.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []*appsv1.Deployment{s0, s1} {
		if mainSel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("the main Deployment's selector %v matches shard %s's Pods %v", mainSel, d.Name, d.Spec.Template.Labels)
		}
		if len(d.Spec.Template.Spec.Volumes) != 0 {
			t.Errorf("shard %s mounts the webhook's certificates", d.Name)
		}
	}
}
