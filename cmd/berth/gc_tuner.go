package main

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// A fixed GOGC makes the collector's headroom a fixed share of what is
// live: 100 doubles the heap. That is cheap for a small heap and wasteful
// for a large one: at 200,000 pods the doubled heap, not the data, set the
// replica's peak (issue 11). The tuner keeps --gc-percent while the heap is
// small, and once that would allow more than --gc-headroom of growth it
// lowers the target so the heap grows by about the headroom, but never by
// less than minAdaptivePercent of what is live: the collector's CPU per
// allocated byte grows as the headroom shrinks, and a floor proportional
// to the live heap bounds that cost at any size.
const defaultGCHeadroom = "256Mi"

// minAdaptivePercent is the floor of the adapted target: a large heap is
// collected about twice as often as at Go's default. 25 (four times) cut
// the peak at 20,000 nodes and 200,000 pods by a third but kept the
// collector marking most of the time; with the CPU shared, etcd's applies
// then missed their deadlines and the load failed (issue 11).
const minAdaptivePercent = 50

const gcHeadroomUsage = "growth of the Go heap over what is live that the collector allows before it runs, once --gc-percent would allow more " +
	"(a quantity such as 256Mi): a large heap then peaks near live + this (but at least live + " +
	"50%) instead of live times (1 + --gc-percent/100). 0 keeps --gc-percent fixed, as does the GOGC environment variable"

// adaptivePercent is the GOGC that lets the heap grow by about headroom
// over live, within [minAdaptivePercent, ceiling]. Go's target is
// live + (live + stacks + globals) * GOGC/100, so the percent is taken of
// roots, all three together.
func adaptivePercent(ceiling int, headroom int64, live, roots uint64) int {
	if roots == 0 || headroom <= 0 {
		return ceiling
	}
	growth := max(uint64(headroom), live*minAdaptivePercent/100)
	p := int(math.Ceil(float64(growth) * 100 / float64(roots)))
	return max(min(p, ceiling), min(minAdaptivePercent, ceiling))
}

// gcTuner sets GOGC after every collection from what it left live.
type gcTuner struct {
	ceiling  int
	headroom int64
	samples  []metrics.Sample
	// set is the last GOGC the tuner chose, for tests.
	set atomic.Int64
	// mu orders a collection's adjustment with stop, so nothing is set
	// after stop has given the ceiling back.
	mu      sync.Mutex
	stopped bool
}

// gcSentinel is garbage from birth: its cleanup runs once after the next
// collection. It holds a pointer so it is never tiny-allocated, which
// could keep it alive beside a longer-lived neighbour.
type gcSentinel struct{ _ *byte }

// startGCTuner adapts GOGC after every collection from now on, until
// stop.
func startGCTuner(ceiling int, headroom int64) *gcTuner {
	t := &gcTuner{ceiling: ceiling, headroom: headroom, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"},
	}}
	t.set.Store(int64(ceiling))
	t.arm()
	return t
}

func (t *gcTuner) arm() {
	runtime.AddCleanup(&gcSentinel{}, func(t *gcTuner) {
		if t.afterGC() {
			t.arm()
		}
	}, t)
}

// afterGC runs on the runtime's cleanup goroutine after a collection; it
// reports whether the tuner still runs.
func (t *gcTuner) afterGC() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	metrics.Read(t.samples)
	var v [3]uint64
	for i, s := range t.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	p := adaptivePercent(t.ceiling, t.headroom, v[0], v[0]+v[1]+v[2])
	if int64(p) != t.set.Load() {
		debug.SetGCPercent(p)
		t.set.Store(int64(p))
	}
	return true
}

// stop ends the tuner and gives the target back its ceiling.
func (t *gcTuner) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	debug.SetGCPercent(t.ceiling)
}
