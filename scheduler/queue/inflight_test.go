package queue

import (
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
)

// A busy loop always has an attempt in flight, so the tracker's window of
// events slides forever without emptying. Sliding must reuse the array
// the window has left behind, not reallocate it, and must keep every
// event a pod in flight may still see.
func TestInFlightEventWindowSlidesInPlace(t *testing.T) {
	tr := newInFlightTracker()
	oldest := &inFlightPod{key: "ns/oldest"}
	tr.oldest, tr.newest = oldest, oldest
	ev := framework.ClusterEvent{Resource: framework.EventResourcePod, ActionType: framework.ActionAdd}
	const window = 50
	slide := func() {
		tr.record(ev, nil, nil)
		oldest.startSeq = tr.lastSeq - min(tr.lastSeq, window)
		tr.trim()
	}
	// Settle the array's size first.
	for range 10 * window {
		slide()
	}
	allocs := testing.AllocsPerRun(10, func() {
		for range 100 * window {
			slide()
		}
	})
	if allocs != 0 {
		t.Fatalf("sliding the window allocated %v times per %d events, want 0", allocs, 100*window)
	}
	seen := tr.eventsSince(oldest)
	if len(seen) != window {
		t.Fatalf("the oldest pod in flight sees %d events, want the %d recorded since it started", len(seen), window)
	}
	for i, e := range seen {
		if want := oldest.startSeq + 1 + uint64(i); e.seq != want {
			t.Fatalf("event %d has seq %d, want %d", i, e.seq, want)
		}
	}
}
