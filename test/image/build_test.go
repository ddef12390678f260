package image

import (
	"bufio"
	"context"
	"debug/elf"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// BuildFixtures' pause binary is static and stripped, as the Dockerfile's flags make them,
// and exits 0 on SIGTERM.
func TestBuildPause(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs go build")
	}
	root, err := FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := Build(ctx, root, out, "./test/image/pause"); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(out, "pause")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("pause is dynamically linked (%v): CGO_ENABLED=0 was not applied", p.Type)
		}
	}
	if f.Section(".symtab") != nil {
		t.Error("pause has a symbol table: -ldflags=-s was not applied")
	}
	f.Close()
	if runtime.GOOS != "linux" {
		return
	}
	runPause(t, exec.Command(bin), nil, func(cmd *exec.Cmd) error { return cmd.Process.Signal(syscall.SIGTERM) })
}

// runPause starts cmd, which runs the pause program (itself or in a container), waits for
// its first line on stderr (its SIGTERM handler is then in place: a SIGTERM before would
// kill it), calls running unless nil, ends it with term, and checks that cmd exits 0
// within 10s.
func runPause(t *testing.T, cmd *exec.Cmd, running func(), term func(*exec.Cmd) error) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stderr)
	line, err := r.ReadString('\n')
	if err != nil || line != "pause: waiting for SIGTERM or SIGINT\n" {
		_ = cmd.Process.Kill()
		t.Fatalf("pause's first line %q (%v)", line, err)
	}
	if running != nil {
		running()
	}
	if err := term(cmd); err != nil {
		_ = cmd.Process.Kill()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var rest []byte
	go func() {
		rest, _ = io.ReadAll(r) // read to the end before Wait closes the pipe
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("pause after SIGTERM: %v (%s), want exit 0", err, rest)
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("pause did not exit on SIGTERM")
	}
}
