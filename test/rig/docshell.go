package rig

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// blockMarker precedes a fenced sh block the tests run: <!-- test:NAME -->.
var blockMarker = regexp.MustCompile(`^<!-- test:([a-z0-9.-]+) -->$`)

// fenceOpen opens a fenced block with its language: ```sh for commands, ```go or ```java
// for a program a test compiles.
var fenceOpen = regexp.MustCompile("^```[a-z]+$")

// DocBlocks returns the marked fenced blocks of a Markdown file (relative to the repo root)
// by name.
func DocBlocks(t *testing.T, file string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(), file))
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		m := blockMarker.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			continue
		}
		if i+1 >= len(lines) || !fenceOpen.MatchString(strings.TrimSpace(lines[i+1])) {
			t.Fatalf("%s:%d: marker %s is not followed by a fenced block (```sh, ```go, ...)", file, i+1, m[1])
		}
		var body []string
		j := i + 2
		for ; j < len(lines) && strings.TrimSpace(lines[j]) != "```"; j++ {
			body = append(body, lines[j])
		}
		if j == len(lines) {
			t.Fatalf("%s:%d: block %s is not closed", file, i+1, m[1])
		}
		if _, dup := blocks[m[1]]; dup {
			t.Fatalf("%s: block %s appears twice", file, m[1])
		}
		blocks[m[1]] = strings.Join(body, "\n")
		i = j
	}
	return blocks
}

// yamlMarker precedes a YAML block the tests decode or create: <!-- yaml:NAME -->.
var yamlMarker = regexp.MustCompile("(?m)^<!-- yaml:([a-z0-9-]+) -->\n```yaml\n((?s:.*?))\n```$")

// YAMLBlocks returns the <!-- yaml:NAME --> blocks of a Markdown file (relative to the repo
// root) by name.
func YAMLBlocks(t *testing.T, file string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(), file))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range yamlMarker.FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	return out
}

// DocBlock returns one named block or fails.
func DocBlock(t *testing.T, file, name string) string {
	t.Helper()
	b, ok := DocBlocks(t, file)[name]
	if !ok {
		t.Fatalf("%s has no block <!-- test:%s -->", file, name)
	}
	return b
}

// ShellCommands splits a shell block into the commands a user would paste one at a time: lines
// continued with a trailing backslash are joined, and a heredoc (<<'WORD' or <<WORD) runs to
// its terminator line.
func ShellCommands(blockText string) []string {
	var out []string
	heredoc := regexp.MustCompile(`<<-?'?([A-Za-z_]+)'?`)
	sc := bufio.NewScanner(strings.NewReader(blockText))
	var cur []string
	term := ""
	for sc.Scan() {
		line := sc.Text()
		if term != "" {
			cur = append(cur, line)
			if strings.TrimSpace(line) == term {
				term = ""
				out = append(out, strings.Join(cur, "\n"))
				cur = nil
			}
			continue
		}
		if len(cur) == 0 && (strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#")) {
			continue
		}
		cur = append(cur, line)
		if strings.HasSuffix(line, `\`) {
			continue
		}
		if m := heredoc.FindStringSubmatch(line); m != nil {
			term = m[1]
			continue
		}
		out = append(out, strings.Join(cur, "\n"))
		cur = nil
	}
	if len(cur) > 0 {
		out = append(out, strings.Join(cur, "\n"))
	}
	return out
}

// UserShell runs commands the way a user's shell would: bash, in a directory of its own where
// charts/ is the repository's (so files the commands write stay out of the repository), with
// the pinned helm and the rig's kubectl first on PATH, a kubeconfig for the test apiserver and
// Helm's own directories in a temp dir.
type UserShell struct {
	t   *testing.T
	dir string
	env []string
	// Replace maps literal text in a command to its replacement before it runs (e.g. the
	// docs' broker address to the rig's).
	Replace map[string]string
}

// NewUserShell is NewUserShellWithKubeconfig with a kubeconfig written for cfg.
func NewUserShell(t *testing.T, cfg *rest.Config) *UserShell {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := WriteKubeconfig(cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	return NewUserShellWithKubeconfig(t, kubeconfig)
}

// NewUserShellWithKubeconfig is NewUserShell for an existing kubeconfig file.
func NewUserShellWithKubeconfig(t *testing.T, kubeconfig string) *UserShell {
	t.Helper()
	if toolsDir == "" {
		t.Fatal("rig.SetupUserTools was not called (TestMain)")
	}
	linkKubectl(t)
	dir := t.TempDir()
	env := append(os.Environ(),
		"PATH="+toolsDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+kubeconfig,
		"HELM_CACHE_HOME="+filepath.Join(dir, "helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(dir, "helm-config"),
		"HELM_DATA_HOME="+filepath.Join(dir, "helm-data"),
	)
	work := filepath.Join(dir, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(RepoRoot(), "charts"), filepath.Join(work, "charts")); err != nil {
		t.Fatal(err)
	}
	return &UserShell{t: t, dir: work, env: env, Replace: map[string]string{}}
}

// WorkDir is the directory the commands run in (it holds a link to the checkout's charts).
func (s *UserShell) WorkDir() string { return s.dir }

// Run runs one command and returns its combined output; a failing command fails the test.
func (s *UserShell) Run(cmd string) string {
	s.t.Helper()
	out, err := s.Try(cmd)
	if err != nil {
		s.t.Fatalf("$ %s\n%s\n%v", cmd, out, err)
	}
	return out
}

// Try runs one command and returns its output and error.
func (s *UserShell) Try(cmd string) (string, error) {
	s.t.Helper()
	for from, to := range s.Replace {
		cmd = strings.ReplaceAll(cmd, from, to)
	}
	c := exec.Command("bash", "-euo", "pipefail", "-c", cmd)
	c.Dir = s.dir
	c.Env = s.env
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	start := time.Now()
	err := c.Run()
	s.t.Logf("$ %s\n%s(%s, %v)", cmd, out.String(), time.Since(start).Round(time.Millisecond), err)
	return out.String(), err
}

// RunBlock runs every command of a docs block in order; after is called after each command
// (nil for none), so a test can start what a cluster would run by itself (the manager's Pod).
func (s *UserShell) RunBlock(blockText string, after func(cmd string)) {
	s.t.Helper()
	cmds := ShellCommands(blockText)
	if len(cmds) == 0 {
		s.t.Fatalf("empty block:\n%s", blockText)
	}
	for _, c := range cmds {
		s.Run(c)
		if after != nil {
			after(c)
		}
	}
}

// UserToolsDir is the directory SetupUserTools filled (helm, kubectl).
func UserToolsDir() string { return toolsDir }

// RemoveUserTools removes what SetupUserTools made.
func RemoveUserTools() { _ = os.RemoveAll(toolsDir) }

// toolsDir holds helm (built from hack/tools/go.mod) and kubectl (built beside kube-apiserver).
var toolsDir string

// SetupUserTools builds the pinned helm into a temp dir and links the rig's kubectl beside
// it; UserShell puts that dir first on PATH. Call it once (e.g. in TestMain); RemoveUserTools
// removes the dir.
func SetupUserTools() error {
	dir, err := os.MkdirTemp("", "kqo-chart-tools-")
	if err != nil {
		return err
	}
	toolsDir = dir
	build := exec.Command("go", "build", "-modfile=hack/tools/go.mod", "-o", filepath.Join(dir, "helm"), "helm.sh/helm/v3/cmd/helm")
	build.Dir = RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building the pinned helm: %v\n%s", err, out)
	}
	return nil
}

// linkKubectl puts the rig's kubectl into toolsDir (it is built with the apiserver).
func linkKubectl(t *testing.T) {
	t.Helper()
	k, err := Kubectl()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(toolsDir, "kubectl")
	if _, err := os.Lstat(link); err == nil {
		return
	}
	if err := os.Symlink(k, link); err != nil && !os.IsExist(err) {
		t.Fatal(err)
	}
}
