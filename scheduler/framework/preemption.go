package framework

import "context"

// DisruptionBudget limits voluntary disruptions of the pods it selects, as
// a Kubernetes PodDisruptionBudget does. Preemption prefers victims whose
// eviction keeps every budget, but may still break one when nothing else
// makes room.
type DisruptionBudget struct {
	// Namespace is the only namespace whose pods the budget covers.
	Namespace string
	// Selector picks the covered pods; nil or empty selects none (kube's
	// preemption rule, unlike LabelSelector's general semantics).
	Selector *LabelSelector
	// DisruptionsAllowed is how many covered pods may go now.
	DisruptionsAllowed int32
}

// BudgetLister returns the disruption budgets in force. It is read once
// per preemption attempt; List must be safe for concurrent use.
type BudgetLister interface {
	List() []DisruptionBudget
}

// Evictor carries out a preemption decision: it asks the owner of each
// victim to stop it, which frees the room the preemptor was nominated
// for. The scheduler never deletes pods itself.
type Evictor interface {
	// Evict evicts victims (all bound to nominatedNode, most important
	// first) so preemptor can run there. An error fails the preemption
	// attempt; the preemptor is retried with backoff.
	Evict(ctx context.Context, preemptor *Pod, nominatedNode string, victims []*Pod) error
}

// EvictionTracker is an optional part of an Evictor that knows which pods
// are on their way out: evicted, but not yet gone. Berth pods have no
// terminating state of their own, so only whoever evicts can tell.
type EvictionTracker interface {
	Terminating(p *Pod) bool
}

// LowerPriorityNominatedPods returns the pods nominated to node with a
// priority below pod's: after pod preempts there, they may no longer fit,
// so their nomination should be cleared.
func LowerPriorityNominatedPods(n PodNominator, pod *Pod, node string) []*Pod {
	if n == nil {
		return nil
	}
	var out []*Pod
	for _, pi := range n.NominatedPodsForNode(node) {
		if pi.Pod.Priority < pod.Priority {
			out = append(out, pi.Pod)
		}
	}
	return out
}
