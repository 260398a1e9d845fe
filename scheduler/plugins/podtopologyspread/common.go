package podtopologyspread

import (
	"fmt"
	"slices"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/nodeaffinity"
)

// Well-known topology labels, Kubernetes' spelling. Hostname domains are
// counted per node at Score instead of in PreScore (kube does the same).
const (
	LabelHostname     = framework.LabelHostname
	LabelTopologyZone = framework.LabelTopologyZone
)

// opEquals is the requirement a MatchLabels entry (or a matchLabelKeys
// label) becomes; LabelSelector has no such operator of its own.
const opEquals framework.LabelSelectorOperator = "="

// requirement is one compiled part of a selector.
type requirement struct {
	key    string
	op     framework.LabelSelectorOperator
	values []string
}

func (r *requirement) matches(labels map[string]string) bool {
	v, ok := labels[r.key]
	switch r.op {
	case opEquals:
		return ok && v == r.values[0]
	case framework.LabelSelectorOpIn:
		return ok && slices.Contains(r.values, v)
	case framework.LabelSelectorOpNotIn:
		return !ok || !slices.Contains(r.values, v)
	case framework.LabelSelectorOpExists:
		return ok
	case framework.LabelSelectorOpDoesNotExist:
		return !ok
	}
	return false
}

// selector is a LabelSelector compiled into a flat list of requirements,
// so counting thousands of pods per cycle iterates a slice rather than a
// map. nothing is the nil selector, which matches no pod.
type selector struct {
	nothing bool
	reqs    []requirement
}

// compileSelector mirrors kube's LabelSelectorAsSelector: nil selects
// nothing, no parts selects everything, bad operators are errors.
func compileSelector(ls *framework.LabelSelector) (selector, error) {
	if ls == nil {
		return selector{nothing: true}, nil
	}
	if err := ls.Validate(); err != nil {
		return selector{}, err
	}
	s := selector{reqs: make([]requirement, 0, len(ls.MatchLabels)+len(ls.MatchExpressions))}
	s.reqs = appendEquals(s.reqs, ls.MatchLabels)
	for _, e := range ls.MatchExpressions {
		s.reqs = append(s.reqs, requirement{key: e.Key, op: e.Operator, values: e.Values})
	}
	return s, nil
}

// selectorFromSet selects pods carrying every label of set; an empty set
// gives the empty selector.
func selectorFromSet(set map[string]string) selector {
	return selector{reqs: appendEquals(make([]requirement, 0, len(set)), set)}
}

// appendEquals adds one equality per label, in key order so compiled
// selectors are deterministic.
func appendEquals(reqs []requirement, set map[string]string) []requirement {
	start := len(reqs)
	for k, v := range set {
		reqs = append(reqs, requirement{key: k, op: opEquals, values: []string{v}})
	}
	slices.SortFunc(reqs[start:], func(a, b requirement) int {
		switch {
		case a.key < b.key:
			return -1
		case a.key > b.key:
			return 1
		}
		return 0
	})
	return reqs
}

// empty reports whether s selects everything.
func (s *selector) empty() bool { return !s.nothing && len(s.reqs) == 0 }

func (s *selector) matches(labels map[string]string) bool {
	if s.nothing {
		return false
	}
	for i := range s.reqs {
		if !s.reqs[i].matches(labels) {
			return false
		}
	}
	return true
}

// constraint is a TopologySpreadConstraint with its selector compiled and
// kube's defaults applied.
type constraint struct {
	maxSkew            int32
	topologyKey        string
	label              framework.LabelKey // topologyKey, resolved
	selector           selector
	minDomains         int32
	nodeAffinityPolicy framework.NodeInclusionPolicy
	nodeTaintsPolicy   framework.NodeInclusionPolicy
}

// includesNode applies the node inclusion policies: whether node is an
// eligible domain member for spreading pod under c.
func (c *constraint) includesNode(pod *framework.Pod, node *framework.Node, aff *nodeaffinity.RequiredNodeAffinity) bool {
	if c.nodeAffinityPolicy == framework.NodeInclusionPolicyHonor {
		// Kube ignores affinity parse errors here: such terms match no node.
		if ok, _ := aff.Match(node); !ok {
			return false
		}
	}
	if c.nodeTaintsPolicy == framework.NodeInclusionPolicyHonor {
		if _, untolerated := framework.FindMatchingUntoleratedTaint(node.Taints, pod.Tolerations, framework.DoNotScheduleTaint); untolerated {
			return false
		}
	}
	return true
}

// filterConstraints compiles the constraints with the given action. The
// labels of the pod named by MatchLabelKeys are ANDed into the selector;
// a nil selector stays nil (selects nothing), as in kube.
func filterConstraints(cs []framework.TopologySpreadConstraint, podLabels map[string]string, action framework.UnsatisfiableConstraintAction) ([]constraint, error) {
	var out []constraint
	for i := range cs {
		c := &cs[i]
		if c.WhenUnsatisfiable != action {
			continue
		}
		sel, err := compileSelector(c.LabelSelector)
		if err != nil {
			return nil, err
		}
		if len(c.MatchLabelKeys) > 0 && !sel.nothing {
			var extra []requirement
			for _, k := range c.MatchLabelKeys {
				if v, ok := podLabels[k]; ok {
					extra = append(extra, requirement{key: k, op: opEquals, values: []string{v}})
				}
			}
			if len(extra) > 0 {
				sel.reqs = append(extra, sel.reqs...)
			}
		}
		tc := constraint{
			maxSkew:            c.MaxSkew,
			topologyKey:        c.TopologyKey,
			label:              framework.NewLabelKey(c.TopologyKey),
			selector:           sel,
			minDomains:         1,
			nodeAffinityPolicy: framework.NodeInclusionPolicyHonor,
			nodeTaintsPolicy:   framework.NodeInclusionPolicyIgnore,
		}
		if c.MinDomains != nil {
			tc.minDomains = *c.MinDomains
		}
		if c.NodeAffinityPolicy != "" {
			tc.nodeAffinityPolicy = c.NodeAffinityPolicy
		}
		if c.NodeTaintsPolicy != "" {
			tc.nodeTaintsPolicy = c.NodeTaintsPolicy
		}
		out = append(out, tc)
	}
	return out, nil
}

// constraints returns the pod's own constraints with the given action,
// or, if it has none at all, the cluster defaults.
func (pl *PodTopologySpread) constraints(pod *framework.Pod, action framework.UnsatisfiableConstraintAction) ([]constraint, error) {
	if len(pod.TopologySpreadConstraints) > 0 {
		cs, err := filterConstraints(pod.TopologySpreadConstraints, pod.Labels, action)
		if err != nil {
			return nil, fmt.Errorf("pod %s: topology spread constraints: %w", pod.Key(), err)
		}
		return cs, nil
	}
	return pl.defaultConstraints(pod, action)
}

// defaultConstraints applies the cluster defaults to a pod without
// constraints of its own. Kube selects the pods of the services and
// controllers owning the pod; Berth has no such objects, so the selector
// is the pod's own labels: pods labelled alike spread together, and a pod
// without labels gets no defaults (kube: no owner, no defaults).
func (pl *PodTopologySpread) defaultConstraints(pod *framework.Pod, action framework.UnsatisfiableConstraintAction) ([]constraint, error) {
	if len(pl.defaults) == 0 || len(pod.Labels) == 0 {
		return nil, nil
	}
	cs, err := filterConstraints(pl.defaults, pod.Labels, action)
	if err != nil || len(cs) == 0 {
		return nil, err
	}
	sel := selectorFromSet(pod.Labels)
	for i := range cs {
		cs[i].selector = sel
	}
	return cs, nil
}

// nodeHasTopologyKeys reports whether the node carries every constraint's
// topology key.
func nodeHasTopologyKeys(nodeLabels map[string]string, cs []constraint) bool {
	for i := range cs {
		if _, ok := nodeLabels[cs[i].topologyKey]; !ok {
			return false
		}
	}
	return true
}

// countMatching counts the pods of namespace ns that sel selects. Kube
// counts nothing for an empty selector, and so does Berth.
func countMatching(pods []*framework.PodInfo, sel *selector, ns string) int {
	if sel.empty() {
		return 0
	}
	n := 0
	for _, pi := range pods {
		if p := pi.Pod; p.Namespace == ns && sel.matches(p.Labels) {
			n++
		}
	}
	return n
}

// podMatchesAnyConstraint reports whether labels are selected by any
// constraint.
func podMatchesAnyConstraint(cs []constraint, labels map[string]string) bool {
	for i := range cs {
		if cs[i].selector.matches(labels) {
			return true
		}
	}
	return false
}
