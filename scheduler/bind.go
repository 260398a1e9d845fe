package scheduler

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/berth-io/berth/scheduler/cache"
	"github.com/berth-io/berth/scheduler/framework"
	fwruntime "github.com/berth-io/berth/scheduler/framework/runtime"
)

// bind runs the binding cycle. Its context is its own, from
// Scheduler.bindContext: a shutdown must not abandon a commit halfway, and
// Run waits for these to end.
func (sh *shard) bind(base context.Context, fwk *fwruntime.Framework, state *framework.CycleState, qpi *framework.QueuedPodInfo, key string, assumed *framework.Pod, assumption cache.Assumption) {
	ctx, cancel := sh.s.bindDeadline(base)
	defer cancel()
	start := time.Now()
	node := assumed.NodeName
	st := fwk.WaitOnPermit(ctx, assumed)
	if st.IsSuccess() {
		st = fwk.RunPreBindPlugins(ctx, state, assumed, node)
	}
	st = sh.bindStep(ctx, fwk, state, assumed, st) // Bind plugins, or a gang's joint commit: gang.go
	if !st.IsSuccess() {
		sh.bindFailed(ctx, fwk, state, qpi, key, assumed, st)
		return
	}
	// The watch may already have confirmed the binding: that is fine.
	assumption.FinishBinding()
	fwk.RunPostBindPlugins(ctx, state, assumed, node)
	e2e := time.Since(qpi.Timestamp)
	if qpi.InitialAttemptTimestamp != nil {
		e2e = time.Since(*qpi.InitialAttemptTimestamp)
	}
	sh.s.metrics.bound(time.Since(start).Seconds(), e2e.Seconds())
	sh.settle(key, nil)
}

// bindFailed undoes a binding cycle that did not commit and sends the pod
// back. It is not part of bind because every binding goroutine holds
// bind's frame all the way down into the commit: with these locals in it,
// the stack outgrew the one the goroutine started with, a copy per pod.
func (sh *shard) bindFailed(ctx context.Context, fwk *fwruntime.Framework, state *framework.CycleState, qpi *framework.QueuedPodInfo, key string, assumed *framework.Pod, st *framework.Status) {
	node := assumed.NodeName
	fwk.RunReservePluginsUnreserve(ctx, state, assumed, node)
	sh.forget(assumed)
	if errors.Is(st.AsError(), ErrCommitConflict) {
		// The pod changed, another writer added to the node, or the
		// shard moved. The watch brings the news; retry at once
		// against it (settle drops the pod if the shard is gone).
		sh.s.metrics.bindError("conflict")
		retry := func() { sh.queue.Requeue(qpi) }
		if stale := (*NodeChargedError)(nil); errors.As(st.AsError(), &stale) {
			retry = func() { sh.s.afterView(stale.Revision, func() { sh.queue.Requeue(qpi) }) }
		}
		sh.settle(key, retry)
		return
	}
	sh.s.metrics.bindError("error")
	sh.s.logger.Warn("binding failed", zap.String("pod", key), zap.String("node", node), zap.Error(st.AsError()))
	sh.retryLater(qpi)
}

func (sh *shard) forget(assumed *framework.Pod) {
	if err := sh.s.cache.ForgetPod(assumed); err != nil {
		sh.s.logger.Warn("forget assumed pod", zap.String("pod", assumed.Key()), zap.Error(err))
	}
}
