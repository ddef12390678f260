// Package webhook holds the operator's mutating admission webhook: it injects the republisher
// sidecar into Pods annotated kafkaqueues.io/queue=<ShareQueue> whose queue has a
// DeadLetterRoute in Republisher mode. It never blocks a Pod: anything it cannot do becomes an
// admission warning and the Pod is admitted as it came.
package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// ContainerName is the injected sidecar's name; a Pod that has it is left alone.
const ContainerName = "kqo-republisher"

// Path is where the webhook is served.
const Path = "/mutate-v1-pod"

// +kubebuilder:webhook:path=/mutate-v1-pod,mutating=true,failurePolicy=ignore,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=republisher.kafkaqueues.io,admissionReviewVersions=v1,timeoutSeconds=5,reinvocationPolicy=Never

// +kubebuilder:rbac:groups=kafkaqueues.io,resources=sharequeues;deadletterroutes;kafkaclusters,verbs=get;list;watch

// PodInjector is the admission handler.
type PodInjector struct {
	// Reader reads ShareQueues, DeadLetterRoutes and KafkaClusters (the manager's cache).
	Reader client.Reader
	// Image is the sidecar image when the route does not set spec.republisher.image.
	Image string
	// APIPort is the port the sidecar serves the application on (127.0.0.1), default 8787.
	APIPort int
	// MetricsPort is the sidecar's /metrics port, default 9787.
	MetricsPort int
}

// Handle implements admission.Handler.
func (p *PodInjector) Handle(ctx context.Context, req admission.Request) admission.Response {
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return admission.Allowed("not a decodable Pod").WithWarnings(fmt.Sprintf("kafkaqueues.io republisher webhook: cannot decode the Pod (%v); admitted unchanged", err))
	}
	queue, ok := pod.Annotations[kqv1.QueueAnnotation]
	if !ok {
		return admission.Allowed("no " + kqv1.QueueAnnotation + " annotation")
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == ContainerName {
			return admission.Allowed("already injected")
		}
	}
	ns := req.Namespace
	if ns == "" {
		ns = pod.Namespace
	}
	sidecar, warning := p.sidecarFor(ctx, ns, queue)
	if sidecar == nil {
		return admission.Allowed("not injected").WithWarnings(warning)
	}
	if why := clash(&pod, sidecar); why != "" {
		return admission.Allowed("not injected").WithWarnings("kafkaqueues.io republisher webhook: " + why + "; the Pod is admitted without a republisher")
	}
	mutated := pod.DeepCopy()
	mutated.Spec.InitContainers = append(mutated.Spec.InitContainers, *sidecar)
	raw, err := json.Marshal(mutated)
	if err != nil {
		return admission.Allowed("not injected").WithWarnings(fmt.Sprintf("kafkaqueues.io republisher webhook: %v; admitted unchanged", err))
	}
	resp := admission.PatchResponseFromRaw(req.Object.Raw, raw)
	if warning != "" {
		resp = resp.WithWarnings(warning)
	}
	return resp
}

// clash says why sidecar cannot join pod: an app container of the same name, a port of the
// sidecar's already declared, or host networking (the sidecar's ports would be the node's).
func clash(pod *corev1.Pod, sidecar *corev1.Container) string {
	if pod.Spec.HostNetwork {
		return "the Pod uses hostNetwork, where the sidecar's ports would bind on the node"
	}
	ports := map[int32]bool{}
	for _, e := range sidecar.Env {
		if e.Name == "KQO_LISTEN" || e.Name == "KQO_METRICS_BIND_ADDRESS" {
			if i := strings.LastIndex(e.Value, ":"); i >= 0 {
				if n, err := strconv.Atoi(e.Value[i+1:]); err == nil {
					ports[int32(n)] = true
				}
			}
		}
	}
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if c.Name == sidecar.Name {
			return fmt.Sprintf("container %q already exists", c.Name)
		}
		for _, p := range c.Ports {
			if ports[p.ContainerPort] || (p.Name != "" && p.Name == sidecar.Ports[0].Name) {
				return fmt.Sprintf("container %q declares port %d (%s), which the sidecar uses", c.Name, p.ContainerPort, p.Name)
			}
		}
	}
	return ""
}

// sidecarFor builds the republisher container for queue in ns, or explains (as a warning)
// why there is none.
func (p *PodInjector) sidecarFor(ctx context.Context, ns, queue string) (*corev1.Container, string) {
	warn := func(format string, args ...any) (*corev1.Container, string) {
		return nil, "kafkaqueues.io republisher webhook: " + fmt.Sprintf(format, args...) + "; the Pod is admitted without a republisher"
	}
	var sq kqv1.ShareQueue
	if err := p.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: queue}, &sq); err != nil {
		if apierrors.IsNotFound(err) {
			return warn("annotation %s=%q names no ShareQueue in namespace %s", kqv1.QueueAnnotation, queue, ns)
		}
		return warn("reading ShareQueue %s/%s: %v", ns, queue, err)
	}
	var routes kqv1.DeadLetterRouteList
	if err := p.Reader.List(ctx, &routes, client.InNamespace(ns)); err != nil {
		return warn("listing DeadLetterRoutes in %s: %v", ns, err)
	}
	var naming []kqv1.DeadLetterRoute
	for _, r := range routes.Items {
		if r.Spec.QueueRef.Name == queue {
			naming = append(naming, r)
		}
	}
	route := kqv1.OwningRoute(naming)
	if route == nil {
		return warn("ShareQueue %s has no DeadLetterRoute", queue)
	}
	switch route.Status.EffectiveMode {
	case kqv1.DeadLetterModeRepublisher:
	case kqv1.DeadLetterModeBrokerNative:
		return warn("DeadLetterRoute %s runs in BrokerNative mode: the brokers write dead records themselves, no sidecar is needed", route.Name)
	default:
		return warn("DeadLetterRoute %s has not resolved its mode yet (status.effectiveMode is empty); recreate the Pod once it is Ready", route.Name)
	}
	if route.Status.TopicName == "" {
		return warn("DeadLetterRoute %s has no topic yet", route.Name)
	}
	if c := meta.FindStatusCondition(route.Status.Conditions, kqv1.ConditionRouteActive); c == nil || c.Status != metav1.ConditionTrue {
		// Above all: the group must hold the reserved attempt, or the sidecar's idea of the
		// last attempt would not match the brokers'.
		why := "it has not been reconciled"
		if c != nil {
			why = c.Reason + ": " + c.Message
		}
		return warn("DeadLetterRoute %s is not active (%s)", route.Name, why)
	}
	var kc kqv1.KafkaCluster
	if err := p.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: sq.Spec.ClusterRef.Name}, &kc); err != nil {
		return warn("reading KafkaCluster %s/%s: %v", ns, sq.Spec.ClusterRef.Name, err)
	}
	if kc.Spec.TLS != nil || kc.Spec.SASL != nil {
		return warn("KafkaCluster %s uses TLS or SASL, which the republisher does not support yet", kc.Name)
	}
	attempts, ok := sq.ApplicationAttempts(kc.Status)
	if !ok {
		return warn("the delivery limit of ShareQueue %s is unknown (spec.delivery.maxDeliveryAttempts is absent and the cluster reports no default)", queue)
	}
	image := p.Image
	if route.Spec.Republisher != nil && route.Spec.Republisher.Image != "" {
		image = route.Spec.Republisher.Image
	}
	if image == "" {
		return warn("no republisher image is configured (manager --republisher-image or the route's spec.republisher.image)")
	}
	apiPort, metricsPort := p.APIPort, p.MetricsPort
	if apiPort == 0 {
		apiPort = 8787
	}
	if metricsPort == 0 {
		metricsPort = 9787
	}
	always := corev1.ContainerRestartPolicyAlways
	no, yes := false, true
	c := &corev1.Container{
		Name:          ContainerName,
		Image:         image,
		Command:       []string{"/republisher"},
		RestartPolicy: &always, // a native sidecar: up before the app, down after it
		Env: []corev1.EnvVar{
			{Name: "KQO_BOOTSTRAP_SERVERS", Value: strings.Join(kc.Spec.BootstrapServers, ",")},
			{Name: "KQO_TOPIC", Value: sq.Status.TopicName},
			{Name: "KQO_GROUP", Value: sq.Status.GroupID},
			{Name: "KQO_DEAD_LETTER_TOPIC", Value: route.Status.TopicName},
			{Name: "KQO_MAX_DELIVERY_ATTEMPTS", Value: strconv.Itoa(int(attempts))},
			{Name: "KQO_LEASE", Value: leaseOf(&sq).String()},
			{Name: "KQO_LISTEN", Value: fmt.Sprintf("127.0.0.1:%d", apiPort)},
			{Name: "KQO_METRICS_BIND_ADDRESS", Value: fmt.Sprintf(":%d", metricsPort)},
		},
		Ports: []corev1.ContainerPort{{Name: "kqo-metrics", ContainerPort: int32(metricsPort)}},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes, RunAsNonRoot: &yes,
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
	if rs := route.Spec.Republisher; rs != nil {
		c.Resources = rs.Resources
		if rs.Members != nil {
			c.Env = append(c.Env, corev1.EnvVar{Name: "KQO_MEMBERS", Value: strconv.Itoa(int(*rs.Members))})
		}
		if rs.MaxRecords != nil {
			c.Env = append(c.Env, corev1.EnvVar{Name: "KQO_MAX_RECORDS", Value: strconv.Itoa(int(*rs.MaxRecords))})
		}
	}
	if sq.Status.TopicName == "" || sq.Status.GroupID == "" {
		c.Env[1].Value, c.Env[2].Value = topicOrName(sq.Spec.Topic.Name, sq.Name), topicOrName(sq.Spec.GroupID, sq.Name)
	}
	return c, ""
}

// leaseOf is the queue's lock duration, the application's lease; 30s when absent.
func leaseOf(sq *kqv1.ShareQueue) time.Duration {
	if d := sq.Spec.Delivery.LockDuration; d != nil {
		return d.Duration
	}
	return 30 * time.Second
}

func topicOrName(v, name string) string {
	if v != "" {
		return v
	}
	return name
}

var _ admission.Handler = (*PodInjector)(nil)
