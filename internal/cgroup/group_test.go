package cgroup

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestNewMemoryGroup(t *testing.T) {
	for _, tc := range []struct {
		name, self string
		files      map[string]string
		dir        string // the group's, under the root
		limitFile  string
	}{
		{"v1 beside v2", "9:name=systemd:/\n4:memory:/process_api/abc\n0::/\n",
			map[string]string{"memory/process_api/abc/memory.limit_in_bytes": "9223372036854771712\n", "unified/cgroup.controllers": "memory\n"},
			"memory/process_api/abc/load-1", "memory.limit_in_bytes"},
		{"v2 delegating memory", "0::/job\n",
			map[string]string{"cgroup.controllers": "cpu memory\n", "job/cgroup.subtree_control": "cpu memory\n"},
			"job/load-1", "memory.max"},
		{"v2 in a namespace", "0::/\n",
			map[string]string{"cgroup.controllers": "memory\n", "cgroup.subtree_control": "memory\n"},
			"load-1", "memory.max"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fakePaths(t)
			writeFile(t, p.Self, tc.self)
			for name, content := range tc.files {
				writeFile(t, filepath.Join(p.Root, name), content)
			}
			g, err := p.NewMemoryGroup("load-1", 644_000_000)
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(p.Root, tc.dir); g.Dir() != want {
				t.Errorf("group at %s; want %s", g.Dir(), want)
			}
			if got := g.Procs(); got != filepath.Join(g.Dir(), "cgroup.procs") {
				t.Errorf("procs file %s", got)
			}
			b, err := os.ReadFile(filepath.Join(g.Dir(), tc.limitFile))
			if err != nil || string(b) != "644000000" {
				t.Errorf("%s holds %q, %v; want 644000000", tc.limitFile, b, err)
			}
		})
	}
}

func TestNewMemoryGroupRefuses(t *testing.T) {
	p := fakePaths(t)
	writeFile(t, p.Self, "0::/job\n")
	writeFile(t, filepath.Join(p.Root, "cgroup.controllers"), "cpu memory\n")
	writeFile(t, filepath.Join(p.Root, "job/cgroup.subtree_control"), "cpu\n")
	if g, err := p.NewMemoryGroup("load-1", 1<<30); err == nil {
		t.Errorf("v2 group that does not hand memory down: made %s", g.Dir())
	}
	if _, err := os.Stat(filepath.Join(p.Root, "job/load-1")); !os.IsNotExist(err) {
		t.Errorf("a refused group left a directory behind: %v", err)
	}

	writeFile(t, filepath.Join(p.Root, "job/cgroup.subtree_control"), "memory\n")
	for _, name := range []string{"", ".", "..", "a/b"} {
		if _, err := p.NewMemoryGroup(name, 1<<30); err == nil {
			t.Errorf("name %q: accepted", name)
		}
	}
	for _, limit := range []int64{0, -1} {
		if _, err := p.NewMemoryGroup("load-1", limit); err == nil {
			t.Errorf("limit %d: accepted", limit)
		}
	}
}

func TestOOMKills(t *testing.T) {
	for _, tc := range []struct {
		name    string
		v2      bool
		file    string
		content string
		want    int64
	}{
		{"v1", false, "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n", 2},
		{"v2", true, "memory.events", "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &Group{dir: t.TempDir(), v2: tc.v2}
			if _, err := g.OOMKills(); err == nil {
				t.Error("no file: want an error")
			}
			writeFile(t, filepath.Join(g.dir, tc.file), tc.content)
			if got, err := g.OOMKills(); err != nil || got != tc.want {
				t.Errorf("OOMKills = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// On a host that lets this process make one (root, or a delegated v2
// group), a real group: a process that writes its pid to Procs is in it,
// the kernel holds the limit, and the group goes once the process has.
func TestMemoryGroupOnThisHost(t *testing.T) {
	g, err := Host.NewMemoryGroup(fmt.Sprintf("berth-test-%d", os.Getpid()), 256<<20)
	if err != nil {
		t.Skipf("cannot make a memory cgroup here: %v", err)
	}
	t.Cleanup(func() { _ = g.Remove() })
	out, err := exec.Command("/bin/sh", "-c", `echo $$ > "$0" && exec cat /proc/self/cgroup`, g.Procs()).CombinedOutput()
	if err != nil {
		t.Fatalf("join the group: %v: %s", err, out)
	}
	name := "/" + filepath.Base(g.Dir()) + "\n"
	if !strings.Contains(string(out)+"\n", name) {
		t.Errorf("a process that joined %s lists its groups as\n%s", g.Dir(), out)
	}
	limit, set, err := readLimit(g.limitFile())
	if err != nil || !set || limit != 256<<20 {
		t.Errorf("the group's limit reads %d, %v, %v; want %d", limit, set, err, 256<<20)
	}
	if kills, err := g.OOMKills(); err != nil || kills != 0 {
		t.Errorf("OOMKills = %d, %v; want 0", kills, err)
	}
	if err := g.Remove(); err != nil {
		t.Errorf("remove the emptied group: %v", err)
	}
}
