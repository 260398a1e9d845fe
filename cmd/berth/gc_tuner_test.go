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
// collection (the tuner sees it on its next poll), and stop gives the
// ceiling back.
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
	tuner.stop() // stopping again must neither panic nor move the target
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

// During a start-up load the target stays at startupPercent although the
// live heap calls for far less; started lowers it at once, without
// waiting for a collection, and a second call changes nothing.
func TestGCTunerHoldsTheStartupTarget(t *testing.T) {
	keepCollector(t)
	live := make([]byte, 32<<20)
	tuner := startGCTuner(100, 1<<20)
	defer tuner.stop()
	runtime.GC() // so the live heap the tuner reads holds live
	tuner.startup()
	if got := tuner.set.Load(); got != startupPercent {
		t.Fatalf("while starting the target is %d; want %d", got, startupPercent)
	}
	if rt := debug.SetGCPercent(startupPercent); rt != startupPercent {
		t.Errorf("runtime target %d while starting; want %d", rt, startupPercent)
	}
	tuner.started()
	runtime.KeepAlive(live)
	got := tuner.set.Load()
	if got < minAdaptivePercent-1 || got > minAdaptivePercent+25 {
		t.Errorf("after started the target is %d; want near the %d%% floor for 32 MiB live and 1 MiB of headroom", got, minAdaptivePercent)
	}
	tuner.started()
	if again := tuner.set.Load(); again != got {
		t.Errorf("a second started moved the target from %d to %d", got, again)
	}
}

// Only an adaptive target is held for the start-up: a fixed one (GOGC,
// or --gc-headroom 0) is the operator's and stays as set.
func TestHoldForStartupOnlyAdaptive(t *testing.T) {
	keepCollector(t)
	noCgroup(t)
	noGCEnv(t)
	s, err := applyGC(100, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.adapt("0"); err != nil {
		t.Fatal(err)
	}
	if end := s.holdForStartup(); end != nil || s.startupPercent != 0 {
		t.Errorf("fixed target: holdForStartup gave %v, startup percent %d; want none", end != nil, s.startupPercent)
	}
	if rt := debug.SetGCPercent(100); rt != 100 {
		t.Errorf("fixed target moved to %d", rt)
	}
	if err := s.adapt(defaultGCHeadroom); err != nil {
		t.Fatal(err)
	}
	defer s.tuner.stop()
	end := s.holdForStartup()
	if end == nil || s.startupPercent != startupPercent {
		t.Fatalf("adaptive target: holdForStartup gave %v, startup percent %d; want an end and %d", end != nil, s.startupPercent, startupPercent)
	}
	if got := s.tuner.set.Load(); got != startupPercent {
		t.Errorf("held target %d; want %d", got, startupPercent)
	}
	end()
	if got := s.tuner.set.Load(); got >= startupPercent {
		t.Errorf("after the end the target is still %d", got)
	}
}
