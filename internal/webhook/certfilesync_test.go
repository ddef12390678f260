package webhook_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kafkaqueues/kafka-queue-operator/internal/webhook"
)

// CertFileSync's copy rules (a fake client stands in for the Secret; the integration test
// TestSelfManagedCertificates runs it against a real apiserver and rotator).
func TestCertFileSyncCopiesThePairWhenItChanges(t *testing.T) {
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "kqo-system", Name: "cert"}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	c := fake.NewClientBuilder().WithObjects(sec).Build()
	dir := filepath.Join(t.TempDir(), "serving-certs")
	s := &webhook.CertFileSync{Reader: c, Secret: key, Dir: dir}

	if copied, err := s.Sync(ctx); err != nil || copied {
		t.Fatalf("empty Secret: copied %v, err %v; want nothing and no error", copied, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tls.crt")); !os.IsNotExist(err) {
		t.Fatalf("a file was written for an empty Secret: %v", err)
	}
	sec.Data = map[string][]byte{"tls.crt": []byte("CERT-1"), "tls.key": []byte("KEY-1"), "ca.crt": []byte("CA")}
	if err := c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	check := func(wantCrt, wantKey string) {
		t.Helper()
		for name, want := range map[string]string{"tls.crt": wantCrt, "tls.key": wantKey} {
			p := filepath.Join(dir, name)
			b, err := os.ReadFile(p)
			if err != nil || string(b) != want {
				t.Fatalf("%s = %q (%v), want %q", name, b, err, want)
			}
			if fi, _ := os.Stat(p); fi.Mode().Perm() != 0o600 {
				t.Fatalf("%s mode %v, want 0600", name, fi.Mode().Perm())
			}
		}
		if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) > 0 {
			t.Fatalf("temporary files left: %v", left)
		}
	}
	if copied, err := s.Sync(ctx); err != nil || !copied {
		t.Fatalf("filled Secret: copied %v, err %v", copied, err)
	}
	check("CERT-1", "KEY-1")
	if copied, err := s.Sync(ctx); err != nil || copied {
		t.Fatalf("unchanged Secret: copied %v, err %v; want no write", copied, err)
	}
	// A rotation: both change.
	sec.Data["tls.crt"], sec.Data["tls.key"] = []byte("CERT-2"), []byte("KEY-2")
	if err := c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	if copied, err := s.Sync(ctx); err != nil || !copied {
		t.Fatalf("rotated Secret: copied %v, err %v", copied, err)
	}
	check("CERT-2", "KEY-2")

	// A directory the manager cannot write (the chart's old read-only Secret volume): the
	// error says what is needed.
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.MkdirAll(ro, 0o500); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// root writes anywhere; a path under a regular file fails for everyone.
		f := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		ro = filepath.Join(f, "dir")
	}
	_, err := (&webhook.CertFileSync{Reader: c, Secret: key, Dir: ro}).Sync(ctx)
	if err == nil || !strings.Contains(err.Error(), "writable") && !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("unwritable dir: err %v, want one naming the cause", err)
	}
}
