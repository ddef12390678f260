package rig

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

// StartSlotsEnv overrides how many apiservers and Kafka clusters may be starting at once on
// this machine (default: the number of CPUs).
const StartSlotsEnv = "KQO_START_SLOTS"

// acquireStartSlot waits for one of the machine's start slots and returns its release.
//
// Starting a kube-apiserver or a Kafka JVM is the rig's CPU burst; once up, both idle. Tests
// run in parallel, and `go test -p` runs packages in separate processes, so the slots are
// lock files shared by every test process of the machine (flock): on two cores, eight
// apiservers started at once each missed envtest's start timeout, while two at a time start in
// seconds and the rest wait their turn.
func acquireStartSlot(what string) (release func()) {
	n := runtime.NumCPU()
	if v, err := strconv.Atoi(os.Getenv(StartSlotsEnv)); err == nil && v > 0 {
		n = v
	}
	dir := filepath.Join(os.TempDir(), "kqo-start-slots")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return func() {}
	}
	var files []*os.File
	for i := 0; i < n; i++ {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("slot-%d", i)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			continue
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return func() {}
	}
	closeAll := func(keep *os.File) {
		for _, f := range files {
			if f != keep {
				_ = f.Close()
			}
		}
	}
	for start := time.Now(); ; {
		for _, f := range files {
			if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
				closeAll(f)
				if waited := time.Since(start); waited > 30*time.Second {
					fmt.Fprintf(os.Stderr, "rig: %s waited %s for a start slot\n", what, waited.Round(time.Second))
				}
				return func() {
					_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
					_ = f.Close()
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}
