package algorithm

import (
	"context"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/runtime"
)

// Signature batching, kube-scheduler 1.35's opportunistic batching done so
// that results never differ from scheduling each pod alone: pods with the
// same signature (framework.SignPlugin) get the same Filter status and raw
// Score on a node whose NodeInfo has not changed, so the memo remembers
// those per (signature, node) and the walk takes them instead of running
// the plugins. Everything else runs as without the memo: the same window,
// start index and order, PreFilter and PreScore per pod, normalizing,
// weighting and the tie-breaking draws. So the memo changes what is
// computed, never what is decided.
//
// A remembered result is valid while
//   - the node's Generation is the one it was computed at (every change of
//     a node or its pods moves it);
//   - the snapshot's node list is the same one (the memo is by position
//     in it, and plugins may read the node count);
//   - no pod is nominated anywhere, and the nominations did not change
//     while it was computed (filters count nominated pods);
//   - the plugins' guards (framework.SignatureGuard) agree, and the skip
//     masks PreFilter and PreScore produced are the same;
//   - the stamping plugins (framework.SignatureStamper, whose results
//     depend on counts over whole topology domains) give the node the
//     stamps they gave it when the result was made: a stamp determines
//     that plugin's own result, the signature and the node the others'.

// memoBudget bounds the node slots held over all signatures: each costs
// about 24 bytes plus 8 per Score plugin, and 16 more for each of the
// Filter and Score stamps when stamping plugins run (spread and affinity
// pods), so at most ~32 MB per placer (~48 MB with stamps), whatever the
// cluster size; at 5,000 nodes that is maxSignatures signatures, at
// 100,000 nodes five. A signature whose cycles are ranked (ranked.go)
// holds its rankTree besides, about 40 bytes per node (48 per normalizing
// Score plugin more), pointer-free.
const memoBudget = 1 << 19

// maxSignatures bounds the signatures remembered at small cluster sizes.
const maxSignatures = 64

// maxSeen bounds the signatures seen once and not yet remembered.
const maxSeen = 4096

type memoKey struct {
	fwk        *runtime.Framework
	sig        string
	skipFilter uint64
}

// memoSlot is one node's remembered results, by position in the snapshot
// list.
type memoSlot struct {
	gen int64
	// status is the Filter verdict (nil: feasible) once filtered is set.
	status   *framework.Status
	filtered bool
	// scored says the node's raw scores are in the signature's scores.
	scored bool
}

// signatureResults is what the memo holds for one signature.
type signatureResults struct {
	slots []memoSlot
	// scores holds numScores raw scores per slot, for the Score plugins
	// not skipped under scoreSkip.
	scores    []int64
	numScores int
	scoreSkip uint64
	lastUse   uint64

	// cycle is what stamps are computed with in the current cycle.
	cycle stampCycle
	// filterStamps and scoreStamps hold, per slot, the stamps its Filter
	// verdict and raw scores were made under; nil while no cycle of the
	// signature had stamping plugins running.
	filterStamps, scoreStamps []framework.Stamps

	// ranked ranks the slots for cycles that need not walk (ranked.go).
	ranked ranked
}

// stampCycle is one cycle's means of computing stamps (it lives for the
// cycle only, hence the context); filter and score say whether stamping
// plugins run at Filter and at Score.
type stampCycle struct {
	ctx    context.Context
	fwk    *runtime.Framework
	state  *framework.CycleState
	pod    *framework.PodInfo
	filter bool
	score  bool
}

// beginCycle prepares r for a cycle of pod under state, after PreFilter:
// the stamps to check come from fwk. Score stamps are known to be needed
// only after PreScore, so they are prepared when scoring starts.
func (r *signatureResults) beginCycle(ctx context.Context, fwk *runtime.Framework, state *framework.CycleState, pod *framework.PodInfo) {
	r.cycle = stampCycle{ctx: ctx, fwk: fwk, state: state, pod: pod, filter: fwk.FilterStamped(state)}
	if r.cycle.filter && len(r.filterStamps) != len(r.slots) {
		// Verdicts kept without stamps were made with the stamping
		// filters skipped, under another key; none is in r.
		r.filterStamps = make([]framework.Stamps, len(r.slots))
	}
}

// signatureMemo is one Placer's memo; like the Placer, it is used by one
// scheduling loop at a time. Its slots are written concurrently by the
// filter and score workers, each at positions no other worker touches.
type signatureMemo struct {
	// list and size identify the snapshot node list positions refer to.
	list *framework.NodeInfo
	size int
	// nominations is the nominator's version the results were made at.
	nominations uint64
	bySig       map[memoKey]*signatureResults
	// seen holds signatures met once: a signature is remembered from its
	// second pod on, so pods of unique shapes cost no memory.
	seen  map[memoKey]struct{}
	clock uint64
	// spare is an evicted signature's storage, for reuse.
	spare *signatureResults
	// positions maps the list's NodeInfos to their positions, for the
	// ranked nodes' updates from the change log.
	positions framework.NodePositions
}

// reset forgets everything remembered.
func (m *signatureMemo) reset() {
	clear(m.bySig)
	clear(m.seen)
	m.spare = nil
}

// begin checks what the cycle may use: false means the memo must be left
// alone this cycle. It drops every result that the cycle's node list or
// nominations make stale.
func (m *signatureMemo) begin(fwk *runtime.Framework, all []*framework.NodeInfo) (nominations uint64, ok bool) {
	if m.bySig == nil {
		m.bySig, m.seen = map[memoKey]*signatureResults{}, map[memoKey]struct{}{}
	}
	v, usable := fwk.SignaturesUsable()
	if !usable || len(all) == 0 {
		return v, false
	}
	if m.list != all[0] || m.size != len(all) || m.nominations != v {
		m.reset()
		m.list, m.size, m.nominations = all[0], len(all), v
	}
	return v, true
}

// end drops results made during a cycle in which the nominations changed:
// some filters may have counted a nomination that others did not.
func (m *signatureMemo) end(fwk *runtime.Framework, began uint64) {
	if v, _, ok := fwk.NominationsVersion(); !ok || v != began {
		m.reset()
	}
}

// lookup returns the results remembered for key, making room for them if
// key was seen before; nil if it is met for the first time.
func (m *signatureMemo) lookup(key memoKey) *signatureResults {
	m.clock++
	if r := m.bySig[key]; r != nil {
		r.lastUse = m.clock
		return r
	}
	if _, ok := m.seen[key]; !ok {
		if len(m.seen) >= maxSeen {
			clear(m.seen)
		}
		m.seen[key] = struct{}{}
		return nil
	}
	delete(m.seen, key)
	if len(m.bySig) >= m.maxSignatures() {
		m.evictOldest()
	}
	r := m.spare
	m.spare = nil
	if r == nil || cap(r.slots) < m.size {
		r = &signatureResults{slots: make([]memoSlot, m.size)}
	} else {
		r.slots = r.slots[:m.size]
		clear(r.slots)
		r.ranked.forget()
	}
	r.numScores = -1
	r.lastUse = m.clock
	m.bySig[key] = r
	return r
}

func (m *signatureMemo) maxSignatures() int {
	return max(1, min(maxSignatures, memoBudget/max(m.size, 1)))
}

func (m *signatureMemo) evictOldest() {
	var oldest memoKey
	var found *signatureResults
	for k, r := range m.bySig {
		if found == nil || r.lastUse < found.lastUse {
			oldest, found = k, r
		}
	}
	delete(m.bySig, oldest)
	m.spare = found
}

// filterResult returns the remembered verdict of node ni at pos, if any.
// A miss leaves the slot ready for keepFilterResult.
func (r *signatureResults) filterResult(pos int, ni *framework.NodeInfo) (*framework.Status, bool) {
	s := &r.slots[pos]
	if !s.filtered || s.gen != ni.Generation {
		if r.cycle.filter {
			r.filterStamps[pos] = r.cycle.fwk.FilterStamps(r.cycle.ctx, r.cycle.state, r.cycle.pod, ni)
		}
		return nil, false
	}
	if r.cycle.filter {
		stamps := r.cycle.fwk.FilterStamps(r.cycle.ctx, r.cycle.state, r.cycle.pod, ni)
		if stamps != r.filterStamps[pos] {
			// The verdict was made under other counts: forget it, so an
			// erring filter run now cannot leave it paired with these.
			s.filtered = false
			r.filterStamps[pos] = stamps
			return nil, false
		}
	}
	return s.status, true
}

// keepFilterResult remembers ni's verdict, made under the stamps the miss
// in filterResult noted; errors are not results.
func (r *signatureResults) keepFilterResult(pos int, ni *framework.NodeInfo, st *framework.Status) {
	if st.Code() == framework.Error {
		return
	}
	r.slots[pos] = memoSlot{gen: ni.Generation, status: st, filtered: true}
}

// prepareScores makes room for numScores raw scores per node under the
// Score skip mask skip, forgetting scores kept under another; it is called
// after PreScore, when the cycle's stamping scores are known.
func (r *signatureResults) prepareScores(skip uint64, numScores int) {
	c := &r.cycle
	c.score = c.fwk.ScoreStamped(c.state)
	if c.score && len(r.scoreStamps) != len(r.slots) {
		r.scoreStamps = make([]framework.Stamps, len(r.slots))
	}
	if r.numScores == numScores && r.scoreSkip == skip {
		return
	}
	if size := len(r.slots) * numScores; cap(r.scores) < size {
		r.scores = make([]int64, size)
	} else {
		r.scores = r.scores[:size]
	}
	for i := range r.slots {
		r.slots[i].scored = false
	}
	r.numScores, r.scoreSkip = numScores, skip
}

// scoreMemo is a runtime.RawScoreMemo over the feasible nodes of one
// cycle: the i-th feasible node is at pos[i] of the snapshot list.
type scoreMemo struct {
	r     *signatureResults
	pos   []int32
	nodes []*framework.NodeInfo
}

// RawScores implements runtime.RawScoreMemo. Called again for a node it
// did not know, after scoring it, it gives the same storage.
func (m *scoreMemo) RawScores(i int) ([]int64, bool) {
	p, k := int(m.pos[i]), m.r.numScores
	s := &m.r.slots[p]
	if gen := m.nodes[i].Generation; s.gen != gen {
		// Not filtered this cycle (a profile without Filter plugins).
		*s = memoSlot{gen: gen}
	}
	if c := &m.r.cycle; c.score {
		stamps := c.fwk.ScoreStamps(c.ctx, c.state, c.pod, m.nodes[i])
		if stamps != m.r.scoreStamps[p] {
			s.scored = false
			m.r.scoreStamps[p] = stamps
		}
	}
	return m.r.scores[p*k : (p+1)*k : (p+1)*k], s.scored
}

// Known implements runtime.RawScoreMemo.
func (m *scoreMemo) Known(i int) { m.r.slots[m.pos[i]].scored = true }
