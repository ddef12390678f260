package rig

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Ports for processes a test starts (brokers, the sidecar binary, a webhook server) are
// chosen here, not with net.Listen(":0") and a Close: a port the kernel hands out for ":0"
// comes from its ephemeral range, which every outgoing connection of the machine draws from
// too, so between the Close and the child's bind a client socket of another test could take
// it ("bind: address already in use", seen in CI). A port from here is
//   - outside the ephemeral range (ip_local_port_range), so no ":0" listener and no outgoing
//     connection is ever given it;
//   - reserved for this test process's lifetime by a lock file shared by every test process
//     of the machine (flock; the kernel drops it when the process exits, however it exits),
//     so two packages running at once never pick the same one;
//   - free when chosen (bound and released once).
var ports struct {
	sync.Mutex
	held map[int]*os.File
}

// FreePort returns a loopback TCP port reserved for this test process (see above).
func FreePort() (int, error) {
	ps, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ps[0], nil
}

// FreePorts returns n distinct ports as FreePort does.
func FreePorts(n int) ([]int, error) {
	ports.Lock()
	defer ports.Unlock()
	if ports.held == nil {
		ports.held = map[int]*os.File{}
	}
	dir := filepath.Join(machineTempDir(), "kqo-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return kernelPorts(n)
	}
	_ = os.Chmod(dir, os.ModeSticky|0o777)
	ranges := portRanges()
	total := 0
	for _, r := range ranges {
		total += r[1] - r[0] + 1
	}
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > 2000 || total == 0 {
			return nil, fmt.Errorf("no free port outside the ephemeral range after %d tries", tries)
		}
		i := rand.IntN(total)
		p := 0
		for _, r := range ranges {
			if size := r[1] - r[0] + 1; i < size {
				p = r[0] + i
				break
			} else {
				i -= size
			}
		}
		if _, mine := ports.held[p]; mine {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			if f, err = os.Open(filepath.Join(dir, strconv.Itoa(p))); err != nil {
				continue
			}
		} else {
			_ = f.Chmod(0o666)
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			_ = f.Close() // another test process holds it
			continue
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			_ = f.Close() // something outside the rig listens there
			continue
		}
		_ = l.Close()
		ports.held[p] = f
		out = append(out, p)
	}
	return out, nil
}

// portRanges are the unprivileged ports outside the kernel's ephemeral range (and above the
// ports services usually take), as inclusive [low, high] pairs.
func portRanges() [][2]int {
	lo, hi := 32768, 60999 // Linux's default ip_local_port_range
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			l, err1 := strconv.Atoi(f[0])
			h, err2 := strconv.Atoi(f[1])
			if err1 == nil && err2 == nil && l <= h {
				lo, hi = l, h
			}
		}
	}
	var rs [][2]int
	const floor, ceil = 10000, 65535
	if lo-1 >= floor {
		rs = append(rs, [2]int{floor, min(lo-1, ceil)})
	}
	if hi+1 <= ceil {
		rs = append(rs, [2]int{max(hi+1, floor), ceil})
	}
	return rs
}

// kernelPorts is the fallback when the lock directory cannot be made: ports the kernel
// chooses, held open together so they are distinct, then released.
func kernelPorts(n int) ([]int, error) {
	var out []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// FreeLoopbackAddr returns "127.0.0.1:port" for a port from FreePort (for a process the test
// starts with a listen address flag).
func FreeLoopbackAddr() (string, error) {
	p, err := FreePort()
	if err != nil {
		return "", err
	}
	return "127.0.0.1:" + strconv.Itoa(p), nil
}
