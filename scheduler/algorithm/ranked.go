package algorithm

import (
	"context"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/runtime"
)

// Ranked placement. Once the memo knows a signature's verdict and raw
// scores on every node, a cycle needs from the window only: where it ends
// (the numToFind-th feasible node from the start), the highest raw score
// of each normalizing plugin in it (all DefaultNormalizeScore needs), and
// which node selectHost would pick, which depends on the totals in window
// order. A rankTree over the node positions answers each in O(log n), so
// a cycle costs the nodes that changed since the signature's previous
// cycle plus a few descents, not a walk over the window:
//   - the nodes the snapshot's change log names are filtered again (or
//     their remembered verdicts taken) and, after PreScore, scored;
//   - the window end is a descent on the feasible counts;
//   - when a normalizer's highest raw score in the window differs from
//     the one the totals were made under, every total is made again;
//   - selectHost's draws are made as it makes them: for each running
//     maximum in window order, one draw per later node that ties it
//     before a higher total comes, found by descents; only the final
//     maximum's winner needs finding.
//
// The outcome is the walk's: same window, start index, counts, draws and
// node. What the fast path cannot reproduce cheaply it leaves to the walk:
// stamped plugins (their results depend on counts over whole domains),
// PreScore plugins that read the feasible nodes, normalizers other than
// MaxNormalizer, no feasible node (the diagnosis), errors, scores out of
// range.

// ranked is one signature's rankTree and what it was made under.
type ranked struct {
	tree rankTree
	// built says the tree's feasible counts reflect the memo's verdicts
	// at kept's generation, except for the positions in pending, whose
	// totals are not made yet.
	built   bool
	kept    framework.KeptAt
	pending []int32
	// full says every total must be made again (after a build, or a
	// change of the normalizers or of the plugins that score).
	full bool
	// skip is the Score skip mask and highest the normalizers' highest
	// raw scores over the window the totals were made under.
	skip    uint64
	highest []int64
	// bad marks positions with a score out of range, which the walk must
	// report if they are in the window; numBad counts them.
	bad    []bool
	numBad int
	// waited counts the cycles since the last try to build; a build is
	// tried once every rotation of the window, so that the walk has
	// filtered and scored most nodes by then, backing off further when
	// the signature turned out not to fit.
	waited, backoff int
	// runs counts the cycles that reached the totals since the last
	// check, remakes those that made every total again (see
	// maxRemakes).
	runs, remakes int
}

// Every total is made again when a normalizer's highest raw score in the
// window moves, at O(nodes) (a few walks' worth). A signature whose
// windows keep moving it (a handful of tainted nodes the window passes
// over, say) costs less walking: after maxRemakes of remakeCheck cycles,
// it walks for a while.
const (
	remakeCheck = 32
	maxRemakes  = 4
)

// forget drops the tree's contents, keeping its memory.
func (rk *ranked) forget() {
	rk.built, rk.full, rk.pending, rk.kept = false, false, rk.pending[:0], framework.KeptAt{}
	rk.waited, rk.backoff, rk.runs, rk.remakes = 0, 0, 0, 0
}

// unfit drops the tree after a cycle that could not use it for a reason
// that is likely to last (the signature's pods are stamped, say), and
// waits longer before building it again.
func (rk *ranked) unfit() {
	b := min(2*rk.backoff+1, 64)
	rk.forget()
	rk.backoff = b
}

// rankedScratch is the cycle's view of the Score plugins, reused.
type rankedScratch struct {
	weights []int64
	norms   []framework.MaxNormalizer
	// normOf[p] is plugin p's index among the normalizers, -1 if none.
	normOf []int
	// raw holds one position's normalizers' raw scores.
	raw []int64
}

// rankedOutcome says how placeRanked ended.
type rankedOutcome uint8

const (
	// rankedWalk: the cycle must walk the window; nothing was run.
	rankedWalk rankedOutcome = iota
	// rankedWalkScored: the cycle must walk, PreScore has run.
	rankedWalkScored
	// rankedDone: the result (or error) is the cycle's.
	rankedDone
)

// placeRanked tries to place pod from s.cur's rankTree; see the comment
// at the top of the file. PreFilter has run, the nodes are not narrowed
// and no pod is nominated.
func (s *Placer) placeRanked(ctx context.Context, fwk *runtime.Framework, state *framework.CycleState, pod *framework.PodInfo,
	nodes []*framework.NodeInfo) (Result, rankedOutcome, error) {
	r, n := s.cur, len(nodes)
	// A cancelled cycle's walk stops part way: leave it to the walk.
	if ctx.Err() != nil || r.cycle.filter || !fwk.HasFilterPlugins() || !fwk.HasScorePlugins() || fwk.PreScoreUsesNodes(pod) {
		return Result{}, rankedWalk, nil
	}
	log, ok := framework.ChangeLogFor(fwk.SnapshotSharedLister(), nodes)
	if !ok || !s.memo.positions.Index(nodes) {
		return Result{}, rankedWalk, nil
	}
	numToFind := s.numFeasibleNodesToFind(fwk.PercentageOfNodesToScore(), n)
	rk := &r.ranked
	if !s.syncRanked(ctx, fwk, state, pod, nodes, log, numToFind) {
		return Result{}, rankedWalk, nil
	}
	t := &rk.tree
	feasibleCount := t.numFeasible()
	if feasibleCount == 0 {
		// The walk writes the diagnosis.
		return Result{}, rankedWalk, nil
	}
	start := s.nextStartNodeIndex
	found := min(feasibleCount, numToFind)
	length := n
	if feasibleCount >= numToFind {
		end := s.kthFeasibleFrom(start, numToFind)
		length = (end-start+n)%n + 1
	}
	w := window{t: t, start: start, length: length, n: n}
	if found == 1 {
		pos := s.kthFeasibleFrom(start, 1)
		s.advanceRanked(length)
		return Result{SuggestedHost: nodes[pos].Name(), EvaluatedNodes: length, FeasibleNodes: 1}, rankedDone, nil
	}

	// PreScore reads no feasible node (PreScoreUsesNodes), so it runs
	// without their list; an error ends the cycle as the walk's would,
	// after the window has moved on.
	if st := fwk.RunPreScorePlugins(ctx, state, pod, nil); !st.IsSuccess() {
		s.advanceRanked(length)
		return Result{}, rankedDone, st.AsError()
	}
	numNorms, fit := s.prepareRankedScores(fwk, state)
	if !fit {
		return Result{}, rankedWalkScored, nil
	}
	if !rk.full && !s.flushRanked(ctx, fwk, state, pod, nodes) {
		return Result{}, rankedWalkScored, nil
	}
	if !s.settleTotals(ctx, fwk, state, pod, nodes, w, numNorms, numToFind) {
		// Some totals may be made under other highest scores than the
		// others: build again later.
		rk.forget()
		return Result{}, rankedWalkScored, nil
	}
	if rk.numBad > 0 {
		return Result{}, rankedWalkScored, nil
	}
	pos := w.pos(s.selectRanked(w))
	s.advanceRanked(length)
	if rk.runs++; rk.runs == remakeCheck {
		if rk.remakes > maxRemakes {
			rk.unfit()
		}
		rk.runs, rk.remakes = 0, 0
	}
	return Result{SuggestedHost: nodes[pos].Name(), EvaluatedNodes: length, FeasibleNodes: found}, rankedDone, nil
}

// prepareRankedScores takes the cycle's Score plugins after PreScore:
// their weights and normalizers into s.rankedScratch, and the memo's raw
// scores ready for them. It returns the number of normalizers; false when
// the cycle must walk, the tree having been dropped.
func (s *Placer) prepareRankedScores(fwk *runtime.Framework, state *framework.CycleState) (numNorms int, fit bool) {
	r, rk, sc := s.cur, &s.cur.ranked, &s.rankedScratch
	sc.weights, sc.norms, fit = fwk.ActiveScorers(state, sc.weights[:0], sc.norms[:0])
	if !fit || fwk.ScoreStamped(state) {
		rk.unfit()
		return 0, false
	}
	skip := state.SkipScorePlugins()
	if r.numScores != len(sc.weights) || r.scoreSkip != skip {
		// The memo's raw scores were kept under another mask and are
		// dropped: the walk learns them again more cheaply than scoring
		// every node here.
		rk.forget()
		return 0, false
	}
	r.prepareScores(skip, len(sc.weights))
	if rk.skip != skip {
		rk.skip, rk.full = skip, true
	}
	sc.normOf = sc.normOf[:0]
	for _, nm := range sc.norms {
		j := -1
		if nm != nil {
			j, numNorms = numNorms, numNorms+1
		}
		sc.normOf = append(sc.normOf, j)
	}
	sc.raw = resize(sc.raw, numNorms)
	if numNorms != rk.tree.norms || len(rk.highest) != numNorms {
		rk.full = true
	}
	return numNorms, true
}

// advanceRanked moves the window start past a window of length nodes, as
// the walk does, and counts the window as reused.
func (s *Placer) advanceRanked(length int) {
	s.nextStartNodeIndex = (s.nextStartNodeIndex + length) % s.memo.size
	s.memoHits += length
	s.rankedCycles++
}

// kthFeasibleFrom is the position of the k-th feasible node in circular
// order from start; there are at least k.
func (s *Placer) kthFeasibleFrom(start, k int) int {
	t := &s.cur.ranked.tree
	before := t.feasibleBefore(start)
	if after := t.numFeasible() - before; k > after {
		return t.kthFeasible(k - after)
	}
	return t.kthFeasible(before + k)
}

// syncRanked brings the tree's verdicts up to date: from the change log
// when it can, else by building it from every position (once a rotation
// of the window at most). False when the cycle must walk.
func (s *Placer) syncRanked(ctx context.Context, fwk *runtime.Framework, state *framework.CycleState, pod *framework.PodInfo,
	nodes []*framework.NodeInfo, log framework.NodeChangeLog, numToFind int) bool {
	rk, n := &s.cur.ranked, len(nodes)
	if rk.built {
		if changed, ok := rk.kept.Changed(log, nodes); ok {
			for _, ni := range changed {
				pos, ok := s.memo.positions.Of(ni)
				if !ok || !s.syncLeaf(ctx, fwk, state, pod, nodes, pos, true) {
					rk.forget()
					return false
				}
			}
			rk.kept.Mark(log, nodes, log.Generation())
			return true
		}
	}
	rk.waited++
	if rk.waited < max(1, n/numToFind)*(1+rk.backoff) {
		rk.built = false
		return false
	}
	rk.waited = 0
	r, unknown := s.cur, 0
	for pos, ni := range nodes {
		if sl := &r.slots[pos]; !sl.filtered || sl.gen != ni.Generation {
			if unknown++; unknown > maxUnknown(numToFind) {
				rk.built = false
				return false
			}
		}
	}
	t := &rk.tree
	t.reset(n, t.norms)
	rk.pending = rk.pending[:0]
	rk.bad = resize(rk.bad, n)
	clear(rk.bad)
	rk.numBad = 0
	for pos := range nodes {
		if !s.syncLeaf(ctx, fwk, state, pod, nodes, pos, false) {
			rk.forget()
			return false
		}
	}
	t.rebuild()
	rk.built, rk.full = true, true
	rk.kept.Mark(log, nodes, log.Generation())
	return true
}

// maxUnknown is how many nodes whose verdict or raw scores the memo lacks
// a build filters or scores itself: a fraction of a window.
func maxUnknown(numToFind int) int { return max(numToFind/4, maxSerialMisses) }

// syncLeaf sets pos's verdict in the tree, from the memo or by filtering
// it, and leaves it pending if feasible; fix says to fix the subtrees
// above it. False on a filter error, which the walk must report.
func (s *Placer) syncLeaf(ctx context.Context, fwk *runtime.Framework, state *framework.CycleState, pod *framework.PodInfo,
	nodes []*framework.NodeInfo, pos int, fix bool) bool {
	r, rk := s.cur, &s.cur.ranked
	ni := nodes[pos]
	st, ok := r.filterResult(pos, ni)
	if !ok {
		st = fwk.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni)
		if st.Code() == framework.Error {
			return false
		}
		r.keepFilterResult(pos, ni, st)
	}
	if rk.bad[pos] {
		rk.bad[pos] = false
		rk.numBad--
	}
	feasible := st.IsSuccess()
	rk.tree.setLeaf(pos, feasible, noTotal, nil)
	if feasible {
		rk.pending = append(rk.pending, int32(pos))
	}
	if fix {
		rk.tree.fix(pos)
	}
	return true
}

// rawScores returns pos's raw scores, scoring it first if the memo does
// not have them; false on a Score error, which the walk must report if
// pos is in the window.
func (s *Placer) rawScores(ctx context.Context, fwk *runtime.Framework, state *framework.CycleState, pod *framework.PodInfo,
	nodes []*framework.NodeInfo, pos int) ([]int64, bool) {
	r := s.cur
	k := r.numScores
	raw := r.scores[pos*k : (pos+1)*k : (pos+1)*k]
	if sl := &r.slots[pos]; !sl.scored {
		if st := fwk.ScoreNodeRaw(ctx, state, pod, nodes[pos], raw); !st.IsSuccess() {
			return nil, false
		}
		sl.scored = true
	}
	return raw, true
}

// total is the weighted total of raw under the normalizers' highest raw
// scores, and whether every score is in range.
func (s *Placer) total(raw []int64) (int64, bool) {
	sc, rk := &s.rankedScratch, &s.cur.ranked
	var sum int64
	inRange := true
	for p, v := range raw {
		if j := sc.normOf[p]; j >= 0 {
			v = sc.norms[p].NormalizeScoreOf(v, rk.highest[j])
		}
		if v > framework.MaxNodeScore || v < framework.MinNodeScore {
			inRange = false
		}
		sum += v * sc.weights[p]
	}
	return sum, inRange
}

// setTotal makes pos's total from raw into its leaf.
func (s *Placer) setTotal(pos int, raw []int64) {
	rk, sc := &s.cur.ranked, &s.rankedScratch
	for p, j := range sc.normOf {
		if j >= 0 {
			sc.raw[j] = raw[p]
		}
	}
	total, inRange := s.total(raw)
	if inRange == rk.bad[pos] {
		rk.bad[pos] = !inRange
		if inRange {
			rk.numBad--
		} else {
			rk.numBad++
		}
	}
	rk.tree.setLeaf(pos, true, total, sc.raw)
}

// flushRanked makes the totals of the pending positions under the
// current highest raw scores. False on a Score error.
func (s *Placer) flushRanked(ctx context.Context, fwk *runtime.Framework, state *framework.CycleState, pod *framework.PodInfo, nodes []*framework.NodeInfo) bool {
	rk := &s.cur.ranked
	for _, p := range rk.pending {
		pos := int(p)
		if !rk.tree.leafFeasible(pos) {
			continue
		}
		raw, ok := s.rawScores(ctx, fwk, state, pod, nodes, pos)
		if !ok {
			return false
		}
		s.setTotal(pos, raw)
		rk.tree.fix(pos)
	}
	rk.pending = rk.pending[:0]
	return true
}

// settleTotals makes every total again if the window's highest raw
// scores differ from those the totals were made under (or rk.full says
// so). False on a Score error, or when the memo lacks the raw scores of
// more nodes than are worth scoring here.
func (s *Placer) settleTotals(ctx context.Context, fwk *runtime.Framework, state *framework.CycleState, pod *framework.PodInfo,
	nodes []*framework.NodeInfo, w window, numNorms, numToFind int) bool {
	rk, t := &s.cur.ranked, &s.cur.ranked.tree
	if rk.full {
		unscored := 0
		for pos, ni := range nodes {
			sl := &s.cur.slots[pos]
			if !sl.filtered || sl.gen != ni.Generation {
				// syncRanked left every verdict known.
				return false
			}
			if sl.status == nil && !sl.scored {
				if unscored++; unscored > maxUnknown(numToFind) {
					return false
				}
			}
		}
		// Raw scores first: the window's highest come from them.
		t.reset(len(nodes), numNorms)
		sc := &s.rankedScratch
		for pos := range nodes {
			if s.cur.slots[pos].status != nil {
				continue
			}
			raw, ok := s.rawScores(ctx, fwk, state, pod, nodes, pos)
			if !ok {
				return false
			}
			for p, j := range sc.normOf {
				if j >= 0 {
					sc.raw[j] = raw[p]
				}
			}
			t.setLeaf(pos, true, noTotal, sc.raw)
		}
		t.rebuild()
		rk.pending = rk.pending[:0]
	}
	changed := rk.full || len(rk.highest) != numNorms
	rk.highest = resize(rk.highest, numNorms)
	for j := range numNorms {
		if h := w.highest(j); h != rk.highest[j] {
			rk.highest[j], changed = h, true
		}
	}
	if !changed {
		return true
	}
	rk.remakes++
	clear(rk.bad)
	rk.numBad = 0
	for pos := range nodes {
		if !t.leafFeasible(pos) {
			continue
		}
		raw, ok := s.rawScores(ctx, fwk, state, pod, nodes, pos)
		if !ok {
			return false
		}
		s.setTotal(pos, raw)
	}
	t.rebuild()
	rk.full = false
	return true
}

// selectRanked is selectHost over the window's feasible nodes in window
// order, making the same draw; it returns the winner's window offset.
func (s *Placer) selectRanked(w window) int {
	cur := w.firstAbove(0, noTotal)
	m := w.total(cur)
	for next := w.firstAbove(cur+1, m); next >= 0; next = w.firstAbove(cur+1, m) {
		cur, m = next, w.total(next)
	}
	// cur is the first node at the best total m; the draw picks among it
	// and the others at m after it.
	if k := s.ties.pick(1 + w.countAt(cur+1, w.length, m)); k > 0 {
		return w.kthAt(cur+1, w.length, m, k)
	}
	return cur
}

// window is the filter window as offsets 0..length-1 from start, over
// the circular node list.
type window struct {
	t                *rankTree
	start, length, n int
}

func (w window) pos(off int) int { return (w.start + off) % w.n }

// pieces splits offsets [a, b) into at most two ranges of positions.
func (w window) pieces(a, b int) (lo1, hi1, lo2, hi2 int) {
	lo, hi := w.start+a, w.start+b
	switch {
	case hi <= w.n:
		return lo, hi, 0, 0
	case lo >= w.n:
		return lo - w.n, hi - w.n, 0, 0
	default:
		return lo, w.n, 0, hi - w.n
	}
}

// off is the window offset of position pos.
func (w window) off(pos int) int { return (pos - w.start + w.n) % w.n }

func (w window) total(off int) int64 { return w.t.leafTotal(w.pos(off)) }

// firstAbove is the first offset at or after a whose total is above m, -1
// if none.
func (w window) firstAbove(a int, m int64) int {
	if a >= w.length {
		return -1
	}
	lo1, hi1, lo2, hi2 := w.pieces(a, w.length)
	if p := w.t.firstAbove(lo1, hi1, m); p >= 0 {
		return w.off(p)
	}
	if p := w.t.firstAbove(lo2, hi2, m); p >= 0 {
		return w.off(p)
	}
	return -1
}

// countAt counts the offsets in [a, b) at total m, which none exceeds.
func (w window) countAt(a, b int, m int64) int {
	if a >= b {
		return 0
	}
	lo1, hi1, lo2, hi2 := w.pieces(a, b)
	return w.t.countAt(lo1, hi1, m) + w.t.countAt(lo2, hi2, m)
}

// kthAt is the k-th offset in [a, b) at total m, which none exceeds.
func (w window) kthAt(a, b int, m int64, k int) int {
	lo1, hi1, lo2, hi2 := w.pieces(a, b)
	if c := w.t.countAt(lo1, hi1, m); k > c {
		return w.off(w.t.kthAt(lo2, hi2, m, k-c))
	}
	return w.off(w.t.kthAt(lo1, hi1, m, k))
}

// highest is normalizer j's highest raw score over the window's feasible
// nodes.
func (w window) highest(j int) int64 {
	lo1, hi1, lo2, hi2 := w.pieces(0, w.length)
	return max(w.t.highestIn(j, lo1, hi1), w.t.highestIn(j, lo2, hi2))
}
