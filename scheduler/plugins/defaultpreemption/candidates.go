package defaultpreemption

import (
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
	return pl.findCandidates(ctx, state, pod, m, lister.NodeInfos(), pl.clock.Now())
}

func (pl *DefaultPreemption) findCandidates(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, m framework.NodeToStatusReader, nodes framework.NodeInfoLister, now time.Time) ([]Candidate, *framework.NodeToStatus, error) {
	if len(nodes.List()) == 0 {
		return nil, nil, errNoNodes
	}
	potential, err := m.NodesForStatusCode(nodes, framework.Unschedulable)
	if err != nil {
		return nil, nil, err
	}
	if len(potential) == 0 {
		return nil, framework.NewNodeToStatus(), nil
	}
	var budgets []budget
	if pl.budgets != nil {
		budgets = compileBudgets(pl.budgets.List())
	}
	offset, num := pl.offsetAndNumCandidates(len(potential))
	return pl.dryRun(ctx, state, pod, potential, budgets, offset, num, now)
}

// dryRun selects victims on potential nodes, from offset round the list,
// in parallel, and stops once it has num candidates of which at least one
// breaks no budget. Every list is kept in node order, so with parallelism
// 1 the outcome depends only on offset.
func (pl *DefaultPreemption) dryRun(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, potential []*framework.NodeInfo,
	budgets []budget, offset, num int, now time.Time) ([]Candidate, *framework.NodeToStatus, error) {
	n := len(potential)
	found := make([]*Candidate, n)
	var nonViolating, violating atomic.Int64
	capped := func(v int64) int64 { return min(v, int64(num)) }

	statuses := framework.NewNodeToStatus()
	var mu sync.Mutex // guards statuses and errs
	var errs []error
	pl.fh.Parallelizer().UntilStopped(ctx, n, func(i int) bool {
		ni := potential[(offset+i)%n].Clone()
		name := ni.Node().Name
		victims, violations, st := pl.selectVictimsOnNode(ctx, state.Clone(), pod, ni, budgets, now)
		if st.IsSuccess() && len(victims) > 0 {
			found[i] = &Candidate{Name: name, Victims: victims, NumPDBViolations: int64(violations)}
			var nv, v int64
			if violations == 0 {
				nv, v = nonViolating.Add(1), violating.Load()
			} else {
				nv, v = nonViolating.Load(), violating.Add(1)
			}
			return nv > 0 && capped(nv)+capped(v) >= int64(num)
		}
		if st.IsSuccess() {
			st = framework.AsStatus(fmt.Errorf("expected at least one victim pod on node %q", name))
		}
		mu.Lock()
		if st.IsError() {
			errs = append(errs, st.AsError())
		}
		statuses.Set(name, st)
		mu.Unlock()
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
	return append(good, bad...), statuses, errors.Join(errs...)
}

// selectVictimsOnNode finds the fewest, least important pods to evict from
// nodeInfo so pod fits, as kube does: remove every lower-priority pod,
// check the pod fits, then add back (reprieve) as many as still let it
// fit, first those whose eviction would break a budget, then the others,
// each group most important first. It returns the victims (most important
// first) and how many break a budget. state and nodeInfo must be copies:
// both are changed. now stands in for missing start times.
func (pl *DefaultPreemption) selectVictimsOnNode(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo,
	nodeInfo *framework.NodeInfo, budgets []budget, now time.Time) ([]*framework.Pod, int, *framework.Status) {
	var potential []*framework.PodInfo
	for _, pi := range nodeInfo.Pods {
		if pi.Pod.Priority < pod.Pod.Priority {
			potential = append(potential, pi)
		}
	}
	if len(potential) == 0 {
		return nil, 0, framework.NewStatus(framework.UnschedulableAndUnresolvable, msgNoVictims)
	}
	remove := func(pi *framework.PodInfo) error {
		if err := nodeInfo.RemovePod(pi.Pod); err != nil {
			return err
		}
		return pl.fh.RunPreFilterExtensionRemovePod(ctx, state, pod, pi, nodeInfo).AsError()
	}
	add := func(pi *framework.PodInfo) error {
		nodeInfo.AddPodInfo(pi)
		return pl.fh.RunPreFilterExtensionAddPod(ctx, state, pod, pi, nodeInfo).AsError()
	}
	// Backwards: the pods were collected in node order, and NodeInfo finds
	// a pod to remove by scanning from the end.
	for i := len(potential) - 1; i >= 0; i-- {
		if err := remove(potential[i]); err != nil {
			return nil, 0, framework.AsStatus(err)
		}
	}
	// Kube does not look further: a pod that fits only thanks to a victim
	// (affinity to a lower-priority pod) is not worth the cost.
	if st := pl.fh.RunFilterPluginsWithNominatedPods(ctx, state, pod, nodeInfo); !st.IsSuccess() {
		return nil, 0, st
	}

	slices.SortStableFunc(potential, func(a, b *framework.PodInfo) int { return importanceOrder(a.Pod, b.Pod, now) })
	violating, nonViolating := filterPodsWithPDBViolation(potential, budgets)
	var victims []*framework.Pod
	reprieve := func(pi *framework.PodInfo) (bool, error) {
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

// moreImportant is kube's MoreImportantPod: higher priority, then the
// earlier start (the longer running pod).
func moreImportant(a, b *framework.Pod, now time.Time) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	return startTime(a, now).Before(startTime(b, now))
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
