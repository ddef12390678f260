package image

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func readDockerfile(t *testing.T) string {
	t.Helper()
	root, err := FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The repository's Dockerfile and OperatorSpec/BuildCommand agree.
func TestDockerfileMatchesOperatorSpec(t *testing.T) {
	df := readDockerfile(t)
	d, err := ParseDockerfile(df)
	if err != nil {
		t.Fatal(err)
	}
	// The parse found what the comparison is about; an empty parse would agree with nothing
	// but would not fail silently either, since every binary would be reported.
	if len(d.Binaries) != 3 || d.User == "" || len(d.Entrypoint) == 0 {
		t.Fatalf("parsed %+v: want 3 binaries, a USER and an ENTRYPOINT", d)
	}
	for _, b := range d.Binaries {
		if !slices.Contains(b.Flags, "-trimpath") || !slices.Contains(b.Flags, "-ldflags=-s -w") ||
			!slices.Contains(b.Env, "CGO_ENABLED=0") || !slices.Contains(b.Env, "GOOS=linux") {
			t.Errorf("parsed build %+v: want -trimpath, -ldflags=-s -w, CGO_ENABLED=0, GOOS=linux", b)
		}
	}
	drifts, err := OperatorDrift(df)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range drifts {
		t.Errorf("Dockerfile and test/image drifted: %s", d)
	}
}

// Each change to the Dockerfile (or to our side) is reported by the same comparison.
func TestDockerfileDriftIsReported(t *testing.T) {
	df := readDockerfile(t)
	edit := func(old, new string) func(string) string {
		return func(s string) string {
			if !strings.Contains(s, old) {
				t.Fatalf("the Dockerfile no longer contains %q; update this test", old)
			}
			return strings.Replace(s, old, new, 1)
		}
	}
	for _, c := range []struct {
		name   string
		modify func(string) string
		want   string // a substring of one reported drift
	}{
		{"extra COPY of a built binary", edit("COPY --from=build /out/republisher /republisher",
			"COPY --from=build /out/republisher /republisher\nCOPY --from=build /out/kqctl /usr/local/bin/kubectl-kq"), "/usr/local/bin/kubectl-kq: the Dockerfile ships it"},
		{"COPY from the build context", edit("USER 65532:65532", "COPY config.yaml /etc/kqo/config.yaml\nUSER 65532:65532"), "COPY config.yaml"},
		{"COPY with --chown", edit("COPY --from=build /out/kqctl /kqctl", "COPY --from=build --chown=65532:65532 /out/kqctl /kqctl"), "--chown"},
		{"binary dropped", edit("COPY --from=build /out/kqctl /kqctl\n", ""), "/kqctl: OperatorSpec ships it, the Dockerfile does not"},
		{"different USER", edit("USER 65532:65532", "USER 1000:1000"), `USER: the Dockerfile says "1000:1000"`},
		{"different ENTRYPOINT", edit(`ENTRYPOINT ["/manager"]`, `ENTRYPOINT ["/republisher"]`), "ENTRYPOINT"},
		{"different WORKDIR", edit("WORKDIR /\nCOPY --from", "WORKDIR /home/nonroot\nCOPY --from"), "WORKDIR"},
		{"different base", edit("FROM gcr.io/distroless/static:nonroot", "FROM gcr.io/distroless/base:nonroot"), "base image"},
		{"ENV in the final stage", edit(`ENTRYPOINT ["/manager"]`, "ENV GODEBUG=x509negativeserial=1\nENTRYPOINT [\"/manager\"]"), "ENV GODEBUG"},
		{"different ldflags", edit(`go build -trimpath -ldflags="-s -w" -o /out/manager`, `go build -trimpath -ldflags="-s -w -X main.version=1" -o /out/manager`), "/manager: the Dockerfile builds it with flags"},
		{"flag dropped", edit(`go build -trimpath -ldflags="-s -w" -o /out/kqctl`, `go build -ldflags="-s -w" -o /out/kqctl`), "/kqctl: the Dockerfile builds it with flags"},
		{"cgo on", edit("CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags=\"-s -w\" -o /out/republisher", "CGO_ENABLED=1 GOOS=linux go build -trimpath -ldflags=\"-s -w\" -o /out/republisher"), "/republisher: the Dockerfile builds it with CGO_ENABLED=1"},
		{"other package", edit("-o /out/kqctl ./cmd/kqctl", "-o /out/kqctl ./cmd/kqctl2"), "/kqctl: the Dockerfile builds it from ./cmd/kqctl2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			drifts, err := OperatorDrift(c.modify(df))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(drifts, func(d string) bool { return strings.Contains(d, c.want) }) {
				t.Errorf("drift %q not reported; got %q", c.want, drifts)
			}
		})
	}

	// Our side changing is caught too.
	d, err := ParseDockerfile(df)
	if err != nil {
		t.Fatal(err)
	}
	const binDir = "/bin-dir"
	cmd := func(pkgs ...string) []string {
		return drift(d, OperatorSpec(binDir), binDir, BuildCommand(context.Background(), "/repo", binDir, pkgs...))
	}
	if got := cmd("./cmd/manager", "./cmd/republisher"); !slices.ContainsFunc(got, func(s string) bool {
		return strings.Contains(s, "/kqctl: OperatorSpec ships /bin-dir/kqctl, which BuildCommand does not build")
	}) {
		t.Errorf("a package missing from BuildCommand: got %q", got)
	}
	spec := OperatorSpec(binDir)
	spec.User = "0:0"
	for i := range spec.Files {
		if spec.Files[i].Path == "/manager" {
			spec.Files[i].Mode = 0o700
		}
	}
	got := drift(d, spec, binDir, BuildCommand(context.Background(), "/repo", binDir, OperatorPackages...))
	for _, want := range []string{`USER: the Dockerfile says "65532:65532", OperatorSpec "0:0"`, "/manager: OperatorSpec ships it as 0:0 mode 700"} {
		if !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, want) }) {
			t.Errorf("want %q among %q", want, got)
		}
	}
}

func TestParseDockerfileForms(t *testing.T) {
	d, err := ParseDockerfile(`
ARG GO=1.26
# a comment
FROM --platform=$BUILDPLATFORM golang:${GO} AS b
RUN go mod download
RUN CGO_ENABLED=0 go build \
      # comments and blank lines inside a continuation are skipped

      -trimpath --ldflags '-s -w' -o=/out/x ./cmd/x; GOOS=linux go build -o /out/y ./cmd/y
FROM scratch
COPY --from=b /out/x /out/y /bin/
USER 1:2
`)
	if err != nil {
		t.Fatal(err)
	}
	x, y := d.Binaries["/bin/x"], d.Binaries["/bin/y"]
	if x.Package != "./cmd/x" || !slices.Equal(x.Flags, []string{"-trimpath", "-ldflags=-s -w"}) || !slices.Equal(x.Env, []string{"CGO_ENABLED=0"}) {
		t.Errorf("/bin/x: %+v", x)
	}
	if y.Package != "./cmd/y" || len(y.Flags) != 0 || !slices.Equal(y.Env, []string{"GOOS=linux"}) {
		t.Errorf("/bin/y: %+v", y)
	}
	if d.Base != "scratch" || d.User != "1:2" || d.Entrypoint != nil || d.WorkingDir != "" || len(d.Unmodelled) != 0 {
		t.Errorf("parsed %+v", d)
	}
	if _, err := ParseDockerfile("FROM a AS b\nRUN go build -o /out/x ./x\nFROM c\nCOPY --from=b /out/z /z\n"); err == nil {
		t.Error("a COPY of something no go build writes parsed")
	}
	if _, err := ParseDockerfile("FROM a\nENTRYPOINT /manager\n"); err == nil {
		t.Error("a shell-form ENTRYPOINT parsed")
	}
}
