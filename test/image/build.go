package image

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
)

// ModulePath is the module that FindRepoRoot looks for.
const ModulePath = "github.com/kafkaqueues/kafka-queue-operator"

// GoBuildEnv and GoBuildFlags are the Dockerfile's build command, which BuildCommand runs:
// CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w". BuildCommand also sets
// GOARCH=runtime.GOARCH, the architecture the image configs name (docker build takes it
// from the build platform instead).
var (
	GoBuildEnv   = []string{"CGO_ENABLED=0", "GOOS=linux"}
	GoBuildFlags = []string{"-trimpath", "-ldflags=-s -w"}
)

// OperatorPackages are the Dockerfile's three programs, in its order, as Go packages relative
// to the repository root; each binary is named after its package's last element (manager,
// kqctl, republisher), as the Dockerfile names them.
var OperatorPackages = []string{"./cmd/manager", "./cmd/kqctl", "./cmd/republisher"}

// FixturePackages are the test images' programs: the pause program and the queue app
// (binaries pause and queueapp).
var FixturePackages = []string{"./test/image/pause", "./test/image/queueapp"}

// BuildCommand returns the go build that writes pkgs into outDir (outDir/<last element>), run in
// repoRoot: one `go build GoBuildFlags... -o outDir/ packages...` with GoBuildEnv and
// GOARCH=runtime.GOARCH added to this process's environment. One command builds them all,
// sharing the compile of their common packages; go's build cache makes a rebuild fast.
func BuildCommand(ctx context.Context, repoRoot, outDir string, pkgs ...string) *exec.Cmd {
	return buildCommand(ctx, repoRoot, outDir, GoBuildFlags, pkgs...)
}

func buildCommand(ctx context.Context, repoRoot, outDir string, flags []string, pkgs ...string) *exec.Cmd {
	args := append([]string{"build"}, flags...)
	args = append(args, "-o", strings.TrimSuffix(outDir, string(filepath.Separator))+string(filepath.Separator))
	args = append(args, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), GoBuildEnv...)
	cmd.Env = append(cmd.Env, "GOARCH="+runtime.GOARCH)
	return cmd
}

// Build runs BuildCommand, creating outDir; the go command's output goes to stderr, and a
// failure's error includes it.
func Build(ctx context.Context, repoRoot, outDir string, pkgs ...string) error {
	return build(ctx, repoRoot, outDir, GoBuildFlags, pkgs...)
}

func build(ctx context.Context, repoRoot, outDir string, flags []string, pkgs ...string) error {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	abs, err := filepath.Abs(outDir)
	if err != nil {
		return err
	}
	seen := map[string]string{}
	for _, p := range pkgs {
		if other, dup := seen[path.Base(p)]; dup {
			return fmt.Errorf("%s and %s would both be written to %s", other, p, path.Base(p))
		}
		seen[path.Base(p)] = p
	}
	cmd := buildCommand(ctx, repoRoot, abs, flags, pkgs...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	if len(out) > 0 {
		_, _ = os.Stderr.Write(out)
	}
	return nil
}

// BuildBinaries builds OperatorPackages into outDir (outDir/manager, outDir/kqctl,
// outDir/republisher) with the Dockerfile's flags; repoRoot is the module's root.
func BuildBinaries(ctx context.Context, repoRoot, outDir string) error {
	return Build(ctx, repoRoot, outDir, OperatorPackages...)
}

// VersionLDFlags are the linker flags that set the binaries' version and commit
// (internal/version), as make build and make release link them.
func VersionLDFlags(version, commit string) string {
	return fmt.Sprintf("-X %[1]s/internal/version.Version=%[2]s -X %[1]s/internal/version.Commit=%[3]s", ModulePath, version, commit)
}

// BuildReleaseBinaries builds OperatorPackages as BuildBinaries does, with version and
// commit linked in: the binaries of a released image print them (manager --version, and the
// manager's "starting manager" log line).
func BuildReleaseBinaries(ctx context.Context, repoRoot, outDir, version, commit string) error {
	flags := []string{"-trimpath", "-ldflags=-s -w " + VersionLDFlags(version, commit)}
	return build(ctx, repoRoot, outDir, flags, OperatorPackages...)
}

// BuildFixtures builds FixturePackages into outDir (outDir/pause, outDir/queueapp) with the
// same flags.
func BuildFixtures(ctx context.Context, repoRoot, outDir string) error {
	return Build(ctx, repoRoot, outDir, FixturePackages...)
}

// FindRepoRoot returns the directory at or above dir whose go.mod declares ModulePath.
func FindRepoRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if f, err := os.Open(filepath.Join(d, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			found := false
			for sc.Scan() {
				if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
					found = fields[1] == ModulePath
					break
				}
			}
			f.Close()
			if found {
				return d, nil
			}
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod of %s at or above %s", ModulePath, dir)
		}
		d = parent
	}
}
