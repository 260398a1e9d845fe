package defaultpreemption

import "github.com/berth-io/berth/scheduler/framework"

// budget is a DisruptionBudget checked once per preemption attempt rather
// than once per node.
type budget struct {
	namespace string
	selector  *framework.LabelSelector
	allowed   int32
	// matchesNothing: a nil, empty or invalid selector (kube's rule for
	// budgets: empty selects nothing, unlike LabelSelector.Matches).
	matchesNothing bool
}

func compileBudgets(in []framework.DisruptionBudget) []budget {
	out := make([]budget, len(in))
	for i, b := range in {
		sel := b.Selector
		out[i] = budget{
			namespace:      b.Namespace,
			selector:       sel,
			allowed:        b.DisruptionsAllowed,
			matchesNothing: sel == nil || sel.Empty() || sel.Validate() != nil,
		}
	}
	return out
}

func (b *budget) covers(p *framework.Pod) bool {
	return !b.matchesNothing && b.namespace == p.Namespace && b.selector.Matches(p.Labels)
}

// filterPodsWithPDBViolation splits pods, in order, into those whose
// eviction breaks a budget and the rest, as kube does: going through the
// pods in order, each pod a budget covers uses up one of its allowed
// disruptions, and a pod that takes any covering budget below zero is
// violating.
func filterPodsWithPDBViolation(pods []*framework.PodInfo, budgets []budget) (violating, nonViolating []*framework.PodInfo) {
	if len(budgets) == 0 {
		return nil, pods // and no pod's labels need reading
	}
	var allowed []int32
	if len(budgets) > 0 {
		allowed = make([]int32, len(budgets))
		for i := range budgets {
			allowed[i] = budgets[i].allowed
		}
	}
	for _, pi := range pods {
		breaks := false
		// A pod without labels matches no budget.
		if len(pi.Pod.Labels) > 0 {
			for i := range budgets {
				if !budgets[i].covers(pi.Pod) {
					continue
				}
				allowed[i]--
				if allowed[i] < 0 {
					breaks = true
				}
			}
		}
		if breaks {
			violating = append(violating, pi)
		} else {
			nonViolating = append(nonViolating, pi)
		}
	}
	return violating, nonViolating
}
