// Package rig starts the local test rig with no Docker: a real kube-apiserver and etcd (built
// from the Go module proxy by hack/build-envtest-bins.sh) and real Apache Kafka brokers (jars
// resolved from Maven Central by hack/kafka-classpath.sh), all on loopback. Binaries and jars
// are cached by version under $KQO_CACHE (default ~/.cache/kafka-queue-operator).
package rig

import (
	"bytes"
	"fmt"
	"net"
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
// first use (KUBEBUILDER_ASSETS wins when set).
func EnvtestBinaries() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	envtestOnce.Do(func() {
		envtestDir, envtestErr = runScript("build-envtest-bins.sh")
	})
	return envtestDir, envtestErr
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

// FreeLoopbackAddr returns "127.0.0.1:port" for a port free when asked (for a process the
// test starts with a listen address flag).
func FreeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
