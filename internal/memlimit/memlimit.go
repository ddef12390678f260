// Package memlimit gives the Go runtime a soft memory limit (runtime/debug.SetMemoryLimit)
// from the container's cgroup memory limit when GOMEMLIMIT is not set, so the GC collects
// harder before the kernel's OOM killer would act rather than letting the heap grow to
// twice the live heap (GOGC=100) regardless of the limit.
//
// The limit is read from cgroup v2 (memory.max of the process's cgroup and its ancestors,
// the smallest wins) or cgroup v1 (memory.limit_in_bytes of the memory controller's
// cgroup, or of the hierarchy's root as mounted in a container). "max" (v2) or a value at
// or above 2^62 (v1's "unlimited", 9223372036854771712) means no limit.
package memlimit

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// DefaultRatio is the share of the cgroup limit the runtime gets by default: the rest is
// left for memory the Go runtime does not count (thread stacks outside the heap, cgo) and
// for the GC to catch up before the kernel's limit.
const DefaultRatio = 0.9

// Result says what Apply did.
type Result struct {
	// Limit is the soft limit set, in bytes (0: none set by Apply).
	Limit int64
	// CgroupLimit is the container's memory limit in bytes (0: none found).
	CgroupLimit int64
	// Source is where the limit came from: "GOMEMLIMIT" (the environment's, left alone),
	// the cgroup file read, or "" when no limit was found.
	Source string
}

// Apply sets the runtime's soft memory limit to ratio × the cgroup memory limit found
// under root ("/" in production: it reads root/proc/self/cgroup and root/sys/fs/cgroup),
// unless GOMEMLIMIT is set (the runtime then already uses it) or ratio is 0 (off). ratio
// must lie in (0, 1]. A host without cgroups or without a limit sets nothing and returns
// no error; an unreadable or malformed limit file is an error naming the file.
func Apply(root string, ratio float64) (Result, error) {
	if err := ValidateRatio(ratio); err != nil {
		return Result{}, err
	}
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		return Result{Limit: debug.SetMemoryLimit(-1), Source: "GOMEMLIMIT"}, nil
	}
	if ratio == 0 {
		return Result{}, nil
	}
	limit, file, err := CgroupLimit(root)
	if err != nil || limit == 0 {
		return Result{}, err
	}
	soft := int64(float64(limit) * ratio)
	debug.SetMemoryLimit(soft)
	return Result{Limit: soft, CgroupLimit: limit, Source: file}, nil
}

// ValidateRatio checks a ratio for Apply: 0 (off) to 1; the error names the flag
// (--memory-limit-ratio), the value and the bounds.
func ValidateRatio(ratio float64) error {
	if ratio < 0 || ratio > 1 || math.IsNaN(ratio) {
		return fmt.Errorf("--memory-limit-ratio %v: must lie between 0 (off) and 1", ratio)
	}
	return nil
}

// CgroupLimit returns the memory limit in bytes of the process's cgroup under root and the
// file it came from; 0 and "" when there is none (no cgroup file, or unlimited).
func CgroupLimit(root string) (int64, string, error) {
	f, err := os.Open(filepath.Join(root, "proc/self/cgroup"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	var v1Path, v2Path string
	v2 := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path (cgroups(7))
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2, v2Path = true, parts[2]
		case hasController(parts[1], "memory"):
			v1Path = parts[2]
		}
	}
	if err := sc.Err(); err != nil {
		return 0, "", err
	}
	if v1Path != "" {
		// cgroup v1 (or hybrid, where memory stays on v1). In a container the hierarchy is
		// mounted at the container's own cgroup, so the host path may not exist under it.
		base := filepath.Join(root, "sys/fs/cgroup/memory")
		for _, p := range []string{filepath.Join(base, v1Path, "memory.limit_in_bytes"), filepath.Join(base, "memory.limit_in_bytes")} {
			n, ok, err := readLimit(p)
			if err != nil || ok && n == 0 {
				return 0, "", err
			}
			if ok {
				return n, p, nil
			}
		}
		return 0, "", nil
	}
	if !v2 {
		return 0, "", nil
	}
	// cgroup v2: the effective limit is the smallest memory.max on the way to the root.
	var best int64
	bestFile := ""
	for p := filepath.Clean("/" + v2Path); ; p = filepath.Dir(p) {
		file := filepath.Join(root, "sys/fs/cgroup", p, "memory.max")
		n, ok, err := readLimit(file)
		if err != nil {
			return 0, "", err
		}
		if ok && n > 0 && (best == 0 || n < best) {
			best, bestFile = n, file
		}
		if p == "/" {
			return best, bestFile, nil
		}
	}
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readLimit reads one limit file: ok is false when it does not exist; a limit of "max" or
// at or above 2^62 is 0 (unlimited) with ok true.
func readLimit(file string) (n int64, ok bool, err error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, true, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%s: %q is not a memory limit in bytes", file, s)
	}
	if v >= 1<<62 {
		return 0, true, nil
	}
	return int64(v), true, nil
}
