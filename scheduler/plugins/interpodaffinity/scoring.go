package interpodaffinity

import (
	"context"
	"fmt"
	"math"

	"github.com/berth-io/berth/scheduler/framework"
)

const preScoreStateKey framework.StateKey = "PreScore" + Name

// scoreMap sums term weights per topology key and value.
type scoreMap map[string]map[string]int64

// add adds delta to the domain value of key. An entry is created even
// when the sum is zero: it records that some term applied, which keeps the
// plugin from skipping.
func (m *scoreMap) add(key, value string, delta int64) {
	if *m == nil {
		*m = scoreMap{}
	}
	values := (*m)[key]
	if values == nil {
		values = map[string]int64{}
		(*m)[key] = values
	}
	values[value] += delta
}

func (m *scoreMap) merge(o scoreMap) {
	for key, values := range o {
		if *m == nil {
			*m = scoreMap{}
		}
		mine := (*m)[key]
		if mine == nil {
			(*m)[key] = values
			continue
		}
		for v, n := range values {
			mine[v] += n
		}
	}
}

// preScoreState is what Score needs, computed once per cycle. Score only
// reads it, so Clone shares it.
type preScoreState struct {
	// byKey holds PreScore's sums by resolved topology key, so that Score
	// reads the well-known keys from NodeInfo rather than from the node's
	// labels.
	byKey []keyScores
}

type keyScores struct {
	key    framework.LabelKey
	values map[string]int64 // sum by domain value
}

func newPreScoreState(topologyScore scoreMap) *preScoreState {
	s := &preScoreState{}
	for key, values := range topologyScore {
		s.byKey = append(s.byKey, keyScores{key: framework.NewLabelKey(key), values: values})
	}
	return s
}

func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore implements framework.PreScorePlugin. Every pair of the incoming
// pod and an existing pod contributes to the existing pod's domains: the
// incoming pod's preferred terms that select the existing pod (weight, or
// minus weight for anti-affinity), and symmetrically the existing pod's
// preferred terms and required affinity terms (the latter at
// HardPodAffinityWeight) that select the incoming pod. Without preferred
// terms of its own the pod only needs the pods that have affinity. It
// skips Score when no term applies anywhere.
func (pl *InterPodAffinity) PreScore(ctx context.Context, state *framework.CycleState, pi *framework.PodInfo, _ []*framework.NodeInfo) *framework.Status {
	pod := pi.Pod
	preferred := preferredAffinityTerms(pod)
	preferredAnti := preferredAntiAffinityTerms(pod)
	hasConstraints := len(preferred) > 0 || len(preferredAnti) > 0
	if pl.ignorePreferredTermsOfExistingPods && !hasConstraints {
		return framework.SkipStatus()
	}
	lister := pl.handle.SnapshotSharedLister()
	if lister == nil {
		return framework.AsStatus(fmt.Errorf("%s: no snapshot lister", Name))
	}
	nodes := lister.NodeInfos().HavePodsWithAffinityList()
	if hasConstraints {
		nodes = lister.NodeInfos().List()
	}
	if len(nodes) == 0 {
		return framework.SkipStatus()
	}
	// Kept sums cover every node of the list; without preferred terms of
	// its own, a pod's sums come from the pods with affinity alone, which
	// a catch-up finds on the changed nodes as a walk finds them on theirs.
	if st, ok := pl.keptScores(ctx, pod, preferred, preferredAnti, hasConstraints, lister.NodeInfos().List(), nodes); ok {
		if st == nil {
			return framework.SkipStatus()
		}
		state.Write(preScoreStateKey, st)
		return nil
	}
	results := forEachChunk(ctx, pl.handle.Parallelizer(), nodes, func(ni *framework.NodeInfo, out *scoreChunk) {
		out.forEachNodeSum(pl, ni, pod, preferred, preferredAnti, hasConstraints, func(key framework.LabelKey, value string, delta int64) {
			out.scores.add(key.Name, value, delta)
		})
	})
	var total scoreMap
	for _, r := range results {
		total.merge(r.scores)
	}
	if len(total) == 0 {
		return framework.SkipStatus()
	}
	state.Write(preScoreStateKey, newPreScoreState(total))
	return nil
}

// forEachNodeSum calls found with what the pods of ni contribute, summed
// per topology key, and ni's value of the key; a node without the key
// belongs to no domain, and one without labels to none at all. Only pods
// with affinity can contribute unless the incoming pod has preferred terms
// (hasConstraints). Summing per node first makes one map update per key
// and node instead of one per pod and term.
func (c *scoreChunk) forEachNodeSum(pl *InterPodAffinity, ni *framework.NodeInfo, pod *framework.Pod, preferred, preferredAnti []framework.WeightedPodAffinityTerm,
	hasConstraints bool, found func(key framework.LabelKey, value string, delta int64)) {
	if len(ni.Node().Labels) == 0 {
		return
	}
	pods := ni.PodsWithAffinity
	if hasConstraints {
		pods = ni.Pods
	}
	sums := c.sums[:0]
	for _, existing := range pods {
		for _, con := range c.contributions(pl, pod, preferred, preferredAnti, existing) {
			sums = addContribution(sums, con)
		}
	}
	for _, con := range sums {
		if value, ok := ni.Label(con.key); ok {
			found(con.key, value, con.delta)
		}
	}
	c.sums = sums
}

// scoreChunk is one PreScore worker's sums, and what it learnt of each
// affinity class of existing pods: all pods of a class contribute alike.
type scoreChunk struct {
	scores  scoreMap
	byClass classMemo[[]contribution]
	sums    []contribution // one node's, reused
}

// contribution is one matching term: delta for the domain of the
// existing pod's node under key.
type contribution struct {
	key   framework.LabelKey
	delta int64
}

// addContribution adds c to the sum of its key in sums.
func addContribution(sums []contribution, c contribution) []contribution {
	for i := range sums {
		if sums[i].key == c.key {
			sums[i].delta += c.delta
			return sums
		}
	}
	return append(sums, c)
}

func (c *scoreChunk) contributions(pl *InterPodAffinity, incoming *framework.Pod, preferred, preferredAnti []framework.WeightedPodAffinityTerm,
	existing *framework.PodInfo) []contribution {
	return c.byClass.get(existing, func() []contribution {
		return pl.scoreExistingPod(incoming, preferred, preferredAnti, existing.Pod)
	})
}

// scoreExistingPod lists what the pair (incoming, existing) contributes to
// the domains of the node existing runs on, one entry per matching term.
// Weights multiply in int32 as in kube; they are at most 100 in magnitude.
func (pl *InterPodAffinity) scoreExistingPod(incoming *framework.Pod, preferred, preferredAnti []framework.WeightedPodAffinityTerm, existing *framework.Pod) []contribution {
	var out []contribution
	addWeighted := func(terms []framework.WeightedPodAffinityTerm, owner, target *framework.Pod, sign int32) {
		for i := range terms {
			if termMatches(&terms[i].Term, owner, target) {
				out = append(out, contribution{framework.NewLabelKey(terms[i].Term.TopologyKey), int64(terms[i].Weight * sign)})
			}
		}
	}
	addWeighted(preferred, incoming, existing, 1)
	addWeighted(preferredAnti, incoming, existing, -1)
	if existing.Affinity == nil {
		return out
	}
	if pl.hardPodAffinityWeight > 0 {
		required := requiredAffinityTerms(existing)
		for i := range required {
			if termMatches(&required[i], existing, incoming) {
				out = append(out, contribution{framework.NewLabelKey(required[i].TopologyKey), int64(pl.hardPodAffinityWeight)})
			}
		}
	}
	addWeighted(preferredAffinityTerms(existing), existing, incoming, 1)
	addWeighted(preferredAntiAffinityTerms(existing), existing, incoming, -1)
	return out
}

// Score implements framework.ScorePlugin: the sum, over the topology keys
// scored, of the weights of the node's domain. It may be negative.
func (*InterPodAffinity) Score(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadState[*preScoreState](state, preScoreStateKey)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	var score int64
	for _, k := range s.byKey {
		if value, ok := nodeInfo.Label(k.key); ok {
			score += k.values[value]
		}
	}
	return score, nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (pl *InterPodAffinity) ScoreExtensions() framework.ScoreExtensions { return pl }

// PreScoreUsesNodes implements framework.PreScoreNodesUser: PreScore
// reads the snapshot's lists, not the feasible nodes.
func (*InterPodAffinity) PreScoreUsesNodes(*framework.PodInfo) bool { return false }

// NormalizeScore implements framework.ScoreExtensions with kube's min-max
// scaling: MaxNodeScore * (score-min)/(max-min) computed in float64 and
// truncated, so 29/100 of the range gives 28 (0.29 is just below 29/100
// in binary); all scores 0 when they are equal.
func (*InterPodAffinity) NormalizeScore(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, scores framework.NodeScoreList) *framework.Status {
	s, err := framework.ReadState[*preScoreState](state, preScoreStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	if len(s.byKey) == 0 {
		return nil
	}
	var minScore int64 = math.MaxInt64
	var maxScore int64 = math.MinInt64
	for i := range scores {
		minScore = min(minScore, scores[i].Score)
		maxScore = max(maxScore, scores[i].Score)
	}
	diff := maxScore - minScore
	for i := range scores {
		f := float64(0)
		if diff > 0 {
			f = float64(framework.MaxNodeScore) * (float64(scores[i].Score-minScore) / float64(diff))
		}
		scores[i].Score = int64(f)
	}
	return nil
}

var (
	_ framework.PreScoreNodesUser = (*InterPodAffinity)(nil)
)
