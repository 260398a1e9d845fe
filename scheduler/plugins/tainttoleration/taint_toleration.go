// Package tainttoleration keeps pods off nodes whose taints they do not
// tolerate, and prefers nodes with fewer PreferNoSchedule taints.
package tainttoleration

import (
	"context"
	"fmt"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/helper"
	"github.com/berth-io/berth/scheduler/plugins/names"
)

// Name is the plugin's name.
const Name = names.TaintToleration

const preScoreStateKey framework.StateKey = "PreScore" + Name

// TaintToleration filters on NoSchedule and NoExecute taints and scores by
// untolerated PreferNoSchedule taints. Kube:
// pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go.
type TaintToleration struct{}

var (
	_ framework.FilterPlugin      = (*TaintToleration)(nil)
	_ framework.PreScorePlugin    = (*TaintToleration)(nil)
	_ framework.ScorePlugin       = (*TaintToleration)(nil)
	_ framework.ScoreExtensions   = (*TaintToleration)(nil)
	_ framework.EnqueueExtensions = (*TaintToleration)(nil)
)

// New returns the plugin; it takes no args.
func New(_ context.Context, _ any, _ framework.Handle) (framework.Plugin, error) {
	return &TaintToleration{}, nil
}

// Name implements framework.Plugin.
func (*TaintToleration) Name() string { return Name }

// Filter implements framework.FilterPlugin: the first NoSchedule or
// NoExecute taint (in node order) the pod does not tolerate rejects it.
// The reason names that taint where kube v1.37 says only "node(s) had
// untolerated taint(s)": a deliberate difference (see the README's
// conformance section), since the taint is what an operator must act on.
// Code and plugin match kube; the conformance check compares the text
// with the taint name left out.
func (*TaintToleration) Filter(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	if !nodeInfo.Tainted() {
		return nil // without reading the Node
	}
	taint, untolerated := framework.FindMatchingUntoleratedTaint(nodeInfo.Node().Taints, pod.Pod.Tolerations, framework.DoNotScheduleTaint)
	if !untolerated {
		return nil
	}
	return framework.NewStatus(framework.UnschedulableAndUnresolvable,
		fmt.Sprintf("node(s) had untolerated taint {%s: %s}", taint.Key, taint.Value))
}

// preScoreState holds the tolerations that can match PreferNoSchedule
// taints: those with that effect or with no effect.
type preScoreState struct {
	tolerations []framework.Toleration
}

func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore implements framework.PreScorePlugin.
func (*TaintToleration) PreScore(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, _ []*framework.NodeInfo) *framework.Status {
	var tols []framework.Toleration
	for _, t := range pod.Pod.Tolerations {
		if t.Effect == "" || t.Effect == framework.TaintEffectPreferNoSchedule {
			tols = append(tols, t)
		}
	}
	state.Write(preScoreStateKey, &preScoreState{tolerations: tols})
	return nil
}

// Score implements framework.ScorePlugin: the count of PreferNoSchedule
// taints the pod does not tolerate (reversed by NormalizeScore).
func (*TaintToleration) Score(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadState[*preScoreState](state, preScoreStateKey)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	if !nodeInfo.Tainted() {
		// Most nodes have no taint; saying so without reading the Node
		// spares a cache miss per node scored.
		return 0, nil
	}
	var n int64
	taints := nodeInfo.Node().Taints
	for i := range taints {
		if taints[i].Effect == framework.TaintEffectPreferNoSchedule && !framework.TolerationsTolerateTaint(s.tolerations, &taints[i]) {
			n++
		}
	}
	return n, nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (pl *TaintToleration) ScoreExtensions() framework.ScoreExtensions { return pl }

// NormalizeScore implements framework.ScoreExtensions: fewer untolerated
// taints score higher.
func (*TaintToleration) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *framework.PodInfo, scores framework.NodeScoreList) *framework.Status {
	return helper.DefaultNormalizeScore(framework.MaxNodeScore, true, scores)
}

// NormalizeScoreOf implements framework.MaxNormalizer.
func (*TaintToleration) NormalizeScoreOf(raw, highest int64) int64 {
	return helper.NormalizedScore(framework.MaxNodeScore, true, raw, highest)
}

// PreScoreUsesNodes implements framework.PreScoreNodesUser.
func (*TaintToleration) PreScoreUsesNodes(*framework.PodInfo) bool { return false }

// EventsToRegister implements framework.EnqueueExtensions: a node added or
// with changed taints may now be tolerated.
func (*TaintToleration) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{{
		Event:          framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionAdd | framework.ActionUpdateNodeTaint},
		QueueingHintFn: isSchedulableAfterNodeChange,
	}}, nil
}

// isSchedulableAfterNodeChange queues the pod only when the node went from
// having an untolerated taint (or not existing) to having none.
func isSchedulableAfterNodeChange(pod *framework.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	newNode, ok := newObj.(*framework.Node)
	if !ok || newNode == nil {
		return framework.Queue, nil
	}
	wasUntolerated := true
	if oldNode, ok := oldObj.(*framework.Node); ok && oldNode != nil {
		_, wasUntolerated = framework.FindMatchingUntoleratedTaint(oldNode.Taints, pod.Tolerations, framework.DoNotScheduleTaint)
	}
	_, isUntolerated := framework.FindMatchingUntoleratedTaint(newNode.Taints, pod.Tolerations, framework.DoNotScheduleTaint)
	if wasUntolerated && !isUntolerated {
		return framework.Queue, nil
	}
	return framework.QueueSkip, nil
}

var _ framework.SignPlugin = (*TaintToleration)(nil)

// AppendSignature implements framework.SignPlugin: Filter and Score read
// only the pod's tolerations.
func (*TaintToleration) AppendSignature(sig []byte, pod *framework.PodInfo) ([]byte, bool) {
	return framework.AppendSigTolerations(sig, pod.Pod.Tolerations), true
}

var (
	_ framework.PreScoreNodesUser = (*TaintToleration)(nil)
	_ framework.MaxNormalizer     = (*TaintToleration)(nil)
)
