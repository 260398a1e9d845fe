package interpodaffinity

import (
	"context"

	"github.com/berth-io/berth/scheduler/framework"
)

// Kept counts of existing pods' required anti-affinity. Every cycle asks
// which existing pods' terms repel the incoming pod; with many such pods
// (one per node in a workload that spreads itself by hostname) that walk,
// and building its map of one domain per node, was a fifth of the cycle.
// What the walk reads of the incoming pod is its namespace and labels
// (termMatches), so pods of one workload get the same counts: as for the
// incoming pod's own terms (incremental.go), the plugin keeps them per
// label set, with each node's contribution, and replaces only the
// contributions of the nodes the snapshot's change log names.
//
// A label set is kept from its second cycle on: pods whose labels are
// their own (a per-pod name label) would otherwise pay for keeping counts
// that no later cycle reads.

// repelTotals is one label set's counts.
type repelTotals struct {
	key     string
	lastUse uint64
	kept    framework.KeptAt
	valid   bool
	// byNode holds the contribution of each node (by position in the
	// list) that has one.
	byNode map[int32][]repelPair
	counts topologyCounts
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
func (pl *InterPodAffinity) keptExistingCounts(ctx context.Context, pod *framework.Pod, nodes, antiNodes []*framework.NodeInfo) (topologyCounts, []framework.LabelKey, bool) {
	src, ok := framework.ChangeLogFor(pl.handle.SnapshotSharedLister(), nodes)
	if !ok {
		return nil, nil, false
	}
	x := &pl.terms
	if !x.mu.TryLock() {
		return nil, nil, false
	}
	defer x.mu.Unlock()
	x.tick++
	key := repelKey(pod)
	t := x.repelFor(key)
	if t == nil {
		return nil, nil, false
	}
	gen := src.Generation()
	switch {
	case t.valid && t.kept.Current(src, nodes, gen):
	case t.valid && x.catchUpRepel(t, pod, src, nodes):
		x.repelCatchUps++
	default:
		x.repelRecounts++
		if !x.recountRepel(ctx, pl.handle.Parallelizer(), t, pod, nodes, antiNodes) {
			return nil, nil, false
		}
	}
	t.kept.Mark(src, nodes, gen)
	var keys []framework.LabelKey
	for k, n := range t.perKey {
		if n != 0 {
			keys = append(keys, k)
		}
	}
	// A copy: AddPod and RemovePod change a state's counts, and the kept
	// ones change next cycle.
	return cloneCounts(t.counts), keys, true
}

// repelFor returns the totals of key, or nil the first time key is seen
// (it is remembered, and kept from its next cycle on). A new key takes
// over the least recently used totals.
func (x *termIndex) repelFor(key string) *repelTotals {
	var victim *repelTotals
	for i, t := range x.repel {
		if t == nil {
			t = &repelTotals{}
			x.repel[i] = t
		}
		if t.key == key {
			t.lastUse = x.tick
			return t
		}
		if victim == nil || t.lastUse < victim.lastUse {
			victim = t
		}
	}
	if !x.recentRepel.seenBefore(key) {
		return nil
	}
	*victim = repelTotals{key: key, lastUse: x.tick}
	return victim
}

// recentKeys remembers the last few keys asked for and not kept: keeping
// counts for a key starts on its second request.
type recentKeys struct {
	keys [8]string
	next int
}

// seenBefore reports whether key is among the recent keys, remembering it.
func (r *recentKeys) seenBefore(key string) bool {
	for _, k := range r.keys {
		if k == key {
			return true
		}
	}
	r.keys[r.next] = key
	r.next = (r.next + 1) % len(r.keys)
	return false
}

// recountRepel builds t from every node with repelling pods; false if ctx
// ended first or a node is not in the list.
func (x *termIndex) recountRepel(ctx context.Context, par framework.Parallelizer, t *repelTotals, pod *framework.Pod, nodes, antiNodes []*framework.NodeInfo) bool {
	t.valid = false
	if !x.positions.Index(nodes) {
		return false
	}
	positions := make([]int32, len(antiNodes))
	for i, ni := range antiNodes {
		pos, ok := x.positions.Of(ni)
		if !ok {
			return false
		}
		positions[i] = int32(pos)
	}
	found := make([][]repelPair, len(antiNodes))
	chunks := 1
	if p := par.Parallelism(); p > 1 {
		chunks = min(len(antiNodes), 4*p)
	}
	chunk := (len(antiNodes) + chunks - 1) / chunks
	par.Until(ctx, chunks, func(c int) {
		var byClass classMemo[[]framework.LabelKey]
		for i := c * chunk; i < min((c+1)*chunk, len(antiNodes)); i++ {
			found[i] = repelContribution(antiNodes[i], pod, &byClass)
		}
	})
	if ctx.Err() != nil {
		return false
	}
	t.byNode = make(map[int32][]repelPair, len(antiNodes))
	t.counts, t.perKey = topologyCounts{}, map[framework.LabelKey]int64{}
	for i, pairs := range found {
		t.set(positions[i], pairs)
	}
	t.valid = true
	return true
}

// catchUpRepel replaces the contributions of the nodes changed since t's
// generation; false if they cannot all be found.
func (x *termIndex) catchUpRepel(t *repelTotals, pod *framework.Pod, src framework.NodeChangeLog, nodes []*framework.NodeInfo) bool {
	changed, ok := t.kept.Changed(src, nodes)
	if !ok || !x.positions.Index(nodes) {
		return false
	}
	var byClass classMemo[[]framework.LabelKey]
	for _, ni := range changed {
		pos, ok := x.positions.Of(ni)
		if !ok {
			return false
		}
		t.set(int32(pos), repelContribution(ni, pod, &byClass))
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
	addPair(t.counts, topologyPair{key: p.key.Name, value: p.value}, sign*p.n)
	if n := t.perKey[p.key] + sign*p.n; n != 0 {
		t.perKey[p.key] = n
	} else {
		delete(t.perKey, p.key)
	}
}
