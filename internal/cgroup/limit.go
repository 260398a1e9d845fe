// Package cgroup reads the memory limit that binds this process, and makes
// memory-limited groups below its own, from the cgroup filesystem (v2, v1,
// or both side by side).
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Paths says where to look: Root is where the cgroup filesystem is mounted,
// Self the list of this process's groups. Tests point both at fake files.
type Paths struct {
	Root string
	Self string
}

// Host is the running system's.
var Host = Paths{Root: "/sys/fs/cgroup", Self: "/proc/self/cgroup"}

// The files that hold a group's memory limit, under v2 and under v1.
const (
	v2LimitFile = "memory.max"
	v1LimitFile = "memory.limit_in_bytes"
)

// unlimited: a limit at or above this is the kernel's way of saying none
// (v1 writes a page-rounded math.MaxInt64).
const unlimited = 1 << 60

// MemoryLimit reads the memory limit that binds this process: the lowest
// one set on its own group or on any group above it, under v2 (memory.max)
// or v1 (memory/memory.limit_in_bytes). A container with a cgroup
// namespace sees its own group at root. A systemd unit (MemoryMax=), or a
// container without a namespace, is in a group further down, which Self
// names, and a limit on a slice above it binds it as much as its own. ok
// is false when no limit is set anywhere on the way.
func (p Paths) MemoryLimit() (limit int64, ok bool, err error) {
	own := p.own()
	for _, h := range []struct{ base, path, file string }{
		{unifiedBase(p.Root), own.v2, v2LimitFile},
		{filepath.Join(p.Root, "memory"), own.v1, v1LimitFile},
	} {
		n, found, err := lowestLimit(h.base, h.path, h.file)
		if err != nil {
			return 0, false, err
		}
		if found && (!ok || n < limit) {
			limit, ok = n, true
		}
	}
	return limit, ok, nil
}

// ownGroups is where Self places the process: its v2 group, and its group
// in a v1 memory hierarchy if one is mounted (v1Memory).
type ownGroups struct {
	v2, v1   string
	v1Memory bool
}

// own reads Self (lines of "id:controllers:/path"). A group Self does not
// name is "/", so only the root's limit is read, as in a cgroup namespace.
func (p Paths) own() ownGroups {
	g := ownGroups{v2: "/", v1: "/"}
	f, err := os.Open(p.Self)
	if err != nil {
		return g
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id, rest, ok := strings.Cut(sc.Text(), ":")
		controllers, group, ok2 := strings.Cut(rest, ":")
		if !ok || !ok2 || !strings.HasPrefix(group, "/") {
			continue
		}
		switch {
		case id == "0" && controllers == "":
			g.v2 = group
		case slices.Contains(strings.Split(controllers, ","), "memory"):
			g.v1, g.v1Memory = group, true
		}
	}
	return g
}

// unifiedBase is where the v2 hierarchy is mounted under root: root
// itself, or root/unified on a host that mounts v1 and v2 side by side.
func unifiedBase(root string) string {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		return root
	}
	if _, err := os.Stat(filepath.Join(root, "unified", "cgroup.controllers")); err == nil {
		return filepath.Join(root, "unified")
	}
	return root
}

// within is base/group, or base if group climbs out of it.
func within(base, group string) string {
	dir := filepath.Join(base, group)
	if rel, err := filepath.Rel(base, dir); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return base
	}
	return dir
}

// lowestLimit reads file in base/group and in each directory above it up
// to base, and returns the lowest limit set. A directory without the file
// (a group this mount does not show) is passed over.
func lowestLimit(base, group, file string) (limit int64, ok bool, err error) {
	dir := within(base, group)
	for {
		n, set, err := readLimit(filepath.Join(dir, file))
		if err != nil {
			return 0, false, err
		}
		if set && (!ok || n < limit) {
			limit, ok = n, true
		}
		parent := filepath.Dir(dir)
		if dir == base || parent == dir {
			return limit, ok, nil
		}
		dir = parent
	}
}

// readLimit reads one limit file; set is false when it does not exist or
// says there is no limit.
func readLimit(path string) (n int64, set bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	v := strings.TrimSpace(string(b))
	if v == "max" {
		return 0, false, nil
	}
	n, err = strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%s: %w", path, err)
	}
	return n, n > 0 && n < unlimited, nil
}
