// Package version says which build of the operator's binaries is running. Release builds set
// Version with the linker (make build, the Dockerfile, make release):
//
//	-ldflags "-X github.com/kafkaqueues/kafka-queue-operator/internal/version.Version=v0.2.0"
//
// taken from `git describe --tags`, and Commit from `git rev-parse HEAD`; without them the
// commit and whether the tree was modified come from the Go toolchain's build info.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release, set at link time; empty in a plain `go build` or `go run`.
var Version string

// Commit is the git commit, set at link time; when empty, the toolchain's vcs.revision is
// used (absent with -buildvcs=false).
var Commit string

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`
	GitCommit string `json:"gitCommit,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// Get returns the running binary's Info. Without a linked Version it is "devel".
func Get() Info {
	i := Info{Version: Version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.GitCommit = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	if Commit != "" {
		i.GitCommit = Commit
	}
	if i.Version == "" {
		i.Version = "devel"
	}
	return i
}

// String is one line: "v0.2.0 (commit 1a2b3c4d5e6f, go1.26.8, linux/amd64)".
func (i Info) String() string {
	commit := i.GitCommit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	if commit == "" {
		commit = "unknown"
	}
	if i.Modified {
		commit += ", modified"
	}
	return fmt.Sprintf("%s (commit %s, %s, %s)", i.Version, commit, i.GoVersion, i.Platform)
}
