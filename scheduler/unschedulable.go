package scheduler

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/berth-io/berth/scheduler/framework"
	fwruntime "github.com/berth-io/berth/scheduler/framework/runtime"
)

// This file ends the attempts that found no node: preemption, the
// recorded diagnosis, and parking the pod until an event may help it.

// unschedulable ends an attempt that found no node: it preempts if the
// profile can, then parks the pod. When victims must be marked, the pod
// stays in flight until that write is done, so events meanwhile are
// replayed for it as before; only the loop moves on.
func (sh *shard) unschedulable(ctx context.Context, fwk *fwruntime.Framework, state *framework.CycleState, placedBefore int64,
	start time.Time, qpi *framework.QueuedPodInfo, fitErr *framework.FitError) {
	if fitErr.NumAllNodes == 0 || !fwk.HasPostFilterPlugins() {
		sh.s.metrics.attempt("unschedulable", time.Since(start).Seconds())
		sh.failed(qpi, fitErr)
		return
	}
	before := qpi
	qpi, evict, stale := sh.preempt(ctx, fwk, state, placedBefore, qpi, fitErr)
	switch {
	case stale:
		sh.s.metrics.preemptionUndone("stale")
		sh.s.metrics.attempt("unschedulable", time.Since(start).Seconds())
		sh.settle(qpi.Pod.Key(), func() { sh.queue.Requeue(qpi) })
	case evict.write == nil:
		sh.s.metrics.attempt("unschedulable", time.Since(start).Seconds())
		sh.failed(qpi, fitErr)
	default:
		// What the goroutine needs of fitErr is read now: the next cycle
		// reuses its statuses.
		why := Unschedulable{Message: fitErr.Error(), NumNodes: fitErr.NumAllNodes, Reasons: fitErr.ReasonCounts()}
		diag := fitErr.Diagnosis
		sh.s.metrics.attempt("unschedulable", time.Since(start).Seconds())
		sh.s.binding.Add(1)
		go func() {
			defer sh.s.binding.Done()
			qpi, why := sh.markVictims(before, qpi, why, evict)
			var record *Unschedulable
			if sh.newDiagnosis(qpi.Pod, why.Message) {
				record = &why
			}
			sh.park(qpi, diag, record)
		}()
	}
}

// failed parks a pod that fits nowhere and records why, once per distinct
// diagnosis.
func (sh *shard) failed(qpi *framework.QueuedPodInfo, fitErr *framework.FitError) {
	var why *Unschedulable
	if msg := fitErr.Error(); sh.newDiagnosis(qpi.Pod, msg) {
		why = &Unschedulable{Message: msg, NumNodes: fitErr.NumAllNodes, Reasons: fitErr.ReasonCounts()}
	}
	sh.park(qpi, fitErr.Diagnosis, why)
}

// newDiagnosis reports whether pod, failing with msg, is not recorded as
// such yet.
func (sh *shard) newDiagnosis(pod *framework.Pod, msg string) bool {
	recorded := pod
	sh.lock()
	if latest, ok := sh.pending[pod.Key()]; ok {
		recorded = latest
	}
	sh.unlock()
	return msg != recorded.StatusMessage() || recorded.Phase != framework.PodUnschedulable ||
		pod.NominatedNodeName() != recorded.NominatedNodeName()
}

// park records why, unless it is nil, and requeues the pod as
// unschedulable. Of diag it reads only the plugin sets, which are the
// cycle's own; its NodeToStatus is the shard's and reused.
func (sh *shard) park(qpi *framework.QueuedPodInfo, diag framework.Diagnosis, why *Unschedulable) {
	qpi.UnschedulablePlugins = diag.UnschedulablePlugins
	qpi.PendingPlugins = diag.PendingPlugins
	pod := qpi.Pod
	if why != nil {
		sh.s.binding.Add(1)
		go func() {
			defer sh.s.binding.Done()
			wctx := sh.s.deadlines.context(time.Now())
			if err := sh.s.committer.RecordUnschedulable(wctx, pod, *why); err != nil {
				sh.s.metrics.statusWrite("error")
				return
			}
			sh.s.metrics.statusWrite("ok")
		}()
	}
	sh.settle(pod.Key(), func() {
		if err := sh.queue.AddUnschedulableIfNotPresent(qpi); err != nil {
			sh.s.logger.Warn("requeue unschedulable pod", zap.String("pod", pod.Key()), zap.Error(err))
		}
	})
}

// preempt runs PostFilter for a pod that fits nowhere. When preemption
// nominates a node, the pod waits, nominated, for its victims' deletion to
// requeue it; filters of every shard count it on that node meanwhile. The
// victims' marks are not written yet when it returns: the returned
// deferredEviction holds that write, if any, for markVictims.
//
// stale says the dry run chose a node another pod has landed on since the
// snapshot it read: its victims may no longer make room, so the choice is
// undone (nothing is written yet) and the pod should be retried at once.
func (sh *shard) preempt(ctx context.Context, fwk *fwruntime.Framework, state *framework.CycleState, placedBefore int64,
	qpi *framework.QueuedPodInfo, fitErr *framework.FitError) (_ *framework.QueuedPodInfo, _ *deferredEviction, stale bool) {
	// Held until the nomination is recorded, so the next preemption, in any
	// shard, counts it. The evictor records it early (and releases the
	// slot); a failed eviction takes it back.
	ctx, release := sh.s.withPreemptionSlot(ctx)
	defer release()
	ctx, evict := withDeferredEviction(ctx)
	prevPI, prevNode := sh.s.nominator.lookup(qpi.Pod.Key())
	evict.prevPI, evict.prevNode = prevPI, prevNode
	res, st := fwk.RunPostFilterPlugins(ctx, state, qpi.PodInfo, fitErr.Diagnosis.NodeToStatus)
	if st.Code() == framework.Error {
		sh.s.logger.Warn("preemption failed", zap.String("pod", qpi.Pod.Key()), zap.Error(st.AsError()))
		sh.s.nominator.restore(qpi.Pod, prevPI, prevNode)
		evict.write = nil
	}
	if msg := st.Message(); msg != "" && !st.IsSuccess() {
		fitErr.Diagnosis.PostFilterMsg = msg
	}
	if res == nil || res.NominatingInfo.Mode() != framework.ModeOverride {
		evict.write = nil
		return qpi, evict, false
	}
	node := res.NominatingInfo.NominatedNodeName
	if node != "" && sh.s.cache.PlacedOnSince(placedBefore, node) {
		// Only a shard's own cycle is serial: one that placed a pod there
		// after this snapshot may also have dropped that pod's nomination,
		// so this dry run saw neither. Left alone, this pod would wait,
		// nominated, for room that is taken.
		sh.s.nominator.restore(qpi.Pod, prevPI, prevNode)
		return qpi, evict, true
	}
	nominated := *qpi.Pod
	nominated.EditExtras().NominatedNodeName = node
	pi := qpi.PodInfo.WithPod(&nominated)
	sh.s.nominator.set(pi, node)
	if node != "" {
		sh.s.metrics.event("Preemption")
		sh.s.unnominateLower(qpi.Pod, node)
	}
	out := *qpi
	out.PodInfo = pi
	return &out, evict, false
}

// markVictims writes the marks preempt left in evict. If that fails, the
// attempt ends as a failed preemption would have: the earlier nomination
// is back, the pod is before (as it was before preempting), and why says
// what failed.
func (sh *shard) markVictims(before, nominated *framework.QueuedPodInfo, why Unschedulable, evict *deferredEviction) (*framework.QueuedPodInfo, Unschedulable) {
	ctx, cancel := context.WithTimeout(context.Background(), sh.s.cfg.BindTimeout)
	defer cancel()
	err := evict.write(ctx)
	if err == nil {
		return nominated, why
	}
	sh.s.logger.Warn("preemption failed", zap.String("pod", before.Pod.Key()), zap.Error(err))
	sh.s.metrics.preemptionUndone("marks_failed")
	sh.s.nominator.restore(before.Pod, evict.prevPI, evict.prevNode)
	why.Message += " preemption: marking victims: " + err.Error()
	return before, why
}
