package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	old := Version
	t.Cleanup(func() { Version = old })

	Version = ""
	if v := Get(); v.Version != "devel" || v.GoVersion != runtime.Version() || v.Platform != runtime.GOOS+"/"+runtime.GOARCH {
		t.Errorf("unlinked: %+v, want devel and this toolchain and platform", v)
	}
	Version = "v1.2.3"
	i := Get()
	if i.Version != "v1.2.3" {
		t.Errorf("linked: %+v", i)
	}
	i.GitCommit, i.Modified = "0123456789abcdef0123", true
	if s := i.String(); !strings.HasPrefix(s, "v1.2.3 (commit 0123456789ab, modified, go") {
		t.Errorf("String() = %q", s)
	}
}
