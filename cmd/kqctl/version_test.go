package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/kafkaqueues/kafka-queue-operator/internal/version"
)

// kqctl version prints the version linked into the build (make build sets it from git
// describe), as text or JSON; a bad -o is a usage error.
func TestVersionCommand(t *testing.T) {
	old := version.Version
	version.Version = "v9.8.7"
	t.Cleanup(func() { version.Version = old })

	var out, errOut bytes.Buffer
	if err := run([]string{"version"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.HasPrefix(s, "kqctl v9.8.7 (commit ") || !strings.Contains(s, runtime.GOOS+"/"+runtime.GOARCH) {
		t.Errorf("version: %q", s)
	}
	out.Reset()
	if err := run([]string{"version", "-o", "json"}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	var v version.Info
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Version != "v9.8.7" || v.GoVersion != runtime.Version() {
		t.Errorf("version -o json: %q (%v)", out.String(), err)
	}
	var ue usageError
	if err := run([]string{"version", "-o", "yaml"}, &out, &errOut); !errors.As(err, &ue) {
		t.Errorf("version -o yaml: %v, want a usage error", err)
	}
}
