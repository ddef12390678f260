// Command build-image builds the operator image and the test node's images as docker-save
// tarballs, with no Docker engine and no registry (package test/image):
//
//	go run ./hack/build-image -o bin/images [-tag REF]
//
// It writes DIR/operator.tar (ref -tag, by default
// ghcr.io/kafkaqueues/kafka-queue-operator:<appVersion of charts/kafka-queue-operator/Chart.yaml>),
// DIR/pause.tar (kqo.local/pause:1) and DIR/queueapp.tar (kqo.local/queueapp:1), keeping
// the binaries in DIR/bin, and prints one line per tarball: its path, a tab, its ref. A node
// loads one with `ctr -n k8s.io images import DIR/operator.tar`. It refuses to build while
// the Dockerfile and test/image disagree (image.OperatorDrift), since the operator image
// would then not be the Dockerfile's.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/kafkaqueues/kafka-queue-operator/test/image"
)

// Refs of the test node's images.
const (
	pauseRef    = "kqo.local/pause:1"
	queueappRef = "kqo.local/queueapp:1"
)

func main() {
	out := flag.String("o", "", "directory for the tarballs (created); required")
	tag := flag.String("tag", "", "the operator image's ref (default ghcr.io/kafkaqueues/kafka-queue-operator:<chart appVersion>)")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: build-image -o DIR [-tag REF]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, *out, *tag); err != nil {
		fmt.Fprintln(os.Stderr, "build-image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out, tag string) error {
	start := time.Now()
	root, err := image.FindRepoRoot(".")
	if err != nil {
		return err
	}
	dockerfile, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		return err
	}
	drifts, err := image.OperatorDrift(string(dockerfile))
	if err != nil {
		return fmt.Errorf("Dockerfile: %w", err)
	}
	if len(drifts) > 0 {
		for _, d := range drifts {
			fmt.Fprintln(os.Stderr, "drift:", d)
		}
		return fmt.Errorf("the Dockerfile and test/image disagree (%d differences); update test/image", len(drifts))
	}
	if tag == "" {
		v, err := chartAppVersion(filepath.Join(root, "charts", "kafka-queue-operator", "Chart.yaml"))
		if err != nil {
			return err
		}
		tag = "ghcr.io/kafkaqueues/kafka-queue-operator:" + v
	}
	bin := filepath.Join(out, "bin")
	if err := image.Build(ctx, root, bin, append(append([]string(nil), image.OperatorPackages...), image.FixturePackages...)...); err != nil {
		return err
	}
	built := time.Now()
	for _, img := range []struct {
		spec image.Spec
		ref  string
		file string
	}{
		{image.OperatorSpec(bin), tag, "operator.tar"},
		{image.PauseSpec(bin), pauseRef, "pause.tar"},
		{image.AppSpec(bin), queueappRef, "queueapp.tar"},
	} {
		p := filepath.Join(out, img.file)
		if err := image.Write(img.spec, img.ref, p); err != nil {
			return err
		}
		fmt.Printf("%s\t%s\n", p, img.ref)
	}
	fmt.Fprintf(os.Stderr, "build-image: binaries %s, tarballs %s\n", built.Sub(start).Round(time.Millisecond), time.Since(built).Round(time.Millisecond))
	return nil
}

func chartAppVersion(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if chart.AppVersion == "" {
		return "", fmt.Errorf("%s has no appVersion", path)
	}
	return chart.AppVersion, nil
}
