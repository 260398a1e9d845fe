package interpodaffinity

import (
	"context"
	"maps"

	"github.com/berth-io/berth/scheduler/framework"
)

// Kept PreScore sums. A pod with preferred terms of its own is scored
// against every existing pod, and that walk was two fifths of a workload of
// such pods. What the walk reads of the incoming pod is its namespace,
// labels and preferred terms, so pods of one workload get the same sums:
// as for the Filter's counts (incremental.go), the plugin keeps them per
// such key, with each node's contribution, and recomputes only the nodes
// the snapshot's change log names. A key is kept from its second cycle on.

// scoreTotals is one key's sums.
type scoreTotals struct {
	key     string
	lastUse uint64
	kept    framework.KeptAt
	valid   bool
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
// anywhere) from the kept sums, brought up to date; ok is false when it
// must be computed from every pod.
func (pl *InterPodAffinity) keptScores(ctx context.Context, pod *framework.Pod, preferred, preferredAnti []framework.WeightedPodAffinityTerm, nodes []*framework.NodeInfo) (*preScoreState, bool) {
	src, ok := framework.ChangeLogFor(pl.handle.SnapshotSharedLister(), nodes)
	if !ok {
		return nil, false
	}
	x := &pl.terms
	if !x.mu.TryLock() {
		return nil, false
	}
	defer x.mu.Unlock()
	x.tick++
	t := x.scoresFor(scoresKey(pod, preferred, preferredAnti))
	if t == nil {
		return nil, false
	}
	sum := func(ni *framework.NodeInfo, c *scoreChunk) []scorePair {
		if ni.Node() == nil {
			return nil
		}
		var pairs []scorePair
		c.forEachNodeSum(pl, ni, pod, preferred, preferredAnti, true, func(key framework.LabelKey, value string, delta int64) {
			pairs = append(pairs, scorePair{key: key, value: value, delta: delta})
		})
		return pairs
	}
	gen := src.Generation()
	switch {
	case t.valid && t.kept.Current(src, nodes, gen):
	case t.valid && x.catchUpScores(t, src, nodes, sum):
		x.scoreCatchUps++
	default:
		x.scoreRecounts++
		if !t.recount(ctx, pl.handle.Parallelizer(), nodes, sum) {
			return nil, false
		}
	}
	t.kept.Mark(src, nodes, gen)
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

// scoresFor returns the sums of key, or nil the first time key is seen
// (it is remembered, and kept from its next cycle on). A new key takes
// over the least recently used sums.
func (x *termIndex) scoresFor(key string) *scoreTotals {
	var victim *scoreTotals
	for i, t := range x.scores {
		if t == nil {
			t = &scoreTotals{}
			x.scores[i] = t
		}
		if t.key == key {
			t.lastUse = x.tick
			return t
		}
		if victim == nil || t.lastUse < victim.lastUse {
			victim = t
		}
	}
	if !x.recentScores.seenBefore(key) {
		return nil
	}
	*victim = scoreTotals{key: key, lastUse: x.tick}
	return victim
}

// recount builds t from every node; false if ctx ended first.
func (t *scoreTotals) recount(ctx context.Context, par framework.Parallelizer, nodes []*framework.NodeInfo, sum func(*framework.NodeInfo, *scoreChunk) []scorePair) bool {
	t.valid = false
	found := make([][]scorePair, len(nodes))
	chunks := 1
	if p := par.Parallelism(); p > 1 {
		chunks = min(len(nodes), 4*p)
	}
	chunk := (len(nodes) + chunks - 1) / chunks
	par.Until(ctx, chunks, func(c int) {
		var sc scoreChunk
		for i := c * chunk; i < min((c+1)*chunk, len(nodes)); i++ {
			found[i] = sum(nodes[i], &sc)
		}
	})
	if ctx.Err() != nil {
		return false
	}
	t.byNode, t.byKey = map[int32][]scorePair{}, nil
	for i, pairs := range found {
		t.set(int32(i), pairs)
	}
	t.valid = true
	return true
}

// catchUpScores recomputes the contributions of the nodes changed since
// t's generation; false if they cannot all be found.
func (x *termIndex) catchUpScores(t *scoreTotals, src framework.NodeChangeLog, nodes []*framework.NodeInfo, sum func(*framework.NodeInfo, *scoreChunk) []scorePair) bool {
	changed, ok := t.kept.Changed(src, nodes)
	if !ok || !x.positions.Index(nodes) {
		return false
	}
	var sc scoreChunk
	for _, ni := range changed {
		pos, ok := x.positions.Of(ni)
		if !ok {
			return false
		}
		t.set(int32(pos), sum(ni, &sc))
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
