// Package podtopologyspread spreads pods evenly over topology domains
// (zones, hosts, any node label): hard constraints (DoNotSchedule) filter
// nodes whose domain would get too far ahead of the emptiest one, soft
// constraints (ScheduleAnyway) score nodes in emptier domains higher.
// Kube: pkg/scheduler/framework/plugins/podtopologyspread.
//
// Domains are node label values, as in kube: nodes need the
// kubernetes.io/hostname and topology.kubernetes.io/zone labels for the
// system default spreading to have any effect. Deviations from kube: the
// default constraints select pods by the incoming pod's own labels (Berth
// has no services or controllers to take a selector from), and pods are
// never skipped as terminating (Berth pods carry no deletion timestamp).
package podtopologyspread

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/names"
)

// Name is the plugin's name.
const Name = names.PodTopologySpread

// Filter rejection reasons, kube's wording.
const (
	ErrReasonConstraintsNotMatch = "node(s) didn't match pod topology spread constraints"
	ErrReasonNodeLabelNotMatch   = ErrReasonConstraintsNotMatch + " (missing required label)"
)

// PodTopologySpread enforces and prefers even spreading of pods selected
// by each constraint over the domains of its topology key.
type PodTopologySpread struct {
	handle       framework.Handle
	parallelizer framework.Parallelizer
	// defaults apply to pods without constraints of their own.
	defaults []framework.TopologySpreadConstraint
	// systemDefaulted relaxes PreScore for kube's built-in defaults: a
	// node without a zone label is still spread by hostname.
	systemDefaulted bool
	// memos keep per-node counts across cycles (see countMemos).
	memos countMemos
	// domains keep each node's domain per topology key across cycles.
	domains domainIndexes
	// counts keep per-domain totals across cycles (see counts.go).
	counts countIndex
}

var (
	_ framework.PreFilterPlugin     = (*PodTopologySpread)(nil)
	_ framework.PreFilterExtensions = (*PodTopologySpread)(nil)
	_ framework.FilterPlugin        = (*PodTopologySpread)(nil)
	_ framework.PreScorePlugin      = (*PodTopologySpread)(nil)
	_ framework.ScorePlugin         = (*PodTopologySpread)(nil)
	_ framework.ScoreExtensions     = (*PodTopologySpread)(nil)
	_ framework.EnqueueExtensions   = (*PodTopologySpread)(nil)
)

// New builds the plugin from *Args, Args or nil (List defaulting with no
// default constraints: see argsFrom). The
// handle must have a snapshot lister: PreScore counts pods on every node,
// not only the filtered ones.
func New(_ context.Context, args any, h framework.Handle) (framework.Plugin, error) {
	if h == nil || h.SnapshotSharedLister() == nil {
		return nil, fmt.Errorf("%s: the handle has no snapshot lister", Name)
	}
	a, err := argsFrom(args)
	if err != nil {
		return nil, err
	}
	if err := validate(&a); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	pl := &PodTopologySpread{
		handle:       h,
		parallelizer: h.Parallelizer(),
		defaults:     a.DefaultConstraints,
	}
	if a.DefaultingType == SystemDefaulting {
		pl.defaults = systemDefaultConstraints
		pl.systemDefaulted = true
	}
	return pl, nil
}

// Name implements framework.Plugin.
func (*PodTopologySpread) Name() string { return Name }

// EventsToRegister implements framework.EnqueueExtensions. Assigned pods
// coming, going or relabelled change the counts; nodes coming, going,
// relabelled or retainted change the domains. Kube registers the same
// actions on all pods; here only assigned pods count (a pending pod's own
// updates requeue it anyway), which its hint would require too.
func (pl *PodTopologySpread) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{
			Event:          framework.ClusterEvent{Resource: framework.EventResourceAssigned, ActionType: framework.ActionAdd | framework.ActionUpdatePodLabel | framework.ActionDelete},
			QueueingHintFn: pl.isSchedulableAfterPodChange,
		},
		{
			Event:          framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionAdd | framework.ActionDelete | framework.ActionUpdateNodeLabel | framework.ActionUpdateNodeTaint},
			QueueingHintFn: pl.isSchedulableAfterNodeChange,
		},
	}, nil
}

// isSchedulableAfterPodChange queues the pod when an assigned pod of its
// namespace that one of its hard constraints selects appears, disappears,
// or starts or stops being selected through a label change; or when the
// pod itself gained tolerations that a NodeTaintsPolicy Honor constraint
// looks at.
func (pl *PodTopologySpread) isSchedulableAfterPodChange(pod *framework.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	oldPod, newPod := asPod(oldObj), asPod(newObj)
	if oldPod == nil && newPod == nil {
		return framework.Queue, errors.New("podtopologyspread: pod event without a pod")
	}
	if (newPod != nil && !involved(newPod, pod)) || (oldPod != nil && !involved(oldPod, pod)) {
		return framework.QueueSkip, nil
	}
	cs, err := pl.constraints(pod, framework.DoNotSchedule)
	if err != nil {
		return framework.Queue, err
	}
	switch {
	case oldPod != nil && newPod != nil:
		if samePod(pod, newPod) && !slices.EqualFunc(oldPod.Tolerations, newPod.Tolerations, equalToleration) && anyHonorsTaints(cs) {
			return framework.Queue, nil
		}
		if maps.Equal(oldPod.Labels, newPod.Labels) {
			return framework.QueueSkip, nil
		}
		for i := range cs {
			if cs[i].selector.matches(oldPod.Labels) != cs[i].selector.matches(newPod.Labels) {
				return framework.Queue, nil
			}
		}
		return framework.QueueSkip, nil
	case newPod != nil:
		return hintIf(podMatchesAnyConstraint(cs, newPod.Labels)), nil
	default:
		return hintIf(podMatchesAnyConstraint(cs, oldPod.Labels)), nil
	}
}

// isSchedulableAfterNodeChange queues the pod when a node carrying every
// topology key appears or disappears, gains or loses one of the keys,
// changes a key's value, or changes taints while carrying all keys.
func (pl *PodTopologySpread) isSchedulableAfterNodeChange(pod *framework.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	oldNode, newNode := asNode(oldObj), asNode(newObj)
	if oldNode == nil && newNode == nil {
		return framework.Queue, errors.New("podtopologyspread: node event without a node")
	}
	cs, err := pl.constraints(pod, framework.DoNotSchedule)
	if err != nil {
		return framework.Queue, err
	}
	var oldHas, newHas bool
	if oldNode != nil {
		oldHas = nodeHasTopologyKeys(oldNode.Labels, cs)
	}
	if newNode != nil {
		newHas = nodeHasTopologyKeys(newNode.Labels, cs)
	}
	switch {
	case oldNode != nil && newNode != nil:
		if oldHas != newHas {
			return framework.Queue, nil
		}
		return hintIf(newHas && (topologyValuesChanged(oldNode.Labels, newNode.Labels, cs) || !slices.Equal(oldNode.Taints, newNode.Taints))), nil
	case newNode != nil:
		return hintIf(newHas), nil
	default:
		return hintIf(oldHas), nil
	}
}

// involved reports whether other can affect pod's spreading: pod itself,
// or an assigned pod of its namespace.
func involved(other, pod *framework.Pod) bool {
	return samePod(other, pod) || (other.NodeName != "" && other.Namespace == pod.Namespace)
}

// samePod compares UIDs, or namespace/name when neither pod has one.
func samePod(a, b *framework.Pod) bool {
	if a.UID != "" || b.UID != "" {
		return a.UID == b.UID
	}
	return a.Namespace == b.Namespace && a.Name == b.Name
}

func anyHonorsTaints(cs []constraint) bool {
	for i := range cs {
		if cs[i].nodeTaintsPolicy == framework.NodeInclusionPolicyHonor {
			return true
		}
	}
	return false
}

func topologyValuesChanged(oldLabels, newLabels map[string]string, cs []constraint) bool {
	for i := range cs {
		if oldLabels[cs[i].topologyKey] != newLabels[cs[i].topologyKey] {
			return true
		}
	}
	return false
}

func equalToleration(a, b framework.Toleration) bool {
	if a.Key != b.Key || a.Operator != b.Operator || a.Value != b.Value || a.Effect != b.Effect {
		return false
	}
	if a.TolerationSeconds == nil || b.TolerationSeconds == nil {
		return a.TolerationSeconds == b.TolerationSeconds
	}
	return *a.TolerationSeconds == *b.TolerationSeconds
}

func hintIf(queue bool) framework.QueueingHint {
	if queue {
		return framework.Queue
	}
	return framework.QueueSkip
}

// asPod returns obj as a pod, or nil (also for a typed nil).
func asPod(obj any) *framework.Pod {
	p, _ := obj.(*framework.Pod)
	return p
}

// asNode returns obj as a node, or nil (also for a typed nil).
func asNode(obj any) *framework.Node {
	n, _ := obj.(*framework.Node)
	return n
}

var _ framework.SignatureStamper = (*PodTopologySpread)(nil)

// AppendSignature implements framework.SignPlugin. Whether Filter and
// Score run at all is in the skip masks; what they decide per node
// depends on counts over whole topology domains, which the stamps
// (FilterStamp, ScoreStamp) carry. So the plugin adds nothing, and every
// pod can be signed.
func (pl *PodTopologySpread) AppendSignature(sig []byte, _ *framework.PodInfo) ([]byte, bool) {
	return sig, true
}

// FilterStamp implements framework.SignatureStamper: Filter's verdict on
// node, which is all its status says.
func (pl *PodTopologySpread) FilterStamp(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, node *framework.NodeInfo) uint64 {
	s, err := framework.ReadState[*preFilterState](state, preFilterStateKey)
	if err != nil {
		// Filter will err too; an error is never remembered.
		return ^uint64(0)
	}
	return uint64(s.verdict(node))
}

// ScoreStamp implements framework.SignatureStamper: the raw score itself
// (cheap from the PreScore state), or a value no score has if Score errs.
func (pl *PodTopologySpread) ScoreStamp(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, node *framework.NodeInfo) uint64 {
	score, st := pl.Score(ctx, state, pod, node)
	if !st.IsSuccess() {
		return ^uint64(0)
	}
	return uint64(score)
}
