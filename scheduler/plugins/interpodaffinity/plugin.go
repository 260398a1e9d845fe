// Package interpodaffinity places pods by the pods already running: a
// pod's required affinity and anti-affinity filter nodes, existing pods'
// required anti-affinity repels the pods they select, and preferred terms
// (of the pod and, symmetrically, of existing pods) score topologies.
//
// Terms read as Kubernetes reads them after the API server has admitted
// the pod: matchLabelKeys and mismatchLabelKeys are merged into the label
// selector from the labels of the pod that declares the term (its current
// labels; kube freezes those at creation, but Berth pods are replaced,
// not edited, when labels change). Berth has no namespace objects, so a
// namespaceSelector cannot be expressed; the term's AllNamespaces flag
// stands for kube's empty namespaceSelector (every namespace), and a term
// naming no namespaces selects its own pod's.
//
// Kube: pkg/scheduler/framework/plugins/interpodaffinity.
package interpodaffinity

import (
	"context"
	"fmt"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/names"
)

// Name is the plugin's name.
const Name = names.InterPodAffinity

// DefaultHardPodAffinityWeight is kube's default for Args.HardPodAffinityWeight.
const DefaultHardPodAffinityWeight int32 = 1

// Args configures InterPodAffinity. The zero value is kube's default.
type Args struct {
	// HardPodAffinityWeight is the score an incoming pod gives a topology
	// for each existing pod there whose required affinity it satisfies, so
	// pods that must be together are also preferred together. Nil means
	// DefaultHardPodAffinityWeight; 0 turns it off; at most 100.
	HardPodAffinityWeight *int32
	// IgnorePreferredTermsOfExistingPods skips scoring for pods that have
	// no preferred terms of their own, ignoring existing pods' terms.
	IgnorePreferredTermsOfExistingPods bool
}

// InterPodAffinity implements required and preferred inter-pod
// (anti-)affinity. Work is proportional to the pods that carry affinity,
// except when the incoming pod's own terms must be checked against every
// pod.
type InterPodAffinity struct {
	handle                             framework.Handle
	hardPodAffinityWeight              int32
	ignorePreferredTermsOfExistingPods bool
	// kept holds results kept across cycles (kept.go).
	kept keptIndex
}

var (
	_ framework.PreFilterPlugin     = (*InterPodAffinity)(nil)
	_ framework.PreFilterExtensions = (*InterPodAffinity)(nil)
	_ framework.FilterPlugin        = (*InterPodAffinity)(nil)
	_ framework.PreScorePlugin      = (*InterPodAffinity)(nil)
	_ framework.ScorePlugin         = (*InterPodAffinity)(nil)
	_ framework.ScoreExtensions     = (*InterPodAffinity)(nil)
	_ framework.EnqueueExtensions   = (*InterPodAffinity)(nil)
)

// New builds the plugin from *Args, Args or nil (defaults). It reads the
// cycle's snapshot through h, which must not be nil.
func New(_ context.Context, args any, h framework.Handle) (framework.Plugin, error) {
	if h == nil {
		return nil, fmt.Errorf("%s: a framework handle is required", Name)
	}
	a, err := framework.DecodeArgs[Args](Name, args)
	if err != nil {
		return nil, err
	}
	weight := DefaultHardPodAffinityWeight
	if a.HardPodAffinityWeight != nil {
		weight = *a.HardPodAffinityWeight
	}
	if weight < 0 || weight > 100 {
		return nil, fmt.Errorf("%s: hardPodAffinityWeight: %d not in valid range [0, 100]", Name, weight)
	}
	pl := &InterPodAffinity{
		handle:                             h,
		hardPodAffinityWeight:              weight,
		ignorePreferredTermsOfExistingPods: a.IgnorePreferredTermsOfExistingPods,
	}
	// Keys of these two kinds include the incoming pod's labels.
	pl.kept.repel.keepOnSecondUse = true
	pl.kept.scores.keepOnSecondUse = true
	return pl, nil
}

// Name implements framework.Plugin.
func (*InterPodAffinity) Name() string { return Name }

// EventsToRegister implements framework.EnqueueExtensions: a bound pod
// added, deleted or relabelled may satisfy an affinity or stop repelling,
// and a node added or relabelled may change which topology it is in.
func (pl *InterPodAffinity) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{
			Event:          framework.ClusterEvent{Resource: framework.EventResourceAssigned, ActionType: framework.ActionAdd | framework.ActionUpdatePodLabel | framework.ActionDelete},
			QueueingHintFn: isSchedulableAfterPodChange,
		},
		{
			Event:          framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionAdd | framework.ActionUpdateNodeLabel},
			QueueingHintFn: isSchedulableAfterNodeChange,
		},
	}, nil
}

// isSchedulableAfterPodChange follows kube's hint: an added pod helps if it
// satisfies all the pod's required affinity terms; an update helps if it
// comes to satisfy them, or stops matching a required anti-affinity term;
// a deletion helps if the deleted pod matched one of the pod's required
// anti-affinity terms, or one of its own matched the pod. Pods not bound
// to a node never count.
func isSchedulableAfterPodChange(pod *framework.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	oldPod, newPod, err := asPods(oldObj, newObj)
	if err != nil {
		return framework.Queue, err
	}
	if (newPod != nil && newPod.NodeName == "") || (oldPod != nil && oldPod.NodeName == "") {
		return framework.QueueSkip, nil
	}
	affinity := requiredAffinityTerms(pod)
	anti := requiredAntiAffinityTerms(pod)
	switch {
	case oldPod != nil && newPod != nil:
		if !matchesAllTerms(affinity, pod, oldPod) && matchesAllTerms(affinity, pod, newPod) {
			return framework.Queue, nil
		}
		if matchesAnyTerm(anti, pod, oldPod) && !matchesAnyTerm(anti, pod, newPod) {
			return framework.Queue, nil
		}
		return framework.QueueSkip, nil
	case newPod != nil:
		if matchesAllTerms(affinity, pod, newPod) {
			return framework.Queue, nil
		}
		return framework.QueueSkip, nil
	case oldPod != nil:
		if matchesAnyTerm(anti, pod, oldPod) || matchesAnyTerm(requiredAntiAffinityTerms(oldPod), oldPod, pod) {
			return framework.Queue, nil
		}
		return framework.QueueSkip, nil
	}
	return framework.Queue, nil
}

// isSchedulableAfterNodeChange follows kube's hint: for required affinity,
// a node that gains a topology key or changes its value (or arrives with
// it) may join a topology with matching pods; for required anti-affinity,
// any new node, or one that loses a topology key or changes its value, may
// leave a repelling topology.
func isSchedulableAfterNodeChange(pod *framework.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	oldNode, _ := oldObj.(*framework.Node)
	newNode, ok := newObj.(*framework.Node)
	if !ok || newNode == nil {
		return framework.Queue, fmt.Errorf("%s: want a *Node after the event, got %T", Name, newObj)
	}
	for _, t := range requiredAffinityTerms(pod) {
		newValue, newHas := newNode.Labels[t.TopologyKey]
		if oldNode == nil {
			if newHas {
				return framework.Queue, nil
			}
			continue
		}
		oldValue, oldHas := oldNode.Labels[t.TopologyKey]
		if newHas && (!oldHas || oldValue != newValue) {
			return framework.Queue, nil
		}
	}
	for _, t := range requiredAntiAffinityTerms(pod) {
		if oldNode == nil {
			return framework.Queue, nil
		}
		oldValue, oldHas := oldNode.Labels[t.TopologyKey]
		newValue, newHas := newNode.Labels[t.TopologyKey]
		if oldHas && (!newHas || oldValue != newValue) {
			return framework.Queue, nil
		}
	}
	return framework.QueueSkip, nil
}

// asPods converts an event's objects; nil stays nil.
func asPods(oldObj, newObj any) (oldPod, newPod *framework.Pod, err error) {
	if oldObj != nil {
		p, ok := oldObj.(*framework.Pod)
		if !ok {
			return nil, nil, fmt.Errorf("%s: want a *Pod before the event, got %T", Name, oldObj)
		}
		oldPod = p
	}
	if newObj != nil {
		p, ok := newObj.(*framework.Pod)
		if !ok {
			return nil, nil, fmt.Errorf("%s: want a *Pod after the event, got %T", Name, newObj)
		}
		newPod = p
	}
	return oldPod, newPod, nil
}

var _ framework.SignatureStamper = (*InterPodAffinity)(nil)

// AppendSignature implements framework.SignPlugin. Whether Filter and
// Score run at all is in the skip masks; what they decide per node
// depends on the pods of whole topology domains (the incoming pod's terms
// and existing pods' terms alike), which the stamps (FilterStamp,
// ScoreStamp) carry. So the plugin adds nothing, and every pod can be
// signed, whatever terms the pods placed have.
func (*InterPodAffinity) AppendSignature(sig []byte, _ *framework.PodInfo) ([]byte, bool) {
	return sig, true
}

// FilterStamp implements framework.SignatureStamper: Filter's verdict on
// node, which is all its status says.
func (*InterPodAffinity) FilterStamp(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, node *framework.NodeInfo) uint64 {
	s, err := framework.ReadState[*preFilterState](state, preFilterStateKey)
	if err != nil {
		// Filter will err too; an error is never remembered.
		return ^uint64(0)
	}
	return uint64(s.verdict(node))
}

// ScoreStamp implements framework.SignatureStamper: the raw score itself
// (a sum over a few domains), as its two's complement bits.
func (pl *InterPodAffinity) ScoreStamp(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) uint64 {
	score, st := pl.Score(ctx, state, pod, node)
	if !st.IsSuccess() {
		// Score errs, and the cycle with it: nothing is remembered.
		return 0
	}
	return uint64(score)
}
