package webhook

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Certificate management modes of the webhook's serving certificate.
const (
	// CertsOff: no webhook is served.
	CertsOff = "off"
	// CertsSelf: the manager creates a CA and serving certificate, keeps them in a Secret,
	// rotates them before they expire and writes the CA into the MutatingWebhookConfiguration
	// (open-policy-agent/cert-controller).
	CertsSelf = "self"
	// CertsExternal: tls.crt/tls.key are mounted in CertDir by someone else (cert-manager's
	// Certificate, with its CA injector filling the caBundle).
	CertsExternal = "external"
)

// Options configure the webhook server.
type Options struct {
	// CertManagement is off, self or external.
	CertManagement string
	// Host and Port the server listens on; CertDir holds tls.crt and tls.key.
	Host    string
	Port    int
	CertDir string
	// Namespace, ServiceName, SecretName and ConfigName name the objects of self-managed
	// certificates: the Service the apiserver calls (its DNS name goes in the certificate),
	// the Secret holding the CA and serving pair, and the MutatingWebhookConfiguration
	// whose caBundle is kept current.
	Namespace, ServiceName, SecretName, ConfigName string
	// Injector is the admission handler to serve.
	Injector *PodInjector
}

// The rotator's Secret access (get, list, watch, create, update in the manager's namespace) is
// a namespaced Role in the Helm chart, not part of the ClusterRole.
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=get;list;watch;update;patch

// Setup adds the webhook server to mgr. With self-managed certificates the server is added once
// the rotator has written them, so it never starts without a certificate.
func Setup(mgr ctrl.Manager, o Options) error {
	switch o.CertManagement {
	case CertsOff, "":
		return nil
	case CertsSelf, CertsExternal:
	default:
		return fmt.Errorf("webhook certificate management %q is not one of off, self, external", o.CertManagement)
	}
	srv := webhook.NewServer(webhook.Options{Host: o.Host, Port: o.Port, CertDir: o.CertDir})
	srv.Register(Path, &webhook.Admission{Handler: o.Injector})
	if o.CertManagement == CertsExternal {
		return mgr.Add(srv)
	}
	if o.Namespace == "" || o.ServiceName == "" || o.SecretName == "" || o.ConfigName == "" {
		return fmt.Errorf("self-managed webhook certificates need the namespace, service, secret and webhook configuration names")
	}
	// The rotator fills an existing Secret and refuses to start without one: create it empty.
	if err := ensureSecret(mgr, o.Namespace, o.SecretName); err != nil {
		return err
	}
	ready := make(chan struct{})
	if err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName},
		CertDir:        o.CertDir,
		CAName:         "kafka-queue-operator-webhook-ca",
		CAOrganization: "kafkaqueues.io",
		DNSName:        fmt.Sprintf("%s.%s.svc", o.ServiceName, o.Namespace),
		ExtraDNSNames:  []string{fmt.Sprintf("%s.%s.svc.cluster.local", o.ServiceName, o.Namespace)},
		IsReady:        ready,
		Webhooks:       []rotator.WebhookInfo{{Name: o.ConfigName, Type: rotator.Mutating}},
		// Every replica needs the files; only the Secret write is contended, and the rotator
		// handles conflicts.
		RequireLeaderElection: false,
	}); err != nil {
		return fmt.Errorf("webhook certificate rotator: %w", err)
	}
	go func() {
		<-ready
		if err := mgr.Add(srv); err != nil {
			ctrl.Log.WithName("webhook").Error(err, "adding the webhook server")
		}
	}()
	return nil
}

// ensureSecret creates the empty Secret the rotator keeps its certificates in, unless it exists.
func ensureSecret(mgr ctrl.Manager, ns, name string) error {
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "kafka-queue-operator"}}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the webhook certificate Secret %s/%s: %w", ns, name, err)
	}
	return nil
}
