// Package layout holds the project's import rules: which package may import which, checked
// over `go list` of the whole module (cluster-api keeps such rules with depguard; a test
// needs no extra tool). Only non-test files count: tests may reach into whatever they check.
package layout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

const module = "github.com/kafkaqueues/kafka-queue-operator"

// pkg is one package of `go list -json`: its path and what its non-test files import.
type pkg struct {
	ImportPath string
	Imports    []string
}

// rule is one import rule: a package matching from must not import what matches banned,
// unless it matches one of the allowed prefixes.
type rule struct {
	name    string
	from    func(p string) bool
	banned  func(imp string) bool
	allowed []string // package path prefixes (relative to the module) the rule exempts
	why     string
}

func under(dirs ...string) func(string) bool {
	return func(p string) bool {
		rel := strings.TrimPrefix(p, module+"/")
		for _, d := range dirs {
			if rel == d || strings.HasPrefix(rel, d+"/") {
				return true
			}
		}
		return false
	}
}

func anyPkg(string) bool { return true }

// rules are the project's layout:
var rules = []rule{
	{
		name: "franz-go only in internal/kafka", from: anyPkg,
		banned:  func(imp string) bool { return strings.HasPrefix(imp, "github.com/twmb/franz-go/") },
		allowed: []string{"internal/kafka", "hack", "test"},
		why:     "the Kafka protocol lives in internal/kafka; others use its types and error helpers (kafka.IsFenced, kafka.Answered, ...)",
	},
	{
		name: "nothing under internal/ or api/ imports controllers", from: under("internal", "api"),
		banned: func(imp string) bool { return imp == module+"/controllers" },
		why:    "controllers is the manager's reconcilers; what others share with it lives in internal/ (delivery, connection)",
	},
	{
		name: "api/ imports nothing of the project", from: under("api"),
		banned: func(imp string) bool {
			return strings.HasPrefix(imp, module+"/") && !strings.HasPrefix(imp, module+"/api/")
		},
		why: "the API types are imported by everything, clients included",
	},
	{
		name: "internal/delivery is pure", from: under("internal/delivery"),
		banned: func(imp string) bool {
			return imp == "context" || imp == "net" || imp == "net/http" || imp == "os" ||
				strings.HasPrefix(imp, "sigs.k8s.io/controller-runtime") || strings.HasPrefix(imp, "k8s.io/client-go") ||
				(strings.HasPrefix(imp, module+"/") && !strings.HasPrefix(imp, module+"/api/"))
		},
		why: "the delivery-settings table and bound checks are decisions: no client, context or I/O, so kqctl, the SQS importer and the truth checker can use them",
	},
}

// violations returns every import of pkgs that breaks a rule, as "pkg imports imp: rule (why)".
func violations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		for _, r := range rules {
			if !r.from(p.ImportPath) || under(r.allowed...)(p.ImportPath) {
				continue
			}
			for _, imp := range p.Imports {
				if r.banned(imp) {
					out = append(out, fmt.Sprintf("%s imports %s: %s (%s)", strings.TrimPrefix(p.ImportPath, module+"/"), imp, r.name, r.why))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	cmd.Dir = rig.RepoRoot()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		// tmp/ is the scratch space the tools and tests write (git ignores it): a user's or
		// an interrupted test's programs there are not the project's.
		if strings.HasPrefix(p.ImportPath, module+"/tmp/") {
			continue
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestImportRules(t *testing.T) {
	t.Parallel()
	pkgs := listPackages(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; the module has more", len(pkgs))
	}
	if v := violations(pkgs); len(v) > 0 {
		t.Errorf("%d import(s) break the layout rules:\n%s", len(v), strings.Join(v, "\n"))
	}
}

// Each rule catches what it names: a deliberate violation of each, fed to the same check.
func TestImportRulesCatchViolations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pkg, imp, rule string
	}{
		{module + "/controllers", "github.com/twmb/franz-go/pkg/kerr", "franz-go only in internal/kafka"},
		{module + "/internal/verify", "github.com/twmb/franz-go/pkg/kgo", "franz-go only in internal/kafka"},
		{module + "/internal/sqsimport", module + "/controllers", "nothing under internal/ or api/ imports controllers"},
		{module + "/api/v1alpha1", module + "/internal/kafka", "api/ imports nothing of the project"},
		{module + "/internal/delivery", "context", "internal/delivery is pure"},
		{module + "/internal/delivery", "sigs.k8s.io/controller-runtime/pkg/client", "internal/delivery is pure"},
	} {
		v := violations([]pkg{{ImportPath: tc.pkg, Imports: []string{"fmt", tc.imp}}})
		if len(v) != 1 || !strings.Contains(v[0], tc.rule) {
			t.Errorf("%s importing %s: found %q, want one violation of %q", tc.pkg, tc.imp, v, tc.rule)
		}
	}
	for _, ok := range []pkg{
		{ImportPath: module + "/internal/kafka", Imports: []string{"github.com/twmb/franz-go/pkg/kgo"}},
		{ImportPath: module + "/test/rig", Imports: []string{"github.com/twmb/franz-go/pkg/kadm"}},
		{ImportPath: module + "/cmd/kqctl", Imports: []string{module + "/controllers"}},
		{ImportPath: module + "/internal/delivery", Imports: []string{"strconv", "time", module + "/api/v1alpha1"}},
	} {
		if v := violations([]pkg{ok}); len(v) > 0 {
			t.Errorf("allowed imports of %s reported: %q", ok.ImportPath, v)
		}
	}
}
