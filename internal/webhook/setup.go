package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Certificate management modes of the webhook's serving certificate.
const (
	// CertsOff: no webhook is served.
	CertsOff = "off"
	// CertsSelf: the manager creates a CA and serving certificate, keeps them in a Secret,
	// rotates them before they expire and writes the CA into the MutatingWebhookConfiguration
	// (open-policy-agent/cert-controller). It also writes tls.crt and tls.key from the Secret
	// into CertDir itself (CertFileSync), so CertDir must be writable (the chart mounts an
	// emptyDir there): a Secret volume would make a fresh install wait for the kubelet's next
	// sync of the volume, which the node rig measured at over a minute.
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
// Writing (update, patch) is granted by the Helm chart for its own configuration only (resourceNames).
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations,verbs=get;list;watch

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
	wc, err := client.NewWithWatch(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	if err := mgr.Add(&CertFileSync{Reader: mgr.GetAPIReader(), Watch: wc, Secret: types.NamespacedName{Namespace: o.Namespace, Name: o.SecretName}, Dir: o.CertDir}); err != nil {
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

// CertFileSync copies the serving pair (tls.crt, tls.key) from the rotator's Secret into Dir
// whenever the Secret's differ from the files. With Watch set it copies on every change of
// the Secret it sees (a watch on that one Secret, by name), so a rotation reaches the files in
// the moment the rotator writes the caBundle, not up to an interval later (a served
// certificate the caBundle does not trust makes the apiserver skip the webhook: with
// failurePolicy Ignore, Pods get no sidecar). It also looks every second until the first
// copy and then every CertFileSyncInterval, in case a watch event was missed. Files are
// written 0600 by rename, so the webhook server's certificate watcher never reads half a
// file. It runs on every replica (each serves the webhook), not only the leader.
type CertFileSync struct {
	Reader client.Reader
	// Watch, when set, is used to watch the Secret (the manager's Role allows watch on
	// Secrets in its namespace).
	Watch  client.WithWatch
	Secret types.NamespacedName
	Dir    string
}

// CertFileSyncInterval is how often CertFileSync looks at the Secret once it has copied it,
// besides the watch.
var CertFileSyncInterval = 30 * time.Second

var _ manager.LeaderElectionRunnable = (*CertFileSync)(nil)

// NeedLeaderElection is false: every replica serves the webhook and needs the files.
func (s *CertFileSync) NeedLeaderElection() bool { return false }

// Start copies until ctx ends; errors are logged and retried.
func (s *CertFileSync) Start(ctx context.Context) error {
	log := ctrl.Log.WithName("webhook-cert-files")
	changed := make(chan struct{}, 1)
	if s.Watch != nil {
		go s.watch(ctx, changed)
	}
	synced := false
	for {
		copied, err := s.Sync(ctx)
		switch {
		case err != nil:
			log.Error(err, "copying the webhook certificate into place", "secret", s.Secret, "dir", s.Dir)
		case copied:
			log.Info("webhook certificate written", "secret", s.Secret, "dir", s.Dir)
		}
		if err == nil && (copied || synced) {
			synced = true
		}
		wait := time.Second
		if synced {
			wait = CertFileSyncInterval
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-time.After(wait):
		}
	}
}

// watch signals changed on every event of the Secret, re-opening the watch when it ends.
func (s *CertFileSync) watch(ctx context.Context, changed chan<- struct{}) {
	for ctx.Err() == nil {
		var list corev1.SecretList
		w, err := s.Watch.Watch(ctx, &list, client.InNamespace(s.Secret.Namespace),
			client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", s.Secret.Name)})
		if err != nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Second):
				continue
			}
		}
		for range w.ResultChan() {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
		w.Stop()
	}
}

// Sync copies the Secret's pair into Dir if it differs from the files there, reporting
// whether it wrote; a Secret without both keys yet (the rotator has not filled it) is no
// error and writes nothing.
func (s *CertFileSync) Sync(ctx context.Context) (bool, error) {
	var sec corev1.Secret
	if err := s.Reader.Get(ctx, s.Secret, &sec); err != nil {
		return false, err
	}
	crt, key := sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey]
	if len(crt) == 0 || len(key) == 0 {
		return false, nil
	}
	oldCrt, _ := os.ReadFile(filepath.Join(s.Dir, corev1.TLSCertKey))
	oldKey, _ := os.ReadFile(filepath.Join(s.Dir, corev1.TLSPrivateKeyKey))
	if string(oldCrt) == string(crt) && string(oldKey) == string(key) {
		return false, nil
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return false, err
	}
	// The key first: the certificate watcher reloads on either file, and a new certificate
	// with the old key would not load.
	for _, f := range []struct {
		name string
		data []byte
	}{{corev1.TLSPrivateKeyKey, key}, {corev1.TLSCertKey, crt}} {
		tmp, err := os.CreateTemp(s.Dir, "."+f.name+".*")
		if err != nil {
			return false, fmt.Errorf("writing %s in %s (self-managed certificates need a writable directory, e.g. an emptyDir): %w", f.name, s.Dir, err)
		}
		_, werr := tmp.Write(f.data)
		cerr := tmp.Close()
		if werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Rename(tmp.Name(), filepath.Join(s.Dir, f.name))
		}
		if werr != nil {
			_ = os.Remove(tmp.Name())
			return false, werr
		}
	}
	return true, nil
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

// ReadyCheck is the manager's readiness check for the webhook of o (cmd/manager adds it to
// /readyz when the webhook is on; with CertsOff it always passes). It fails until the webhook
// server serves with a valid certificate: tls.crt and tls.key in o.CertDir form a key pair
// whose certificate is within its NotBefore/NotAfter, and the server on o.Host:o.Port
// completes a TLS handshake presenting a certificate that is valid now. Only a started server
// answers, so this covers controller-runtime's StartedChecker too; in self mode the server is
// added only once the rotator has written the certificates, so the check also waits for them.
// It never holds the manager's liveness: a missing certificate is not a reason to restart.
func ReadyCheck(o Options) healthz.Checker {
	if o.CertManagement == CertsOff || o.CertManagement == "" {
		return healthz.Ping
	}
	port := o.Port
	if port == 0 {
		port = 9443 // webhook.Server's default
	}
	addr := net.JoinHostPort(o.Host, strconv.Itoa(port))
	return func(req *http.Request) error {
		ctx := context.Background()
		if req != nil {
			ctx = req.Context()
		}
		// Within a kubelet probe's default 1s timeout, give or take.
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		now := time.Now()
		crt := filepath.Join(o.CertDir, "tls.crt")
		pair, err := tls.LoadX509KeyPair(crt, filepath.Join(o.CertDir, "tls.key"))
		if err != nil {
			return fmt.Errorf("webhook certificate in %s: %w", o.CertDir, err)
		}
		leaf := pair.Leaf
		if leaf == nil {
			if leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
				return fmt.Errorf("webhook certificate %s: %w", crt, err)
			}
		}
		if err := validAt(leaf, now); err != nil {
			return fmt.Errorf("webhook certificate %s %w", crt, err)
		}
		// The name and chain are the apiserver's to check (against the Service's DNS name and
		// the caBundle); here only that the server answers and what it presents is in date.
		d := &tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // see above
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("webhook server on %s does not answer TLS: %w", addr, err)
		}
		defer conn.Close()
		peer := conn.(*tls.Conn).ConnectionState().PeerCertificates
		if len(peer) == 0 {
			return fmt.Errorf("webhook server on %s presents no certificate", addr)
		}
		if err := validAt(peer[0], now); err != nil {
			return fmt.Errorf("webhook server on %s serves a certificate that %w", addr, err)
		}
		return nil
	}
}

// validAt says how c is outside its validity at t, or nil; the message reads after "certificate".
func validAt(c *x509.Certificate, t time.Time) error {
	switch {
	case t.Before(c.NotBefore):
		return fmt.Errorf("is not valid before %s", c.NotBefore.UTC().Format(time.RFC3339))
	case t.After(c.NotAfter):
		return fmt.Errorf("expired at %s", c.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}
