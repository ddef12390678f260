// Command testtimes reads `go test -json` output (gotestsum's --jsonfile) and prints where a
// test run's time went: wall time per package and the slowest tests. With -before it prints
// one table with a before and an after column per package.
//
//	go run ./hack/testtimes tmp/test-times/go-test.json tmp/test-times/node.json
//	go run ./hack/testtimes -before docs/testing-before.json tmp/test-times/*.json
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
}

// run is what one or more JSON files say about a test run.
type run struct {
	pkgs  map[string]*pkg
	tests map[string]*test // key: package + " " + test
}

type pkg struct {
	name    string
	last    time.Time // the package's last event
	elapsed time.Duration
	result  string // pass, fail, skip; "" when the package never finished (killed, timed out)
	tests   int    // top-level tests that ran (pass or fail)
	subs    int    // subtests that ran
}

type test struct {
	pkg, name string
	started   time.Time
	elapsed   time.Duration
	result    string // pass, fail, skip; "unfinished" for a test that started and never ended
}

func main() {
	top := flag.Int("top", 20, "how many of the slowest tests to print")
	before := flag.String("before", "", "a `go test -json` file of an earlier run: print both runs per package")
	subtests := flag.Bool("subtests", false, "rank subtests beside top-level tests")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: testtimes [-top N] [-before FILE] [-subtests] FILE...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	// A -before file among the run's files (make test-times globs the test-times directory)
	// would be counted twice: in the run and as the earlier run.
	abs := func(f string) string {
		if a, err := filepath.Abs(f); err == nil {
			return a
		}
		return filepath.Clean(f)
	}
	var beforeFiles []string
	for _, f := range strings.Split(*before, ",") {
		beforeFiles = append(beforeFiles, abs(f))
	}
	var files []string
	for _, f := range flag.Args() {
		if !slices.Contains(beforeFiles, abs(f)) {
			files = append(files, f)
		}
	}
	after, err := readRuns(files)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
		os.Exit(1)
	}
	var prev *run
	if *before != "" {
		if prev, err = readRuns(strings.Split(*before, ",")); err != nil {
			fmt.Fprintln(os.Stderr, "testtimes:", err)
			os.Exit(1)
		}
	}
	printPackages(os.Stdout, prev, after)
	fmt.Println()
	printSlowest(os.Stdout, after, *top, *subtests)
}

func readRuns(files []string) (*run, error) {
	r := &run{pkgs: map[string]*pkg{}, tests: map[string]*test{}}
	for _, f := range files {
		if err := r.read(f); err != nil {
			return nil, err
		}
	}
	r.finish()
	return r, nil
}

func (r *run) read(file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue // go test's own lines (build output) between events
		}
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			continue
		}
		r.add(e)
	}
	return sc.Err()
}

func (r *run) add(e event) {
	if e.Package == "" {
		return
	}
	p := r.pkgs[e.Package]
	if p == nil {
		p = &pkg{name: e.Package}
		r.pkgs[e.Package] = p
	}
	if e.Time.After(p.last) {
		p.last = e.Time
	}
	switch e.Action {
	case "pass", "fail", "skip":
	case "run":
		// A test killed with its package (-timeout, a signal) has no end event: it stays
		// unfinished, timed from its start to the package's last event (finish).
		if k := e.Package + " " + e.Test; e.Test != "" && r.tests[k] == nil {
			r.tests[k] = &test{pkg: e.Package, name: e.Test, started: e.Time, result: "unfinished"}
		}
		return
	default:
		return
	}
	d := time.Duration(e.Elapsed * float64(time.Second))
	if e.Test == "" {
		// A package run twice (make test runs some tests alone, after the rest) counts both.
		p.elapsed += d
		if p.result != "fail" {
			p.result = e.Action
		}
		return
	}
	if e.Action != "skip" {
		if strings.Contains(e.Test, "/") {
			p.subs++
		} else {
			p.tests++
		}
	}
	r.tests[e.Package+" "+e.Test] = &test{pkg: e.Package, name: e.Test, elapsed: d, result: e.Action}
}

// finish times the unfinished tests up to their package's last event.
func (r *run) finish() {
	for _, t := range r.tests {
		if p := r.pkgs[t.pkg]; t.result == "unfinished" && p != nil && !t.started.IsZero() && p.last.After(t.started) {
			t.elapsed = p.last.Sub(t.started)
		}
	}
}

func (r *run) total() time.Duration {
	var sum time.Duration
	for _, p := range r.pkgs {
		sum += p.elapsed
	}
	return sum
}

func printPackages(w io.Writer, before, after *run) {
	names := map[string]bool{}
	for n := range after.pkgs {
		names[n] = true
	}
	if before != nil {
		for n := range before.pkgs {
			names[n] = true
		}
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	// Slowest first (by the later run), so the table reads as a budget.
	sort.Slice(sorted, func(i, j int) bool {
		a, b := after.pkgs[sorted[i]], after.pkgs[sorted[j]]
		if (a == nil) != (b == nil) {
			return b == nil
		}
		if a != nil && a.elapsed != b.elapsed {
			return a.elapsed > b.elapsed
		}
		return sorted[i] < sorted[j]
	})
	if before != nil {
		fmt.Fprintln(w, "| package | before | after | tests+subtests before | after |")
		fmt.Fprintln(w, "|---|---:|---:|---:|---:|")
	} else {
		fmt.Fprintln(w, "| package | wall time | result | tests | subtests |")
		fmt.Fprintln(w, "|---|---:|---|---:|---:|")
	}
	for _, n := range sorted {
		a := after.pkgs[n]
		short := strings.TrimPrefix(n, "github.com/kafkaqueues/kafka-queue-operator/")
		if before != nil {
			b := before.pkgs[n]
			if (a == nil || a.tests == 0) && (b == nil || b.tests == 0) {
				continue // no tests in either run
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", short, pkgTime(b), pkgTime(a), pkgCount(b), pkgCount(a))
			continue
		}
		if a.result == "skip" && a.tests == 0 {
			continue // no test files
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %d |\n", short, pkgTime(a), orUnfinished(a.result), a.tests, a.subs)
	}
	if before != nil {
		fmt.Fprintf(w, "| **sum of packages** | %s | %s | %d | %d |\n", secs(before.total()), secs(after.total()), before.count(), after.count())
	} else {
		fmt.Fprintf(w, "| **sum of packages** | %s | | %d | |\n", secs(after.total()), after.count())
	}
}

func (r *run) count() int {
	n := 0
	for _, p := range r.pkgs {
		n += p.tests + p.subs
	}
	return n
}

func printSlowest(w io.Writer, r *run, top int, subtests bool) {
	var ts []*test
	for _, t := range r.tests {
		if !subtests && strings.Contains(t.name, "/") {
			continue
		}
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].elapsed != ts[j].elapsed {
			return ts[i].elapsed > ts[j].elapsed
		}
		return ts[i].pkg+ts[i].name < ts[j].pkg+ts[j].name
	})
	if len(ts) > top {
		ts = ts[:top]
	}
	fmt.Fprintf(w, "%d slowest tests:\n\n", len(ts))
	fmt.Fprintln(w, "| test | package | time | result |")
	fmt.Fprintln(w, "|---|---|---:|---|")
	for _, t := range ts {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.name, strings.TrimPrefix(t.pkg, "github.com/kafkaqueues/kafka-queue-operator/"), secs(t.elapsed), t.result)
	}
	var unfinished []string
	for _, t := range r.tests {
		if t.result == "unfinished" && !strings.Contains(t.name, "/") {
			unfinished = append(unfinished, fmt.Sprintf("%s (%s, %s)", t.name, strings.TrimPrefix(t.pkg, "github.com/kafkaqueues/kafka-queue-operator/"), secs(t.elapsed)))
		}
	}
	if len(unfinished) > 0 {
		sort.Strings(unfinished)
		fmt.Fprintf(w, "\nNever finished (the package was killed or timed out): %s\n", strings.Join(unfinished, ", "))
	}
}

func pkgTime(p *pkg) string {
	if p == nil {
		return "–"
	}
	switch p.result {
	case "":
		return "unfinished"
	case "fail":
		return secs(p.elapsed) + " (fail)"
	}
	return secs(p.elapsed)
}

func pkgCount(p *pkg) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprint(p.tests + p.subs)
}

func orUnfinished(s string) string {
	if s == "" {
		return "unfinished"
	}
	return s
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
