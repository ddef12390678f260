package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// krewPlugin is the part of krew's Plugin kind (krew.googlecontainertools.github.com/v1alpha2)
// a manifest may use; decoding is strict, so an unknown or misspelt field is an error.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string         `json:"version"`
		Homepage         string         `json:"homepage,omitempty"`
		ShortDescription string         `json:"shortDescription"`
		Description      string         `json:"description,omitempty"`
		Caveats          string         `json:"caveats,omitempty"`
		Platforms        []krewPlatform `json:"platforms"`
	} `json:"spec"`
}

type krewPlatform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string `json:"uri"`
	Sha256 string `json:"sha256"`
	Files  []struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"files"`
	Bin string `json:"bin"`
}

const krewManifest = "hack/krew/kq.yaml"

var (
	semver   = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$`)
	sha256Re = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// krewPlatforms are the platforms the manifest must cover.
var krewPlatforms = []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"}

func loadKrewManifest(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rig.RepoRoot(), krewManifest))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// validateKrew checks a manifest's structure; with release set, every sha256 must also be a
// real digest (the unfilled file is a template, not a manifest krew can install).
func validateKrew(data []byte, release bool) (*krewPlugin, []string) {
	var p krewPlugin
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, []string{err.Error()}
	}
	var problems []string
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" {
		bad("apiVersion/kind %s/%s, want krew.googlecontainertools.github.com/v1alpha2 Plugin", p.APIVersion, p.Kind)
	}
	if p.Metadata.Name != "kq" {
		bad("metadata.name %q, want kq (kubectl kq)", p.Metadata.Name)
	}
	if !semver.MatchString(p.Spec.Version) {
		bad("spec.version %q is not v-prefixed semver", p.Spec.Version)
	}
	if p.Spec.ShortDescription == "" || len(p.Spec.ShortDescription) > 50 || strings.Contains(p.Spec.ShortDescription, "\n") {
		bad("spec.shortDescription %q: want one line of at most 50 characters", p.Spec.ShortDescription)
	}
	if p.Spec.Homepage != "https://github.com/kafkaqueues/kafka-queue-operator" {
		bad("spec.homepage %q", p.Spec.Homepage)
	}
	seen := map[string]bool{}
	for i, pl := range p.Spec.Platforms {
		osName, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		key := osName + "/" + arch
		where := fmt.Sprintf("platforms[%d] (%s)", i, key)
		if len(pl.Selector.MatchLabels) != 2 || osName == "" || arch == "" {
			bad("%s: selector.matchLabels %v, want exactly os and arch", where, pl.Selector.MatchLabels)
		}
		if seen[key] {
			bad("%s: duplicate platform", where)
		}
		seen[key] = true
		wantURI := fmt.Sprintf("https://github.com/kafkaqueues/kafka-queue-operator/releases/download/%s/kubectl-kq_%s_%s_%s.tar.gz",
			p.Spec.Version, p.Spec.Version, osName, arch)
		if pl.URI != wantURI {
			bad("%s: uri %q, want %q", where, pl.URI, wantURI)
		}
		placeholder := "SHA256_" + strings.ToUpper(osName) + "_" + strings.ToUpper(arch)
		switch {
		case sha256Re.MatchString(pl.Sha256):
		case release:
			bad("%s: sha256 %q is not a sha256 digest (the release process fills it)", where, pl.Sha256)
		case pl.Sha256 != placeholder:
			bad("%s: sha256 %q, want a digest or the placeholder %s", where, pl.Sha256, placeholder)
		}
		if pl.Bin != pluginBinary {
			bad("%s: bin %q, want %s", where, pl.Bin, pluginBinary)
		}
		found := false
		for _, f := range pl.Files {
			if f.From == "" || f.To == "" || strings.Contains(f.To, "..") || filepath.IsAbs(f.To) {
				bad("%s: file %+v", where, f)
			}
			if f.From == pluginBinary {
				found = true
			}
		}
		if !found {
			bad("%s: files do not install %s", where, pluginBinary)
		}
	}
	for _, want := range krewPlatforms {
		if !seen[want] {
			bad("no platform %s", want)
		}
	}
	if len(seen) != len(krewPlatforms) {
		bad("platforms %v, want exactly %v", seen, krewPlatforms)
	}
	return &p, problems
}

// TestKrewManifest: hack/krew/kq.yaml is a well-formed krew Plugin for linux and darwin on amd64
// and arm64 whose version is the chart's appVersion; unfilled it is refused as a release
// manifest. (TestKubectlPlugin/krew_release_archive fills it from a built archive.)
func TestKrewManifest(t *testing.T) {
	data := loadKrewManifest(t)
	p, problems := validateKrew(data, false)
	for _, pr := range problems {
		t.Errorf("%s: %s", krewManifest, pr)
	}
	if p == nil {
		t.FailNow()
	}
	chart, err := os.ReadFile(filepath.Join(rig.RepoRoot(), "charts/kafka-queue-operator/Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(chart, &c); err != nil || "v"+c.AppVersion != p.Spec.Version {
		t.Errorf("krew spec.version %s, chart appVersion %q (%v)", p.Spec.Version, c.AppVersion, err)
	}
	if _, problems := validateKrew(data, true); len(problems) != len(krewPlatforms) {
		t.Errorf("the unfilled manifest as a release manifest: %q, want one refused placeholder per platform", problems)
	}
	if _, problems := validateKrew([]byte(strings.Replace(string(data), "  shortDescription:", "  shortDescripton:", 1)), false); len(problems) == 0 {
		t.Error("a misspelt field was accepted")
	}
}

// testKrewReleaseArchive: a release as the manifest's header describes it, for this platform:
// pack the archive, fill its digest, validate the filled manifest as a release manifest, and
// install it as krew does (unpack, link bin onto PATH) so that kubectl runs it as `kubectl kq`.
func testKrewReleaseArchive(t *testing.T, pp *pluginPath) {
	data := loadKrewManifest(t)
	p, problems := validateKrew(data, false)
	if p == nil || len(problems) > 0 {
		t.Fatalf("%s: %q", krewManifest, problems)
	}
	host := runtime.GOOS + "/" + runtime.GOARCH
	if !strings.Contains(strings.Join(krewPlatforms, " "), host) {
		// The manifest's platforms are linux and darwin on amd64 and arm64; CI runs on one.
		if rig.RigRequired() {
			t.Fatalf("no krew platform for %s, but %s is set: the release-archive path must run", host, rig.RequireEnv)
		}
		t.Skipf("no krew platform for %s", host)
	}
	archive := filepath.Join(t.TempDir(), fmt.Sprintf("kubectl-kq_%s_%s_%s.tar.gz", p.Spec.Version, runtime.GOOS, runtime.GOARCH))
	if err := writeArchive(archive, filepath.Join(pp.bin, "kqctl")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	filled := string(data)
	for _, pl := range krewPlatforms {
		osName, arch, _ := strings.Cut(pl, "/")
		digest := hex.EncodeToString(sum[:])
		if pl != host {
			// Other platforms' archives are built by the release; stand in a digest of their name.
			other := sha256.Sum256([]byte(pl))
			digest = hex.EncodeToString(other[:])
		}
		filled = strings.Replace(filled, "SHA256_"+strings.ToUpper(osName)+"_"+strings.ToUpper(arch), digest, 1)
	}
	rp, problems := validateKrew([]byte(filled), true)
	for _, pr := range problems {
		t.Errorf("filled manifest: %s", pr)
	}
	if rp == nil {
		t.FailNow()
	}
	for _, pl := range rp.Spec.Platforms {
		if pl.Selector.MatchLabels["os"]+"/"+pl.Selector.MatchLabels["arch"] != host {
			continue
		}
		if filepath.Base(pl.URI) != filepath.Base(archive) || pl.Sha256 != hex.EncodeToString(sum[:]) {
			t.Errorf("host platform: uri %s sha256 %s; archive %s", pl.URI, pl.Sha256, filepath.Base(archive))
		}
		// Install as krew does: unpack, copy files, link bin onto PATH; kubectl runs it.
		dir := t.TempDir()
		if err := unpack(archive, dir); err != nil {
			t.Fatal(err)
		}
		for _, f := range pl.Files {
			if _, err := os.Stat(filepath.Join(dir, f.From)); err != nil {
				t.Errorf("archive lacks %s: %v", f.From, err)
			}
		}
		pathDir := t.TempDir()
		if err := os.Symlink(filepath.Join(dir, pl.Bin), filepath.Join(pathDir, pluginBinary)); err != nil {
			t.Fatal(err)
		}
		installed := &pluginPath{bin: pathDir, kubectl: pp.kubectl, path: pathDir + string(os.PathListSeparator) + filepath.Dir(pp.kubectl) + string(os.PathListSeparator) + os.Getenv("PATH")}
		out, errOut, err := installed.run(t, dir, nil, "kubectl", "kq", "--help")
		if err != nil || !strings.Contains(out, "kubectl kq [command]") {
			t.Errorf("kubectl kq --help from the release archive: %v\n%s%s", err, out, errOut)
		}
	}
}

// writeArchive packs the kqctl binary as kubectl-kq at the top of a tar.gz, as a release does.
func writeArchive(path, binary string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	b, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: pluginBinary, Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := tw.Write(b); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return f.Close()
}

func unpack(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg || strings.Contains(h.Name, "..") {
			return fmt.Errorf("unexpected archive entry %q", h.Name)
		}
		out, err := os.OpenFile(filepath.Join(dir, h.Name), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode))
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, tr); err != nil {
			out.Close()
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
	}
}
