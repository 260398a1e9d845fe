package defaultpreemption

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-io/berth/scheduler/framework"
)

// Candidate is a node where the preemptor fits once Victims are gone.
type Candidate struct {
	Name string
	// Victims are ordered most important first.
	Victims []*framework.Pod
	// NumPDBViolations counts victims whose eviction breaks a budget.
	NumPDBViolations int64
}

// FindCandidates dry-runs preemption over the nodes the filters found
// Unschedulable (not UnschedulableAndUnresolvable), starting at a random
// one, until it has enough candidates (see Args). Candidates that break
// no budget come first. The NodeToStatus holds why the nodes tried
// without success cannot be made to fit. It changes nothing: state and
// the snapshot are only read.
func (pl *DefaultPreemption) FindCandidates(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, m framework.NodeToStatusReader) ([]Candidate, *framework.NodeToStatus, error) {
	lister := pl.fh.SnapshotSharedLister()
	if lister == nil {
		return nil, nil, errNoNodes
	}
	candidates, failed, err := pl.findCandidates(ctx, state, pod, m, lister.NodeInfos(), pl.clock.Now())
	defer failed.release()
	return candidates, failed.nodeToStatus(), err
}

func (pl *DefaultPreemption) findCandidates(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, m framework.NodeToStatusReader, nodes framework.NodeInfoLister, now time.Time) ([]Candidate, failures, error) {
	if len(nodes.List()) == 0 {
		return nil, failures{}, errNoNodes
	}
	potential, err := m.NodesForStatusCode(nodes, framework.Unschedulable)
	if err != nil {
		return nil, failures{}, err
	}
	if len(potential) == 0 {
		return nil, failures{}, nil
	}
	var budgets []budget
	if pl.budgets != nil {
		budgets = compileBudgets(pl.budgets.List())
	}
	offset, num := pl.offsetAndNumCandidates(len(potential))
	return pl.dryRun(ctx, state, pod, potential, budgets, offset, num, now)
}

// failures holds why the nodes a dry run tried without success cannot be
// made to fit, by position in the dry run. A NodeToStatus is needed
// only when no candidate is found.
type failures struct {
	nodes    []*framework.NodeInfo
	offset   int
	statuses []*framework.Status
	// ruledOut marks the nodes skipped on their totals alone; why exactly
	// they fail is worked out by explain only if nodeToStatus is asked.
	ruledOut []bool
	explain  func(*framework.NodeInfo) *framework.Status
	scratch  *dryRunScratch
}

// release hands the dry run's scratch back; f must not be used after.
func (f failures) release() {
	if f.scratch != nil {
		scratchPool.Put(f.scratch)
	}
}

// dryRunScratch is what a dry run keeps per potential node, reused by the
// next: at thousands of nodes, allocating it afresh was a tenth of all a
// preemption workload allocated.
type dryRunScratch struct {
	found    []*Candidate
	statuses []*framework.Status
	ruledOut []bool
}

var scratchPool = sync.Pool{New: func() any { return new(dryRunScratch) }}

// getScratch returns zeroed scratch for n nodes.
func getScratch(n int) *dryRunScratch {
	s := scratchPool.Get().(*dryRunScratch)
	s.found = resized(s.found, n)
	s.statuses = resized(s.statuses, n)
	s.ruledOut = resized(s.ruledOut, n)
	return s
}

func resized[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

// nodeToStatus returns the failures by node; never nil.
func (f failures) nodeToStatus() *framework.NodeToStatus {
	m := framework.NewNodeToStatus()
	for i, st := range f.statuses {
		ni := f.nodes[(f.offset+i)%len(f.nodes)]
		if st == nil && f.ruledOut[i] {
			st = f.explain(ni)
		}
		if st != nil {
			m.Record(ni, st)
		}
	}
	return m
}

// dryRun selects victims on potential nodes, from offset round the list,
// in parallel, and stops once it has num candidates of which at least one
// breaks no budget. Every list is kept in node order, so with parallelism
// 1 the outcome depends only on offset.
func (pl *DefaultPreemption) dryRun(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, potential []*framework.NodeInfo,
	budgets []budget, offset, num int, now time.Time) ([]Candidate, failures, error) {
	n := len(potential)
	scratch := getScratch(n)
	found := scratch.found
	failed := failures{nodes: potential, offset: offset, statuses: scratch.statuses, ruledOut: scratch.ruledOut, scratch: scratch,
		explain: func(ni *framework.NodeInfo) *framework.Status {
			_, _, st := pl.selectVictimsOnNode(ctx, state, pod, ni, budgets, now)
			return st
		}}
	var nonViolating, violating atomic.Int64
	capped := func(v int64) int64 { return min(v, int64(num)) }

	pl.parallelizer().UntilStopped(ctx, n, func(i int) bool {
		ni := potential[(offset+i)%n]
		// Most nodes of a busy cluster cannot be made to fit; their totals
		// per priority say so without a copy of the node.
		if freed := ni.FreedBelow(pod.Pod.Priority); freed.Pods > 0 && !pl.fh.CouldFitWithFreed(state, pod, ni, freed) {
			failed.ruledOut[i] = true
			return false
		}
		victims, violations, st := pl.selectVictimsOnNode(ctx, state, pod, ni, budgets, now)
		if st.IsSuccess() && len(victims) > 0 {
			found[i] = &Candidate{Name: ni.Node().Name, Victims: victims, NumPDBViolations: int64(violations)}
			var nv, v int64
			if violations == 0 {
				nv, v = nonViolating.Add(1), violating.Load()
			} else {
				nv, v = nonViolating.Load(), violating.Add(1)
			}
			return nv > 0 && capped(nv)+capped(v) >= int64(num)
		}
		if st.IsSuccess() {
			st = framework.AsStatus(fmt.Errorf("expected at least one victim pod on node %q", ni.Node().Name))
		}
		failed.statuses[i] = st
		return false
	})

	var good, bad []Candidate
	for _, c := range found {
		switch {
		case c == nil:
		case c.NumPDBViolations == 0 && len(good) < num:
			good = append(good, *c)
		case c.NumPDBViolations > 0 && len(bad) < num:
			bad = append(bad, *c)
		}
	}
	var errs []error
	for _, st := range failed.statuses {
		if st.IsError() {
			errs = append(errs, st.AsError())
		}
	}
	return append(good, bad...), failed, errors.Join(errs...)
}

// selectVictimsOnNode finds the fewest, least important pods to evict from
// nodeInfo so pod fits, as kube does: remove every lower-priority pod,
// check the pod fits, then add back (reprieve) as many as still let it
// fit, first those whose eviction would break a budget, then the others,
// each group most important first. It returns the victims (most important
// first) and how many break a budget. It changes neither state nor
// nodeInfo: it works on copies, and copies state only if a PreFilter
// extension follows the changes. now stands in for missing start times.
// It is one function, as kube's SelectVictimsOnNode, so the two read side
// by side.
func (pl *DefaultPreemption) selectVictimsOnNode(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo,
	nodeInfo *framework.NodeInfo, budgets []budget, now time.Time) ([]*framework.Pod, int, *framework.Status) {
	copied := nodeCopies.Get().(*nodeCopy)
	defer nodeCopies.Put(copied)
	nodeInfo, potential := copied.withoutLowerPriority(nodeInfo, pod.Pod.Priority)
	if len(potential) == 0 {
		return nil, 0, framework.NewStatus(framework.UnschedulableAndUnresolvable, msgNoVictims)
	}
	extended := pl.fh.HasActivePreFilterExtensions(state)
	if extended {
		state = state.Clone()
		// Backwards, as kube removes them one by one; the extensions look
		// only at the pod and the node.
		for i := len(potential) - 1; i >= 0; i-- {
			if st := pl.fh.RunPreFilterExtensionRemovePod(ctx, state, pod, potential[i], nodeInfo); !st.IsSuccess() {
				return nil, 0, framework.AsStatus(st.AsError())
			}
		}
	}
	remove := func(pi *framework.PodInfo) error {
		if err := nodeInfo.RemovePod(pi.Pod); err != nil || !extended {
			return err
		}
		return pl.fh.RunPreFilterExtensionRemovePod(ctx, state, pod, pi, nodeInfo).AsError()
	}
	add := func(pi *framework.PodInfo) error {
		nodeInfo.AddPodInfo(pi)
		if !extended {
			return nil
		}
		return pl.fh.RunPreFilterExtensionAddPod(ctx, state, pod, pi, nodeInfo).AsError()
	}
	// Kube does not look further: a pod that fits only thanks to a victim
	// (affinity to a lower-priority pod) is not worth the cost.
	if st := pl.fh.RunFilterPluginsWithNominatedPods(ctx, state, pod, nodeInfo); !st.IsSuccess() {
		return nil, 0, st
	}

	slices.SortStableFunc(potential, func(a, b *framework.PodInfo) int { return infoImportanceOrder(a, b, now) })
	violating, nonViolating := filterPodsWithPDBViolation(potential, budgets)
	var victims []*framework.Pod
	reprieve := func(pi *framework.PodInfo) (bool, error) {
		// Most pods cannot come back once the preemptor is in: the
		// filters' totals test says so without adding and filtering.
		back := framework.Freed{Pods: -1, MilliCPU: -pi.Requests.MilliCPU, Memory: -pi.Requests.Memory,
			EphemeralStorage: -pi.Requests.EphemeralStorage}
		if !pl.fh.CouldFitWithFreed(state, pod, nodeInfo, back) {
			victims = append(victims, pi.Pod)
			return false, nil
		}
		if err := add(pi); err != nil {
			return false, err
		}
		if pl.fh.RunFilterPluginsWithNominatedPods(ctx, state, pod, nodeInfo).IsSuccess() {
			return true, nil
		}
		if err := remove(pi); err != nil {
			return false, err
		}
		victims = append(victims, pi.Pod)
		return false, nil
	}
	numViolating := 0
	for _, pi := range violating {
		fits, err := reprieve(pi)
		if err != nil {
			return nil, 0, framework.AsStatus(err)
		}
		if !fits {
			numViolating++
		}
	}
	for _, pi := range nonViolating {
		if _, err := reprieve(pi); err != nil {
			return nil, 0, framework.AsStatus(err)
		}
	}
	// Each group is in order already; merged they need sorting again.
	if len(violating) > 0 && len(nonViolating) > 0 {
		slices.SortStableFunc(victims, func(a, b *framework.Pod) int { return importanceOrder(a, b, now) })
	}
	return victims, numViolating, nil
}

// nodeCopy is the room withoutLowerPriority builds its copy in. A dry run
// builds one per candidate node and drops it at once, so the room is
// reused: nothing keeps a hypothetical NodeInfo past selectVictimsOnNode.
type nodeCopy struct {
	ni      framework.NodeInfo
	removed []*framework.PodInfo
}

var nodeCopies = sync.Pool{New: func() any { return new(nodeCopy) }}

// withoutLowerPriority returns a copy of ni, built in c, without its pods
// of priority below prio, and those pods in node order; ni itself when
// there are none. It is what Clone then RemovePod of each would leave,
// made in one pass: only what AddPodInfo and RemovePod change is copied
// (the pods' lists, the requested sums, the per-priority totals, and the
// host ports if a removed pod holds any, since only removed pods are
// added back). The rest is shared with ni and must not be changed. Both
// results are valid until c is reused.
func (c *nodeCopy) withoutLowerPriority(ni *framework.NodeInfo, prio int32) (*framework.NodeInfo, []*framework.PodInfo) {
	lower := func(pi *framework.PodInfo) bool { return pi.Priority() < prio }
	removed := c.removed[:0]
	for _, pi := range ni.Pods {
		if lower(pi) {
			removed = append(removed, pi)
		}
	}
	c.removed = removed
	if len(removed) == 0 {
		return ni, nil
	}
	pods, withAffinity, withAntiAffinity := c.ni.Pods[:0], c.ni.PodsWithAffinity[:0], c.ni.PodsWithRequiredAntiAffinity[:0]
	c.ni = *ni
	// Own slices, so adding a pod back never writes to ni's.
	for _, pi := range ni.Pods {
		if !lower(pi) {
			pods = append(pods, pi)
		}
	}
	c.ni.Pods = pods
	c.ni.PodsWithAffinity = slices.DeleteFunc(append(withAffinity, ni.PodsWithAffinity...), lower)
	c.ni.PodsWithRequiredAntiAffinity = slices.DeleteFunc(append(withAntiAffinity, ni.PodsWithRequiredAntiAffinity...), lower)
	c.ni.Requested = ni.Requested.Clone()
	c.ni.NonZeroRequested = ni.NonZeroRequested.Clone()
	// Only a pod using host ports has any to release. Asking the node
	// instead (is UsedPorts empty?) cost a cache miss per node.
	copiedPorts := false
	for _, pi := range removed {
		c.ni.Requested.SubResource(&pi.Requests)
		c.ni.NonZeroRequested.SubResource(&pi.NonZeroRequests)
		if !pi.UsesHostPorts() {
			continue
		}
		for _, ctr := range pi.Pod.Containers {
			for _, port := range ctr.Ports {
				if port.HostPort <= 0 {
					continue
				}
				if !copiedPorts {
					c.ni.UsedPorts, copiedPorts = ni.UsedPorts.Clone(), true
				}
				c.ni.UsedPorts.Remove(port.HostIP, port.Protocol, port.HostPort)
			}
		}
	}
	if c.ni.Requested.Saturated() || c.ni.NonZeroRequested.Saturated() {
		// A saturated sum less the removed pods is unknown: count the rest.
		c.ni.RecountRequests()
	}
	c.ni.KeepAtOrAbove(prio)
	c.ni.Generation = framework.NextGeneration()
	return &c.ni, removed
}

// moreImportant is kube's MoreImportantPod: higher priority, then the
// earlier start (the longer running pod).
func moreImportant(a, b *framework.Pod, now time.Time) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	return startTime(a, now).Before(startTime(b, now))
}

// infoImportanceOrder is importanceOrder read from PodInfos, which keep
// priority and start time beside the requests a dry run reads anyway.
func infoImportanceOrder(a, b *framework.PodInfo, now time.Time) int {
	if pa, pb := a.Priority(), b.Priority(); pa != pb {
		return cmp.Compare(pb, pa)
	}
	sa, sb := a.StartTime(), b.StartTime()
	if sa.IsZero() {
		sa = now
	}
	if sb.IsZero() {
		sb = now
	}
	return sa.Compare(sb)
}

// importanceOrder sorts most important first.
func importanceOrder(a, b *framework.Pod, now time.Time) int {
	switch {
	case moreImportant(a, b, now):
		return -1
	case moreImportant(b, a, now):
		return 1
	}
	return 0
}

// startTime is the pod's start, or now for a pod not started yet (kube's
// GetPodStartTime).
func startTime(p *framework.Pod, now time.Time) time.Time {
	if p.StartTime.IsZero() {
		return now
	}
	return p.StartTime
}
