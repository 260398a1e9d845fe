package podtopologyspread

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/nodeaffinity"
)

const preScoreStateKey framework.StateKey = "PreScore" + Name

// invalidScore marks ignored nodes inside NormalizeScore; real raw scores
// are never negative.
const invalidScore = -1

// preScoreState is what Score needs of the soft constraints. Read-only
// after PreScore, so clones share it.
type preScoreState struct {
	constraints []constraint
	// ignoredNodes are filtered nodes missing a topology key; they score 0.
	ignoredNodes map[string]struct{}
	// index[i] maps each domain of constraint i among the filtered nodes
	// to its slot in counts[i], which holds its matching pods across all
	// nodes. Empty for hostname constraints: Score counts those per node.
	index  []map[string]int
	counts [][]int64
	// weights[i] is log(domains + 2): it keeps the counts of a topology
	// with few domains from being drowned by one with many.
	weights []float64
}

// Clone implements framework.StateData.
func (s *preScoreState) Clone() framework.StateData { return s }

// hasDomains reports whether any constraint has domains to count in
// PreScore.
func (s *preScoreState) hasDomains() bool {
	for _, m := range s.index {
		if len(m) > 0 {
			return true
		}
	}
	return false
}

// initPreScoreState compiles the soft constraints and finds, among the
// filtered nodes, the ignored ones and the domains (with their count).
// It returns false when the pod has no soft constraints.
func (pl *PodTopologySpread) initPreScoreState(s *preScoreState, pod *framework.Pod, filtered []*framework.NodeInfo, requireAllTopologies bool) (bool, error) {
	cs, err := pl.constraints(pod, framework.ScheduleAnyway)
	if err != nil || len(cs) == 0 {
		return false, err
	}
	s.constraints = cs
	s.index = make([]map[string]int, len(cs))
	s.counts = make([][]int64, len(cs))
	s.weights = make([]float64, len(cs))
	for i := range cs {
		s.index[i] = map[string]int{}
	}
	for _, ni := range filtered {
		node := ni.Node()
		if requireAllTopologies && !nodeHasTopologyKeys(node.Labels, cs) {
			if s.ignoredNodes == nil {
				s.ignoredNodes = map[string]struct{}{}
			}
			s.ignoredNodes[node.Name] = struct{}{}
			continue
		}
		for i := range cs {
			if cs[i].topologyKey == LabelHostname {
				continue
			}
			// A node lacking the key (possible only with system defaults)
			// still forms the "" domain, which counts towards the weight,
			// exactly as in kube.
			v, _ := ni.Label(cs[i].label)
			if _, ok := s.index[i][v]; !ok {
				s.index[i][v] = len(s.index[i])
			}
		}
	}
	for i := range cs {
		size := len(s.index[i])
		if cs[i].topologyKey == LabelHostname {
			size = len(filtered) - len(s.ignoredNodes)
		}
		s.counts[i] = make([]int64, len(s.index[i]))
		s.weights[i] = topologyNormalizingWeight(size)
	}
	return true, nil
}

// PreScore implements framework.PreScorePlugin: it counts the pods every
// soft constraint selects in each domain that holds a filtered node,
// over all nodes of the snapshot. Pods without soft constraints skip
// Score.
func (pl *PodTopologySpread) PreScore(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, filtered []*framework.NodeInfo) *framework.Status {
	all := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if len(all) == 0 {
		return framework.SkipStatus()
	}
	p := pod.Pod
	s := &preScoreState{}
	// Only pods spread by the system defaults tolerate nodes missing a
	// key, so nodes without a zone label are still spread by hostname.
	requireAllTopologies := len(p.TopologySpreadConstraints) > 0 || !pl.systemDefaulted
	ok, err := pl.initPreScoreState(s, p, filtered, requireAllTopologies)
	if err != nil {
		return framework.AsStatus(fmt.Errorf("calculating preScoreState: %w", err))
	}
	if !ok {
		return framework.SkipStatus()
	}

	if !s.hasDomains() {
		// Only hostname constraints: Score counts per node, nothing to do.
		state.Write(preScoreStateKey, s)
		return nil
	}
	if idx := pl.counts.acquire(); idx != nil {
		counted := pl.scoreCountsIncrementally(ctx, idx, s, p, requireAllTopologies, all)
		idx.release()
		if counted {
			state.Write(preScoreStateKey, s)
			return nil
		}
	}
	memos := pl.memos.acquire()
	if memos != nil {
		defer memos.release()
	}
	memo := make([]*countMemo, len(s.constraints))
	for i := range s.constraints {
		if len(s.index[i]) > 0 {
			memo[i] = memos.forSelector(&s.constraints[i].selector, p.Namespace, len(all))
		}
	}
	aff := nodeaffinity.GetRequiredNodeAffinity(p)
	pl.parallelizer.Until(ctx, len(all), func(n int) {
		node := all[n].Node()
		if node == nil || (requireAllTopologies && !nodeHasTopologyKeys(node.Labels, s.constraints)) {
			return
		}
		for i := range s.constraints {
			c := &s.constraints[i]
			if !c.includesNode(p, node, &aff) {
				continue
			}
			// Domains without a filtered node are not scored; hostname
			// has no domains here at all. A node lacking the key is in
			// the "" domain, as above.
			v, _ := all[n].Label(c.label)
			slot, ok := s.index[i][v]
			if !ok {
				continue
			}
			if cnt := memo[i].count(n, all[n], &c.selector, p.Namespace); cnt > 0 {
				atomic.AddInt64(&s.counts[i][slot], int64(cnt))
			}
		}
	})
	if err := ctx.Err(); err != nil {
		return framework.AsStatus(err)
	}
	state.Write(preScoreStateKey, s)
	return nil
}

// scoreCountsIncrementally fills s.counts from the kept per-domain
// totals; false if they cannot be used (see incrementalTotals).
func (pl *PodTopologySpread) scoreCountsIncrementally(ctx context.Context, idx *countIndex, s *preScoreState, pod *framework.Pod, requireAllTopologies bool, all []*framework.NodeInfo) bool {
	var required []string
	if requireAllTopologies {
		required = requiredKeys(s.constraints)
	}
	// Only constraints with domains among the filtered nodes count here.
	var which []int
	var cs []constraint
	for i := range s.constraints {
		if len(s.index[i]) > 0 {
			which = append(which, i)
			cs = append(cs, s.constraints[i])
		}
	}
	totals := pl.incrementalTotals(ctx, idx, pod, cs, required, all)
	if totals == nil {
		return false
	}
	for j, t := range totals {
		i := which[j]
		for v, slot := range s.index[i] {
			if id, ok := t.byValue[v]; ok && t.members[id] > 0 {
				s.counts[i][slot] = t.pods[id]
			}
		}
	}
	return true
}

// Score implements framework.ScorePlugin: the raw score grows with the
// matching pods of the node's domains (weighted per topology, plus
// maxSkew-1 to soften small differences); NormalizeScore inverts it.
func (pl *PodTopologySpread) Score(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadState[*preScoreState](state, preScoreStateKey)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	node := nodeInfo.Node()
	if _, ignored := s.ignoredNodes[node.Name]; ignored {
		return 0, nil
	}
	var score float64
	for i := range s.constraints {
		c := &s.constraints[i]
		value, ok := nodeInfo.Label(c.label)
		if !ok {
			continue
		}
		var cnt int64
		if c.topologyKey == LabelHostname {
			cnt = int64(countMatching(nodeInfo.Pods, &c.selector, pod.Pod.Namespace))
		} else if slot, ok := s.index[i][value]; ok {
			cnt = s.counts[i][slot]
		}
		score += scoreForCount(cnt, c.maxSkew, s.weights[i])
	}
	return int64(math.Round(score)), nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (pl *PodTopologySpread) ScoreExtensions() framework.ScoreExtensions { return pl }

// PreScoreUsesNodes implements framework.PreScoreNodesUser: the domains
// scored are those of the feasible nodes, for pods with soft constraints
// (their own or the defaults).
func (pl *PodTopologySpread) PreScoreUsesNodes(pod *framework.PodInfo) bool {
	cs, err := pl.constraints(pod.Pod, framework.ScheduleAnyway)
	return err != nil || len(cs) > 0
}

// NormalizeScore implements framework.ScoreExtensions with kube's integer
// formula: MaxNodeScore * (max + min - score) / max, so the emptiest node
// gets MaxNodeScore; ignored nodes get 0, and all get MaxNodeScore when
// every raw score is 0.
func (pl *PodTopologySpread) NormalizeScore(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, scores framework.NodeScoreList) *framework.Status {
	s, err := framework.ReadState[*preScoreState](state, preScoreStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	var minScore int64 = math.MaxInt64
	var maxScore int64
	for i := range scores {
		if _, ignored := s.ignoredNodes[scores[i].Name]; ignored {
			scores[i].Score = invalidScore
			continue
		}
		minScore = min(minScore, scores[i].Score)
		maxScore = max(maxScore, scores[i].Score)
	}
	for i := range scores {
		switch sc := scores[i].Score; {
		case sc == invalidScore:
			scores[i].Score = 0
		case maxScore == 0:
			scores[i].Score = framework.MaxNodeScore
		default:
			scores[i].Score = framework.MaxNodeScore * (maxScore + minScore - sc) / maxScore
		}
	}
	return nil
}

// topologyNormalizingWeight is log(size+2): at least log 2 even when no
// node has the topology (every node then scores 0 anyway).
func topologyNormalizingWeight(size int) float64 { return math.Log(float64(size + 2)) }

// scoreForCount is a domain's contribution to a node's raw score.
func scoreForCount(cnt int64, maxSkew int32, weight float64) float64 {
	return float64(cnt)*weight + float64(maxSkew-1)
}

var (
	_ framework.PreScoreNodesUser = (*PodTopologySpread)(nil)
)
