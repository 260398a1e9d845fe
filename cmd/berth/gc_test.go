package main

import (
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/berth-io/berth/internal/cgroup"
)

// noCgroup points the cgroup reader at an empty directory for the test,
// and at a process in its root group.
func noCgroup(t *testing.T) string {
	t.Helper()
	orig := cgroupPaths
	cgroupPaths = cgroup.Paths{Root: t.TempDir(), Self: filepath.Join(t.TempDir(), "cgroup")}
	t.Cleanup(func() { cgroupPaths = orig })
	return cgroupPaths.Root
}

// noGCEnv clears GOGC and GOMEMLIMIT for the test, so flags decide.
func noGCEnv(t *testing.T) {
	t.Helper()
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("GOGC", "") // restored after the test; unset for it below
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
}

// keepCollector restores the collector's settings after the test.
func keepCollector(t *testing.T) {
	t.Helper()
	origPercent := debug.SetGCPercent(100)
	origLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(origPercent)
		debug.SetMemoryLimit(origLimit)
	})
}

func TestSetGCPercentLeavesGOGCAlone(t *testing.T) {
	keepCollector(t)
	noCgroup(t)
	t.Setenv("GOMEMLIMIT", "")

	t.Setenv("GOGC", "50") // restored after the test
	if _, err := applyGC(300, ""); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, the target became %d; want it left at 100", got)
	}

	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	if _, err := applyGC(300, ""); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 300 {
		t.Errorf("without GOGC, the target is %d; want 300", got)
	}
}

func TestParseMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"1048576", 1 << 20},
		{"2Gi", 2 << 30},
		{"2GiB", 2 << 30},
		{"512MiB", 512 << 20},
		{"512Mi", 512 << 20},
		{"1G", 1e9},
		{"1024B", 1024},
		{"644MB", 644e6},
		{"2GB", 2e9},
		{"100kB", 100e3},
	} {
		got, err := parseMemoryLimit(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseMemoryLimit(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "lots", "-1Gi", "0", "1.5", "1XB", "B"} {
		if got, err := parseMemoryLimit(bad); err == nil {
			t.Errorf("parseMemoryLimit(%q) = %d; want an error", bad, got)
		}
	}
}

func TestApplyGCMemoryLimit(t *testing.T) {
	keepCollector(t)
	root := noCgroup(t)
	noGCEnv(t)

	s, err := applyGC(300, "")
	if err != nil || s.memoryLimitSource != "none" || s.memoryLimit != math.MaxInt64 {
		t.Errorf("without flag or cgroup: %+v, %v; want no limit", s, err)
	}

	if err := os.WriteFile(filepath.Join(root, "memory.max"), []byte("1000000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = applyGC(300, "")
	if err != nil || s.memoryLimitSource != "cgroup" || s.memoryLimit != 900_000_000 {
		t.Errorf("with a 1 GB cgroup: %+v, %v; want 90%% of it", s, err)
	}
	if got := debug.SetMemoryLimit(-1); got != 900_000_000 {
		t.Errorf("runtime limit %d; want 900000000", got)
	}

	s, err = applyGC(300, "512Mi")
	if err != nil || s.memoryLimitSource != "flag" || s.memoryLimit != 512<<20 {
		t.Errorf("with --memory-limit 512Mi: %+v, %v; want the flag's", s, err)
	}

	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(1 << 30) // what the runtime read from GOMEMLIMIT at start
	s, err = applyGC(300, "512Mi")
	if err != nil || s.memoryLimitSource != "GOMEMLIMIT" || s.memoryLimit != 1<<30 {
		t.Errorf("with GOMEMLIMIT: %+v, %v; want it to win", s, err)
	}

	t.Setenv("GOMEMLIMIT", "")
	if _, err := applyGC(300, "lots"); err == nil {
		t.Error("--memory-limit lots: want an error")
	}
}

// By default a small heap may grow to four times what is live, but the
// adaptive target lets a larger one grow by about --gc-headroom and a
// large one by half: the ceiling is high, the headroom bounds the peak.
func TestDefaultTargetGrowsByTheHeadroom(t *testing.T) {
	keepCollector(t)
	noCgroup(t)
	noGCEnv(t)
	s, err := applyGC(defaultGCPercent, "")
	if err != nil || s.gcPercent != 300 || s.gcPercentSource != "flag" {
		t.Fatalf("default: %+v, %v; want GOGC 300 from the flag's default", s, err)
	}
	if err := s.adapt(defaultGCHeadroom); err != nil || s.tuner == nil {
		t.Fatalf("default headroom: tuner %v, %v; want one", s.tuner, err)
	}
	s.tuner.stop()
	const mi = 1 << 20
	headroom := s.headroom
	for _, c := range []struct {
		live     uint64
		atLeast  int
		atMost   int
		describe string
	}{
		{20 * mi, 300, 300, "a small heap grows by the ceiling"},
		{400 * mi, 60, 66, "400 MiB live grows by the headroom"},
		{2000 * mi, 50, 50, "2000 MiB live grows by half"},
	} {
		got := adaptivePercent(defaultGCPercent, headroom, c.live, c.live)
		if got < c.atLeast || got > c.atMost {
			t.Errorf("%s: target %d; want %d-%d", c.describe, got, c.atLeast, c.atMost)
		}
	}
}
