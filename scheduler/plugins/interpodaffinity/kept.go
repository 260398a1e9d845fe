package interpodaffinity

import (
	"context"
	"sync"

	"github.com/berth-io/berth/scheduler/framework"
)

// What the plugin keeps across cycles, and how it brings it up to date.
//
// Three walks over existing pods depend on the incoming pod only through a
// few of its fields, so pods of one workload get the same results from
// them: the counts for its required terms (incremental.go), the counts of
// existing pods' anti-affinity that repel it (incremental_existing.go)
// and PreScore's sums (incremental_scores.go). Each is kept per key (what
// the walk reads of the incoming pod) with every node's contribution;
// between two cycles only a few nodes change, and when the snapshot lists
// the NodeInfos its updates overwrote (framework.NodeChangeLog) only those
// nodes' contributions are replaced. Anything the plugin cannot vouch for
// (a rebuilt node list, a change log that no longer reaches back, another
// lister or node list) is recounted from every node.

// maxKept bounds the keys kept of each kind: each costs up to tens of
// bytes per node.
const maxKept = 4

// keptIndex holds the kept results. A plugin belongs to one framework
// whose cycles run one at a time; the TryLock only keeps an unexpected
// concurrent cycle out (it counts without the index).
type keptIndex struct {
	mu        sync.Mutex
	positions framework.NodePositions

	terms  keptSlots[termTotals]
	repel  keptSlots[repelTotals]
	scores keptSlots[scoreTotals]
}

// keptEntry is what any kept result records of itself.
type keptEntry struct {
	key     string
	lastUse uint64
	// kept is the snapshot, list and generation the result is at.
	kept  framework.KeptAt
	valid bool
}

// keptSlots holds the kept results of one kind.
type keptSlots[T any] struct {
	entries [maxKept]keptEntry
	data    [maxKept]T
	// keepOnSecondUse makes a key kept from its second request on: keys
	// of the incoming pod's labels are often a pod's own (a per-pod name
	// label), and keeping results no later cycle reads costs more than
	// the walk.
	keepOnSecondUse bool
	recent          [8]string
	nextRecent      int
	// requests counts the calls of slot; an entry's lastUse is the
	// count at its last one.
	requests uint64
	// recounts and catchUps say how results were brought up to date, for
	// tests.
	recounts, catchUps int
}

// slot returns key's entry and result, taking over the least recently
// used slot when key is new (its result is then invalid, to be recounted
// in place). It returns nil, and the cycle walks, when key is to be kept
// only from its next request, or when every slot was used within the last
// staleAfter requests: with more keys in turn than slots (several
// workloads' pods interleaved in the queue), taking over a slot would
// recount every cycle, which costs more than the walk it replaces.
func (s *keptSlots[T]) slot(key string) (*keptEntry, *T) {
	s.requests++
	victim := 0
	for i := range s.entries {
		e := &s.entries[i]
		if e.key == key {
			e.lastUse = s.requests
			return e, &s.data[i]
		}
		if e.lastUse < s.entries[victim].lastUse {
			victim = i
		}
	}
	if s.keepOnSecondUse && !s.seenBefore(key) {
		return nil, nil
	}
	if e := &s.entries[victim]; e.key != "" && s.requests-e.lastUse <= staleAfter {
		return nil, nil
	}
	s.entries[victim] = keptEntry{key: key, lastUse: s.requests}
	return &s.entries[victim], &s.data[victim]
}

// staleAfter is how many requests of a kind a slot must go unused before
// another key takes it over.
const staleAfter = 2 * maxKept

// seenBefore reports whether key was among the last few keys not kept,
// remembering it.
func (s *keptSlots[T]) seenBefore(key string) bool {
	for _, k := range s.recent {
		if k == key {
			return true
		}
	}
	s.recent[s.nextRecent] = key
	s.nextRecent = (s.nextRecent + 1) % len(s.recent)
	return false
}

// refresh brings e's result to src's generation over nodes: as it is when
// current, by renewing the contribution of each node changed since when
// the log names them (finding them in positions), or else by recounting. It is false when
// the recount is (the cycle's context ended, or a node is not in the
// list), and the result must not be used.
func (s *keptSlots[T]) refresh(e *keptEntry, src framework.NodeChangeLog, nodes []*framework.NodeInfo, positions *framework.NodePositions,
	renew func(pos int, ni *framework.NodeInfo), recount func() bool) bool {
	gen := src.Generation()
	switch {
	case e.valid && e.kept.Current(src, nodes, gen):
	case e.valid && e.kept.CatchUp(src, nodes, positions, renew):
		s.catchUps++
	default:
		s.recounts++
		e.valid = false
		if !recount() {
			return false
		}
		e.valid = true
	}
	e.kept.Mark(src, nodes, gen)
	return true
}

// lockKept takes the kept index for one cycle over nodes, returning the
// snapshot's change log; false (and not locked) when nodes is not the
// snapshot's list or another cycle holds the index.
func (pl *InterPodAffinity) lockKept(nodes []*framework.NodeInfo) (framework.NodeChangeLog, bool) {
	src, ok := framework.ChangeLogFor(pl.handle.SnapshotSharedLister(), nodes)
	if !ok || !pl.kept.mu.TryLock() {
		return nil, false
	}
	return src, true
}

// positionsIn returns the positions in all of the NodeInfos of some, a
// sublist of all's nodes, indexing all in p; false if one is not in all.
func positionsIn(p *framework.NodePositions, all, some []*framework.NodeInfo) ([]int32, bool) {
	if !p.Index(all) {
		return nil, false
	}
	at := make([]int32, len(some))
	for i, ni := range some {
		pos, ok := p.Of(ni)
		if !ok {
			return nil, false
		}
		at[i] = int32(pos)
	}
	return at, true
}

// inChunks calls visit for every index below n, in a few contiguous
// chunks run on the parallelizer, each chunk with a value of its own, and
// returns those values; false if ctx ended first.
func inChunks[S any](ctx context.Context, par framework.Parallelizer, n int, visit func(i int, chunk *S)) ([]S, bool) {
	if n == 0 {
		return nil, ctx.Err() == nil
	}
	chunks := 1
	if p := par.Parallelism(); p > 1 {
		chunks = min(n, 4*p)
	}
	size := (n + chunks - 1) / chunks
	values := make([]S, chunks)
	par.Until(ctx, chunks, func(c int) {
		for i := c * size; i < min((c+1)*size, n); i++ {
			visit(i, &values[c])
		}
	})
	return values, ctx.Err() == nil
}
