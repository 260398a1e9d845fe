package interpodaffinity

import (
	"context"
	"maps"

	"github.com/berth-io/berth/scheduler/framework"
)

// Kept PreScore sums (see kept.go). A pod with preferred terms of its own
// is scored against every existing pod, and that walk was two fifths of a
// workload of such pods; a pod without is scored against the pods with
// affinity, a tenth of a workload whose pods all repel one another. What
// the walk reads of the incoming pod is its namespace, labels and
// preferred terms (none, for the second kind, which only pods with
// affinity contribute to): the sums are kept per such key.

// scoreTotals is one key's sums.
type scoreTotals struct {
	// byNode holds the contribution of each node (by position in the
	// list) that has one.
	byNode map[int32][]scorePair
	byKey  []*keyTotals
}

// scorePair is a node's summed weight under one key, and the node's value
// of the key when summed.
type scorePair struct {
	key   framework.LabelKey
	value string
	delta int64
}

// keyTotals sums one key's weights per domain. A domain some node
// contributes to has an entry even when its sum is zero, as a recount
// gives it (see scoreMap.add); adders counts those nodes.
type keyTotals struct {
	key    framework.LabelKey
	values map[string]int64
	adders map[string]int32
}

// scoresKey is what the walk reads of pod.
func scoresKey(pod *framework.Pod, preferred, preferredAnti []framework.WeightedPodAffinityTerm) string {
	b := make([]byte, 0, 256)
	b = framework.AppendSigString(b, pod.Namespace)
	b = framework.AppendSigStringMap(b, pod.Labels)
	for _, terms := range [][]framework.WeightedPodAffinityTerm{preferred, preferredAnti} {
		b = framework.AppendSigInt(b, int64(len(terms)))
		for i := range terms {
			b = framework.AppendSigInt(b, int64(terms[i].Weight))
			b = appendTerm(b, &terms[i].Term, pod)
		}
	}
	return string(b)
}

// keptScores returns PreScore's state for pod (nil when no term applies
// anywhere) from the sums kept over nodes, brought up to date; ok is false
// when it must be computed from every pod. A recount visits walk, the
// nodes whose pods can contribute (all of nodes for a pod with preferred
// terms), as a cycle without kept sums would: with a few nodes running
// pods with affinity, a recount of every node would cost far more than
// that cycle.
func (pl *InterPodAffinity) keptScores(ctx context.Context, pod *framework.Pod, preferred, preferredAnti []framework.WeightedPodAffinityTerm, hasConstraints bool,
	nodes, walk []*framework.NodeInfo) (*preScoreState, bool) {
	src, ok := pl.lockKept(nodes)
	if !ok {
		return nil, false
	}
	defer pl.kept.mu.Unlock()
	x := &pl.kept
	e, t := x.scores.slot(scoresKey(pod, preferred, preferredAnti))
	if e == nil {
		return nil, false
	}
	sum := func(ni *framework.NodeInfo, c *scoreChunk) []scorePair {
		if ni.Node() == nil {
			return nil
		}
		var pairs []scorePair
		c.forEachNodeSum(pl, ni, pod, preferred, preferredAnti, hasConstraints, func(key framework.LabelKey, value string, delta int64) {
			pairs = append(pairs, scorePair{key: key, value: value, delta: delta})
		})
		return pairs
	}
	var sc scoreChunk
	renew := func(pos int, ni *framework.NodeInfo) { t.set(int32(pos), sum(ni, &sc)) }
	recount := func() bool { return t.recount(ctx, pl.handle.Parallelizer(), &x.positions, nodes, walk, sum) }
	if !x.scores.refresh(e, src, nodes, &x.positions, renew, recount) {
		return nil, false
	}
	s := &preScoreState{}
	for _, k := range t.byKey {
		if len(k.values) > 0 {
			// A copy: the kept sums change next cycle.
			s.byKey = append(s.byKey, keyScores{key: k.key, values: maps.Clone(k.values)})
		}
	}
	if len(s.byKey) == 0 {
		return nil, true
	}
	return s, true
}

// recount builds t from every node; false if ctx ended first.
func (t *scoreTotals) recount(ctx context.Context, par framework.Parallelizer, positions *framework.NodePositions, nodes, walk []*framework.NodeInfo,
	sum func(*framework.NodeInfo, *scoreChunk) []scorePair) bool {
	at, ok := positionsIn(positions, nodes, walk)
	if !ok {
		return false
	}
	found := make([][]scorePair, len(walk))
	if _, ok := inChunks(ctx, par, len(walk), func(i int, sc *scoreChunk) { found[i] = sum(walk[i], sc) }); !ok {
		return false
	}
	t.byNode, t.byKey = map[int32][]scorePair{}, nil
	for i, pairs := range found {
		t.set(at[i], pairs)
	}
	return true
}

// set replaces the contribution at pos with pairs.
func (t *scoreTotals) set(pos int32, pairs []scorePair) {
	for _, p := range t.byNode[pos] {
		t.totals(p.key).add(p.value, -p.delta, -1)
	}
	if len(pairs) == 0 {
		delete(t.byNode, pos)
		return
	}
	t.byNode[pos] = pairs
	for _, p := range pairs {
		t.totals(p.key).add(p.value, p.delta, 1)
	}
}

// totals returns the sums of key, adding them if new.
func (t *scoreTotals) totals(key framework.LabelKey) *keyTotals {
	for _, k := range t.byKey {
		if k.key == key {
			return k
		}
	}
	k := &keyTotals{key: key, values: map[string]int64{}, adders: map[string]int32{}}
	t.byKey = append(t.byKey, k)
	return k
}

// add adds delta to value's sum, from one more node (adders 1) or one
// fewer (adders -1); the entry goes when no node adds to it.
func (k *keyTotals) add(value string, delta int64, adders int32) {
	n := k.adders[value] + adders
	if n == 0 {
		delete(k.adders, value)
		delete(k.values, value)
		return
	}
	k.adders[value] = n
	k.values[value] += delta
}
