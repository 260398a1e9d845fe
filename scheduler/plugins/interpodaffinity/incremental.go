package interpodaffinity

import (
	"context"

	"github.com/berth-io/berth/scheduler/framework"
)

// Kept counts for the incoming pod's required terms (see kept.go).
// incomingCounts visits every pod of the cluster, which at 100,000 nodes
// is most of a cycle for a pod with terms; pods of one workload carry the
// same terms, and the counts are kept per rule: the terms and what of the
// incoming pod they read.

// termTotals is one rule's counts: per node and term, the domain value
// and the pods counted there (0 when the node lacks the key), and their
// sums per domain.
type termTotals struct {
	// numTerms contributions per node: affinity terms first, then
	// anti-affinity terms.
	numTerms int
	values   []string
	counts   []int32
	affinity layeredCounts
	anti     layeredCounts
}

// ruleKey encodes everything the incoming pod's required terms read: the
// terms, the pod's namespace, and its values of the keys the terms' label
// key lists name. Two pods with one key get the same counts.
func ruleKey(s *preFilterState) string {
	b := make([]byte, 0, 128)
	b = framework.AppendSigString(b, s.pod.Namespace)
	for _, terms := range [][]framework.PodAffinityTerm{s.affinityTerms, s.antiAffinityTerms} {
		b = framework.AppendSigInt(b, int64(len(terms)))
		for i := range terms {
			b = appendTerm(b, &terms[i], s.pod)
		}
	}
	return string(b)
}

func appendTerm(b []byte, t *framework.PodAffinityTerm, owner *framework.Pod) []byte {
	if ls := t.LabelSelector; ls == nil {
		b = append(b, 'N')
	} else {
		b = append(b, 'S')
		b = framework.AppendSigStringMap(b, ls.MatchLabels)
		b = framework.AppendSigInt(b, int64(len(ls.MatchExpressions)))
		for _, e := range ls.MatchExpressions {
			b = framework.AppendSigString(b, e.Key)
			b = framework.AppendSigString(b, string(e.Operator))
			b = appendStrings(b, e.Values)
		}
	}
	b = appendStrings(b, t.Namespaces)
	if t.AllNamespaces {
		b = append(b, 'A')
	}
	b = framework.AppendSigString(b, t.TopologyKey)
	for _, keys := range [][]string{t.MatchLabelKeys, t.MismatchLabelKeys} {
		b = framework.AppendSigInt(b, int64(len(keys)))
		for _, k := range keys {
			b = framework.AppendSigString(b, k)
			if v, ok := owner.Labels[k]; ok {
				b = framework.AppendSigString(b, v)
			} else {
				b = append(b, '-')
			}
		}
	}
	return b
}

func appendStrings(b []byte, ss []string) []byte {
	b = framework.AppendSigInt(b, int64(len(ss)))
	for _, s := range ss {
		b = framework.AppendSigString(b, s)
	}
	return b
}

// keptIncomingCounts returns copies of the kept counts for s's terms over
// nodes, brought up to date; ok is false when they must be counted from
// every pod.
func (pl *InterPodAffinity) keptIncomingCounts(ctx context.Context, s *preFilterState, nodes []*framework.NodeInfo) (affinity, anti layeredCounts, ok bool) {
	src, ok := pl.lockKept(nodes)
	if !ok {
		return affinity, anti, false
	}
	defer pl.kept.mu.Unlock()
	x := &pl.kept
	e, t := x.terms.slot(ruleKey(s))
	if e == nil {
		return affinity, anti, false
	}
	var classes classMemo[matched]
	renew := func(pos int, ni *framework.NodeInfo) {
		t.apply(s, pos, -1)
		t.contribute(s, pos, ni, &classes)
		t.apply(s, pos, 1)
	}
	if !x.terms.refresh(e, src, nodes, &x.positions, renew, func() bool { return t.recount(ctx, pl.handle.Parallelizer(), s, nodes) }) {
		return affinity, anti, false
	}
	// Copies: AddPod and RemovePod change a state's counts, and the kept
	// ones change next cycle.
	t.affinity.settle()
	t.anti.settle()
	return t.affinity.copy(), t.anti.copy(), true
}

// recount builds t from every node; false if ctx ended first.
func (t *termTotals) recount(ctx context.Context, par framework.Parallelizer, s *preFilterState, nodes []*framework.NodeInfo) bool {
	t.numTerms = len(s.affinityTerms) + len(s.antiAffinityTerms)
	size := len(nodes) * t.numTerms
	if cap(t.counts) < size {
		t.values, t.counts = make([]string, size), make([]int32, size)
	}
	t.values, t.counts = t.values[:size], t.counts[:size]
	if _, ok := inChunks(ctx, par, len(nodes), func(n int, classes *classMemo[matched]) { t.contribute(s, n, nodes[n], classes) }); !ok {
		return false
	}
	t.affinity, t.anti = layeredCounts{}, layeredCounts{}
	for n := range nodes {
		t.apply(s, n, 1)
	}
	return true
}

// contribute computes the contributions of ni, at position pos.
func (t *termTotals) contribute(s *preFilterState, pos int, ni *framework.NodeInfo, classes *classMemo[matched]) {
	values := t.values[pos*t.numTerms : (pos+1)*t.numTerms]
	counts := t.counts[pos*t.numTerms : (pos+1)*t.numTerms]
	clear(values)
	clear(counts)
	node := ni.Node()
	if node == nil {
		return
	}
	var all int32
	anti := counts[len(s.affinityTerms):]
	for _, existing := range ni.Pods {
		m := classes.get(existing, func() matched { return s.judge(existing.Pod) })
		if m.all {
			all++
		}
		for _, j := range m.antiTerms {
			anti[j]++
		}
	}
	for i := range s.affinityTerms {
		counts[i] = all
	}
	for i := range counts {
		if v, ok := node.Labels[s.termKey(i)]; ok {
			values[i] = v
		} else {
			counts[i] = 0
		}
	}
}

// termKey is the topology key of term i, counting affinity terms first.
func (s *preFilterState) termKey(i int) string {
	if i < len(s.affinityTerms) {
		return s.affinityTerms[i].TopologyKey
	}
	return s.antiAffinityTerms[i-len(s.affinityTerms)].TopologyKey
}

// apply adds (sign 1) or takes out (sign -1) the contributions at pos.
func (t *termTotals) apply(s *preFilterState, pos int, sign int64) {
	for i := range t.numTerms {
		n := t.counts[pos*t.numTerms+i]
		if n == 0 {
			continue
		}
		m := &t.anti
		if i < len(s.affinityTerms) {
			m = &t.affinity
		}
		m.add(s.termKey(i), t.values[pos*t.numTerms+i], sign*int64(n))
	}
}
