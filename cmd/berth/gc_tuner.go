package main

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
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

// startupPercent is the target while a replica loads its state at start,
// until it first reports SERVING. The cache and etcd's key index are both
// built then, in one heap, and each collection marks all of both built so
// far: a geometric series of marking that ends several times the size of
// what is finally live. Restarting a replica of 100,000 nodes and
// 1,000,000 pods on a 2-core VM, GOGC 200 collected 5-6 times instead of
// 12 and reached SERVING in 8.3-9.5 s against 9.1-10.0 s (four alternating
// runs each), with peak RSS 130-250 MiB higher. Once the snapshot's maps
// were let go before the cache is built, 400 fitted in the memory they had
// taken: SERVING in 3.84-4.58 s against 4.16-4.94 s (18 and 12 restarts
// at that size), the restart's peak 2,384-2,755 MiB against 2,356-2,724.
// 800 saved about 0.1 s more for a steady 2.7 GiB. A memory limit caps it
// as ever.
const startupPercent = 400

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

// gcPollInterval is how often the tuner looks for a finished collection.
// A collection at 200,000 pods comes every half second or so, and a
// look costs about 60 ns.
const gcPollInterval = 20 * time.Millisecond

// gcTuner sets GOGC after every collection from what it left live. It
// polls the runtime's count of collections: a cleanup attached to a
// garbage sentinel runs only once the sentinel's span is swept, which
// under a 200,000-pod load came 25-534 ms after the collection (a
// quarter of a cycle at the median) and once a whole cycle late.
type gcTuner struct {
	ceiling  int
	headroom int64
	samples  []metrics.Sample
	// cycles counts collections for run; done ends run.
	cycles []metrics.Sample
	done   chan struct{}
	// set is the last GOGC the tuner chose, for tests.
	set atomic.Int64
	// mu orders a collection's adjustment with stop, so nothing is set
	// after stop has given the ceiling back.
	mu      sync.Mutex
	stopped bool
	// starting holds the target at startupPercent or above (see
	// startup).
	starting bool
}

// startGCTuner adapts GOGC after every collection from now on, until
// stop.
func startGCTuner(ceiling int, headroom int64) *gcTuner {
	t := &gcTuner{ceiling: ceiling, headroom: headroom, samples: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"},
	}, cycles: []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}, done: make(chan struct{})}
	t.set.Store(int64(ceiling))
	go t.run()
	return t
}

// run applies the target after each collection it sees, until stop.
func (t *gcTuner) run() {
	tick := time.NewTicker(gcPollInterval)
	defer tick.Stop()
	var seen uint64
	for {
		select {
		case <-t.done:
			return
		case <-tick.C:
		}
		metrics.Read(t.cycles)
		if t.cycles[0].Value.Kind() != metrics.KindUint64 {
			continue
		}
		if n := t.cycles[0].Value.Uint64(); n != seen {
			seen = n
			t.afterGC()
		}
	}
}

// afterGC sets the target for what the last collection left.
func (t *gcTuner) afterGC() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.applyLocked()
	}
}

// applyLocked sets the target for the heap the last collection left.
func (t *gcTuner) applyLocked() {
	metrics.Read(t.samples)
	var v [3]uint64
	for i, s := range t.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	p := adaptivePercent(t.ceiling, t.headroom, v[0], v[0]+v[1]+v[2])
	if t.starting {
		p = max(p, startupPercent)
	}
	if int64(p) != t.set.Load() {
		debug.SetGCPercent(p)
		t.set.Store(int64(p))
	}
}

// startup holds the target at startupPercent (or the ceiling, if higher)
// until started.
func (t *gcTuner) startup() { t.setStarting(true) }

// started ends the start-up target at once: until the next collection
// the heap could otherwise grow to three times what was last live. It is
// safe to call more than once.
func (t *gcTuner) started() { t.setStarting(false) }

func (t *gcTuner) setStarting(on bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped || t.starting == on {
		return
	}
	t.starting = on
	t.applyLocked()
}

// stop ends the tuner and gives the target back its ceiling. It is safe
// to call more than once.
func (t *gcTuner) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.stopped {
		t.stopped = true
		close(t.done)
	}
	debug.SetGCPercent(t.ceiling)
}
