package main

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

// cgroupRoot is where the cgroup filesystem is mounted; tests point it at a
// directory of fake files.
var cgroupRoot = "/sys/fs/cgroup"

// procSelfCgroup lists the cgroups this process is in; tests point it at a
// fake file.
var procSelfCgroup = "/proc/self/cgroup"

// cgroupUnlimited: a cgroup limit at or above this is the kernel's way of
// saying none (v1 writes a page-rounded math.MaxInt64).
const cgroupUnlimited = 1 << 60

// cgroupMemoryLimit reads the memory limit that binds this process: the
// lowest one set on its own cgroup or on any group above it, under v2
// (memory.max) or v1 (memory/memory.limit_in_bytes). A container with a
// cgroup namespace sees its own group at root. A systemd unit
// (MemoryMax=), or a container without a namespace, is in a group further
// down, which /proc/self/cgroup names, and a limit on a slice above it
// binds it as much as its own. ok is false when no limit is set anywhere
// on the way.
func cgroupMemoryLimit(root string) (limit int64, ok bool, err error) {
	v2, v1 := ownCgroups(procSelfCgroup)
	for _, h := range []struct{ base, path, file string }{
		{unifiedBase(root), v2, "memory.max"},
		{filepath.Join(root, "memory"), v1, "memory.limit_in_bytes"},
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

// ownCgroups reads the process's v2 group and its v1 memory group from
// path (lines of "id:controllers:/path"). Either is "/" when path does not
// name it, so only the root's limit is read, as in a cgroup namespace.
func ownCgroups(path string) (v2, v1 string) {
	v2, v1 = "/", "/"
	f, err := os.Open(path)
	if err != nil {
		return v2, v1
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
			v2 = group
		case slices.Contains(strings.Split(controllers, ","), "memory"):
			v1 = group
		}
	}
	return v2, v1
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

// lowestLimit reads file in base/group and in each directory above it up
// to base, and returns the lowest limit set. A directory without the file
// (a group this mount does not show) is passed over.
func lowestLimit(base, group, file string) (limit int64, ok bool, err error) {
	dir := filepath.Join(base, group)
	if rel, err := filepath.Rel(base, dir); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		dir = base
	}
	for {
		n, set, err := readCgroupLimit(filepath.Join(dir, file))
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

// readCgroupLimit reads one limit file; set is false when it does not
// exist or says there is no limit.
func readCgroupLimit(path string) (n int64, set bool, err error) {
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
	return n, n > 0 && n < cgroupUnlimited, nil
}
