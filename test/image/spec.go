package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// DefaultPath is the PATH every image gets unless its Spec sets one: distroless's.
const DefaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// epoch is every entry's modification time and the config's creation time, so that the
// same inputs give the same layer and image digests.
var epoch = time.Unix(0, 0).UTC()

// Spec describes a one-layer linux image for runtime.GOARCH.
type Spec struct {
	// Files are the layer's entries, in any order. A parent directory not listed is added as
	// root:root 0755.
	Files []File
	// User is the config's User, as in a Dockerfile's USER: "65532:65532" (uid:gid).
	User string
	// Entrypoint and Cmd are the config's, exec form: ["/manager"].
	Entrypoint []string
	Cmd        []string
	// WorkingDir is the config's, an absolute path ("/"); empty means the runtime's default (/).
	WorkingDir string
	// Env holds NAME=value entries; DefaultPath is added when no entry sets PATH.
	Env []string
	// Labels are the config's labels; nil for none.
	Labels map[string]string
}

// File is one layer entry: a regular file or a directory.
type File struct {
	// Path is absolute and clean: "/etc/passwd", "/tmp".
	Path string
	// Mode holds the permission bits plus fs.ModeDir for a directory and any of
	// fs.ModeSticky, fs.ModeSetuid, fs.ModeSetgid; permission bits 0 mean 0644 for a file and
	// 0755 for a directory.
	Mode fs.FileMode
	// Content is a regular file's bytes; SourcePath instead names a host file whose bytes
	// are read when the image is written (its own mode and owner are not used). At most one
	// of the two is set; neither is set for a directory.
	Content    []byte
	SourcePath string
	// Uid and Gid own the entry (numeric; the tar entry carries no user or group name).
	Uid, Gid int
}

// Dir returns a directory entry.
func Dir(p string, perm fs.FileMode, uid, gid int) File {
	return File{Path: p, Mode: fs.ModeDir | perm, Uid: uid, Gid: gid}
}

// Image builds the spec's image in memory; files named by SourcePath are read now.
func Image(spec Spec) (v1.Image, error) {
	layerTar, err := layerBytes(spec.Files)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: "kafka-queue-operator test/image"},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: epoch}
	env := append([]string(nil), spec.Env...)
	if !hasVar(env, "PATH") {
		env = append([]string{DefaultPath}, env...)
	}
	cf.Config = v1.Config{
		User:       spec.User,
		Entrypoint: spec.Entrypoint,
		Cmd:        spec.Cmd,
		WorkingDir: spec.WorkingDir,
		Env:        env,
		Labels:     spec.Labels,
	}
	return mutate.ConfigFile(img, cf)
}

// Write writes the spec's image to tarPath as a docker-save tarball (manifest.json with
// RepoTags [ref], the config blob, one gzip layer) that `ctr images import` and
// `docker load` accept. ref is a tag such as "kqo.local/pause:1" (no digest); a ref without
// a registry is Docker Hub's, as containerd would name it. The file is replaced if present.
func Write(spec Spec, ref, tarPath string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image ref %q: %w", ref, err)
	}
	img, err := Image(spec)
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	if err := tarball.WriteToFile(tarPath, tag, img); err != nil {
		return fmt.Errorf("image %s: write %s: %w", ref, tarPath, err)
	}
	return nil
}

func hasVar(env []string, name string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, name+"=") {
			return true
		}
	}
	return false
}

// layerBytes returns the uncompressed layer: the files sorted by path, parents first, with
// the missing parent directories added.
func layerBytes(files []File) ([]byte, error) {
	byPath := map[string]File{}
	for _, f := range files {
		if f.Path == "" || f.Path[0] != '/' || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("file path %q: want an absolute, clean path other than /", f.Path)
		}
		if _, dup := byPath[f.Path]; dup {
			return nil, fmt.Errorf("file path %q listed twice", f.Path)
		}
		if f.Mode.IsDir() && (f.Content != nil || f.SourcePath != "") {
			return nil, fmt.Errorf("%s: a directory has no content", f.Path)
		}
		if f.Content != nil && f.SourcePath != "" {
			return nil, fmt.Errorf("%s: both Content and SourcePath set", f.Path)
		}
		if f.Mode&^(fs.ModeDir|fs.ModeSticky|fs.ModeSetuid|fs.ModeSetgid|fs.ModePerm) != 0 {
			return nil, fmt.Errorf("%s: mode %v: only regular files and directories are supported", f.Path, f.Mode)
		}
		byPath[f.Path] = f
	}
	for p := range byPath {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if parent, ok := byPath[d]; !ok {
				byPath[d] = Dir(d, 0o755, 0, 0)
			} else if !parent.Mode.IsDir() {
				return nil, fmt.Errorf("%s: parent %s is a file", p, d)
			}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	// Path order puts every directory before its entries ("/a" < "/a/b").
	sort.Strings(paths)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		f := byPath[p]
		hdr := &tar.Header{
			Name:    strings.TrimPrefix(p, "/"),
			Mode:    tarMode(f.Mode),
			Uid:     f.Uid,
			Gid:     f.Gid,
			ModTime: epoch,
		}
		var content []byte
		if f.Mode.IsDir() {
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		} else {
			hdr.Typeflag = tar.TypeReg
			content = f.Content
			if f.SourcePath != "" {
				b, err := os.ReadFile(f.SourcePath)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", p, err)
				}
				content = b
			}
			hdr.Size = int64(len(content))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if _, err := tw.Write(content); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarMode turns a FileMode into tar's mode bits (c_ISUID 04000, c_ISGID 02000, c_ISVTX
// 01000 and the permissions), applying the 0644/0755 defaults.
func tarMode(m fs.FileMode) int64 {
	perm := m.Perm()
	if perm == 0 {
		perm = 0o644
		if m.IsDir() {
			perm = 0o755
		}
	}
	mode := int64(perm)
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}
