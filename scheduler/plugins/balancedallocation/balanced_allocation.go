// Package balancedallocation favours nodes whose resource use the pod
// makes more even.
package balancedallocation

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/helper"
	"github.com/berth-io/berth/scheduler/plugins/names"
)

// Name is the plugin's name.
const Name = names.NodeResourcesBalancedAllocation

const preScoreStateKey framework.StateKey = "PreScore" + Name

// Args configures the plugin. The zero value is kube's default: cpu and
// memory, weight 1 (weights are accepted but, as in kube, unused).
type Args struct {
	Resources []helper.ResourceSpec
}

// BalancedAllocation scores how much placing the pod improves the node's
// balance, as kube v1.37 does: balance is (1 - standard deviation of the
// used fractions) * 100, taken with and without the pod, and the
// difference (-100..100) is mapped onto 50 +- 50, so a pod that changes
// nothing scores 75. Requests count as declared (no defaults).
// Kube: pkg/scheduler/framework/plugins/noderesources/balanced_allocation.go.
type BalancedAllocation struct {
	resources []helper.ResourceSpec
}

var (
	_ framework.PreScorePlugin = (*BalancedAllocation)(nil)
	_ framework.ScorePlugin    = (*BalancedAllocation)(nil)
)

// New builds the plugin from *Args, Args or nil (defaults).
func New(_ context.Context, args any, _ framework.Handle) (framework.Plugin, error) {
	a, err := framework.DecodeArgs[Args](Name, args)
	if err != nil {
		return nil, err
	}
	if len(a.Resources) == 0 {
		a.Resources = helper.DefaultResources()
	}
	seen := map[string]bool{}
	var errs []error
	for _, r := range a.Resources {
		if r.Weight != 0 && (r.Weight < 1 || r.Weight > 100) {
			errs = append(errs, fmt.Errorf("resources: weight of %q is %d, not in [1, 100]", r.Name, r.Weight))
		}
		if seen[r.Name] {
			errs = append(errs, fmt.Errorf("resources: %q listed twice", r.Name))
		}
		seen[r.Name] = true
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return &BalancedAllocation{resources: append([]helper.ResourceSpec(nil), a.Resources...)}, nil
}

// Name implements framework.Plugin.
func (*BalancedAllocation) Name() string { return Name }

type preScoreState struct {
	podRequests []int64
}

func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore implements framework.PreScorePlugin. A pod requesting none of
// the resources is skipped: otherwise every such pod would crowd onto the
// same "most balanced" node (kube issue 129138).
func (ba *BalancedAllocation) PreScore(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, _ []*framework.NodeInfo) *framework.Status {
	reqs := helper.PodRequests(pod, ba.resources, true, nil)
	if isBestEffort(reqs) {
		return framework.SkipStatus()
	}
	state.Write(preScoreStateKey, &preScoreState{podRequests: reqs})
	return nil
}

func isBestEffort(reqs []int64) bool {
	for _, r := range reqs {
		if r != 0 {
			return false
		}
	}
	return true
}

const maxInlineResources = 8

// Score implements framework.ScorePlugin.
func (ba *BalancedAllocation) Score(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadState[*preScoreState](state, preScoreStateKey)
	var reqs []int64
	if err == nil {
		reqs = s.podRequests
	} else {
		// As kube: without PreScore, compute here, and give best-effort
		// pods 0.
		reqs = helper.PodRequests(pod, ba.resources, true, nil)
		if isBestEffort(reqs) {
			return 0, nil
		}
	}
	var withBuf, withoutBuf [maxInlineResources]float64
	with, without := withBuf[:0], withoutBuf[:0]
	if len(ba.resources) > maxInlineResources {
		with, without = make([]float64, 0, len(ba.resources)), make([]float64, 0, len(ba.resources))
	}
	for i, r := range ba.resources {
		alloc, req := helper.AllocatableRequested(nodeInfo, r.Name, reqs[i], true)
		if alloc == 0 {
			continue
		}
		with = append(with, min(float64(req)/float64(alloc), 1))
		without = append(without, min(float64(req-reqs[i])/float64(alloc), 1))
	}
	return improvementScore(balancedScore(with), balancedScore(without)), nil
}

// improvementScore maps the change in balance the pod brings onto the
// score range: half the maximum plus half of (half the maximum plus the
// change), each halving truncated toward zero as kube's integer
// arithmetic does.
func improvementScore(with, without int64) int64 {
	const half = framework.MaxNodeScore / 2
	return half + (half+with-without)/2
}

// balancedScore is int64((1 - std) * 100), truncated; std of two
// fractions is |f1-f2|/2, of more the population standard deviation, of
// fewer 0.
func balancedScore(fractions []float64) int64 {
	var std float64
	switch n := len(fractions); {
	case n == 2:
		std = math.Abs((fractions[0] - fractions[1]) / 2)
	case n > 2:
		var total float64
		for _, f := range fractions {
			total += f
		}
		mean := total / float64(n)
		var sum float64
		for _, f := range fractions {
			sum += (f - mean) * (f - mean)
		}
		std = math.Sqrt(sum / float64(n))
	}
	return int64((1 - std) * float64(framework.MaxNodeScore))
}

// ScoreExtensions implements framework.ScorePlugin: scores are final.
func (*BalancedAllocation) ScoreExtensions() framework.ScoreExtensions { return nil }

// PreScoreUsesNodes implements framework.PreScoreNodesUser.
func (*BalancedAllocation) PreScoreUsesNodes(*framework.PodInfo) bool { return false }

var _ framework.SignPlugin = (*BalancedAllocation)(nil)

// AppendSignature implements framework.SignPlugin: the pod's requests,
// plain and with kube's non-zero defaults.
func (*BalancedAllocation) AppendSignature(sig []byte, pod *framework.PodInfo) ([]byte, bool) {
	sig = framework.AppendSigResource(sig, &pod.Requests)
	return framework.AppendSigResource(sig, &pod.NonZeroRequests), true
}

var (
	_ framework.PreScoreNodesUser = (*BalancedAllocation)(nil)
)
