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
