package rig

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

var (
	tempOnce sync.Once
	// tempBase is the temp dir this process started with: machine-wide state (the start
	// slots) lives there, not in the process's own directory.
	tempBase string
	// tempOwn is this process's own directory, $TMPDIR/kqo-rig/<pid>.
	tempOwn string
)

// isolateTemp, on its first call, points this process's TMPDIR at a directory of its own,
// $TMPDIR/kqo-rig/<pid>, after removing those of earlier processes that no longer run. Every
// directory the rig makes (the brokers' logs, the apiserver's etcd data and certificates,
// kubeconfigs, the node's state) is made in the temp dir, so what a killed or timed-out test
// process could not clean up (SIGKILL, a -timeout panic: no cleanup runs) is removed by the
// next test process that starts a rig. The rig's processes themselves die with the test
// process (setpriv --pdeathsig).
func isolateTemp() {
	tempOnce.Do(func() {
		tempBase = os.TempDir()
		root := filepath.Join(tempBase, "kqo-rig")
		if err := os.MkdirAll(root, 0o777); err != nil {
			fmt.Fprintf(os.Stderr, "rig: %v; rig directories stay in %s\n", err, tempBase)
			return
		}
		_ = os.Chmod(root, os.ModeSticky|0o777)
		if entries, err := os.ReadDir(root); err == nil {
			for _, e := range entries {
				pid, err := strconv.Atoi(e.Name())
				if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
					continue
				}
				_ = os.RemoveAll(filepath.Join(root, e.Name()))
			}
		}
		own := filepath.Join(root, strconv.Itoa(os.Getpid()))
		if err := os.MkdirAll(own, 0o700); err != nil {
			fmt.Fprintf(os.Stderr, "rig: %v; rig directories stay in %s\n", err, tempBase)
			return
		}
		tempOwn = own
		_ = os.Setenv("TMPDIR", own)
	})
}

// machineTempDir is the temp dir the process started with (for state shared by every test
// process of the machine).
func machineTempDir() string {
	isolateTemp()
	return tempBase
}

// removeOwnTemp removes this process's own directory (at the end of a package's tests).
func removeOwnTemp() {
	if tempOwn != "" {
		_ = os.RemoveAll(tempOwn)
	}
}
