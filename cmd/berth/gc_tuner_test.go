package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestAdaptivePercent(t *testing.T) {
	const mi = 1 << 20
	for _, tc := range []struct {
		name        string
		ceiling     int
		headroom    int64
		live, roots uint64
		want        int
	}{
		{"small heap keeps the ceiling", 100, 128 * mi, 50 * mi, 60 * mi, 100},
		{"headroom sets the target", 100, 256 * mi, 400 * mi, 420 * mi, 61},
		{"large heap stops at the floor", 100, 256 * mi, 2000 * mi, 2100 * mi, 50},
		{"a lower ceiling wins", 10, 128 * mi, 2000 * mi, 2100 * mi, 10},
		{"no headroom: fixed", 100, 0, 2000 * mi, 2100 * mi, 100},
		{"nothing measured yet", 100, 128 * mi, 0, 0, 100},
	} {
		if got := adaptivePercent(tc.ceiling, tc.headroom, tc.live, tc.roots); got != tc.want {
			t.Errorf("%s: adaptivePercent = %d; want %d", tc.name, got, tc.want)
		}
	}
}

// A heap far larger than the headroom gets a lower target after the next
// collection, and stop gives the ceiling back.
func TestGCTunerFollowsTheLiveHeap(t *testing.T) {
	keepCollector(t)
	live := make([]byte, 32<<20)
	tuner := startGCTuner(100, 1<<20)
	deadline := time.Now().Add(30 * time.Second)
	for tuner.set.Load() == 100 {
		if time.Now().After(deadline) {
			t.Fatal("the tuner did not run after a collection")
		}
		runtime.GC()
		runtime.Gosched()
	}
	runtime.KeepAlive(live)
	got := tuner.set.Load()
	if got < minAdaptivePercent-1 || got > minAdaptivePercent+25 {
		t.Errorf("with 32 MiB live and 1 MiB of headroom the target is %d; want near the %d%% floor", got, minAdaptivePercent)
	}
	if rt := debug.SetGCPercent(int(got)); int64(rt) != got {
		t.Errorf("runtime target %d; the tuner says %d", rt, got)
	}
	tuner.stop()
	if rt := debug.SetGCPercent(100); rt != 100 {
		t.Errorf("after stop the target is %d; want the ceiling, 100", rt)
	}
}

// GOGC from the environment, or a headroom of 0, keeps the target fixed.
func TestAdaptLeavesAFixedTargetAlone(t *testing.T) {
	keepCollector(t)
	noCgroup(t)
	t.Setenv("GOMEMLIMIT", "")

	t.Setenv("GOGC", "50")
	s, err := applyGC(100, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.adapt(defaultGCHeadroom); err != nil || s.tuner != nil || s.headroom != 0 {
		t.Errorf("with GOGC set: tuner %v, headroom %d, %v; want no tuner", s.tuner, s.headroom, err)
	}

	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	s, err = applyGC(100, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.adapt("0"); err != nil || s.tuner != nil {
		t.Errorf("--gc-headroom 0: tuner %v, %v; want none", s.tuner, err)
	}
	if err := s.adapt("lots"); err == nil {
		t.Error("--gc-headroom lots: want an error")
	}
	if err := s.adapt("64Mi"); err != nil || s.tuner == nil || s.headroom != 64<<20 {
		t.Errorf("--gc-headroom 64Mi: tuner %v, headroom %d, %v; want a tuner", s.tuner, s.headroom, err)
	}
	s.tuner.stop()
}
