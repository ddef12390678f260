package image

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

type entry struct {
	typ      byte
	mode     int64
	uid, gid int
	content  string
}

// readImage opens a tarball Write wrote: its one layer's entry names in order and entries
// by name, its manifest.json entry, and its config file.
func readImage(t *testing.T, tarPath string) ([]string, map[string]entry, *tarball.Descriptor, *v1.ConfigFile) {
	t.Helper()
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(tarPath) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 {
		t.Fatalf("manifest.json has %d images, want 1", len(m))
	}
	img, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	entries := map[string]entry{}
	var order []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries[h.Name] = entry{h.Typeflag, h.Mode, h.Uid, h.Gid, string(b)}
		order = append(order, h.Name)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	return order, entries, &m[0], cf
}

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "prog")
	if err := os.WriteFile(src, []byte("#!binary"), 0o600); err != nil { // its own mode is not used
		t.Fatal(err)
	}
	spec := Spec{
		Files: []File{
			{Path: "/usr/local/bin/prog", Mode: 0o755, SourcePath: src},
			{Path: "/etc/conf", Content: []byte("a=1\n"), Uid: 7, Gid: 8},
			Dir("/tmp", fs.ModeSticky|0o777, 0, 0),
			Dir("/home/u", 0o700, 65532, 65532),
			Dir("/var/empty", 0, 0, 0),
		},
		User:       "65532:65532",
		Entrypoint: []string{"/usr/local/bin/prog", "--flag"},
		Cmd:        []string{"arg"},
		WorkingDir: "/home/u",
		Env:        []string{"A=b"},
		Labels:     map[string]string{"k": "v"},
	}
	tarPath := filepath.Join(dir, "img.tar")
	if err := Write(spec, "kqo.local/test:1", tarPath); err != nil {
		t.Fatal(err)
	}
	order, entries, m, cf := readImage(t, tarPath)
	if !slices.Equal(m.RepoTags, []string{"kqo.local/test:1"}) {
		t.Errorf("RepoTags %q", m.RepoTags)
	}
	c := cf.Config
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, spec.Entrypoint) || !slices.Equal(c.Cmd, spec.Cmd) ||
		c.WorkingDir != "/home/u" || !slices.Equal(c.Env, []string{DefaultPath, "A=b"}) || c.Labels["k"] != "v" {
		t.Errorf("config %+v", c)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH || !cf.Created.Time.Equal(epoch) {
		t.Errorf("config file: os %s, architecture %s, created %v", cf.OS, cf.Architecture, cf.Created)
	}

	want := map[string]entry{
		"etc/":               {tar.TypeDir, 0o755, 0, 0, ""},
		"etc/conf":           {tar.TypeReg, 0o644, 7, 8, "a=1\n"},
		"home/":              {tar.TypeDir, 0o755, 0, 0, ""},
		"home/u/":            {tar.TypeDir, 0o700, 65532, 65532, ""},
		"tmp/":               {tar.TypeDir, 0o1777, 0, 0, ""},
		"usr/":               {tar.TypeDir, 0o755, 0, 0, ""},
		"usr/local/":         {tar.TypeDir, 0o755, 0, 0, ""},
		"usr/local/bin/":     {tar.TypeDir, 0o755, 0, 0, ""},
		"usr/local/bin/prog": {tar.TypeReg, 0o755, 0, 0, "#!binary"},
		"var/":               {tar.TypeDir, 0o755, 0, 0, ""},
		"var/empty/":         {tar.TypeDir, 0o755, 0, 0, ""},
	}
	if len(entries) != len(want) {
		t.Errorf("entries %q, want %d", order, len(want))
	}
	for name, w := range want {
		if got, ok := entries[name]; !ok || got != w {
			t.Errorf("%s: %+v, want %+v", name, got, w)
		}
	}
	if !slices.IsSorted(order) {
		t.Errorf("entries not in path order: %q", order)
	}

	// The same spec gives the same image: the same config, naming the same layer.
	tar2 := filepath.Join(dir, "img2.tar")
	if err := Write(spec, "kqo.local/test:1", tar2); err != nil {
		t.Fatal(err)
	}
	if _, _, m2, _ := readImage(t, tar2); m2.Config != m.Config || !slices.Equal(m2.Layers, m.Layers) {
		t.Errorf("two writes of one spec: config %s and %s, layers %q and %q", m.Config, m2.Config, m.Layers, m2.Layers)
	}
}

func TestWriteRejectsBadSpecs(t *testing.T) {
	dir := t.TempDir()
	for name, files := range map[string][]File{
		"relative path":    {{Path: "etc/x"}},
		"unclean path":     {{Path: "/etc/../x"}},
		"duplicate":        {{Path: "/x"}, {Path: "/x"}},
		"dir with content": {{Path: "/d", Mode: fs.ModeDir, Content: []byte("x")}},
		"both sources":     {{Path: "/x", Content: []byte("x"), SourcePath: "/etc/hostname"}},
		"symlink":          {{Path: "/x", Mode: fs.ModeSymlink}},
		"file as parent":   {{Path: "/a", Content: []byte("x")}, {Path: "/a/b"}},
		"missing source":   {{Path: "/x", SourcePath: filepath.Join(dir, "nope")}},
	} {
		if err := Write(Spec{Files: files}, "kqo.local/bad:1", filepath.Join(dir, "bad.tar")); err == nil {
			t.Errorf("%s: Write accepted %+v", name, files)
		}
	}
	if err := Write(Spec{}, "Not A Ref", filepath.Join(dir, "bad.tar")); err == nil {
		t.Error("Write accepted a bad ref")
	}
}

// The operator, pause and app specs written from stand-in binaries: the files and config
// the package doc promises.
func TestSpecsWrite(t *testing.T) {
	if _, err := os.Stat(HostCACertificates); err != nil {
		// CI's machine has one (ca-certificates); there a missing bundle fails.
		if rig.RigRequired() {
			t.Fatalf("this host has no CA bundle to copy: %v", err)
		}
		t.Skipf("this host has no CA bundle to copy: %v", err)
	}
	bin := t.TempDir()
	for _, name := range []string{"manager", "kqctl", "republisher", "pause", "queueapp"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ca, err := os.ReadFile(HostCACertificates)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for _, c := range []struct {
		spec       Spec
		ref        string
		user       string
		entrypoint string
		want       map[string]entry
		absent     []string
	}{
		{OperatorSpec(bin), "ghcr.io/kafkaqueues/kafka-queue-operator:0.0.0-test", "65532:65532", "/manager", map[string]entry{
			"manager":                           {tar.TypeReg, 0o755, 0, 0, "manager"},
			"kqctl":                             {tar.TypeReg, 0o755, 0, 0, "kqctl"},
			"republisher":                       {tar.TypeReg, 0o755, 0, 0, "republisher"},
			"tmp/":                              {tar.TypeDir, 0o1777, 0, 0, ""},
			"home/nonroot/":                     {tar.TypeDir, 0o700, 65532, 65532, ""},
			"etc/ssl/certs/ca-certificates.crt": {tar.TypeReg, 0o644, 0, 0, string(ca)},
		}, nil},
		{PauseSpec(bin), "kqo.local/pause:1", "65535:65535", "/pause", map[string]entry{
			"pause": {tar.TypeReg, 0o755, 0, 0, "pause"},
		}, []string{"etc/", "tmp/"}},
		{AppSpec(bin), "kqo.local/queueapp:1", "65532:65532", "/queueapp", map[string]entry{
			"queueapp":      {tar.TypeReg, 0o755, 0, 0, "queueapp"},
			"home/nonroot/": {tar.TypeDir, 0o700, 65532, 65532, ""},
		}, []string{"etc/ssl/certs/ca-certificates.crt"}},
	} {
		t.Run(c.ref, func(t *testing.T) {
			p := filepath.Join(out, "img.tar")
			if err := Write(c.spec, c.ref, p); err != nil {
				t.Fatal(err)
			}
			order, entries, m, cf := readImage(t, p)
			if !slices.Equal(m.RepoTags, []string{c.ref}) {
				t.Errorf("RepoTags %q", m.RepoTags)
			}
			for name, w := range c.want {
				if got := entries[name]; got != w {
					t.Errorf("%s: %+v, want %+v", name, got, w)
				}
			}
			for _, name := range c.absent {
				if _, ok := entries[name]; ok {
					t.Errorf("%s is in the image", name)
				}
			}
			if c.spec.User == "65532:65532" {
				passwd := entries["etc/passwd"].content
				if passwd == "" || !strings.Contains(passwd, "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n") || !strings.Contains(entries["etc/group"].content, "nonroot:x:65532:\n") {
					t.Errorf("passwd %q, group %q", passwd, entries["etc/group"].content)
				}
			}
			if cf.Config.User != c.user || !slices.Equal(cf.Config.Entrypoint, []string{c.entrypoint}) || cf.Config.WorkingDir != "/" {
				b, _ := json.Marshal(cf.Config)
				t.Errorf("config %s; entries %q", b, order)
			}
		})
	}
}
