package conformance

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// NodeOutcome is one node's verdict in the terms both schedulers share.
type NodeOutcome struct {
	Feasible bool
	// Plugin, Code and Reasons say why an infeasible node was rejected.
	Plugin  string
	Code    string
	Reasons []string
	// Scores maps each score plugin that ran to its normalized score
	// (before weights), for feasible nodes when at least two are.
	Scores map[string]int64
}

// Outcome is a whole scheduling cycle's result.
type Outcome struct {
	Nodes map[string]*NodeOutcome
	// Best are the nodes sharing the highest weighted total (all feasible
	// nodes when there is one, none when no node fits), sorted.
	Best []string
	// Candidates maps each node where preemption would make room, when no
	// node fits, to its victims ("namespace/name", sorted).
	Candidates map[string][]string
	// PreemptionBest are the candidates tied for best under preemption's
	// selection rules, sorted; Nominated is the one the scheduler's own
	// selection picks (any of them: its last tie-break is order or
	// chance) and NominatedVictims its victims, sorted.
	PreemptionBest   []string
	Nominated        string
	NominatedVictims []string
}

func newOutcome() *Outcome { return &Outcome{Nodes: map[string]*NodeOutcome{}} }

// normalize puts what may legitimately differ in form into one form:
// reason order (kube lists extended resources in map order) and the
// deliberate differences of wording listed in deliberateReason.
func (o *Outcome) normalize() {
	for _, n := range o.Nodes {
		for i, r := range n.Reasons {
			n.Reasons[i] = deliberateReason(r)
		}
		sort.Strings(n.Reasons)
	}
	sort.Strings(o.Best)
	for _, v := range o.Candidates {
		sort.Strings(v)
	}
	sort.Strings(o.PreemptionBest)
	sort.Strings(o.NominatedVictims)
}

// deliberateReason maps a Berth reason that deliberately says more than
// kube's onto kube's wording. TaintToleration names the untolerated
// taint; kube says only that there was one.
func deliberateReason(r string) string {
	if strings.HasPrefix(r, "node(s) had untolerated taint {") {
		return "node(s) had untolerated taint(s)"
	}
	return r
}

// Diff lists every disagreement between kube's outcome and Berth's, one
// line each; nil when they agree.
func Diff(kube, berth *Outcome) []string {
	var out []string
	names := map[string]bool{}
	for n := range kube.Nodes {
		names[n] = true
	}
	for n := range berth.Nodes {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, name := range sorted {
		k, b := kube.Nodes[name], berth.Nodes[name]
		switch {
		case k == nil || b == nil:
			out = append(out, fmt.Sprintf("%s: present in kube %v, in berth %v", name, k != nil, b != nil))
			continue
		case k.Feasible != b.Feasible:
			out = append(out, fmt.Sprintf("%s: feasible kube %v (%s), berth %v (%s)", name, k.Feasible, k.why(), b.Feasible, b.why()))
			continue
		case k.Plugin != b.Plugin || k.Code != b.Code:
			out = append(out, fmt.Sprintf("%s: rejected by kube %s, berth %s", name, k.why(), b.why()))
		case !slices.Equal(k.Reasons, b.Reasons):
			out = append(out, fmt.Sprintf("%s: reasons kube %q, berth %q", name, k.Reasons, b.Reasons))
		}
		for _, p := range scoreNames(k.Scores, b.Scores) {
			ks, kok := k.Scores[p]
			bs, bok := b.Scores[p]
			if kok != bok || ks != bs {
				out = append(out, fmt.Sprintf("%s: %s score kube %s, berth %s", name, p, scoreText(ks, kok), scoreText(bs, bok)))
			}
		}
	}
	for _, name := range scoreNames(toCount(kube.Candidates), toCount(berth.Candidates)) {
		k, kok := kube.Candidates[name]
		b, bok := berth.Candidates[name]
		if kok != bok || !slices.Equal(k, b) {
			out = append(out, fmt.Sprintf("%s: preemption victims kube %s, berth %s", name, victimsText(k, kok), victimsText(b, bok)))
		}
	}
	if !slices.Equal(kube.Best, berth.Best) {
		out = append(out, fmt.Sprintf("best nodes: kube %v, berth %v", kube.Best, berth.Best))
	}
	return append(out, diffNomination(kube, berth)...)
}

// diffNomination compares preemption's pick modulo ties: the same
// candidates tie for best, each side nominates one of the other's best,
// and the victims of each nomination are what the other side would evict
// on that node. Kube's nominee must also be among the best that the
// checker computes from kube's own candidates, or that computation (and
// so the comparison of best sets) is wrong.
func diffNomination(kube, berth *Outcome) []string {
	var out []string
	if !slices.Equal(kube.PreemptionBest, berth.PreemptionBest) {
		out = append(out, fmt.Sprintf("preemption's best candidates: kube %v, berth %v", kube.PreemptionBest, berth.PreemptionBest))
	}
	if kube.Nominated != "" && !slices.Contains(kube.PreemptionBest, kube.Nominated) {
		out = append(out, fmt.Sprintf("kube nominates %s, not among the best %v computed from kube's rules", kube.Nominated, kube.PreemptionBest))
	}
	for _, n := range []struct {
		who, node, other string
		victims          []string
		otherBest        []string
		otherCandidates  map[string][]string
	}{
		{"kube", kube.Nominated, "berth", kube.NominatedVictims, berth.PreemptionBest, berth.Candidates},
		{"berth", berth.Nominated, "kube", berth.NominatedVictims, kube.PreemptionBest, kube.Candidates},
	} {
		if n.node == "" {
			if len(n.otherBest) > 0 {
				out = append(out, fmt.Sprintf("%s nominates no node, %s's best candidates are %v", n.who, n.other, n.otherBest))
			}
			continue
		}
		if !slices.Contains(n.otherBest, n.node) {
			out = append(out, fmt.Sprintf("%s nominates %s, not among %s's best candidates %v", n.who, n.node, n.other, n.otherBest))
		}
		if v, ok := n.otherCandidates[n.node]; !ok || !slices.Equal(v, n.victims) {
			out = append(out, fmt.Sprintf("%s nominates %s evicting %v, %s would evict %s there", n.who, n.node, n.victims, n.other, victimsText(v, ok)))
		}
	}
	return out
}

func (n *NodeOutcome) why() string {
	if n.Feasible {
		return "feasible"
	}
	return fmt.Sprintf("%s/%s %q", n.Plugin, n.Code, n.Reasons)
}

func scoreNames(a, b map[string]int64) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range []map[string]int64{a, b} {
		for p := range m {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	return out
}

func toCount(m map[string][]string) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		out[k] = int64(len(v))
	}
	return out
}

func victimsText(v []string, ok bool) string {
	if !ok {
		return "not a candidate"
	}
	return fmt.Sprint(v)
}

func scoreText(v int64, ok bool) string {
	if !ok {
		return "none"
	}
	return fmt.Sprint(v)
}

// bestOf returns the nodes whose total is the highest.
func bestOf(totals map[string]int64) []string {
	var best []string
	var top int64
	for n, t := range totals {
		switch {
		case len(best) == 0 || t > top:
			best, top = []string{n}, t
		case t == top:
			best = append(best, n)
		}
	}
	sort.Strings(best)
	return best
}
