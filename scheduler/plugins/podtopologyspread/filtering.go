package podtopologyspread

import (
	"context"
	"slices"
	"unique"
	"unsafe"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/nodeaffinity"
)

const preFilterStateKey framework.StateKey = "PreFilter" + Name

// preFilterState is what Filter needs of the hard constraints: per
// constraint, the matching pods of every eligible domain and the fewest
// in any. AddPod and RemovePod change it; the framework calls them only
// on a clone owned by one goroutine (nominated pods, preemption), so
// unlike kube it carries no lock and Filter reads it lock-free.
type preFilterState struct {
	// constraints, selfMatch and affinity never change after PreFilter
	// and are shared by clones.
	constraints []constraint
	// selfMatch[i] is whether constraint i selects the incoming pod, which
	// would then add one to its domain.
	selfMatch []bool
	affinity  *nodeaffinity.RequiredNodeAffinity

	// matches[i] counts the matching pods of each eligible domain of
	// constraint i, and their minimum.
	matches []domainMatches
	// shared[i] repeats matches[i] by canonical value when
	// constraint i's label has them (framework.LabelKey.Canonical) and at
	// most maxSharedDomains domains; nil otherwise. Filter then finds a
	// node's count by the address of its value, not by hashing it.
	shared [][]domainCount
}

// maxSharedDomains bounds shared: past a few domains a scan costs more
// than the hash.
const maxSharedDomains = 16

type domainCount struct {
	value string // canonical
	num   int
}

// Clone implements framework.StateData.
func (s *preFilterState) Clone() framework.StateData {
	if s == nil {
		return nil
	}
	c := &preFilterState{
		constraints: s.constraints,
		selfMatch:   s.selfMatch,
		affinity:    s.affinity,
		matches:     make([]domainMatches, len(s.matches)),
	}
	for i := range s.matches {
		c.matches[i] = s.matches[i].copy()
	}
	if s.shared != nil {
		c.shared = make([][]domainCount, len(s.shared))
		for i, t := range s.shared {
			c.shared[i] = slices.Clone(t)
		}
	}
	return c
}

// indexShared builds shared from matches.
func (s *preFilterState) indexShared() {
	for i := range s.constraints {
		m := &s.matches[i]
		if !s.constraints[i].label.Canonical() || m.domains > maxSharedDomains {
			continue
		}
		if s.shared == nil {
			s.shared = make([][]domainCount, len(s.constraints))
		}
		t := make([]domainCount, 0, m.domains)
		m.each(func(v string, num int) {
			t = append(t, domainCount{value: unique.Make(v).Value(), num: num})
		})
		s.shared[i] = t
	}
}

// setShared records in shared that domain v of constraint i has num
// matching pods, dropping the constraint's list if it grows too long.
func (s *preFilterState) setShared(i int, v string, num int) {
	if s.shared == nil || s.shared[i] == nil {
		return
	}
	v = unique.Make(v).Value()
	t := s.shared[i]
	for j := range t {
		if t[j].value == v {
			t[j].num = num
			return
		}
	}
	if len(t) == maxSharedDomains {
		s.shared[i] = nil
		return
	}
	s.shared[i] = append(t, domainCount{value: v, num: num})
}

// matchNum is the matching pods of domain value of constraint i.
func (s *preFilterState) matchNum(i int, value string) int {
	if s.shared != nil {
		for _, d := range s.shared[i] {
			// Equal addresses and lengths are equal strings; a value not
			// canonical, or a domain not counted, is looked up below.
			if unsafe.StringData(d.value) == unsafe.StringData(value) && len(d.value) == len(value) {
				return d.num
			}
		}
	}
	n, _ := s.matches[i].get(value)
	return n
}

// minMatchNum is the global minimum the skew of constraint i is measured
// from: 0 while fewer domains than minDomains are eligible.
func (s *preFilterState) minMatchNum(i int) int {
	if s.matches[i].domains < int(s.constraints[i].minDomains) {
		return 0
	}
	return s.matches[i].minimum()
}

// PreFilter implements framework.PreFilterPlugin: it counts, for every
// hard constraint, the matching pods of each eligible domain. A pod
// without hard constraints skips Filter.
func (pl *PodTopologySpread) PreFilter(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, nodes []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	s, err := pl.calPreFilterState(ctx, pod.Pod, nodes)
	if err != nil {
		return nil, framework.AsStatus(err)
	}
	if s == nil {
		return nil, framework.SkipStatus()
	}
	state.Write(preFilterStateKey, s)
	return nil, nil
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (pl *PodTopologySpread) PreFilterExtensions() framework.PreFilterExtensions { return pl }

// AddPod implements framework.PreFilterExtensions.
func (pl *PodTopologySpread) AddPod(_ context.Context, state *framework.CycleState, podToSchedule, podInfoToAdd *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadState[*preFilterState](state, preFilterStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	s.updateWithPod(podInfoToAdd.Pod, podToSchedule.Pod, nodeInfo.Node(), 1)
	return nil
}

// RemovePod implements framework.PreFilterExtensions.
func (pl *PodTopologySpread) RemovePod(_ context.Context, state *framework.CycleState, podToSchedule, podInfoToRemove *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadState[*preFilterState](state, preFilterStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	s.updateWithPod(podInfoToRemove.Pod, podToSchedule.Pod, nodeInfo.Node(), -1)
	return nil
}

// updateWithPod adds delta for updated, a pod on node, to the domains of
// the constraints that select it, if node is eligible for them.
func (s *preFilterState) updateWithPod(updated, incoming *framework.Pod, node *framework.Node, delta int) {
	if s == nil || node == nil || updated.Namespace != incoming.Namespace || !nodeHasTopologyKeys(node.Labels, s.constraints) {
		return
	}
	for i := range s.constraints {
		c := &s.constraints[i]
		if !c.selector.matches(updated.Labels) || !c.includesNode(incoming, node, s.affinity) {
			continue
		}
		// The minimum stays exact: Kubernetes tracks only the two
		// emptiest domains here and can miss that a third became the
		// emptiest, rare trouble for its nominated pods but not for Berth,
		// which folds every pod placed concurrently into a cycle's state
		// before assuming.
		v := node.Labels[c.topologyKey]
		n, _ := s.matches[i].get(v)
		s.matches[i].set(v, n+delta)
		s.setShared(i, v, n+delta)
	}
}

// calPreFilterState returns nil when the pod has no hard constraints. It is
// one function, as kube's of the same name, so the two read side by side.
func (pl *PodTopologySpread) calPreFilterState(ctx context.Context, pod *framework.Pod, nodes []*framework.NodeInfo) (*preFilterState, error) {
	cs, err := pl.constraints(pod, framework.DoNotSchedule)
	if err != nil || len(cs) == 0 {
		return nil, err
	}
	aff := nodeaffinity.GetRequiredNodeAffinity(pod)
	s := &preFilterState{
		constraints: cs,
		selfMatch:   make([]bool, len(cs)),
		affinity:    &aff,
		matches:     make([]domainMatches, len(cs)),
	}
	for i := range cs {
		s.selfMatch[i] = cs[i].selector.matches(pod.Labels)
	}

	counted := false
	if idx := pl.counts.acquire(); idx != nil {
		if totals := pl.incrementalTotals(ctx, idx, pod, cs, requiredKeys(cs), nodes); totals != nil {
			for i, t := range totals {
				s.matches[i] = t.filterMatches()
			}
			counted = true
		}
		idx.release()
	}
	if !counted {
		if err := pl.countNodeByNode(ctx, s, pod, nodes); err != nil {
			return nil, err
		}
	}
	s.indexShared()
	return s, nil
}

// countNodeByNode fills s.matches looking at every node, with
// the count memos where it can.
func (pl *PodTopologySpread) countNodeByNode(ctx context.Context, s *preFilterState, pod *framework.Pod, nodes []*framework.NodeInfo) error {
	cs, aff := s.constraints, s.affinity
	memos := pl.memos.acquire()
	if memos != nil {
		defer memos.release()
	}
	memo := make([]*countMemo, len(cs))
	for i := range cs {
		memo[i] = memos.forSelector(&cs[i].selector, pod.Namespace, len(nodes))
	}

	// Domain ids per node, per constraint, from the cross-cycle index.
	k := len(cs)
	domIDs := make([][]int32, k)
	domValues := make([][]string, k)
	for i := range cs {
		ids, values := pl.domains.lookup(cs[i].topologyKey, nodes)
		domIDs[i], domValues[i] = ids, values
	}

	// Count per node in parallel into one flat table (-1: the node is not
	// an eligible domain member), then merge by domain id.
	counts := make([]int32, len(nodes)*k)
	pl.parallelizer.Until(ctx, len(nodes), func(n int) {
		row := counts[n*k : (n+1)*k]
		node := nodes[n].Node()
		hasKeys := node != nil
		for i := 0; hasKeys && i < k; i++ {
			hasKeys = domIDs[i][n] >= 0
		}
		if !hasKeys {
			for i := range row {
				row[i] = -1
			}
			return
		}
		for i := range cs {
			if !cs[i].includesNode(pod, node, aff) {
				row[i] = -1
				continue
			}
			row[i] = int32(memo[i].count(n, nodes[n], &cs[i].selector, pod.Namespace))
		}
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range cs {
		perDomain := make([]int, len(domValues[i]))
		present := make([]bool, len(domValues[i]))
		for n := range nodes {
			if c := counts[n*k+i]; c >= 0 {
				id := domIDs[i][n]
				perDomain[id] += int(c)
				present[id] = true
			}
		}
		m := make(map[string]int, len(present))
		for id, ok := range present {
			if ok {
				m[domValues[i][id]] = perDomain[id]
			}
		}
		s.matches[i] = matchesOf(m)
	}
	return nil
}

// Filter implements framework.FilterPlugin: a node fails a constraint when
// its domain's matching pods, plus the incoming pod if selected, would
// exceed the global minimum by more than maxSkew. A node without the
// topology key can never satisfy the constraint.
func (pl *PodTopologySpread) Filter(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadState[*preFilterState](state, preFilterStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	switch s.verdict(nodeInfo) {
	case missingLabel:
		return labelNotMatched
	case tooSkewed:
		return constraintsNotMatched
	}
	return nil
}

// Filter's rejections (framework.NewRejection). A tight spread rejects
// most of the nodes it is asked about.
var (
	labelNotMatched       = framework.NewRejection(framework.UnschedulableAndUnresolvable, Name, ErrReasonNodeLabelNotMatch)
	constraintsNotMatched = framework.NewRejection(framework.Unschedulable, Name, ErrReasonConstraintsNotMatch)
)

// verdict is Filter's decision; its values are Filter stamps.
type verdict uint64

const (
	fits verdict = iota
	missingLabel
	tooSkewed
)

func (s *preFilterState) verdict(nodeInfo *framework.NodeInfo) verdict {
	for i := range s.constraints {
		c := &s.constraints[i]
		value, ok := nodeInfo.Label(c.label)
		if !ok {
			return missingLabel
		}
		self := 0
		if s.selfMatch[i] {
			self = 1
		}
		if skew := s.matchNum(i, value) + self - s.minMatchNum(i); skew > int(c.maxSkew) {
			return tooSkewed
		}
	}
	return fits
}
