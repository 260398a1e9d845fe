package interpodaffinity

import (
	"slices"

	"github.com/berth-io/berth/scheduler/framework"
)

// termMatches reports whether target is a pod that term, declared by owner,
// selects. It reads the term as Kubernetes does after the API server has
// rewritten it, without building anything:
//   - namespaces: AllNamespaces selects every namespace (kube's empty
//     namespaceSelector); otherwise the listed ones, or owner's own when
//     none are listed;
//   - a nil selector selects nothing, an empty one everything;
//   - each matchLabelKeys key that owner carries adds "key In (owner's
//     value)", each such mismatchLabelKeys key "key NotIn (owner's value)",
//     so keys owner lacks add nothing.
func termMatches(term *framework.PodAffinityTerm, owner, target *framework.Pod) bool {
	if !term.AllNamespaces {
		if len(term.Namespaces) == 0 {
			if target.Namespace != owner.Namespace {
				return false
			}
		} else if !slices.Contains(term.Namespaces, target.Namespace) {
			return false
		}
	}
	if !term.LabelSelector.Matches(target.Labels) {
		return false
	}
	for _, key := range term.MatchLabelKeys {
		if want, ok := owner.Labels[key]; ok {
			if got, ok := target.Labels[key]; !ok || got != want {
				return false
			}
		}
	}
	for _, key := range term.MismatchLabelKeys {
		if avoid, ok := owner.Labels[key]; ok {
			if got, ok := target.Labels[key]; ok && got == avoid {
				return false
			}
		}
	}
	return true
}

// matchesAllTerms reports whether target matches every term; false for no
// terms. Required affinity needs one pod that matches all its terms.
func matchesAllTerms(terms []framework.PodAffinityTerm, owner, target *framework.Pod) bool {
	if len(terms) == 0 {
		return false
	}
	for i := range terms {
		if !termMatches(&terms[i], owner, target) {
			return false
		}
	}
	return true
}

// matchesAnyTerm reports whether target matches at least one term: one is
// enough for anti-affinity to repel.
func matchesAnyTerm(terms []framework.PodAffinityTerm, owner, target *framework.Pod) bool {
	for i := range terms {
		if termMatches(&terms[i], owner, target) {
			return true
		}
	}
	return false
}

func requiredAffinityTerms(p *framework.Pod) []framework.PodAffinityTerm {
	if a := p.Affinity; a != nil && a.PodAffinity != nil {
		return a.PodAffinity.Required
	}
	return nil
}

func requiredAntiAffinityTerms(p *framework.Pod) []framework.PodAffinityTerm {
	if a := p.Affinity; a != nil && a.PodAntiAffinity != nil {
		return a.PodAntiAffinity.Required
	}
	return nil
}

func preferredAffinityTerms(p *framework.Pod) []framework.WeightedPodAffinityTerm {
	if a := p.Affinity; a != nil && a.PodAffinity != nil {
		return a.PodAffinity.Preferred
	}
	return nil
}

func preferredAntiAffinityTerms(p *framework.Pod) []framework.WeightedPodAffinityTerm {
	if a := p.Affinity; a != nil && a.PodAntiAffinity != nil {
		return a.PodAntiAffinity.Preferred
	}
	return nil
}

// validateTerms returns the first selector error among the pod's terms,
// which kube reports when parsing the pod.
func validateTerms(p *framework.Pod) error {
	for _, terms := range [][]framework.PodAffinityTerm{requiredAffinityTerms(p), requiredAntiAffinityTerms(p)} {
		for i := range terms {
			if err := terms[i].LabelSelector.Validate(); err != nil {
				return err
			}
		}
	}
	for _, terms := range [][]framework.WeightedPodAffinityTerm{preferredAffinityTerms(p), preferredAntiAffinityTerms(p)} {
		for i := range terms {
			if err := terms[i].Term.LabelSelector.Validate(); err != nil {
				return err
			}
		}
	}
	return nil
}
