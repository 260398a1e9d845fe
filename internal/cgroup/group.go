package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Group is a memory-limited group made by NewMemoryGroup.
type Group struct {
	dir string
	v2  bool
}

// NewMemoryGroup makes a group called name below this process's own and
// limits the memory of what joins it to limit bytes, as a container's
// limit would. Where the memory controller is on a v1 hierarchy the group
// is made there. Under v2 only a group that hands the memory controller
// down (its cgroup.subtree_control names it) can have a limited child:
// v2 enables no controller for the children of a group that holds
// processes itself, so that must have been arranged from outside.
func (p Paths) NewMemoryGroup(name string, limit int64) (*Group, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return nil, fmt.Errorf("cgroup name %q: want one path element", name)
	}
	if limit <= 0 {
		return nil, fmt.Errorf("cgroup memory limit %d: want a positive number of bytes", limit)
	}
	own := p.own()
	g := &Group{}
	if own.v1Memory {
		g.dir = filepath.Join(within(filepath.Join(p.Root, "memory"), own.v1), name)
	} else {
		parent := within(unifiedBase(p.Root), own.v2)
		ctl, err := os.ReadFile(filepath.Join(parent, "cgroup.subtree_control"))
		if err != nil || !slices.Contains(strings.Fields(string(ctl)), "memory") {
			return nil, fmt.Errorf("cgroup %s does not enable the memory controller for groups below it (cgroup.subtree_control)", parent)
		}
		g.dir, g.v2 = filepath.Join(parent, name), true
	}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return nil, fmt.Errorf("make cgroup: %w", err)
	}
	if err := os.WriteFile(g.limitFile(), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		return nil, errors.Join(fmt.Errorf("limit cgroup %s: %w", g.dir, err), os.Remove(g.dir))
	}
	return g, nil
}

// limitFile is the file that holds the group's memory limit.
func (g *Group) limitFile() string {
	if g.v2 {
		return filepath.Join(g.dir, v2LimitFile)
	}
	return filepath.Join(g.dir, v1LimitFile)
}

// Dir is the group's directory.
func (g *Group) Dir() string { return g.dir }

// Procs is the file a process writes its pid to, to join the group.
func (g *Group) Procs() string { return filepath.Join(g.dir, "cgroup.procs") }

// OOMKills is how many processes of the group the kernel's OOM killer has
// killed since it was made.
func (g *Group) OOMKills() (int64, error) {
	file := "memory.oom_control" // v1, since Linux 4.13
	if g.v2 {
		file = "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(g.dir, file))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no oom_kill count", file)
}

// Remove deletes the group; the kernel refuses while a process is in it.
func (g *Group) Remove() error { return os.Remove(g.dir) }
