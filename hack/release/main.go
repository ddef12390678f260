// Command release builds a release's artifacts into one directory (make release), with no
// Docker engine and no registry:
//
//   - kafka-queue-operator-crds-<chart>.tgz and kafka-queue-operator-<chart>.tgz: both charts
//     packaged by the pinned helm (`helm push DIR/<chart>.tgz oci://REGISTRY/charts` publishes
//     them);
//   - kafka-queue-operator-image.tar: the operator image (the Dockerfile's, built by test/image
//     with the version and commit linked in)
//     as a docker-save tarball tagged IMAGE, and kafka-queue-operator-image.digest, its
//     manifest digest (`crane push` or `skopeo copy docker-archive:…` publish it);
//   - kubectl-kq_<version>_<os>_<arch>.tar.gz for each platform: the kqctl binary as kubectl-kq
//     at the archive's top level (what krew installs) with the LICENSE, built with the version
//     linked in;
//   - kq.yaml: hack/krew/kq.yaml with every sha256 filled from those archives;
//   - checksums.txt: the sha256 of every other file, as `sha256sum -c` reads it.
//
// Nothing is uploaded. The version is -version (make passes `git describe --tags`); the
// charts keep the version their Chart.yaml names.
package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kafkaqueues/kafka-queue-operator/test/image"
)

// Platforms are those the krew manifest lists.
var Platforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

// Options say what to build.
type Options struct {
	Root, Out, Version, Commit, Image string
	Platforms                         []string
	// Helm runs helm with the given arguments (the pinned one, from hack/tools).
	Helm func(ctx context.Context, args ...string) *exec.Cmd
	// SkipImage leaves the image out, and PartialKrew leaves the sha256 of platforms not
	// built as placeholders (tests that check the charts and one archive).
	SkipImage, PartialKrew bool
	Log                    func(format string, args ...any)
}

func main() {
	o := Options{Log: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }}
	var platforms string
	flag.StringVar(&o.Out, "o", "dist", "directory for the artifacts (created; emptied first)")
	flag.StringVar(&o.Version, "version", "", "the release's version, e.g. v0.2.0 (required)")
	flag.StringVar(&o.Commit, "commit", "", "the git commit linked into the binaries")
	flag.StringVar(&o.Image, "image", "", "the image's ref (default ghcr.io/kafkaqueues/kafka-queue-operator:<version without v>)")
	flag.StringVar(&platforms, "platforms", strings.Join(Platforms, ","), "kqctl archives to build, os/arch comma-separated")
	flag.BoolVar(&o.SkipImage, "skip-image", false, "build no image")
	flag.BoolVar(&o.PartialKrew, "partial-krew", false, "fill the krew manifest only for the platforms built (not a release)")
	flag.Parse()
	if o.Version == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: release -version vX.Y.Z [-o DIR] [-commit SHA] [-image REF] [-platforms os/arch,...]")
		os.Exit(2)
	}
	o.Platforms = strings.Split(platforms, ",")
	root, err := image.FindRepoRoot(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	o.Root = root
	o.Helm = func(ctx context.Context, args ...string) *exec.Cmd {
		c := exec.CommandContext(ctx, "go", append([]string{"tool", "-modfile=hack/tools/go.mod", "helm"}, args...)...)
		c.Dir = root
		return c
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	start := time.Now()
	files, err := Run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
	for _, f := range files {
		fmt.Println(f)
	}
	o.Log("release %s: %d artifacts in %s (%s)", o.Version, len(files), o.Out, time.Since(start).Round(time.Second))
}

// Run builds every artifact into o.Out and returns their paths.
func Run(ctx context.Context, o Options) ([]string, error) {
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if !strings.HasPrefix(o.Version, "v") {
		return nil, fmt.Errorf("version %q: want vX.Y.Z", o.Version)
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	// Charts.
	o.Log("packaging the charts")
	cmd := o.Helm(ctx, "package", filepath.Join(o.Root, "charts", "kafka-queue-operator-crds"), filepath.Join(o.Root, "charts", "kafka-queue-operator"), "-d", o.Out)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("helm package: %v\n%s", err, out)
	}
	// kqctl archives.
	ldflags := "-s -w " + image.VersionLDFlags(o.Version, o.Commit)
	archives := map[string]string{}
	for _, p := range o.Platforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok {
			return nil, fmt.Errorf("platform %q: want os/arch", p)
		}
		o.Log("building kqctl for %s", p)
		bin := filepath.Join(o.Out, ".build", goos+"_"+goarch, "kubectl-kq")
		b := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags="+ldflags, "-o", bin, "./cmd/kqctl")
		b.Dir = o.Root
		b.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
		if out, err := b.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building kqctl for %s: %v\n%s", p, err, out)
		}
		archive := filepath.Join(o.Out, fmt.Sprintf("kubectl-kq_%s_%s_%s.tar.gz", o.Version, goos, goarch))
		if err := writeArchive(archive, map[string]string{"kubectl-kq": bin, "LICENSE": filepath.Join(o.Root, "LICENSE")}); err != nil {
			return nil, err
		}
		sum, err := sha256File(archive)
		if err != nil {
			return nil, err
		}
		archives[strings.ToUpper(goos+"_"+goarch)] = sum
	}
	if err := os.RemoveAll(filepath.Join(o.Out, ".build")); err != nil {
		return nil, err
	}
	// The krew manifest, filled.
	if err := fillKrew(filepath.Join(o.Root, "hack", "krew", "kq.yaml"), filepath.Join(o.Out, "kq.yaml"), o.Version, archives, o.PartialKrew); err != nil {
		return nil, err
	}
	// The image.
	if !o.SkipImage {
		if err := writeImage(ctx, o); err != nil {
			return nil, err
		}
	}
	return writeChecksums(o.Out)
}

// writeImage builds the operator image as the Dockerfile describes it (test/image refuses to
// while they disagree) and writes it with its digest.
func writeImage(ctx context.Context, o Options) error {
	dockerfile, err := os.ReadFile(filepath.Join(o.Root, "Dockerfile"))
	if err != nil {
		return err
	}
	drifts, err := image.OperatorDrift(string(dockerfile))
	if err != nil {
		return err
	}
	if len(drifts) > 0 {
		return fmt.Errorf("the Dockerfile and test/image disagree: %s", strings.Join(drifts, "; "))
	}
	ref := o.Image
	if ref == "" {
		ref = "ghcr.io/kafkaqueues/kafka-queue-operator:" + strings.TrimPrefix(o.Version, "v")
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image ref %q: %w", ref, err)
	}
	o.Log("building the image %s", ref)
	bin := filepath.Join(o.Out, ".image-bin")
	defer os.RemoveAll(bin)
	if err := image.BuildReleaseBinaries(ctx, o.Root, bin, o.Version, o.Commit); err != nil {
		return err
	}
	img, err := image.Image(image.OperatorSpec(bin))
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(filepath.Join(o.Out, "kafka-queue-operator-image.tar"), tag, img); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.Out, "kafka-queue-operator-image.digest"), []byte(ref+"@"+digest.String()+"\n"), 0o644)
}

// writeArchive writes a gzip'd tar with each file (by name in the archive) at the top level,
// executable for kubectl-kq, with a fixed time so that one tree gives one archive.
func writeArchive(path string, files map[string]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := os.ReadFile(files[n])
		if err != nil {
			return err
		}
		mode := int64(0o644)
		if n == "kubectl-kq" {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: mode, Size: int64(len(b)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := tw.Write(b); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return f.Close()
}

// fillKrew writes the krew manifest with version, URIs and each platform's sha256. Every
// SHA256_<OS>_<ARCH> placeholder must be filled: a platform without an archive is an error.
func fillKrew(src, dst, version string, sums map[string]string, partial bool) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	s := string(b)
	manifestVersion := ""
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "version: "); ok {
			manifestVersion = v
			break
		}
	}
	if manifestVersion == "" {
		return fmt.Errorf("%s: no spec.version", src)
	}
	s = strings.ReplaceAll(s, manifestVersion, version)
	for platform, sum := range sums {
		s = strings.ReplaceAll(s, "SHA256_"+platform, sum)
	}
	if i := strings.Index(s, "sha256: SHA256_"); i >= 0 && !partial {
		end := strings.IndexByte(s[i:], '\n')
		return fmt.Errorf("%s: no archive for %s (build every platform the manifest lists)", src, s[i+len("sha256: "):i+end])
	}
	return os.WriteFile(dst, []byte(s), 0o644)
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeChecksums writes checksums.txt for every file of dir and returns every file's path.
func writeChecksums(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var lines, files []string
	for _, e := range entries {
		if e.IsDir() || e.Name() == "checksums.txt" {
			continue
		}
		p := filepath.Join(dir, e.Name())
		sum, err := sha256File(p)
		if err != nil {
			return nil, err
		}
		lines = append(lines, sum+"  "+e.Name())
		files = append(files, p)
	}
	sums := filepath.Join(dir, "checksums.txt")
	if err := os.WriteFile(sums, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	return append(files, sums), nil
}
