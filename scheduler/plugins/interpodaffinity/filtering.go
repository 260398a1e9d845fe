package interpodaffinity

import (
	"context"
	"fmt"
	"slices"

	"github.com/berth-io/berth/scheduler/framework"
)

// Filter rejection reasons, kube's wording.
const (
	ErrReasonExistingAntiAffinityRulesNotMatch = "node(s) didn't satisfy existing pods anti-affinity rules"
	ErrReasonAffinityRulesNotMatch             = "node(s) didn't match pod affinity rules"
	ErrReasonAntiAffinityRulesNotMatch         = "node(s) didn't match pod anti-affinity rules"
)

const preFilterStateKey framework.StateKey = "PreFilter" + Name

// preFilterState is what Filter needs, computed once per cycle.
type preFilterState struct {
	pod               *framework.Pod
	affinityTerms     []framework.PodAffinityTerm
	antiAffinityTerms []framework.PodAffinityTerm
	// affinityKeys and antiAffinityKeys are the terms' topology keys,
	// resolved, so that NodeInfo answers for the well-known ones from its
	// copies: searching every node's label map for them was a sixth of an
	// anti-affinity workload's CPU.
	affinityKeys, antiAffinityKeys []framework.LabelKey
	// existingAntiAffinityCounts counts, per domain, existing pods'
	// required anti-affinity terms that select the incoming pod.
	existingAntiAffinityCounts layeredCounts
	// existingAntiAffinityKeys are the topology keys of those terms, so
	// Filter looks up a node's value for each of these few keys instead of
	// trying every label of the node.
	existingAntiAffinityKeys []framework.LabelKey
	// affinityCounts counts, per domain of each required affinity term,
	// existing pods that match all of the incoming pod's affinity terms.
	affinityCounts layeredCounts
	// antiAffinityCounts counts, per domain, existing pods matching each of
	// the incoming pod's required anti-affinity terms.
	antiAffinityCounts layeredCounts
}

// Clone copies the counts, which AddPod and RemovePod change; the pod and
// its terms are immutable.
func (s *preFilterState) Clone() framework.StateData {
	c := *s
	c.existingAntiAffinityCounts = s.existingAntiAffinityCounts.copy()
	c.existingAntiAffinityKeys = slices.Clone(s.existingAntiAffinityKeys)
	c.affinityCounts = s.affinityCounts.copy()
	c.antiAffinityCounts = s.antiAffinityCounts.copy()
	return &c
}

func (s *preFilterState) noteExistingKey(key string) {
	if !slices.ContainsFunc(s.existingAntiAffinityKeys, func(k framework.LabelKey) bool { return k.Name == key }) {
		s.existingAntiAffinityKeys = append(s.existingAntiAffinityKeys, framework.NewLabelKey(key))
	}
}

// topologyKeys resolves the terms' topology keys.
func topologyKeys(terms []framework.PodAffinityTerm) []framework.LabelKey {
	keys := make([]framework.LabelKey, len(terms))
	for i := range terms {
		keys[i] = framework.NewLabelKey(terms[i].TopologyKey)
	}
	return keys
}

// updateWithPod counts p, on node, in (delta 1) or out (delta -1).
func (s *preFilterState) updateWithPod(p *framework.Pod, node *framework.Node, delta int64) {
	if node == nil {
		return
	}
	anti := requiredAntiAffinityTerms(p)
	for i := range anti {
		if termMatches(&anti[i], p, s.pod) {
			s.existingAntiAffinityCounts.addOnNode(node, anti[i].TopologyKey, delta)
			s.noteExistingKey(anti[i].TopologyKey)
		}
	}
	if matchesAllTerms(s.affinityTerms, s.pod, p) {
		for i := range s.affinityTerms {
			s.affinityCounts.addOnNode(node, s.affinityTerms[i].TopologyKey, delta)
		}
	}
	for i := range s.antiAffinityTerms {
		if termMatches(&s.antiAffinityTerms[i], s.pod, p) {
			s.antiAffinityCounts.addOnNode(node, s.antiAffinityTerms[i].TopologyKey, delta)
		}
	}
}

// PreFilter implements framework.PreFilterPlugin. It counts, per topology
// domain, the existing pods whose required anti-affinity selects the pod
// (visiting only nodes running such pods) and, if the pod has required
// terms, the existing pods matching them (visiting every pod). It skips
// the Filter when there is nothing to check.
func (pl *InterPodAffinity) PreFilter(ctx context.Context, state *framework.CycleState, pi *framework.PodInfo, nodes []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	pod := pi.Pod
	if err := validateTerms(pod); err != nil {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, fmt.Sprintf("parsing pod: %v", err))
	}
	lister := pl.handle.SnapshotSharedLister()
	if lister == nil {
		return nil, framework.AsStatus(fmt.Errorf("%s: no snapshot lister", Name))
	}
	affinity, anti := requiredAffinityTerms(pod), requiredAntiAffinityTerms(pod)
	antiNodes := lister.NodeInfos().HavePodsWithRequiredAntiAffinityList()
	if len(antiNodes) == 0 && len(affinity) == 0 && len(anti) == 0 {
		// The common case, decided without counting anything.
		return nil, framework.SkipStatus()
	}
	s := &preFilterState{pod: pod, affinityTerms: affinity, antiAffinityTerms: anti,
		affinityKeys: topologyKeys(affinity), antiAffinityKeys: topologyKeys(anti)}
	s.existingAntiAffinityCounts, s.existingAntiAffinityKeys = pl.existingAntiAffinityCounts(ctx, pod, nodes, antiNodes)
	s.affinityCounts, s.antiAffinityCounts = pl.incomingCounts(ctx, s, nodes)
	if s.existingAntiAffinityCounts.empty() && len(s.affinityTerms) == 0 && len(s.antiAffinityTerms) == 0 {
		return nil, framework.SkipStatus()
	}
	state.Write(preFilterStateKey, s)
	return nil, nil
}

// existingAntiAffinityCounts counts the required anti-affinity terms of
// existing pods (on antiNodes, those of nodes running such pods) that
// select pod, from counts kept across cycles when it can (see
// incremental_existing.go).
func (pl *InterPodAffinity) existingAntiAffinityCounts(ctx context.Context, pod *framework.Pod, nodes, antiNodes []*framework.NodeInfo) (layeredCounts, []framework.LabelKey) {
	if len(antiNodes) == 0 {
		return layeredCounts{}, nil
	}
	if counts, keys, ok := pl.keptExistingCounts(ctx, pod, nodes, antiNodes); ok {
		return counts, keys
	}
	type found struct {
		counts  domainCounts
		keys    []framework.LabelKey
		byClass classMemo[[]framework.LabelKey]
	}
	results := forEachChunk(ctx, pl.handle.Parallelizer(), antiNodes, func(ni *framework.NodeInfo, out *found) {
		forEachRepelling(ni, pod, &out.byClass, func(key framework.LabelKey, value string) {
			out.counts.add(key.Name, value, 1)
			if !slices.Contains(out.keys, key) {
				out.keys = append(out.keys, key)
			}
		})
	})
	parts := make([]domainCounts, len(results))
	var keys []framework.LabelKey
	for i := range results {
		parts[i] = results[i].counts
		for _, k := range results[i].keys {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	return layered(mergeCounts(parts)), keys
}

// forEachRepelling calls found once per required anti-affinity term of
// ni's pods that selects pod, with the term's domain on ni; terms whose
// key ni lacks repel nowhere. byClass remembers, per affinity class, the
// keys of the terms that select pod: all pods of a class repel it alike.
func forEachRepelling(ni *framework.NodeInfo, pod *framework.Pod, byClass *classMemo[[]framework.LabelKey], found func(key framework.LabelKey, value string)) {
	for _, existing := range ni.PodsWithRequiredAntiAffinity {
		repelling := byClass.get(existing, func() []framework.LabelKey {
			var keys []framework.LabelKey
			terms := requiredAntiAffinityTerms(existing.Pod)
			for i := range terms {
				if termMatches(&terms[i], existing.Pod, pod) {
					keys = append(keys, framework.NewLabelKey(terms[i].TopologyKey))
				}
			}
			return keys
		})
		for _, key := range repelling {
			if value, ok := ni.Label(key); ok {
				found(key, value)
			}
		}
	}
}

// incomingCounts counts the existing pods matching the incoming pod's
// required terms: for affinity, pods matching all terms count once in the
// domain of each term; for anti-affinity, each matching term counts.
func (pl *InterPodAffinity) incomingCounts(ctx context.Context, s *preFilterState, nodes []*framework.NodeInfo) (affinity, anti layeredCounts) {
	if len(s.affinityTerms) == 0 && len(s.antiAffinityTerms) == 0 {
		return layeredCounts{}, layeredCounts{}
	}
	if affinity, anti, ok := pl.keptIncomingCounts(ctx, s, nodes); ok {
		return affinity, anti
	}
	type found struct {
		affinity, anti domainCounts
		byClass        classMemo[matched]
	}
	results := forEachChunk(ctx, pl.handle.Parallelizer(), nodes, func(ni *framework.NodeInfo, out *found) {
		for _, existing := range ni.Pods {
			m := out.byClass.get(existing, func() matched { return s.judge(existing.Pod) })
			if m.all {
				for _, key := range s.affinityKeys {
					if value, ok := ni.Label(key); ok {
						out.affinity.add(key.Name, value, 1)
					}
				}
			}
			for _, j := range m.antiTerms {
				key := s.antiAffinityKeys[j]
				if value, ok := ni.Label(key); ok {
					out.anti.add(key.Name, value, 1)
				}
			}
		}
	})
	affinityParts := make([]domainCounts, len(results))
	antiParts := make([]domainCounts, len(results))
	for i := range results {
		affinityParts[i], antiParts[i] = results[i].affinity, results[i].anti
	}
	return layered(mergeCounts(affinityParts)), layered(mergeCounts(antiParts))
}

// matched is how the incoming pod's required terms judge one existing
// pod.
type matched struct {
	all       bool  // it matches every affinity term
	antiTerms []int // the anti-affinity terms it matches
}

func (s *preFilterState) judge(existing *framework.Pod) matched {
	judged := matched{all: matchesAllTerms(s.affinityTerms, s.pod, existing)}
	for i := range s.antiAffinityTerms {
		if termMatches(&s.antiAffinityTerms[i], s.pod, existing) {
			judged.antiTerms = append(judged.antiTerms, i)
		}
	}
	return judged
}

// classMemo remembers, for one worker of one cycle, a result per affinity
// class of existing pods (see framework.PodInfo.AffinityClass): pods of a
// class match, and are matched by, the incoming pod alike.
type classMemo[T any] map[uint64]T

func (m *classMemo[T]) get(pi *framework.PodInfo, judge func() T) T {
	class := pi.AffinityClass()
	if v, ok := (*m)[class]; ok {
		return v
	}
	v := judge()
	if *m == nil {
		*m = classMemo[T]{}
	}
	(*m)[class] = v
	return v
}

// forEachChunk calls visit for every node with a Node, splitting nodes into
// a few contiguous chunks run on the parallelizer; each chunk writes only
// its own result, so workers share nothing and the caller merges after.
func forEachChunk[T any](ctx context.Context, par framework.Parallelizer, nodes []*framework.NodeInfo, visit func(*framework.NodeInfo, *T)) []T {
	results, _ := inChunks(ctx, par, len(nodes), func(i int, out *T) {
		if ni := nodes[i]; ni.Node() != nil {
			visit(ni, out)
		}
	})
	return results
}

// PreFilterExtensions implements framework.PreFilterPlugin.
func (pl *InterPodAffinity) PreFilterExtensions() framework.PreFilterExtensions { return pl }

// AddPod implements framework.PreFilterExtensions.
func (*InterPodAffinity) AddPod(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, podInfoToAdd *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadState[*preFilterState](state, preFilterStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	s.updateWithPod(podInfoToAdd.Pod, nodeInfo.Node(), 1)
	return nil
}

// RemovePod implements framework.PreFilterExtensions.
func (*InterPodAffinity) RemovePod(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, podInfoToRemove *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadState[*preFilterState](state, preFilterStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	s.updateWithPod(podInfoToRemove.Pod, nodeInfo.Node(), -1)
	return nil
}

// Filter implements framework.FilterPlugin. Unmet affinity is
// UnschedulableAndUnresolvable (evicting pods cannot bring a matching pod);
// anti-affinity, either way, is Unschedulable (preemption may help).
func (*InterPodAffinity) Filter(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadState[*preFilterState](state, preFilterStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	switch s.verdict(nodeInfo) {
	case affinityUnmet:
		return affinityUnmetStatus
	case antiAffinityUnmet:
		return antiAffinityUnmetStatus
	case existingAntiAffinityUnmet:
		return existingAntiAffinityUnmetStatus
	}
	return nil
}

// Filter's rejections (framework.NewRejection).
var (
	affinityUnmetStatus             = framework.NewRejection(framework.UnschedulableAndUnresolvable, Name, ErrReasonAffinityRulesNotMatch)
	antiAffinityUnmetStatus         = framework.NewRejection(framework.Unschedulable, Name, ErrReasonAntiAffinityRulesNotMatch)
	existingAntiAffinityUnmetStatus = framework.NewRejection(framework.Unschedulable, Name, ErrReasonExistingAntiAffinityRulesNotMatch)
)

// verdict is Filter's decision; its values are Filter stamps.
type verdict uint64

const (
	fits verdict = iota
	affinityUnmet
	antiAffinityUnmet
	existingAntiAffinityUnmet
)

func (s *preFilterState) verdict(nodeInfo *framework.NodeInfo) verdict {
	switch {
	case !s.satisfiesAffinity(nodeInfo):
		return affinityUnmet
	case !s.satisfiesAntiAffinity(nodeInfo):
		return antiAffinityUnmet
	case !s.satisfiesExistingAntiAffinity(nodeInfo):
		return existingAntiAffinityUnmet
	}
	return fits
}

// satisfiesAffinity: the node must carry every term's topology key, and
// each of its domains must hold a pod matching all terms. The exception
// lets the first of a group of pods with affinity to each other start:
// when no pod anywhere matches and the pod matches its own terms, any
// node with the keys passes.
func (s *preFilterState) satisfiesAffinity(ni *framework.NodeInfo) bool {
	podsExist := true
	for _, key := range s.affinityKeys {
		value, ok := ni.Label(key)
		if !ok {
			return false
		}
		if s.affinityCounts.get(key.Name, value) <= 0 {
			podsExist = false
		}
	}
	if podsExist {
		return true
	}
	return s.affinityCounts.empty() && matchesAllTerms(s.affinityTerms, s.pod, s.pod)
}

// satisfiesAntiAffinity: no domain of the node may hold a pod matching the
// term of that key.
func (s *preFilterState) satisfiesAntiAffinity(ni *framework.NodeInfo) bool {
	if s.antiAffinityCounts.empty() {
		return true
	}
	for _, key := range s.antiAffinityKeys {
		if value, ok := ni.Label(key); ok && s.antiAffinityCounts.get(key.Name, value) > 0 {
			return false
		}
	}
	return true
}

// satisfiesExistingAntiAffinity: no domain of the node may hold an existing
// pod whose required anti-affinity selects the incoming pod.
func (s *preFilterState) satisfiesExistingAntiAffinity(ni *framework.NodeInfo) bool {
	if s.existingAntiAffinityCounts.empty() {
		return true
	}
	for _, key := range s.existingAntiAffinityKeys {
		if value, ok := ni.Label(key); ok && s.existingAntiAffinityCounts.get(key.Name, value) > 0 {
			return false
		}
	}
	return true
}
