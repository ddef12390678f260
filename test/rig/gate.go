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
	n := startSlots()
	dir := filepath.Join(machineTempDir(), "kqo-start-slots")
	// Open to every user (the umask would narrow it), so runs of several users share the
	// gate; a file another user made is opened read-only, on which flock works as well.
	if err := os.MkdirAll(dir, 0o777); err != nil {
		fmt.Fprintf(os.Stderr, "rig: no start gate (%v): %s starts at once\n", err, what)
		return func() {}
	}
	_ = os.Chmod(dir, os.ModeSticky|0o777)
	var files []*os.File
	var openErr error
	for i := 0; i < n; i++ {
		name := filepath.Join(dir, fmt.Sprintf("slot-%d", i))
		f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o666)
		if err == nil {
			_ = f.Chmod(0o666)
		} else if f, err = os.Open(name); err != nil {
			openErr = err
			continue
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		fmt.Fprintf(os.Stderr, "rig: no start gate (%v): %s starts at once\n", openErr, what)
		return func() {}
	}
	closeAll := func(keep *os.File) {
		for _, f := range files {
			if f != keep {
				_ = f.Close()
			}
		}
	}
	start, said := time.Now(), time.Now()
	for {
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
		if time.Since(said) >= 30*time.Second {
			said = time.Now()
			fmt.Fprintf(os.Stderr, "rig: %s still waiting for one of %d start slots in %s after %s (another test process holds them all; a stopped one holds them until it exits)\n",
				what, len(files), dir, time.Since(start).Round(time.Second))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// maxStartSlots bounds KQO_START_SLOTS (each slot is a file every start opens).
const maxStartSlots = 64

// startSlots is KQO_START_SLOTS, or the number of CPUs when unset; a value that is not a
// number from 1 to maxStartSlots is refused with a warning.
func startSlots() int {
	n := runtime.NumCPU()
	v := os.Getenv(StartSlotsEnv)
	if v == "" {
		return min(n, maxStartSlots)
	}
	if k, err := strconv.Atoi(v); err == nil && k > 0 && k <= maxStartSlots {
		return k
	}
	fmt.Fprintf(os.Stderr, "rig: %s=%q is not a number from 1 to %d; using %d\n", StartSlotsEnv, v, maxStartSlots, min(n, maxStartSlots))
	return min(n, maxStartSlots)
}
