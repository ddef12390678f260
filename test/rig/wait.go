package rig

import (
	"testing"
	"time"
)

// Eventually polls cond every 100ms until it returns "" or timeout passes, then fails t with
// cond's last complaint. Brokers and the apiserver's caches trail writes, so tests poll.
func Eventually(t testing.TB, timeout time.Duration, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		last := cond()
		if last == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
