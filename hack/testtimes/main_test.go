package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Two files of one run (make test runs some tests alone, after the rest): a package that
// appears in both counts both runs' time, a failure anywhere fails it, and subtests are
// counted apart from tests.
func TestReadRunsAddsAPackagesRuns(t *testing.T) {
	dir := t.TempDir()
	main := `{"Action":"run","Package":"m/e2e","Test":"TestA"}
{"Action":"output","Package":"m/e2e","Test":"TestA","Output":"=== RUN TestA\n"}
{"Action":"pass","Package":"m/e2e","Test":"TestA/sub","Elapsed":1.5}
{"Action":"pass","Package":"m/e2e","Test":"TestA","Elapsed":2}
{"Action":"skip","Package":"m/e2e","Test":"TestSkipped","Elapsed":0}
{"Action":"pass","Package":"m/e2e","Elapsed":10}
not json: go build output
{"Action":"fail","Package":"m/ctl","Test":"TestB","Elapsed":30}
{"Action":"fail","Package":"m/ctl","Elapsed":31}
`
	alone := `{"Action":"fail","Package":"m/e2e","Test":"TestSlow","Elapsed":50}
{"Action":"fail","Package":"m/e2e","Elapsed":52}
`
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	if err := os.WriteFile(a, []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte(alone), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := readRuns([]string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	e2e := r.pkgs["m/e2e"]
	if e2e.elapsed != 62*time.Second || e2e.result != "fail" || e2e.tests != 2 || e2e.subs != 1 {
		t.Errorf("m/e2e: %+v, want 62s, fail, 2 tests, 1 subtest", *e2e)
	}
	if r.total() != 93*time.Second || r.count() != 4 {
		t.Errorf("total %v count %d, want 93s and 4", r.total(), r.count())
	}
	var out bytes.Buffer
	printSlowest(&out, r, 2, false)
	if s := out.String(); !strings.Contains(s, "| TestSlow | m/e2e | 50.0 s | fail |\n| TestB | m/ctl | 30.0 s | fail |") || strings.Contains(s, "TestA/sub") {
		t.Errorf("slowest:\n%s", s)
	}
}

// A package killed by -timeout: its running test has a run event and no end. It is listed as
// never finished, timed to the package's last event, and the before/after table marks the
// failed package instead of reading its shorter time as a speed-up.
func TestUnfinishedTestsAndFailedPackagesShow(t *testing.T) {
	dir := t.TempDir()
	killed := `{"Time":"2026-12-03T10:00:00Z","Action":"run","Package":"m/k","Test":"TestHangs"}
{"Time":"2026-12-03T10:00:01Z","Action":"run","Package":"m/k","Test":"TestFine"}
{"Time":"2026-12-03T10:00:02Z","Action":"pass","Package":"m/k","Test":"TestFine","Elapsed":1}
{"Time":"2026-12-03T10:00:25Z","Action":"output","Package":"m/k","Output":"panic: test timed out after 25s\n"}
{"Time":"2026-12-03T10:00:25Z","Action":"fail","Package":"m/k","Elapsed":25}
`
	before := `{"Action":"pass","Package":"m/k","Test":"TestHangs","Elapsed":40}
{"Action":"pass","Package":"m/k","Elapsed":41}
`
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	if err := os.WriteFile(a, []byte(killed), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	after, err := readRuns([]string{a})
	if err != nil {
		t.Fatal(err)
	}
	prev, err := readRuns([]string{b})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printSlowest(&out, after, 5, false)
	if s := out.String(); !strings.Contains(s, "| TestHangs | m/k | 25.0 s | unfinished |") || !strings.Contains(s, "Never finished (the package was killed or timed out): TestHangs (m/k, 25.0 s)") {
		t.Errorf("slowest:\n%s", s)
	}
	out.Reset()
	printPackages(&out, prev, after)
	if s := out.String(); !strings.Contains(s, "| m/k | 41.0 s | 25.0 s (fail) |") {
		t.Errorf("packages:\n%s", s)
	}
}
