package scheduler

import (
	"context"
	"fmt"

	"github.com/berth-io/berth/scheduler/cache"
	"github.com/berth-io/berth/scheduler/framework"
	fwruntime "github.com/berth-io/berth/scheduler/framework/runtime"
)

// This file is the last check before a pod is charged to its node: the
// cache's, and for pods whose fit depends on other pods, a re-run of the
// filters against what other shards placed since the snapshot.

// assume charges the pod to its chosen node. The cache re-checks room and
// ports against live state, which settles races between shards for those.
// Constraints that span pods (inter-pod affinity and anti-affinity, either
// the pod's own or existing pods' against it, and hard topology spreading)
// can be broken by pods another shard placed after this cycle's snapshot.
// For pods they apply to, those placements are folded into a copy of the
// cycle's state (as Kubernetes adds nominated pods) and the chosen node is
// filtered again on its live NodeInfo. Such a pod holds placeMu
// exclusively, so nothing is placed between that re-check and this
// assumption. Other pods hold it shared: their own assumptions cannot
// break one another (a placement matters to such a pod only through a
// required anti-affinity, and a pod carrying one takes the lock
// exclusively), so the shard loops assume them side by side instead of
// queueing on one lock every cycle.
//
// assumedInfo's pod is the binding cycle's own copy (assumedCopy), whose
// extras assume fills in.
func (sh *shard) assume(ctx context.Context, fwk *fwruntime.Framework, state *framework.CycleState, placedBefore int64, pi, assumedInfo *framework.PodInfo) (cache.Assumption, error) {
	if hasCrossPodTerms(pi.Pod) {
		sh.s.placeMu.Lock()
		defer sh.s.placeMu.Unlock()
	} else {
		sh.s.placeMu.RLock()
		defer sh.s.placeMu.RUnlock()
	}
	if sh.s.cache.Placements() != placedBefore {
		placed, complete := sh.s.cache.PlacedSince(placedBefore)
		var err error
		switch {
		case hasCrossPodTerms(pi.Pod):
			// Its plugins ran in the cycle, so their state can take the
			// new placements.
			err = sh.recheck(ctx, fwk, state, placed, complete, pi, assumedInfo.Pod.NodeName)
		case !complete || anyRequiredAntiAffinity(placed):
			// Its inter-pod plugins skipped in the cycle (nothing
			// concerned it then), so there is no state to extend: start
			// afresh.
			err = sh.recheck(ctx, fwk, nil, nil, false, pi, assumedInfo.Pod.NodeName)
		}
		if err != nil {
			return cache.Assumption{}, fmt.Errorf("%w: %v", cache.ErrNodeChanged, err)
		}
	}
	// Read before the cache's check: everything up to this revision is in
	// the NodeInfo it checks against, so the commit may fence on it.
	assumedInfo.Pod.Extras.ViewRevision = sh.s.view.Load()
	return sh.s.cache.Assume(assumedInfo)
}

// recheck filters node again for pi. With a state and the complete list of
// pods placed since, it folds them into a copy of that state; otherwise it
// computes the state afresh from an updated snapshot. Called with placeMu
// held.
func (sh *shard) recheck(ctx context.Context, fwk *fwruntime.Framework, state *framework.CycleState, placed []*framework.PodInfo, complete bool, pi *framework.PodInfo, node string) error {
	live, ok := sh.s.cache.NodeInfo(node)
	if !ok {
		return fmt.Errorf("node %s is gone", node)
	}
	var st *framework.CycleState
	if state != nil && complete {
		st = state.Clone()
		for _, q := range placed {
			if q.Pod.Key() == pi.Pod.Key() {
				continue
			}
			qNode, ok := sh.s.cache.NodeInfo(q.Pod.NodeName)
			if !ok {
				continue
			}
			if s := fwk.RunPreFilterExtensionAddPod(ctx, st, pi, q, qNode); !s.IsSuccess() {
				return s.AsError()
			}
		}
	} else {
		if err := sh.s.cache.UpdateSnapshot(sh.snapshot); err != nil {
			return err
		}
		st = framework.NewCycleState()
		if _, s, _ := fwk.RunPreFilterPlugins(ctx, st, pi); !s.IsSuccess() {
			return fmt.Errorf("pre-filter: %s", s.Message())
		}
	}
	if s := fwk.RunFilterPluginsWithNominatedPods(ctx, st, pi, live); !s.IsSuccess() {
		return fmt.Errorf("node %s no longer fits: %s", node, s.Message())
	}
	return nil
}

// hasCrossPodTerms reports whether a pod's own spec makes its fit depend on
// other pods: required inter-pod affinity or anti-affinity, or hard
// topology spreading.
func hasCrossPodTerms(p *framework.Pod) bool {
	if a := p.Affinity; a != nil && ((a.PodAffinity != nil && len(a.PodAffinity.Required) > 0) ||
		(a.PodAntiAffinity != nil && len(a.PodAntiAffinity.Required) > 0)) {
		return true
	}
	for _, c := range p.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != framework.ScheduleAnyway {
			return true
		}
	}
	return false
}

func anyRequiredAntiAffinity(pods []*framework.PodInfo) bool {
	for _, q := range pods {
		if framework.HasRequiredAntiAffinity(q.Pod) {
			return true
		}
	}
	return false
}

// assumedCopy is the copy of pod a binding cycle assumes on node and
// commits, fenced by the shard's ownership. Its extras are its own, for
// assume to complete.
func assumedCopy(pod *framework.Pod, node string, shardID int, epoch int64) *framework.Pod {
	assumed := *pod
	assumed.NodeName = node
	ex := assumed.EditExtras()
	ex.Shard, ex.ShardEpoch = shardID, epoch
	return &assumed
}
