package memlimit

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// tree writes files (path → content) under a new temporary root.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCgroupLimit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		files    map[string]string
		want     int64
		wantFile string // relative to the root
		wantErr  string
	}{
		{name: "no cgroups", files: map[string]string{}},
		{name: "v2 container (namespace root)", files: map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "268435456\n",
		}, want: 256 << 20, wantFile: "sys/fs/cgroup/memory.max"},
		{name: "v2 unlimited", files: map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "max\n",
		}},
		{name: "v2 nested: the smallest on the way up wins", files: map[string]string{
			"proc/self/cgroup":                          "0::/kubepods/pod1/c1\n",
			"sys/fs/cgroup/kubepods/pod1/c1/memory.max": "max\n",
			"sys/fs/cgroup/kubepods/pod1/memory.max":    "536870912\n",
			"sys/fs/cgroup/kubepods/memory.max":         "1073741824\n",
		}, want: 512 << 20, wantFile: "sys/fs/cgroup/kubepods/pod1/memory.max"},
		{name: "v1 at the process's path", files: map[string]string{
			"proc/self/cgroup": "4:memory:/kubepods/pod1/c1\n3:cpu,cpuacct:/kubepods/pod1/c1\n0::/\n",
			"sys/fs/cgroup/memory/kubepods/pod1/c1/memory.limit_in_bytes": "209715200\n",
		}, want: 200 << 20, wantFile: "sys/fs/cgroup/memory/kubepods/pod1/c1/memory.limit_in_bytes"},
		{name: "v1 in a container: the mount's root", files: map[string]string{
			"proc/self/cgroup":                           "4:memory:/kubepods/pod1/c1\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "209715200\n",
		}, want: 200 << 20, wantFile: "sys/fs/cgroup/memory/memory.limit_in_bytes"},
		{name: "v1 unlimited", files: map[string]string{
			"proc/self/cgroup":                           "4:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}},
		{name: "malformed", files: map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "lots\n",
		}, wantErr: `memory.max: "lots" is not a memory limit in bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := tree(t, tc.files)
			got, file, err := CgroupLimit(root)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantFile := ""
			if tc.wantFile != "" {
				wantFile = filepath.Join(root, tc.wantFile)
			}
			if got != tc.want || file != wantFile {
				t.Errorf("CgroupLimit = %d from %q, want %d from %q", got, file, tc.want, wantFile)
			}
		})
	}
}

func TestApply(t *testing.T) {
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	root := tree(t, map[string]string{
		"proc/self/cgroup":         "0::/\n",
		"sys/fs/cgroup/memory.max": "1048576000\n",
	})

	t.Setenv("GOMEMLIMIT", "")
	res, err := Apply(root, DefaultRatio)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(943718400); res.Limit != want || res.CgroupLimit != 1048576000 || debug.SetMemoryLimit(-1) != want {
		t.Errorf("Apply = %+v, runtime limit %d; want %d of 1048576000", res, debug.SetMemoryLimit(-1), want)
	}

	// GOMEMLIMIT set (as the chart does): the runtime's own value stays.
	debug.SetMemoryLimit(prev)
	t.Setenv("GOMEMLIMIT", "200MiB")
	res, err = Apply(root, DefaultRatio)
	if err != nil {
		t.Fatal(err)
	}
	if res.Source != "GOMEMLIMIT" || debug.SetMemoryLimit(-1) != prev {
		t.Errorf("with GOMEMLIMIT set: %+v, runtime limit %d, want it left at %d", res, debug.SetMemoryLimit(-1), prev)
	}

	// Ratio 0 turns it off; out of range is an error naming the value.
	t.Setenv("GOMEMLIMIT", "")
	if res, err := Apply(root, 0); err != nil || res.Limit != 0 || debug.SetMemoryLimit(-1) != prev {
		t.Errorf("ratio 0: %+v, %v, runtime limit %d", res, err, debug.SetMemoryLimit(-1))
	}
	if _, err := Apply(root, 1.5); err == nil || !strings.Contains(err.Error(), "1.5") {
		t.Errorf("ratio 1.5: error %v, want one naming 1.5", err)
	}
}
