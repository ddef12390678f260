package main

import (
	"bytes"
	"strings"
	"testing"
)

// kqctl verify tells "a claim is false" (1) from "nothing was checked": a Kubernetes API that
// does not answer exits 4 (before the fix: 1, read by scripts and the soak as a false claim),
// and a --kafka-timeout that is not positive or a --bootstrap-server with no host is a usage
// error (2) naming the flag (before: silently 10s, and a dial of ":9092").
func TestVerifyExitStatusWhenNothingIsChecked(t *testing.T) {
	skipShort(t)
	verifyRun := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		err := run(append([]string{"verify", "--kubeconfig", kubeconfig}, args...), &out, &errOut)
		if err != nil {
			errOut.WriteString("kqctl: " + err.Error() + "\n")
		}
		return out.String() + errOut.String(), exitCode(err)
	}
	out, code := verifyRun("-n", "default", "--server", "https://127.0.0.1:1", "--request-timeout", "2s")
	if code != verifyExitNotChecked || !strings.Contains(out, "nothing checked") || strings.Contains(out, "false") {
		t.Errorf("Kubernetes API not answering: exit %d, want 4 saying nothing was checked\n%s", code, out)
	}
	for _, bad := range [][]string{{"--kafka-timeout", "0s"}, {"--kafka-timeout=-5s"}, {"--bootstrap-server", "default/local=:9092"}} {
		out, code := verifyRun(append([]string{"-n", "default"}, bad...)...)
		flag, _, _ := strings.Cut(strings.TrimPrefix(bad[0], "--"), "=")
		if code != 2 || !strings.Contains(out, "--"+flag) {
			t.Errorf("%v: exit %d, want 2 naming --%s\n%s", bad, code, flag, out)
		}
	}
}
