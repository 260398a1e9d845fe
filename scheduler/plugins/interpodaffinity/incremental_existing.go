package interpodaffinity

import (
	"context"

	"github.com/berth-io/berth/scheduler/framework"
)

// Kept counts of existing pods' required anti-affinity (see kept.go).
// Every cycle asks which existing pods' terms repel the incoming pod; with
// many such pods (one per node in a workload that spreads itself by
// hostname) that walk, and building its map of one domain per node, was a
// fifth of the cycle. What it reads of the incoming pod is its namespace
// and labels (termMatches): the counts are kept per label set.

// repelTotals is one label set's counts.
type repelTotals struct {
	// byNode holds the contribution of each node (by position in the
	// list) that has one.
	byNode map[int32][]repelPair
	counts layeredCounts
	// perKey sums counts by topology key; the keys with a sum are the
	// state's existingAntiAffinityKeys.
	perKey map[framework.LabelKey]int64
}

// repelPair is one node's count of repelling terms with one key; value is
// the node's value of it when counted, which a later label change does
// not alter.
type repelPair struct {
	key   framework.LabelKey
	value string
	n     int64
}

// repelKey is what the walk reads of pod.
func repelKey(pod *framework.Pod) string {
	b := make([]byte, 0, 128)
	b = framework.AppendSigString(b, pod.Namespace)
	return string(framework.AppendSigStringMap(b, pod.Labels))
}

// keptExistingCounts returns a copy of the kept counts for pod's labels,
// and their keys, brought up to date; ok is false when they must be
// counted from every repelling pod.
func (pl *InterPodAffinity) keptExistingCounts(ctx context.Context, pod *framework.Pod, nodes, antiNodes []*framework.NodeInfo) (layeredCounts, []framework.LabelKey, bool) {
	src, ok := pl.lockKept(nodes)
	if !ok {
		return layeredCounts{}, nil, false
	}
	defer pl.kept.mu.Unlock()
	x := &pl.kept
	e, t := x.repel.slot(repelKey(pod))
	if e == nil {
		return layeredCounts{}, nil, false
	}
	var byClass classMemo[[]framework.LabelKey]
	renew := func(pos int, ni *framework.NodeInfo) { t.set(int32(pos), repelContribution(ni, pod, &byClass)) }
	recount := func() bool { return t.recount(ctx, pl.handle.Parallelizer(), &x.positions, pod, nodes, antiNodes) }
	if !x.repel.refresh(e, src, nodes, &x.positions, renew, recount) {
		return layeredCounts{}, nil, false
	}
	var keys []framework.LabelKey
	for k := range t.perKey {
		keys = append(keys, k)
	}
	// A copy: AddPod and RemovePod change a state's counts, and the kept
	// ones change next cycle.
	t.counts.settle()
	return t.counts.copy(), keys, true
}

// recount builds t from every node with repelling pods; false if ctx
// ended first or such a node is not in the list.
func (t *repelTotals) recount(ctx context.Context, par framework.Parallelizer, positions *framework.NodePositions, pod *framework.Pod, nodes, antiNodes []*framework.NodeInfo) bool {
	at, ok := positionsIn(positions, nodes, antiNodes)
	if !ok {
		return false
	}
	found := make([][]repelPair, len(antiNodes))
	if _, ok := inChunks(ctx, par, len(antiNodes), func(i int, byClass *classMemo[[]framework.LabelKey]) {
		found[i] = repelContribution(antiNodes[i], pod, byClass)
	}); !ok {
		return false
	}
	t.byNode = make(map[int32][]repelPair, len(antiNodes))
	t.counts, t.perKey = layeredCounts{}, map[framework.LabelKey]int64{}
	for i, pairs := range found {
		t.set(at[i], pairs)
	}
	return true
}

// repelContribution is what ni's repelling pods count, a pair per key.
func repelContribution(ni *framework.NodeInfo, pod *framework.Pod, byClass *classMemo[[]framework.LabelKey]) []repelPair {
	if ni.Node() == nil || len(ni.PodsWithRequiredAntiAffinity) == 0 {
		return nil
	}
	var pairs []repelPair
	forEachRepelling(ni, pod, byClass, func(key framework.LabelKey, value string) {
		for i := range pairs {
			if pairs[i].key == key {
				pairs[i].n++
				return
			}
		}
		pairs = append(pairs, repelPair{key: key, value: value, n: 1})
	})
	return pairs
}

// set replaces the contribution at pos with pairs.
func (t *repelTotals) set(pos int32, pairs []repelPair) {
	for _, p := range t.byNode[pos] {
		t.add(p, -1)
	}
	if len(pairs) == 0 {
		delete(t.byNode, pos)
		return
	}
	t.byNode[pos] = pairs
	for _, p := range pairs {
		t.add(p, 1)
	}
}

func (t *repelTotals) add(p repelPair, sign int64) {
	t.counts.add(p.key.Name, p.value, sign*p.n)
	if n := t.perKey[p.key] + sign*p.n; n != 0 {
		t.perKey[p.key] = n
	} else {
		delete(t.perKey, p.key)
	}
}
