package runtime

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/berth-io/berth/scheduler/framework"
)

// This file holds how filters count the pods nominated to a node by
// preemption. Every filter of every cycle asks, and once preemptions start
// many nodes hold a nomination, so the work per node is kept small: no
// copy when nothing counts, a partial copy when something does, and the
// copy itself remembered while neither the node nor its nominations change.

// CountingPodNominator is a PodNominator that can also pick out the pods
// nominated to a node that count against a pod without the caller reading
// each one, and that keeps a NominatedOverlays per version of each node's
// nominations.
type CountingPodNominator interface {
	framework.PodNominator
	// NominatedPodsAgainst returns, in NominatedPodsForNode's order, the
	// pods nominated to node with priority at least pod's, other than pod
	// itself (by UID). The slice may be shared and must not be changed.
	// When it holds every pod nominated to node, overlays is that version
	// of the node's nominations' memo; otherwise nil.
	NominatedPodsAgainst(node *framework.NodeInfo, pod *framework.Pod) (pods []*framework.PodInfo, overlays *NominatedOverlays)
}

// NominatedOverlays remembers NodeInfos with every pod nominated to one
// node added, for one version of that node's nominations: the filters of
// every pod that all of them count against would build the same ones. Each
// is keyed by the snapshot NodeInfo it was built on and that NodeInfo's
// generation, which moves on every change; shards have snapshots of their
// own, hence a few slots. The NodeInfos are shared and must not be changed.
// The zero value is empty and ready.
type NominatedOverlays struct {
	slots [overlaySlots]atomic.Pointer[overlay]
	next  atomic.Uint32 // round robin for replacing a slot
}

// overlaySlots is enough for one shard per core on small machines; more
// shards only rebuild overlays more often.
const overlaySlots = 4

type overlay struct {
	base *framework.NodeInfo
	gen  int64
	with *framework.NodeInfo
}

func (o *NominatedOverlays) get(base *framework.NodeInfo) *framework.NodeInfo {
	for i := range o.slots {
		if e := o.slots[i].Load(); e != nil && e.base == base && e.gen == base.Generation {
			return e.with
		}
	}
	return nil
}

func (o *NominatedOverlays) put(base, with *framework.NodeInfo) {
	e := &overlay{base: base, gen: base.Generation, with: with}
	for i := range o.slots {
		if cur := o.slots[i].Load(); cur == nil || cur.base == base {
			if o.slots[i].CompareAndSwap(cur, e) {
				return
			}
		}
	}
	o.slots[o.next.Add(1)%overlaySlots].Store(e)
}

// RunFilterPluginsWithNominatedPods filters like RunFilterPlugins, but
// first as if the pods nominated to the node with priority at least the
// pod's were already there, and then (if that passed and such pods exist)
// without them: the pod must fit both ways, as in kube.
func (f *Framework) RunFilterPluginsWithNominatedPods(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	if f.nominator == nil {
		return f.RunFilterPlugins(ctx, state, pod, nodeInfo)
	}
	added, stateWith, nodeWith, err := f.addNominatedPods(ctx, pod, state, nodeInfo)
	if err != nil {
		return framework.AsStatus(err)
	}
	st := f.RunFilterPlugins(ctx, stateWith, pod, nodeWith)
	if !added || !st.IsSuccess() {
		return st
	}
	return f.RunFilterPlugins(ctx, state, pod, nodeInfo)
}

// addNominatedPods returns copies of state and nodeInfo with the pods
// nominated to the node that count against pod added, and whether there
// were any. It copies only when something is added, copies state only
// when a PreFilter extension would write to it, and with no such
// extension reuses the copy of nodeInfo an earlier cycle made, if the
// node and its nominations are unchanged since.
func (f *Framework) addNominatedPods(ctx context.Context, pod *framework.PodInfo, state *framework.CycleState, nodeInfo *framework.NodeInfo) (bool, *framework.CycleState, *framework.NodeInfo, error) {
	nominated, overlays := f.nominatedPodsAgainst(nodeInfo, pod.Pod)
	if len(nominated) == 0 {
		return false, state, nodeInfo, nil
	}
	if f.HasActivePreFilterExtensions(state) {
		// The extensions see the pods added one by one, as in kube.
		stateOut := state.Clone()
		nodeOut := forAdding(nodeInfo, nominated)
		for _, pi := range nominated {
			nodeOut.AddPodInfo(pi)
			if st := f.RunPreFilterExtensionAddPod(ctx, stateOut, pod, pi, nodeOut); !st.IsSuccess() {
				return false, state, nodeInfo, st.AsError()
			}
		}
		return true, stateOut, nodeOut, nil
	}
	if overlays != nil {
		if with := overlays.get(nodeInfo); with != nil {
			return true, state, with, nil
		}
	}
	nodeOut := forAdding(nodeInfo, nominated)
	for _, pi := range nominated {
		nodeOut.AddPodInfo(pi)
	}
	// Only the snapshot's NodeInfos are worth remembering: the hypothetical
	// copies preemption filters are made afresh for each node it tries.
	if overlays != nil && f.snapshot != nil {
		if cur, err := f.snapshot.NodeInfos().Get(nodeInfo.Node().Name); err == nil && cur == nodeInfo {
			overlays.put(nodeInfo, nodeOut)
		}
	}
	return true, state, nodeOut, nil
}

// nominatedPodsAgainst returns the pods nominated to node that pod must
// leave room for: priority at least its own, and not pod itself.
func (f *Framework) nominatedPodsAgainst(node *framework.NodeInfo, pod *framework.Pod) ([]*framework.PodInfo, *NominatedOverlays) {
	if f.counting != nil {
		return f.counting.NominatedPodsAgainst(node, pod)
	}
	all := f.nominator.NominatedPodsForNode(node.Node().Name)
	counts := func(pi *framework.PodInfo) bool {
		return pi.Pod.Priority >= pod.Priority && pi.Pod.UID != pod.UID
	}
	if !slices.ContainsFunc(all, func(pi *framework.PodInfo) bool { return !counts(pi) }) {
		return all, nil
	}
	var out []*framework.PodInfo
	for _, pi := range all {
		if counts(pi) {
			out = append(out, pi)
		}
	}
	return out, nil
}

// forAdding returns a copy of ni to which pods may be added (AddPodInfo)
// without touching ni. It is cheaper than Clone: it copies only what
// AddPodInfo changes and shares the rest (images, allocatable, the node).
// The pods' slices are clipped, so appending to them reallocates; the host
// ports are copied only if a pod to add uses one.
func forAdding(ni *framework.NodeInfo, pods []*framework.PodInfo) *framework.NodeInfo {
	c := *ni
	c.Pods = slices.Clip(ni.Pods)
	c.PodsWithAffinity = slices.Clip(ni.PodsWithAffinity)
	c.PodsWithRequiredAntiAffinity = slices.Clip(ni.PodsWithRequiredAntiAffinity)
	c.Requested = ni.Requested.Clone()
	c.NonZeroRequested = ni.NonZeroRequested.Clone()
	if slices.ContainsFunc(pods, (*framework.PodInfo).UsesHostPorts) {
		c.UsedPorts = ni.UsedPorts.Clone()
	}
	return &c
}

// HasActivePreFilterExtensions reports whether any PreFilter plugin that
// this cycle did not skip has extensions: only then do AddPod and RemovePod
// change state, and a hypothetical change needs a copy of it.
func (f *Framework) HasActivePreFilterExtensions(state *framework.CycleState) bool {
	skip := state.SkipFilterPlugins()
	for i, pl := range f.preFilter {
		if skip&f.preFilterBit[i] == 0 && pl.PreFilterExtensions() != nil {
			return true
		}
	}
	return false
}

// CouldFitWithFreed reports whether every Filter plugin this cycle runs
// that can judge from totals (framework.FreedFitter) leaves room for pod
// on nodeInfo once pods freeing freed are removed. False means the filters
// would reject it there.
func (f *Framework) CouldFitWithFreed(state *framework.CycleState, pod *framework.PodInfo, nodeInfo *framework.NodeInfo, freed framework.Freed) bool {
	skip := state.SkipFilterPlugins()
	for i, ff := range f.freedFitters {
		if skip&f.freedFitterBit[i] == 0 && !ff.CouldFitWithFreed(state, pod, nodeInfo, freed) {
			return false
		}
	}
	return true
}
