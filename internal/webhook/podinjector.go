// Package webhook holds the operator's mutating admission webhook: it injects the republisher
// sidecar into Pods labelled kafkaqueues.io/queue=<ShareQueue> whose queue has a
// DeadLetterRoute in Republisher mode. It never blocks a Pod: anything it cannot do becomes an
// admission warning and the Pod is admitted as it came.
//
// Opting in: the label kafkaqueues.io/queue names the queue; the webhook configuration's
// objectSelector sends the apiserver's Pods carrying it, and only those. A queue name longer
// than a label value allows (63 characters) goes in the annotation of the same key, with the
// label present and empty. A Pod with only the annotation is still handled as before when it
// reaches the webhook (no objectSelector, or an older configuration).
//
// The sidecar reaches the brokers the way the KafkaCluster says: TLS material from its
// Secrets mounted as read-only secret volumes into the sidecar alone (volumes named kqo-*),
// an OAUTHBEARER token likewise, other SASL credentials as environment variables with
// secretKeyRef. No Secret value is ever
// written into the Pod. Its securityContext satisfies the Pod Security "restricted" profile on
// its own (it runs as the image's nonroot user 65532 whatever the Pod's runAsUser), it has
// requests and limits (50m/64Mi, 500m/256Mi unless the route's spec.republisher.resources
// replaces them) so a namespace's ResourceQuota on limits admits the Pod, and its
// startupProbe (/readyz on the kqo-metrics port) holds the application's containers back
// until the sidecar's API answers. A Windows Pod (spec.os.name: windows) is admitted without
// a sidecar, with a warning: the republisher runs on Linux nodes only.
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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// ContainerName is the injected sidecar's name; a Pod that has it is left alone.
const ContainerName = "kqo-republisher"

// Path is where the webhook is served.
const Path = "/mutate-v1-pod"

// MetricsPortName names the sidecar's metrics and probe port.
const MetricsPortName = "kqo-metrics"

// Volumes the webhook adds for the sidecar (a Pod that already has a volume of one of these
// names is admitted without a sidecar), and where the sidecar mounts them read-only.
const (
	// VolumeKafkaCA holds the KafkaCluster's spec.tls.caSecretRef key, as file CAFile.
	VolumeKafkaCA = "kqo-kafka-ca"
	// VolumeKafkaClientCert holds the client certificate and key of spec.tls.clientCert (or
	// the deprecated clientCertSecretName), as files tls.crt and tls.key whatever the keys.
	VolumeKafkaClientCert = "kqo-kafka-client-cert"
	// VolumeKafkaOAuthToken holds spec.sasl.oauthBearer.tokenSecretRef's key as file
	// TokenFile; the sidecar reads it at every authentication, so a rotated token is used.
	VolumeKafkaOAuthToken = "kqo-kafka-oauth-token"
	// MountKafkaCA, MountKafkaClientCert and MountKafkaOAuthToken are the sidecar's mount paths.
	MountKafkaCA         = "/var/run/secrets/kafkaqueues.io/kafka-ca"
	MountKafkaClientCert = "/var/run/secrets/kafkaqueues.io/kafka-client-cert"
	MountKafkaOAuthToken = "/var/run/secrets/kafkaqueues.io/kafka-oauth-token"
	// CAFile is the CA bundle's file name in VolumeKafkaCA, whatever the Secret's key.
	CAFile = "ca.crt"
	// TokenFile is the token's file name in VolumeKafkaOAuthToken, whatever the Secret's key.
	TokenFile = "token"
)

// The webhook configuration should carry an objectSelector on the QueueLabel (matchExpressions
// key kafkaqueues.io/queue, operator Exists), so the apiserver calls the webhook for opted-in
// Pods only. controller-gen's webhook marker cannot express an objectSelector, so it is added
// to the generated configuration outside this marker.

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
	// MetricsPort is the sidecar's /metrics and probe (/healthz, /readyz) port on all
	// interfaces, named kqo-metrics; default 9787.
	MetricsPort int
}

// Handle implements admission.Handler.
func (p *PodInjector) Handle(ctx context.Context, req admission.Request) admission.Response {
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return admission.Allowed("not a decodable Pod").WithWarnings(fmt.Sprintf("kafkaqueues.io republisher webhook: cannot decode the Pod (%v); admitted unchanged", err))
	}
	queue, source, why := queueOf(&pod)
	if why != "" {
		return admission.Allowed("no queue named").WithWarnings("kafkaqueues.io republisher webhook: " + why + "; the Pod is admitted without a republisher")
	}
	if queue == "" {
		return admission.Allowed("no " + kqv1.QueueLabel + " label")
	}
	var warnings []string
	if a, ok := pod.Annotations[kqv1.QueueAnnotation]; ok && a != "" && a != queue {
		warnings = append(warnings, fmt.Sprintf("kafkaqueues.io republisher webhook: annotation %s=%q differs from the label, which names %q and wins", kqv1.QueueAnnotation, a, queue))
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == ContainerName {
			return admission.Allowed("already injected")
		}
	}
	if pod.Spec.OS != nil && pod.Spec.OS.Name == corev1.Windows {
		// The sidecar's image and its securityContext (runAsUser, seccomp, capabilities) are
		// Linux-only; the apiserver would refuse the mutated Pod.
		return admission.Allowed("windows Pod").WithWarnings(append(warnings, "kafkaqueues.io republisher webhook: the Pod runs on Windows (spec.os.name: windows) "+
			"and the republisher runs on Linux nodes only; the Pod is admitted without a republisher")...)
	}
	ns := req.Namespace
	if ns == "" {
		ns = pod.Namespace
	}
	inj, warning := p.sidecarFor(ctx, ns, queue, source)
	if inj == nil {
		return admission.Allowed("not injected").WithWarnings(append(warnings, warning)...)
	}
	if why := clash(&pod, inj); why != "" {
		return admission.Allowed("not injected").WithWarnings(append(warnings, "kafkaqueues.io republisher webhook: "+why+"; the Pod is admitted without a republisher")...)
	}
	warnings = append(warnings, inj.warnings...)
	mutated := pod.DeepCopy()
	mutated.Spec.InitContainers = append(mutated.Spec.InitContainers, inj.container)
	mutated.Spec.Volumes = append(mutated.Spec.Volumes, inj.volumes...)
	if mutated.Labels == nil {
		mutated.Labels = map[string]string{}
	}
	mutated.Labels[kqv1.RepublisherLabel] = kqv1.RepublisherInjected
	raw, err := json.Marshal(mutated)
	if err != nil {
		return admission.Allowed("not injected").WithWarnings(append(warnings, fmt.Sprintf("kafkaqueues.io republisher webhook: %v; admitted unchanged", err))...)
	}
	resp := admission.PatchResponseFromRaw(req.Object.Raw, raw)
	if len(warnings) > 0 {
		resp = resp.WithWarnings(warnings...)
	}
	return resp
}

// queueOf is the queue a Pod names and where it names it (for warnings): the label
// kafkaqueues.io/queue; when the label is empty, the annotation of the same key (names longer
// than 63 characters); without the label, the annotation alone. An empty queue and no why: the
// Pod names no queue. why says why a Pod that opted in names none.
func queueOf(pod *corev1.Pod) (queue, source, why string) {
	label, labelled := pod.Labels[kqv1.QueueLabel]
	ann, annotated := pod.Annotations[kqv1.QueueAnnotation]
	switch {
	case labelled && label != "":
		return label, fmt.Sprintf("label %s=%q", kqv1.QueueLabel, label), ""
	case labelled && ann != "":
		return ann, fmt.Sprintf("annotation %s=%q (the label is empty)", kqv1.QueueAnnotation, ann), ""
	case labelled:
		return "", "", fmt.Sprintf("label %s is empty and no annotation %s names the queue (the annotation carries names longer than 63 characters)", kqv1.QueueLabel, kqv1.QueueAnnotation)
	case annotated && ann != "":
		return ann, fmt.Sprintf("annotation %s=%q", kqv1.QueueAnnotation, ann), ""
	case annotated:
		return "", "", fmt.Sprintf("annotation %s is empty", kqv1.QueueAnnotation)
	}
	return "", "", ""
}

// injection is what the webhook adds to a Pod: the sidecar and the volumes only it mounts.
type injection struct {
	container corev1.Container
	volumes   []corev1.Volume
	// warnings are admission warnings for a Pod that gets the sidecar (something the sidecar
	// needs that the webhook cannot give it).
	warnings []string
}

// clash says why the injection cannot join pod: an app container of the same name, a TCP
// port of the sidecar's already declared (the sidecar listens on TCP only, so a UDP or SCTP
// port of the same number does not clash) or a port of its port's name, a volume of the
// sidecar's name, or host networking (the sidecar's ports would be the node's).
func clash(pod *corev1.Pod, inj *injection) string {
	sidecar := &inj.container
	if pod.Spec.HostNetwork {
		return "the Pod uses hostNetwork, where the sidecar's ports would bind on the node"
	}
	for _, v := range inj.volumes {
		for _, pv := range pod.Spec.Volumes {
			if pv.Name == v.Name {
				return fmt.Sprintf("volume %q already exists (the sidecar's volumes are named kqo-*)", v.Name)
			}
		}
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
			tcp := p.Protocol == "" || p.Protocol == corev1.ProtocolTCP
			if (tcp && ports[p.ContainerPort]) || (p.Name != "" && p.Name == sidecar.Ports[0].Name) {
				return fmt.Sprintf("container %q declares port %d/%s (%s), which the sidecar uses", c.Name, p.ContainerPort, protocolOf(p), p.Name)
			}
		}
	}
	return ""
}

func protocolOf(p corev1.ContainerPort) corev1.Protocol {
	if p.Protocol == "" {
		return corev1.ProtocolTCP
	}
	return p.Protocol
}

// SidecarUID is the user and group the sidecar runs as: the image's (distroless static:nonroot)
// nonroot user, 65532. It is set explicitly so that a Pod-level runAsUser (0 above all, which
// runAsNonRoot would make the kubelet refuse, and a native sidecar that cannot start holds the
// application back) is never inherited.
const SidecarUID = 65532

// DefaultResources are the sidecar's resources when the route sets none in
// spec.republisher.resources (which, when set, replace them whole): limits as well as requests,
// so that a namespace whose ResourceQuota covers limits.cpu or limits.memory admits the Pod.
func DefaultResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
}

// sidecarFor builds the republisher container (and its volumes) for queue in ns, or explains
// (as a warning) why there is none. source says where the Pod named the queue.
func (p *PodInjector) sidecarFor(ctx context.Context, ns, queue, source string) (*injection, string) {
	warn := func(format string, args ...any) (*injection, string) {
		return nil, "kafkaqueues.io republisher webhook: " + fmt.Sprintf(format, args...) + "; the Pod is admitted without a republisher"
	}
	var sq kqv1.ShareQueue
	if err := p.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: queue}, &sq); err != nil {
		if apierrors.IsNotFound(err) {
			return warn("%s names no ShareQueue in namespace %s", source, ns)
		}
		return warn("reading ShareQueue %s/%s: %v", ns, queue, err)
	}
	route, why := p.activeRoute(ctx, ns, queue)
	if route == nil {
		return warn("%s", why)
	}
	var kc kqv1.KafkaCluster
	if err := p.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: sq.Spec.ClusterRef.Name}, &kc); err != nil {
		return warn("reading KafkaCluster %s/%s: %v", ns, sq.Spec.ClusterRef.Name, err)
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
	inj := &injection{}
	c := p.container(image, &sq, route, attempts, &kc)
	addSecurity(c, inj, &kc)
	inj.container = *c
	return inj, ""
}

// activeRoute returns the DeadLetterRoute that owns queue in ns when it is an active
// Republisher route with its topic, or nil and why not.
func (p *PodInjector) activeRoute(ctx context.Context, ns, queue string) (*kqv1.DeadLetterRoute, string) {
	var routes kqv1.DeadLetterRouteList
	if err := p.Reader.List(ctx, &routes, client.InNamespace(ns)); err != nil {
		return nil, fmt.Sprintf("listing DeadLetterRoutes in %s: %v", ns, err)
	}
	var naming []kqv1.DeadLetterRoute
	for _, r := range routes.Items {
		if r.Spec.QueueRef.Name == queue {
			naming = append(naming, r)
		}
	}
	route := kqv1.OwningRoute(naming)
	if route == nil {
		return nil, fmt.Sprintf("ShareQueue %s has no DeadLetterRoute", queue)
	}
	switch route.Status.EffectiveMode {
	case kqv1.DeadLetterModeRepublisher:
	case kqv1.DeadLetterModeBrokerNative:
		return nil, fmt.Sprintf("DeadLetterRoute %s runs in BrokerNative mode: the brokers write dead records themselves, no sidecar is needed", route.Name)
	default:
		return nil, fmt.Sprintf("DeadLetterRoute %s has not resolved its mode yet (status.effectiveMode is empty); recreate the Pod once it is Ready", route.Name)
	}
	if route.Status.TopicName == "" {
		return nil, fmt.Sprintf("DeadLetterRoute %s has no topic yet", route.Name)
	}
	if c := meta.FindStatusCondition(route.Status.Conditions, kqv1.ConditionRouteActive); c == nil || c.Status != metav1.ConditionTrue {
		// Above all: the group must hold the reserved attempt, or the sidecar's idea of the
		// last attempt would not match the brokers'.
		why := "it has not been reconciled"
		if c != nil {
			why = c.Reason + ": " + c.Message
		}
		return nil, fmt.Sprintf("DeadLetterRoute %s is not active (%s)", route.Name, why)
	}
	return route, ""
}

// container is the republisher sidecar for queue sq with its route: a native sidecar
// (restartPolicy Always) under the restricted Pod Security Standard, its startup probe on
// /readyz, the route's resources and member settings.
func (p *PodInjector) container(image string, sq *kqv1.ShareQueue, route *kqv1.DeadLetterRoute, attempts int32, kc *kqv1.KafkaCluster) *corev1.Container {
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
			{Name: "KQO_LEASE", Value: leaseOf(sq).String()},
			{Name: "KQO_LISTEN", Value: fmt.Sprintf("127.0.0.1:%d", apiPort)},
			{Name: "KQO_METRICS_BIND_ADDRESS", Value: fmt.Sprintf(":%d", metricsPort)},
		},
		Ports: []corev1.ContainerPort{{Name: MetricsPortName, ContainerPort: int32(metricsPort)}},
		// Pod Security "restricted" on its own, whatever the Pod sets. runAsUser and runAsGroup
		// are the image's distroless nonroot user, 65532, set explicitly so that a Pod-level
		// runAsUser (say 0, which runAsNonRoot would refuse) is not inherited.
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes, RunAsNonRoot: &yes,
			RunAsUser: ptr.To[int64](SidecarUID), RunAsGroup: ptr.To[int64](SidecarUID),
			Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		// A native sidecar's startup probe gates the next containers: the application starts
		// once the sidecar's API accepts connections (/readyz on the metrics port, as the API
		// itself listens on loopback only).
		StartupProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString(MetricsPortName)}},
			PeriodSeconds: 1, TimeoutSeconds: 1, FailureThreshold: 120,
		},
	}
	c.Resources = DefaultResources()
	if rs := route.Spec.Republisher; rs != nil {
		if r := rs.Resources; len(r.Requests) > 0 || len(r.Limits) > 0 || len(r.Claims) > 0 {
			c.Resources = r // the route's resources replace the defaults whole
		}
		if rs.Members != nil {
			c.Env = append(c.Env, corev1.EnvVar{Name: "KQO_MEMBERS", Value: strconv.Itoa(int(*rs.Members))})
		}
		if rs.MaxRecords != nil {
			c.Env = append(c.Env, corev1.EnvVar{Name: "KQO_MAX_RECORDS", Value: strconv.Itoa(int(*rs.MaxRecords))})
		}
	}
	if _, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		// The Go runtime's soft limit is the container's own memory limit, so it collects
		// harder before the kernel's OOM killer would act.
		c.Env = append(c.Env, corev1.EnvVar{Name: "GOMEMLIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
			ContainerName: ContainerName, Resource: "limits.memory"}}})
	}
	if sq.Status.TopicName == "" || sq.Status.GroupID == "" {
		c.Env[1].Value, c.Env[2].Value = sq.KafkaTopicName(), sq.KafkaGroupID()
	}
	return c
}

// addSecurity gives the sidecar the KafkaCluster's TLS and SASL settings by reference: secret
// volumes (only the keys it needs, under fixed file names whatever the Secret's key names)
// mounted read-only into the sidecar alone, and secretKeyRef environment variables. The
// Secrets are in the Pod's namespace, which is the KafkaCluster's. Only settings that are not
// secret (mechanism, a literal username, a token endpoint and client id) are values.
func addSecurity(c *corev1.Container, inj *injection, kc *kqv1.KafkaCluster) {
	mount := func(volume, path, secret string, items ...corev1.KeyToPath) {
		inj.volumes = append(inj.volumes, corev1.Volume{Name: volume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: secret, Items: items}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: volume, MountPath: path, ReadOnly: true})
	}
	if t := kc.Spec.TLS; t != nil {
		c.Env = append(c.Env, corev1.EnvVar{Name: "KQO_TLS", Value: "true"})
		if t.CASecretRef != nil {
			mount(VolumeKafkaCA, MountKafkaCA, t.CASecretRef.Name, corev1.KeyToPath{Key: t.CASecretRef.Key, Path: CAFile})
			c.Env = append(c.Env, corev1.EnvVar{Name: "KQO_TLS_CA_FILE", Value: MountKafkaCA + "/" + CAFile})
		}
		if name, certKey, keyKey := t.ClientCertRef(); name != "" {
			mount(VolumeKafkaClientCert, MountKafkaClientCert, name,
				corev1.KeyToPath{Key: certKey, Path: corev1.TLSCertKey}, corev1.KeyToPath{Key: keyKey, Path: corev1.TLSPrivateKeyKey})
			c.Env = append(c.Env,
				corev1.EnvVar{Name: "KQO_TLS_CERT_FILE", Value: MountKafkaClientCert + "/" + corev1.TLSCertKey},
				corev1.EnvVar{Name: "KQO_TLS_KEY_FILE", Value: MountKafkaClientCert + "/" + corev1.TLSPrivateKeyKey})
		}
		if t.ServerName != "" {
			c.Env = append(c.Env, corev1.EnvVar{Name: "KQO_TLS_SERVER_NAME", Value: t.ServerName})
		}
	}
	s := kc.Spec.SASL
	if s == nil {
		return
	}
	ref := func(secret, key string, optional bool) *corev1.EnvVarSource {
		sel := &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}
		if optional {
			sel.Optional = &optional
		}
		return &corev1.EnvVarSource{SecretKeyRef: sel}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: "KQO_SASL_MECHANISM", Value: string(s.Mechanism)})
	switch s.Mechanism {
	case kqv1.SASLMechanismOAuthBearer:
		o := s.OAuthBearer
		switch {
		case o == nil:
		case o.TokenSecretRef != nil:
			mount(VolumeKafkaOAuthToken, MountKafkaOAuthToken, o.TokenSecretRef.Name, corev1.KeyToPath{Key: o.TokenSecretRef.Key, Path: TokenFile})
			c.Env = append(c.Env, corev1.EnvVar{Name: "KQO_SASL_OAUTH_TOKEN_FILE", Value: MountKafkaOAuthToken + "/" + TokenFile})
		case o.ClientCredentials != nil:
			cc := o.ClientCredentials
			c.Env = append(c.Env,
				corev1.EnvVar{Name: "KQO_SASL_OAUTH_TOKEN_ENDPOINT", Value: cc.TokenEndpoint},
				corev1.EnvVar{Name: "KQO_SASL_OAUTH_CLIENT_ID", Value: cc.ClientID},
				corev1.EnvVar{Name: "KQO_SASL_OAUTH_CLIENT_SECRET", ValueFrom: ref(cc.ClientSecretRef.Name, cc.ClientSecretRef.Key, false)})
			if cc.Scope != "" {
				c.Env = append(c.Env, corev1.EnvVar{Name: "KQO_SASL_OAUTH_SCOPE", Value: cc.Scope})
			}
		}
	case kqv1.SASLMechanismAWSMSKIAM:
		// The standard AWS variables, which the sidecar reads at every authentication. Without
		// a Secret the sidecar has whatever the Pod gives it.
		if a := s.AWSMSKIAM; a != nil && a.SecretName != "" {
			idKey, secretKey, tokenKey := a.Keys()
			c.Env = append(c.Env,
				corev1.EnvVar{Name: "AWS_ACCESS_KEY_ID", ValueFrom: ref(a.SecretName, idKey, false)},
				corev1.EnvVar{Name: "AWS_SECRET_ACCESS_KEY", ValueFrom: ref(a.SecretName, secretKey, false)},
				corev1.EnvVar{Name: "AWS_SESSION_TOKEN", ValueFrom: ref(a.SecretName, tokenKey, true)})
		} else {
			inj.warnings = append(inj.warnings, fmt.Sprintf("kafkaqueues.io republisher webhook: KafkaCluster %s uses AWS_MSK_IAM without spec.sasl.awsMskIam.secretName, "+
				"so the sidecar %s needs AWS credentials in its own environment (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or IRSA's AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE) and will not start without them; see docs/msk.md", kc.Name, ContainerName))
		}
	default: // PLAIN, SCRAM
		if s.Username != "" {
			c.Env = append(c.Env, corev1.EnvVar{Name: "KQO_SASL_USERNAME", Value: s.Username})
		} else {
			c.Env = append(c.Env, corev1.EnvVar{Name: "KQO_SASL_USERNAME", ValueFrom: ref(s.SecretName, s.UsernameKeyOrDefault(), false)})
		}
		c.Env = append(c.Env, corev1.EnvVar{Name: "KQO_SASL_PASSWORD", ValueFrom: ref(s.SecretName, s.PasswordKeyOrDefault(), false)})
	}
}

// leaseOf is the queue's lock duration, the application's lease; 30s when absent.
func leaseOf(sq *kqv1.ShareQueue) time.Duration {
	if d := sq.Spec.Delivery.LockDuration; d != nil {
		return d.Duration
	}
	return 30 * time.Second
}

var _ admission.Handler = (*PodInjector)(nil)
