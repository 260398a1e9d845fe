package scheduler

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/berth-io/berth/scheduler/algorithm"
	"github.com/berth-io/berth/scheduler/cache"
	"github.com/berth-io/berth/scheduler/framework"
	fwruntime "github.com/berth-io/berth/scheduler/framework/runtime"
	"github.com/berth-io/berth/scheduler/internal/handoff"
	"github.com/berth-io/berth/scheduler/plugins/names"
	"github.com/berth-io/berth/scheduler/plugins/queuesort"
	"github.com/berth-io/berth/scheduler/queue"
)

// shard is one scheduling loop with its own queue and snapshot. Pods are
// spread over shards by hash, so shards never schedule the same pod; they
// share only the cache, whose AssumePod re-check settles races for room.
type shard struct {
	id         int
	s          *Scheduler
	queue      *queue.PriorityQueue
	snapshot   *cache.Snapshot
	algo       *algorithm.Placer
	frameworks map[string]*fwruntime.Framework

	// cycleMu serialises scheduling cycles with Explain dry runs, which
	// share the snapshot, the algorithm's rotating window and its random
	// source. Lock order: cycleMu, then mu.
	cycleMu sync.Mutex
	// mu guards pending and inFlight; take it only with lock and unlock,
	// which settle what settle left. Lock order: mu, then the queue's lock.
	mu sync.Mutex
	// pending holds the latest stored record of every unbound pod of this
	// shard: the truth the queue is derived from.
	pending map[string]*framework.Pod
	// inFlight holds pods popped and not yet settled (scheduling or binding).
	inFlight map[string]*framework.Pod
	// pendingPeak and inFlightPeak let the maps shrink after a backlog
	// (framework.DeleteShrinking).
	pendingPeak, inFlightPeak int
	// leftSettled holds the successful attempts settle left for the
	// holder of mu; lock and unlock settle them (see settle).
	leftSettled handoff.Keys
	// slot is true while the loop holds the binding slot (bind_slots.go)
	// of the cycle running now, not yet handed to a binding. Only the
	// loop's goroutine touches it.
	slot bool
}

func newShard(ctx context.Context, s *Scheduler, id int) (*shard, error) {
	sh := &shard{
		id:         id,
		s:          s,
		snapshot:   cache.NewEmptySnapshot(),
		algo:       algorithm.New(s.cfg.PercentageOfNodesToScore),
		frameworks: map[string]*fwruntime.Framework{},
		pending:    map[string]*framework.Pod{},
		inFlight:   map[string]*framework.Pod{},
	}
	var first *fwruntime.Framework
	for _, prof := range s.cfg.Profiles {
		fwk, err := fwruntime.NewFramework(ctx, s.cfg.Registry, prof,
			fwruntime.WithSnapshotSharedLister(sh.snapshot),
			fwruntime.WithBinder(s.committer),
			fwruntime.WithParallelism(s.cfg.Parallelism),
			fwruntime.WithPodNominator(s.nominator),
			fwruntime.WithEvictor(nominatingEvictor{nominator: s.nominator, next: s.committer}),
			fwruntime.WithDisruptionBudgets(&s.budgets),
			// Preemptions wait for one another (withPreemptionSlot), so
			// the cores of shards waiting for the slot are free: the dry
			// run may use them all, as kube's does its Parallelizer.
			fwruntime.WithPreemptionParallelism(max(s.cfg.Parallelism, runtime.GOMAXPROCS(0))),
			fwruntime.WithPodGroups(s.groups),
			fwruntime.WithGangCommitter(s.groups),
		)
		if err != nil {
			return nil, err
		}
		if first == nil {
			first = fwk
		}
		sh.frameworks[prof.SchedulerName] = fwk
	}
	// Profiles share one queue per shard, so its order comes from the first
	// profile (the config loader insists they agree), while gates and
	// requeue hints come from every profile: a pod is gated by its own
	// profile's PreEnqueue plugins, and any profile's plugin may have
	// rejected a queued pod.
	hints := map[string][]framework.ClusterEventWithHint{}
	for _, fwk := range sh.frameworks {
		for plugin, events := range fwk.EventsToRegister() {
			if _, seen := hints[plugin]; !seen {
				hints[plugin] = events
			}
		}
	}
	less := first.QueueSortFunc()
	if _, ok := first.QueueSortPlugin().(*queuesort.PrioritySort); ok {
		less = nil // the queue's own, faster PrioritySort
	}
	sh.queue = queue.New(less,
		queue.WithQueueingHints(hints),
		queue.WithPreEnqueue(func(p *framework.Pod) *framework.Status {
			fwk := sh.frameworkFor(p)
			if fwk == nil {
				return nil
			}
			st := fwk.PreEnqueueCheck(p)
			if !st.IsSuccess() && st.Plugin() == names.Coscheduling {
				sh.recordGated(p, st.Message())
			}
			return st
		}),
	)
	return sh, nil
}

// recordGated stores why a pod waits at PreEnqueue (its pod group does not
// exist), where GetPod shows it; scheduling gates are left out, as their
// pod's own spec already says why it waits. It runs under the queue's lock,
// so the check and the write happen on their own goroutine.
func (sh *shard) recordGated(p *framework.Pod, msg string) {
	sh.s.binding.Add(1)
	go func() {
		defer sh.s.binding.Done()
		if !sh.newDiagnosis(p, msg) {
			return
		}
		wctx := sh.s.deadlines.context(time.Now())
		if err := sh.s.committer.RecordUnschedulable(wctx, p, Unschedulable{Message: msg}); err != nil {
			sh.s.metrics.statusWrite("error")
			return
		}
		sh.s.metrics.statusWrite("ok")
	}()
}

// filterPlugins names a profile's Filter plugins.
func (sh *shard) filterPlugins(fwk *fwruntime.Framework) map[string]struct{} {
	names := map[string]struct{}{}
	for _, name := range fwk.ListPlugins()["Filter"] {
		names[name] = struct{}{}
	}
	return names
}

func (sh *shard) frameworkFor(p *framework.Pod) *fwruntime.Framework {
	name := p.SchedulerName
	if name == "" {
		name = DefaultProfileName
	}
	return sh.frameworks[name]
}

// upsertPending records the latest state of an unbound pod, whose key is
// key, and queues it, unless it is being scheduled right now: then the
// attempt's end decides.
func (sh *shard) upsertPending(key string, p *framework.Pod) {
	sh.lock()
	defer sh.unlock()
	old := sh.pending[key]
	sh.pending[key] = p
	if _, busy := sh.inFlight[key]; busy {
		return
	}
	if !sh.s.OwnsPod(p) {
		return // another replica schedules it; kept for when we own it
	}
	if old == nil {
		sh.queue.Add(p)
		return
	}
	sh.queue.Update(old, p)
}

// forgetPending drops a pod, whose key is key, that was deleted or bound.
func (sh *shard) forgetPending(key string) {
	sh.lock()
	defer sh.unlock()
	old, ok := sh.pending[key]
	if !ok {
		return
	}
	sh.pending = framework.DeleteShrinking(sh.pending, key, &sh.pendingPeak)
	if _, busy := sh.inFlight[key]; !busy {
		sh.queue.Delete(old)
	}
}

func (sh *shard) run(ctx context.Context) {
	sh.queue.Run(ctx) // starts its own goroutine; Close waits for it
	stop := context.AfterFunc(ctx, sh.queue.Close)
	defer stop()
	for {
		qpi, err := sh.queue.Pop(ctx)
		if err != nil {
			return
		}
		if !sh.s.bindSlots.acquire(ctx) {
			return
		}
		sh.slot = true
		sh.cycleMu.Lock()
		sh.scheduleOne(ctx, qpi)
		sh.cycleMu.Unlock()
		if sh.slot {
			sh.s.bindSlots.release()
			sh.slot = false
		}
	}
}

// scheduleOne runs the scheduling cycle for one pod and, if a node was
// found, starts its binding cycle without waiting for the commit: the loop
// moves on while many commits share storage writes.
func (sh *shard) scheduleOne(ctx context.Context, qpi *framework.QueuedPodInfo) {
	key, shardID, epoch, ok := sh.claim(qpi)
	if !ok {
		return
	}
	ctx, end := sh.s.startCycle(ctx, qpi.Pod)
	defer end()
	pod := qpi.Pod
	start := time.Now()
	fwk := sh.frameworkFor(pod)
	if fwk == nil {
		sh.failed(qpi, &framework.FitError{Pod: pod, Diagnosis: framework.Diagnosis{
			PreFilterMsg: "no scheduling profile named " + pod.SchedulerName,
		}})
		sh.s.metrics.attempt("unschedulable", time.Since(start).Seconds())
		return
	}
	// Read before the snapshot, so anything placed while it is taken
	// counts as placed after it.
	placedBefore := sh.s.cache.Placements()
	if err := sh.s.cache.UpdateSnapshot(sh.snapshot); err != nil {
		sh.s.logger.Error("snapshot update failed", zap.Error(err))
		sh.retryLater(qpi)
		return
	}
	state := framework.NewCycleState()
	result, err := sh.algo.Schedule(ctx, fwk, state, qpi.PodInfo)
	if errors.Is(err, framework.ErrNoNodesAvailable) {
		// Not a fault: the cluster is empty. Park the pod until a node
		// arrives instead of retrying it in a loop; every filter plugin is
		// named as rejecting so a node event for any of them wakes it.
		err = &framework.FitError{Pod: pod, Diagnosis: framework.Diagnosis{
			UnschedulablePlugins: sh.filterPlugins(fwk),
			PreFilterMsg:         "no nodes registered",
		}}
	}
	if err != nil {
		var fitErr *framework.FitError
		if errors.As(err, &fitErr) {
			sh.unschedulable(ctx, fwk, state, placedBefore, start, qpi, fitErr)
			return
		}
		sh.s.metrics.attempt("error", time.Since(start).Seconds())
		sh.s.logger.Error("scheduling attempt failed", zap.String("pod", key), zap.Error(err))
		sh.retryLater(qpi)
		return
	}
	sh.assumeAndBind(ctx, fwk, state, placedBefore, start, qpi, key, result.SuggestedHost, shardID, epoch)
}

// claim marks qpi's pod in flight, as its latest stored copy, and returns
// its key. It is false, and the attempt over, if the pod was deleted or
// replaced while queued, or its shard moved away meanwhile.
func (sh *shard) claim(qpi *framework.QueuedPodInfo) (key string, shardID int, epoch int64, ok bool) {
	pod := qpi.Pod
	key = pod.Key()
	sh.lock()
	if latest, ok := sh.pending[key]; !ok || latest.UID != pod.UID {
		sh.unlock()
		sh.queue.Done(key)
		return "", 0, 0, false
	} else if latest != pod {
		qpi.PodInfo = qpi.PodInfo.WithPod(latest)
		pod = latest
	}
	shardID = sh.s.ShardOf(pod)
	epoch, owned := sh.s.epochOf(shardID)
	if !owned {
		sh.unlock()
		sh.queue.Done(key)
		return "", 0, 0, false
	}
	sh.inFlight[key] = pod
	sh.unlock()
	return key, shardID, epoch, true
}

// assumeAndBind charges the pod, whose key is key, to node, runs Reserve
// and Permit, and starts the binding cycle without waiting for it.
func (sh *shard) assumeAndBind(ctx context.Context, fwk *fwruntime.Framework, state *framework.CycleState, placedBefore int64,
	start time.Time, qpi *framework.QueuedPodInfo, key, node string, shardID int, epoch int64) {
	pod := qpi.Pod
	assumed := assumedCopy(pod, node, shardID, epoch)
	assumedInfo := qpi.PodInfo.WithPod(assumed)
	assumption, err := sh.assume(ctx, fwk, state, placedBefore, qpi.PodInfo, assumedInfo)
	if err != nil {
		// Another shard filled the node after our snapshot: try again now,
		// against a fresher snapshot, with no backoff.
		sh.s.metrics.conflict()
		sh.settle(key, func() { sh.queue.Requeue(qpi) })
		return
	}
	// Assumed, the pod is charged to its node; a nomination would charge
	// it again in every other pod's filters until the watch confirms the
	// binding. Kubernetes drops it at assume too.
	sh.s.nominator.forget(pod)
	if st := fwk.RunReservePluginsReserve(ctx, state, assumed, node); !st.IsSuccess() {
		fwk.RunReservePluginsUnreserve(ctx, state, assumed, node)
		sh.forget(assumed)
		sh.s.metrics.attempt("error", time.Since(start).Seconds())
		sh.retryLater(qpi)
		return
	}
	st := fwk.RunPermitPlugins(ctx, state, assumed, node)
	if st.IsWait() {
		sh.s.groups.writeHeld(assumed)
	} else if !st.IsSuccess() {
		fwk.RunReservePluginsUnreserve(ctx, state, assumed, node)
		sh.forget(assumed)
		sh.s.metrics.attempt("unschedulable", time.Since(start).Seconds())
		sh.retryLater(qpi)
		return
	}
	sh.s.metrics.attempt("scheduled", time.Since(start).Seconds())

	bindCtx := sh.s.bindContext(ctx)
	// A binding waiting at Permit takes no slot (see bindSlots).
	slot := sh.slot && !st.IsWait()
	if slot {
		sh.slot = false
	}
	sh.s.binding.Add(1)
	go func() {
		defer sh.s.binding.Done()
		if slot {
			defer sh.s.bindSlots.release()
		}
		sh.bind(bindCtx, fwk, state, qpi, key, assumed, assumption)
	}()
}

// retryLater sends a pod that failed for a transient reason to backoff.
func (sh *shard) retryLater(qpi *framework.QueuedPodInfo) {
	qpi.UnschedulablePlugins = nil
	qpi.PendingPlugins = nil
	sh.settle(qpi.Pod.Key(), func() {
		if err := sh.queue.AddUnschedulableIfNotPresent(qpi); err != nil {
			sh.s.logger.Warn("requeue pod", zap.String("pod", qpi.Pod.Key()), zap.Error(err))
		}
	})
}

// settle ends a pod's attempt. If the stored pod changed meanwhile (deleted,
// replaced, or a newer record), that newer truth wins over requeue; a pod
// neither pending nor bound any more is simply dropped.
//
// A successful binding (requeue nil) does not wait for mu: a group commit
// ends hundreds of attempts at once, and they queued on mu ahead of the
// loop's next claim. When mu is busy the key is left for its holder, who
// settles it before unlocking (see unlock), so every holder of mu still
// finds the attempts that ended before it locked settled.
func (sh *shard) settle(key string, requeue func()) {
	switch {
	case requeue != nil:
		sh.lock()
	case sh.mu.TryLock():
		sh.settleLeftLocked()
	default:
		sh.leftSettled.Push(key)
		// The holder may have unlocked before the push: then no one
		// else is bound to see it.
		if sh.mu.TryLock() {
			sh.unlock()
		}
		return
	}
	sh.settleLocked(key, requeue)
	sh.unlock()
}

// settleLocked is settle's work, under mu. The queue's Done does not wait
// for its lock, so it may run under mu.
func (sh *shard) settleLocked(key string, requeue func()) {
	attempted := sh.inFlight[key]
	sh.inFlight = framework.DeleteShrinking(sh.inFlight, key, &sh.inFlightPeak)
	latest, pending := sh.pending[key]
	switch {
	case pending && !sh.s.OwnsPod(latest):
		// The shard moved during the attempt: its new owner schedules it.
	case !pending:
		// Bound (by this attempt or otherwise) or deleted. A nomination
		// this attempt recorded after the pod's delete cleared it would
		// otherwise hold its node's room for good.
		if attempted != nil {
			sh.s.nominator.forget(attempted)
		}
	case attempted == nil || latest.UID != attempted.UID:
		sh.queue.Add(latest)
	case requeue != nil:
		requeue()
	case latest != attempted:
		// A bind conflict whose cause the watch already delivered.
		sh.queue.Add(latest)
	}
	sh.queue.Done(key)
}

// lock takes mu and settles the attempts left meanwhile.
func (sh *shard) lock() {
	sh.mu.Lock()
	sh.settleLeftLocked()
}

// unlock settles what was left while mu was held, then releases it, and
// takes it back for anything left in between: a settle that found mu
// busy returns at once, so someone must apply it.
func (sh *shard) unlock() {
	for {
		sh.settleLeftLocked()
		sh.mu.Unlock()
		if sh.leftSettled.Empty() || !sh.mu.TryLock() {
			return
		}
	}
}

func (sh *shard) settleLeftLocked() {
	sh.leftSettled.Drain(func(key string) { sh.settleLocked(key, nil) })
}
