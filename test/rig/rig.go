// Package rig starts the local test rig with no Docker: a real kube-apiserver and etcd (built
// from the Go module proxy by hack/build-envtest-bins.sh) and real Apache Kafka brokers (jars
// resolved from Maven Central by hack/kafka-classpath.sh), all on loopback. Binaries and jars
// are cached by version under $KQO_CACHE (default ~/.cache/kafka-queue-operator).
package rig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// RepoRoot returns the repository root (found from this source file's location).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var (
	envtestOnce sync.Once
	envtestDir  string
	envtestErr  error
)

// EnvtestBinaries returns the directory holding kube-apiserver and etcd, building them on
// first use (KUBEBUILDER_ASSETS wins when set). Like the built ones (hack/build-envtest-bins.sh),
// binaries from KUBEBUILDER_ASSETS are run through wrappers that make them die with the test
// process (setpriv --pdeathsig), so a killed test leaves no apiserver or etcd behind.
func EnvtestBinaries() (string, error) {
	envtestOnce.Do(func() {
		if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
			envtestDir, envtestErr = wrapAssets(d)
			return
		}
		envtestDir, envtestErr = runScript("build-envtest-bins.sh")
	})
	return envtestDir, envtestErr
}

var (
	promOnce sync.Once
	promDir  string
	promErr  error
)

// PrometheusBinaries returns the directory holding prometheus and promtool, built by
// hack/build-prometheus.sh from the Go module proxy (cached in $KQO_CACHE by version).
func PrometheusBinaries() (string, error) {
	promOnce.Do(func() { promDir, promErr = runScript("build-prometheus.sh") })
	return promDir, promErr
}

// wrapAssets writes, for each of etcd, kube-apiserver and kubectl in dir, a wrapper that runs
// it under setpriv --pdeathsig KILL, into a directory of its own (by dir's path) under the temp
// dir, and returns that directory; dir itself when setpriv is missing (with a warning).
func wrapAssets(dir string) (string, error) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		fmt.Fprintf(os.Stderr, "rig: setpriv (util-linux) not found: the apiservers and etcds of %s will outlive a killed test\n", dir)
		return dir, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(abs))
	out := filepath.Join(os.TempDir(), "kqo-wrapped-assets", hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", err
	}
	for _, b := range []string{"etcd", "kube-apiserver", "kubectl"} {
		bin := filepath.Join(abs, b)
		if _, err := os.Stat(bin); err != nil {
			continue
		}
		tmp, err := os.CreateTemp(out, b+".*")
		if err != nil {
			return "", err
		}
		_, werr := fmt.Fprintf(tmp, "#!/bin/sh\nexec setpriv --pdeathsig KILL %q \"$@\"\n", bin)
		if err := errors.Join(werr, tmp.Chmod(0o755), tmp.Close()); err != nil {
			return "", err
		}
		if err := os.Rename(tmp.Name(), filepath.Join(out, b)); err != nil {
			return "", err
		}
	}
	return out, nil
}

// KafkaClasspath resolves the broker classpath of a Kafka version (e.g. "4.4.0").
func KafkaClasspath(version string) (string, error) {
	return readClasspath(version)
}

// KafkaToolsClasspath resolves the classpath of Apache Kafka's command-line tools (the
// kafka-tools jar, e.g. org.apache.kafka.tools.ShareConsumerPerformance) of a Kafka version,
// kept apart from the broker's (hack/kafka-classpath.sh VERSION tools).
func KafkaToolsClasspath(version string) (string, error) {
	return readClasspath(version, "tools")
}

// readClasspath runs hack/kafka-classpath.sh with args and returns the classpath it resolved.
func readClasspath(args ...string) (string, error) {
	cpFile, err := runScript("kafka-classpath.sh", args...)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(cpFile)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

func runScript(name string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(RepoRoot(), "hack", name), args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/%s %s: %w", name, strings.Join(args, " "), err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}
