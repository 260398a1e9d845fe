// Package algorithm is one scheduling cycle after the snapshot is up to
// date, as kube-scheduler's schedulePod: PreFilter, Filter over a rotating
// window of nodes with early exit, PreScore, Score, and host selection.
package algorithm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/runtime"
)

const (
	// minFeasibleNodesToFind: below this many nodes every node is filtered,
	// and at least this many feasible nodes are looked for.
	minFeasibleNodesToFind = 100
	// minFeasibleNodesPercentageToFind is the floor of the adaptive
	// percentage.
	minFeasibleNodesPercentageToFind = 5
)

// Result is where a pod should go.
type Result struct {
	SuggestedHost string
	// EvaluatedNodes counts the nodes filtered (feasible or not).
	EvaluatedNodes int
	// FeasibleNodes counts the feasible nodes found (and scored).
	FeasibleNodes int
}

// nodeResult is one node's filter outcome, by position in the window.
type nodeResult struct {
	status *framework.Status
	state  uint8
	// remembered says the memo supplied the result.
	remembered bool
}

const (
	unvisited uint8 = iota
	feasible
	rejected
)

// Placer runs scheduling cycles for one shard: it decides where a pod
// goes, and leaves assuming and binding to the caller. It keeps the rotating
// start of the filter window, the random source for ties and reusable
// buffers, so it is not safe for concurrent use: call Schedule and Explain
// from the shard's loop only.
type Placer struct {
	percentage int32
	// nextStartNodeIndex is where the next filter window starts, so over
	// successive cycles every node gets examined.
	nextStartNodeIndex int
	pcg                *rand.PCG
	ties               tieBreaker // over pcg

	results  []nodeResult
	feasible []*framework.NodeInfo
	// feasiblePos[i] is feasible[i]'s position in the snapshot list, for
	// the memo; kept only while cur is set.
	feasiblePos []int32
	// statuses is every cycle's NodeToStatus, reused: see Schedule.
	statuses *framework.NodeToStatus
	scores   framework.NodeScores

	// batching enables the signature memo (see memo.go); cur is the
	// current cycle's signature's results, nil when the cycle cannot use
	// the memo.
	batching bool
	memo     signatureMemo
	cur      *signatureResults
	// scoreMemo is the cycle's view of cur for scoring, kept here so
	// that handing it to the runtime allocates nothing.
	scoreMemo scoreMemo
	// rankedScratch is placeRanked's, reused.
	rankedScratch rankedScratch
	// memoCycles counts cycles that used the memo, memoHits the filter
	// results in their windows it supplied: for tests and benchmarks.
	memoCycles, memoHits int
	// rankedCycles counts cycles placeRanked decided, for tests.
	rankedCycles int
}

// Option configures New.
type Option func(*Placer)

// WithRandSeed seeds the tie-break source, for reproducible tests.
func WithRandSeed(seed1, seed2 uint64) Option {
	return func(s *Placer) { s.pcg.Seed(seed1, seed2) }
}

// WithSignatureBatching turns the reuse of results between pods of one
// signature (see memo.go) on or off; it is on by default. Decisions are
// the same either way; off is for comparing.
func WithSignatureBatching(on bool) Option {
	return func(s *Placer) { s.batching = on }
}

// New returns a Placer filtering percentageOfNodesToScore percent of
// the nodes per cycle (0: kube's adaptive default).
func New(percentageOfNodesToScore int32, opts ...Option) *Placer {
	now := uint64(time.Now().UnixNano())
	s := &Placer{percentage: percentageOfNodesToScore, pcg: rand.NewPCG(now, now>>1^0x9e3779b97f4a7c15), batching: true}
	for _, o := range opts {
		o(s)
	}
	s.ties = tieBreaker{s.pcg}
	return s
}

// Schedule finds a node for pod using fwk, whose snapshot must already be
// updated. It returns a *framework.FitError when no node fits, whose
// NodeToStatus is this Placer's and is valid until its next Schedule,
// framework.ErrNoNodesAvailable when there are no nodes, and other errors
// for plugin failures.
func (s *Placer) Schedule(ctx context.Context, fwk *runtime.Framework, state *framework.CycleState, pod *framework.PodInfo) (Result, error) {
	nodes := fwk.SnapshotSharedLister().NodeInfos().List()
	if len(nodes) == 0 {
		return Result{}, framework.ErrNoNodesAvailable
	}
	s.cur = nil
	sig, batched := s.signature(fwk, pod)
	if batched {
		var began uint64
		if began, batched = s.memo.begin(fwk, nodes); batched {
			defer s.memo.end(fwk, began)
		}
	}
	if !batched {
		sig = ""
	}
	feasibleNodes, diag, ranked, err := s.findNodesThatFitPod(ctx, fwk, state, pod, nodes, batched, sig)
	if ranked.outcome == rankedDone {
		return ranked.result, err
	}
	if err != nil {
		return Result{}, err
	}
	if len(feasibleNodes) == 0 {
		return Result{}, &framework.FitError{Pod: pod.Pod, NumAllNodes: len(nodes), Diagnosis: diag}
	}
	evaluated := len(feasibleNodes) + diag.NodeToStatus.Len()
	if len(feasibleNodes) == 1 {
		return Result{SuggestedHost: feasibleNodes[0].Name(), EvaluatedNodes: evaluated, FeasibleNodes: 1}, nil
	}
	var memo runtime.RawScoreMemo
	if s.cur != nil {
		s.scoreMemo = scoreMemo{r: s.cur, pos: s.feasiblePos, nodes: feasibleNodes}
		memo = &s.scoreMemo
	}
	totals, err := s.prioritize(ctx, fwk, state, pod, feasibleNodes, &s.scores, memo, ranked.outcome == rankedWalkScored)
	if err != nil {
		return Result{}, err
	}
	best := selectHost(totals, s.ties)
	return Result{SuggestedHost: feasibleNodes[best].Name(), EvaluatedNodes: evaluated, FeasibleNodes: len(feasibleNodes)}, nil
}

// signature returns the pod's signature if this cycle may use the memo
// for it at all: a pod nominated to a node filters that node first and is
// left out of the nominations it would count, so it goes alone.
func (s *Placer) signature(fwk *runtime.Framework, pod *framework.PodInfo) (string, bool) {
	if !s.batching || pod.Pod.NominatedNodeName() != "" {
		return "", false
	}
	return fwk.PodSignature(pod)
}

// rankedCycle is how a cycle's try of placeRanked ended, and its result
// if it placed the pod.
type rankedCycle struct {
	outcome rankedOutcome
	result  Result
}

// findNodesThatFitPod runs PreFilter, tries the nominated node, then
// filters a window of the (possibly narrowed) nodes. With batched, the
// memo's results for sig are used when the nodes are not narrowed, and
// the signature's ranked nodes may decide the cycle (see ranked.go).
func (s *Placer) findNodesThatFitPod(ctx context.Context, fwk *runtime.Framework, state *framework.CycleState, pod *framework.PodInfo, all []*framework.NodeInfo,
	batched bool, sig string) (_ []*framework.NodeInfo, _ framework.Diagnosis, ranked rankedCycle, _ error) {
	if s.statuses == nil {
		s.statuses = framework.NewNodeToStatus()
	}
	s.statuses.Reset()
	diag := framework.Diagnosis{NodeToStatus: s.statuses}
	preRes, st, withNodes := fwk.RunPreFilterPlugins(ctx, state, pod)
	diag.UnschedulablePlugins = withNodes
	if !st.IsSuccess() {
		if !st.IsRejected() {
			return nil, diag, ranked, st.AsError()
		}
		// Every node gets the same status, for preemption.
		diag.NodeToStatus.SetAbsentNodesStatus(st)
		diag.PreFilterMsg = st.Message()
		diag.AddPluginStatus(st)
		return nil, diag, ranked, nil
	}

	// A node nominated by an earlier preemption is likely the only one with
	// room: try it first.
	var nominated *framework.NodeInfo
	var nominatedStatus *framework.Status
	if name := pod.Pod.NominatedNodeName(); name != "" {
		if ni, err := fwk.SnapshotSharedLister().NodeInfos().Get(name); err == nil {
			st := fwk.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni)
			if st.IsSuccess() {
				return []*framework.NodeInfo{ni}, diag, ranked, nil
			}
			if st.IsRejected() {
				nominated, nominatedStatus = ni, st
				diag.AddPluginStatus(st)
			}
		}
	}

	candidates := narrow(fwk, all, preRes, withNodes, &diag)
	if batched && preRes.AllNodes() {
		// The memo is by position in the whole list.
		if s.cur = s.memo.lookup(memoKey{fwk: fwk, sig: sig, skipFilter: state.SkipFilterPlugins()}); s.cur != nil {
			s.cur.beginCycle(ctx, fwk, state, pod)
			s.memoCycles++
			if nominated == nil {
				var err error
				ranked.result, ranked.outcome, err = s.placeRanked(ctx, fwk, state, pod, all)
				if ranked.outcome == rankedDone {
					return nil, diag, ranked, err
				}
			}
		}
	}
	diag.NodeToStatus.Grow(len(candidates))
	found, recordedNominated, err := s.findNodesThatPassFilters(ctx, fwk, state, pod, &diag, candidates, nominated)
	// The window most often filtered the nominated node again; if not,
	// its rejection still belongs to the diagnosis.
	if nominated != nil && !recordedNominated {
		diag.NodeToStatus.Record(nominated, nominatedStatus)
	}
	// Advance even on error, so every node keeps its turn.
	processed := len(found) + diag.NodeToStatus.Len()
	s.nextStartNodeIndex = (s.nextStartNodeIndex + processed) % len(all)
	if err != nil {
		return nil, diag, ranked, err
	}
	return found, diag, ranked, nil
}

// narrow applies a PreFilterResult: only the named nodes that exist, in
// name order; the others count as absent with kube's status.
func narrow(fwk *runtime.Framework, all []*framework.NodeInfo, preRes *framework.PreFilterResult, withNodes map[string]struct{}, diag *framework.Diagnosis) []*framework.NodeInfo {
	if preRes.AllNodes() {
		return all
	}
	names := runtime.SortedNames(preRes.NodeNames)
	out := make([]*framework.NodeInfo, 0, len(names))
	lister := fwk.SnapshotSharedLister().NodeInfos()
	for _, n := range names {
		if ni, err := lister.Get(n); err == nil {
			out = append(out, ni)
		}
	}
	diag.NodeToStatus.SetAbsentNodesStatus(framework.NewStatus(framework.UnschedulableAndUnresolvable,
		fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", runtime.SortedNames(withNodes))))
	return out
}

// numFeasibleNodesToFind is kube's adaptive window: every node below 100
// nodes; otherwise percentage% (adaptive: 50 - nodes/125, at least 5),
// but at least 100.
func (s *Placer) numFeasibleNodesToFind(override *int32, numAllNodes int) int {
	if numAllNodes < minFeasibleNodesToFind {
		return numAllNodes
	}
	pct := int(s.percentage)
	if override != nil {
		pct = int(*override)
	}
	if pct == 0 {
		pct = max(50-numAllNodes/125, minFeasibleNodesPercentageToFind)
	}
	n := numAllNodes * pct / 100
	if n < minFeasibleNodesToFind {
		return minFeasibleNodesToFind
	}
	return min(n, numAllNodes)
}

// findNodesThatPassFilters filters nodes starting at nextStartNodeIndex
// and stops once enough feasible nodes are found. Feasible nodes come back
// in window order; rejections go to diag. recordedNominated says whether
// nominated (a node already tried, or nil) was among the rejections.
func (s *Placer) findNodesThatPassFilters(ctx context.Context, fwk *runtime.Framework, state *framework.CycleState, pod *framework.PodInfo, diag *framework.Diagnosis,
	nodes []*framework.NodeInfo, nominated *framework.NodeInfo) (_ []*framework.NodeInfo, recordedNominated bool, _ error) {
	n := len(nodes)
	if n == 0 {
		return nil, false, nil
	}
	numToFind := s.numFeasibleNodesToFind(fwk.PercentageOfNodesToScore(), n)
	if !fwk.HasScorePlugins() {
		// Without scoring any feasible node is as good as another.
		numToFind = 1
	}
	start := s.nextStartNodeIndex
	s.feasible = s.feasible[:0]
	s.feasiblePos = s.feasiblePos[:0]
	if !fwk.HasFilterPlugins() {
		for i := range numToFind {
			s.feasible = append(s.feasible, nodes[(start+i)%n])
			s.feasiblePos = append(s.feasiblePos, int32((start+i)%n))
		}
		return s.feasible, false, nil
	}
	if cap(s.results) < n {
		s.results = make([]nodeResult, n)
	}
	filtered, found := 0, 0
	var errSt *framework.Status
	if s.cur != nil {
		filtered, found, errSt = s.walkRemembered(ctx, fwk, state, pod, s.cur, nodes, start, numToFind)
	}
	if filtered < n && found < numToFind && errSt == nil {
		filtered, errSt = s.filterInParallel(ctx, fwk, state, pod, nodes, start, filtered, found, numToFind)
	}
	recordedNominated = s.keepWindowPrefix(s.results[:filtered], nodes, start, numToFind, diag, nominated)
	if errSt != nil {
		return s.feasible, recordedNominated, errSt.AsError()
	}
	return s.feasible, recordedNominated, nil
}

// filterInParallel filters the window from position first on with the
// framework's parallelism, found of the numToFind feasible nodes being
// before first, and records the verdicts in s.results (taking and keeping
// them in the memo, if the cycle has one). It returns one past the
// furthest position filtered and the first error status.
func (s *Placer) filterInParallel(ctx context.Context, fwk *runtime.Framework, state *framework.CycleState, pod *framework.PodInfo,
	nodes []*framework.NodeInfo, start, first, found, numToFind int) (int, *framework.Status) {
	n := len(nodes)
	results, memo := s.results[:n], s.cur
	var firstErr atomic.Pointer[framework.Status]
	// The Parallelizer hands out chunks in window order and finishes every
	// chunk it hands out, so the nodes filtered always include a prefix of
	// the window holding the first numToFind feasible nodes. Keeping
	// exactly that prefix makes the outcome independent of the parallelism.
	covered := fwk.Parallelizer().UntilFound(ctx, n-first, numToFind-found, func(j int) (hit, stop bool) {
		if firstErr.Load() != nil {
			return false, true
		}
		i := first + j
		pos := (start + i) % n
		ni := nodes[pos]
		var st *framework.Status
		if memo == nil {
			st = fwk.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni)
		} else if known, ok := memo.filterResult(pos, ni); ok {
			st = known
			results[i].remembered = true
		} else {
			st = fwk.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni)
			memo.keepFilterResult(pos, ni, st)
		}
		switch {
		case st.IsSuccess():
			results[i].state = feasible
			return true, false
		case st.Code() == framework.Error:
			firstErr.CompareAndSwap(nil, st)
			return false, true
		default:
			results[i].status, results[i].state = st, rejected
			return false, false
		}
	})
	return first + covered, firstErr.Load()
}

// maxSerialMisses is how many nodes the memo does not know walkRemembered
// filters itself before it hands the rest of the window to the parallel
// walk: about as long as starting the workers takes.
const maxSerialMisses = 16

// walkRemembered walks the window in order on the caller's goroutine,
// taking the memo's verdicts and filtering the nodes it does not know,
// until numToFind nodes are feasible, a filter errs, the window ends, or
// (with parallelism) more than maxSerialMisses nodes were unknown (a new
// signature, a changed list). With most verdicts a load away, a worker per
// chunk and atomics per node would cost more than the walk. It returns how
// far it got (the positions before that are in s.results, the rest are not
// touched), how many were feasible, and the error status if any.
func (s *Placer) walkRemembered(ctx context.Context, fwk *runtime.Framework, state *framework.CycleState, pod *framework.PodInfo, memo *signatureResults,
	nodes []*framework.NodeInfo, start, numToFind int) (next, found int, errSt *framework.Status) {
	n := len(nodes)
	results := s.results[:n]
	parallel := fwk.Parallelizer().Parallelism() > 1
	misses := 0
	for i := range n {
		if i&1023 == 1023 && ctx.Err() != nil {
			return i, found, nil
		}
		pos := (start + i) % n
		ni := nodes[pos]
		st, ok := memo.filterResult(pos, ni)
		if ok {
			results[i].remembered = true
		} else {
			if parallel && misses == maxSerialMisses {
				return i, found, nil
			}
			misses++
			st = fwk.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni)
			memo.keepFilterResult(pos, ni, st)
		}
		switch {
		case st.IsSuccess():
			results[i].state = feasible
			if found++; found >= numToFind {
				return i + 1, found, nil
			}
		case st.Code() == framework.Error:
			return i + 1, found, st
		default:
			results[i].status, results[i].state = st, rejected
		}
	}
	return n, found, nil
}

// keepWindowPrefix walks the filtered part of the window in order, keeps
// feasible nodes until numToFind, records the rejections before that point
// in diag, and clears results for the next cycle. It reports whether the
// nominated node's rejection was recorded.
func (s *Placer) keepWindowPrefix(results []nodeResult, nodes []*framework.NodeInfo, start, numToFind int, diag *framework.Diagnosis,
	nominated *framework.NodeInfo) (recordedNominated bool) {
	n := len(nodes)
	// Most rejections come from the same plugin with the same code: note
	// each plugin once per run rather than once per node.
	var last struct {
		plugin string
		code   framework.Code
	}
	for i := range results {
		r := &results[i]
		if len(s.feasible) < numToFind {
			if r.remembered {
				s.memoHits++
			}
			switch pos := (start + i) % n; r.state {
			case feasible:
				s.feasible = append(s.feasible, nodes[pos])
				s.feasiblePos = append(s.feasiblePos, int32(pos))
			case rejected:
				ni := nodes[pos]
				diag.NodeToStatus.Record(ni, r.status)
				if p, c := r.status.Plugin(), r.status.Code(); p != last.plugin || c != last.code {
					diag.AddPluginStatus(r.status)
					last.plugin, last.code = p, c
				}
				if ni == nominated {
					recordedNominated = true
				}
			}
		}
		*r = nodeResult{}
	}
	return recordedNominated
}

// prioritize runs PreScore and Score and returns the weighted totals, in
// the order of nodes. Without Score plugins every node scores 1. A memo
// (nil: none) supplies and keeps raw scores.
func (s *Placer) prioritize(ctx context.Context, fwk *runtime.Framework, state *framework.CycleState, pod *framework.PodInfo, nodes []*framework.NodeInfo, out *framework.NodeScores,
	memo runtime.RawScoreMemo, preScored bool) ([]int64, error) {
	if !fwk.HasScorePlugins() {
		out.Reset(0, nodes)
		for i := range out.Totals {
			out.Totals[i] = 1
		}
		return out.Totals, nil
	}
	// With preScored, placeRanked ran PreScore already, for a pod whose
	// PreScore plugins do not read the nodes.
	if !preScored {
		if st := fwk.RunPreScorePlugins(ctx, state, pod, nodes); !st.IsSuccess() {
			return nil, st.AsError()
		}
	}
	if m, ok := memo.(*scoreMemo); ok {
		m.r.prepareScores(state.SkipScorePlugins(), fwk.NumActiveScorePlugins(state))
	}
	if st := fwk.RunScorePluginsWithMemo(ctx, state, pod, nodes, out, memo); !st.IsSuccess() {
		return nil, st.AsError()
	}
	return out.Totals, nil
}

// selectHost returns the index of the highest total; ties are broken
// uniformly at random, with one draw when there are any.
func selectHost(totals []int64, ties tieBreaker) int {
	best, tied := 0, 1
	for i := 1; i < len(totals); i++ {
		switch {
		case totals[i] > totals[best]:
			best, tied = i, 1
		case totals[i] == totals[best]:
			tied++
		}
	}
	k := ties.pick(tied)
	for i := best + 1; k > 0; i++ {
		if totals[i] == totals[best] {
			best, k = i, k-1
		}
	}
	return best
}
