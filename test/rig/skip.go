package rig

import (
	"os"
	"testing"
)

// RequireEnv names the variable that forbids skipping: .ci/run sets it, so a test that
// needs the real apiserver or broker can never pass by skipping in CI.
const RequireEnv = "KQO_REQUIRE_RIG"

// RigRequired reports whether RequireEnv is set to anything but "", "0" or "false".
func RigRequired() bool {
	switch os.Getenv(RequireEnv) {
	case "", "0", "false":
		return false
	}
	return true
}

// SkipWithoutRig skips t under `go test -short` (the tests that need no apiserver or broker),
// and fails it instead when RequireEnv is set.
func SkipWithoutRig(t testing.TB, what string) {
	t.Helper()
	if !testing.Short() {
		return
	}
	if RigRequired() {
		t.Fatalf("%s is required (%s is set) but -short would skip it", what, RequireEnv)
	}
	t.Skip("-short: needs " + what)
}
