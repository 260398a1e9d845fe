package cgroup

import (
	"os"
	"path/filepath"
	"testing"
)

// fakePaths points at an empty directory for the cgroup filesystem, and at
// a process in its root group.
func fakePaths(t *testing.T) Paths {
	t.Helper()
	return Paths{Root: t.TempDir(), Self: filepath.Join(t.TempDir(), "cgroup")}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCgroupMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name, file, content string
		want                int64
		ok                  bool
	}{
		{"v2 limit", "memory.max", "2147483648\n", 2 << 30, true},
		{"v2 none", "memory.max", "max\n", 0, false},
		{"v1 limit", "memory/memory.limit_in_bytes", "1073741824\n", 1 << 30, true},
		{"v1 none", "memory/memory.limit_in_bytes", "9223372036854771712\n", 0, false},
		{"no cgroup", "", "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fakePaths(t)
			if tc.file != "" {
				writeFile(t, filepath.Join(p.Root, tc.file), tc.content)
			}
			got, ok, err := p.MemoryLimit()
			if err != nil || got != tc.want || ok != tc.ok {
				t.Errorf("MemoryLimit = %d, %v, %v; want %d, %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
	p := fakePaths(t)
	writeFile(t, filepath.Join(p.Root, "memory.max"), "garbage\n")
	if _, _, err := p.MemoryLimit(); err == nil {
		t.Error("an unreadable memory.max: want an error")
	}
}

// A process deeper in the hierarchy (a systemd unit, a container without
// a cgroup namespace) is bound by the lowest limit on the way from its own
// group to the root, read where /proc/self/cgroup says it is.
func TestCgroupMemoryLimitOfOwnGroup(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		name, self string
		files      map[string]string
		want       int64
		ok         bool
	}{
		{"v2 unit", "0::/system.slice/berth.service\n",
			map[string]string{"cgroup.controllers": "memory\n", "system.slice/berth.service/memory.max": "4294967296\n", "system.slice/memory.max": "max\n"},
			4 * gib, true},
		{"v2 slice lower than unit", "0::/system.slice/berth.service\n",
			map[string]string{"cgroup.controllers": "memory\n", "system.slice/berth.service/memory.max": "4294967296\n", "system.slice/memory.max": "2147483648\n"},
			2 * gib, true},
		{"v2 beside v1", "0::/berth\n4:memory:/\n",
			map[string]string{"unified/cgroup.controllers": "memory\n", "unified/berth/memory.max": "1073741824\n"},
			gib, true},
		{"v1 nested", "9:name=systemd:/\n4:memory:/process_api/abc/berth\n3:cpu,cpuacct:/\n0::/\n",
			map[string]string{"memory/memory.limit_in_bytes": "9223372036854771712\n", "memory/process_api/abc/memory.limit_in_bytes": "9223372036854771712\n",
				"memory/process_api/abc/berth/memory.limit_in_bytes": "3221225472\n"},
			3 * gib, true},
		{"v1 with memory among others", "4:cpu,memory:/job\n",
			map[string]string{"memory/job/memory.limit_in_bytes": "1073741824\n"},
			gib, true},
		{"own group not mounted", "0::/docker/abc\n",
			map[string]string{"memory.max": "2147483648\n"},
			2 * gib, true},
		{"no limit anywhere", "0::/system.slice/berth.service\n",
			map[string]string{"cgroup.controllers": "memory\n", "system.slice/berth.service/memory.max": "max\n"},
			0, false},
		{"a path out of the mount", "0::/../outside\n",
			map[string]string{"memory.max": "1073741824\n", "../outside/memory.max": "1\n"},
			gib, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fakePaths(t)
			p.Root = filepath.Join(p.Root, "fs")
			writeFile(t, p.Self, tc.self)
			for name, content := range tc.files {
				writeFile(t, filepath.Join(p.Root, name), content)
			}
			got, ok, err := p.MemoryLimit()
			if err != nil || got != tc.want || ok != tc.ok {
				t.Errorf("MemoryLimit = %d, %v, %v; want %d, %v", got, ok, err, tc.want, tc.ok)
			}
		})
	}
}
