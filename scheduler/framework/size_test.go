package framework

import (
	"testing"
	"time"
	"unsafe"
)

// The core holds a Pod and a PodInfo for every pod it knows; a field that
// pushes either into the next allocation size class costs its size again
// on every pod. Move a field into a rarer struct, or raise these limits
// knowing what it costs.
func TestPodSize(t *testing.T) {
	if got := unsafe.Sizeof(Pod{}); got > 256 {
		t.Errorf("framework.Pod is %d bytes, over the 256-byte size class", got)
	}
	if got := unsafe.Sizeof(PodInfo{}); got > 128 {
		t.Errorf("framework.PodInfo is %d bytes, over the 128-byte size class", got)
	}
}

// PodInfo keeps the start time in a compact form; it must still be the
// same instant, and the zero time must stay zero (not started).
func TestPodInfoStartTime(t *testing.T) {
	for _, st := range []time.Time{
		{},
		time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(3000, 1, 1, 0, 0, 0, 999999999, time.FixedZone("x", 3600)),
	} {
		got := NewPodInfo(&Pod{StartTime: st}).StartTime()
		if !got.Equal(st) || got.IsZero() != st.IsZero() {
			t.Errorf("start %v: PodInfo says %v", st, got)
		}
	}
}
