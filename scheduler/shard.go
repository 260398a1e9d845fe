package scheduler

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/berth-io/berth/scheduler/algorithm"
	"github.com/berth-io/berth/scheduler/cache"
	"github.com/berth-io/berth/scheduler/framework"
	fwruntime "github.com/berth-io/berth/scheduler/framework/runtime"
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
	algo       *algorithm.Scheduler
	frameworks map[string]*fwruntime.Framework

	// cycleMu serialises scheduling cycles with Explain dry runs, which
	// share the snapshot, the algorithm's rotating window and its random
	// source. Lock order: cycleMu, then mu.
	cycleMu sync.Mutex
	// mu guards pending and inFlight. Lock order: mu, then the queue's lock.
	mu sync.Mutex
	// pending holds the latest stored record of every unbound pod of this
	// shard: the truth the queue is derived from.
	pending map[string]*framework.Pod
	// inFlight holds pods popped and not yet settled (scheduling or binding).
	inFlight map[string]*framework.Pod
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
	sh.queue = queue.New(first.QueueSortFunc(),
		queue.WithQueueingHints(hints),
		queue.WithPreEnqueue(func(p *framework.Pod) *framework.Status {
			if fwk := sh.frameworkFor(p); fwk != nil {
				return fwk.PreEnqueueCheck(p)
			}
			return nil
		}),
	)
	return sh, nil
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

// upsertPending records the latest state of an unbound pod and queues it,
// unless it is being scheduled right now: then the attempt's end decides.
func (sh *shard) upsertPending(p *framework.Pod) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	old := sh.pending[p.Key()]
	sh.pending[p.Key()] = p
	if _, busy := sh.inFlight[p.Key()]; busy {
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

// forgetPending drops a pod that was deleted or bound.
func (sh *shard) forgetPending(p *framework.Pod) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	old, ok := sh.pending[p.Key()]
	if !ok {
		return
	}
	delete(sh.pending, p.Key())
	if _, busy := sh.inFlight[p.Key()]; !busy {
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
		sh.cycleMu.Lock()
		sh.scheduleOne(ctx, qpi)
		sh.cycleMu.Unlock()
	}
}

// scheduleOne runs the scheduling cycle for one pod and, if a node was
// found, starts its binding cycle without waiting for the commit: the loop
// moves on while many commits share storage writes.
func (sh *shard) scheduleOne(ctx context.Context, qpi *framework.QueuedPodInfo) {
	pod := qpi.Pod
	key := pod.Key()
	sh.mu.Lock()
	if latest, ok := sh.pending[key]; !ok || latest.UID != pod.UID {
		// Deleted or replaced while queued.
		sh.mu.Unlock()
		sh.queue.Done(key)
		return
	} else if latest != pod {
		qpi.PodInfo = withPod(qpi.PodInfo, latest)
		pod = latest
	}
	shardID := sh.s.ShardOf(pod)
	epoch, owned := sh.s.epochOf(shardID)
	if !owned {
		// The shard moved away while the pod was queued.
		sh.mu.Unlock()
		sh.queue.Done(key)
		return
	}
	sh.inFlight[key] = pod
	sh.mu.Unlock()

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

	assumed := *pod
	assumed.NodeName = result.SuggestedHost
	assumed.Shard, assumed.ShardEpoch = shardID, epoch
	assumedInfo := withPod(qpi.PodInfo, &assumed)
	if err := sh.assume(ctx, fwk, state, placedBefore, qpi.PodInfo, assumedInfo); err != nil {
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
	if st := fwk.RunReservePluginsReserve(ctx, state, &assumed, result.SuggestedHost); !st.IsSuccess() {
		fwk.RunReservePluginsUnreserve(ctx, state, &assumed, result.SuggestedHost)
		sh.forget(&assumed)
		sh.s.metrics.attempt("error", time.Since(start).Seconds())
		sh.retryLater(qpi)
		return
	}
	if st := fwk.RunPermitPlugins(ctx, state, &assumed, result.SuggestedHost); st.IsWait() {
		sh.s.groups.writeHeld(&assumed)
	} else if !st.IsSuccess() {
		fwk.RunReservePluginsUnreserve(ctx, state, &assumed, result.SuggestedHost)
		sh.forget(&assumed)
		sh.s.metrics.attempt("unschedulable", time.Since(start).Seconds())
		sh.retryLater(qpi)
		return
	}
	sh.s.metrics.attempt("scheduled", time.Since(start).Seconds())

	sh.s.binding.Add(1)
	go func() {
		defer sh.s.binding.Done()
		sh.bind(fwk, state, qpi, &assumed)
	}()
}

// assume charges the pod to its chosen node. The cache re-checks room and
// ports against live state, which settles races between shards for those.
// Constraints that span pods (inter-pod affinity and anti-affinity, either
// the pod's own or existing pods' against it, and hard topology spreading)
// can be broken by pods another shard placed after this cycle's snapshot.
// For pods they apply to, those placements are folded into a copy of the
// cycle's state (as Kubernetes adds nominated pods) and the chosen node is
// filtered again on its live NodeInfo. Every assumption holds placeMu, so
// nothing is placed between that re-check and this assumption.
func (sh *shard) assume(ctx context.Context, fwk *fwruntime.Framework, state *framework.CycleState, placedBefore int64, pi, assumedInfo *framework.PodInfo) error {
	sh.s.placeMu.Lock()
	defer sh.s.placeMu.Unlock()
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
			return fmt.Errorf("%w: %v", cache.ErrConflict, err)
		}
	}
	// Read before the cache's check: everything up to this revision is in
	// the NodeInfo it checks against, so the commit may fence on it.
	assumedInfo.Pod.ViewRevision = sh.s.view.Load()
	return sh.s.cache.AssumePod(assumedInfo)
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

// bind runs the binding cycle. It uses its own context: a shutdown must
// not abandon a commit halfway, and Run waits for these to end.
func (sh *shard) bind(fwk *fwruntime.Framework, state *framework.CycleState, qpi *framework.QueuedPodInfo, assumed *framework.Pod) {
	ctx, cancel := context.WithTimeout(context.Background(), sh.s.cfg.BindTimeout)
	defer cancel()
	start := time.Now()
	node := assumed.NodeName
	st := fwk.WaitOnPermit(ctx, assumed)
	if st.IsSuccess() {
		st = fwk.RunPreBindPlugins(ctx, state, assumed, node)
	}
	st = sh.bindStep(ctx, fwk, state, assumed, st) // Bind plugins, or a gang's joint commit: gang.go
	if !st.IsSuccess() {
		fwk.RunReservePluginsUnreserve(ctx, state, assumed, node)
		sh.forget(assumed)
		if errors.Is(st.AsError(), ErrConflict) {
			// The pod changed, another writer added to the node, or the
			// shard moved. The watch brings the news; retry at once
			// against it (settle drops the pod if the shard is gone).
			sh.s.metrics.bindError("conflict")
			retry := func() { sh.queue.Requeue(qpi) }
			if stale := (*StaleViewError)(nil); errors.As(st.AsError(), &stale) {
				retry = func() { sh.s.afterView(stale.Revision, func() { sh.queue.Requeue(qpi) }) }
			}
			sh.settle(assumed.Key(), retry)
			return
		}
		sh.s.metrics.bindError("error")
		sh.s.logger.Warn("binding failed", zap.String("pod", assumed.Key()), zap.String("node", node), zap.Error(st.AsError()))
		sh.retryLater(qpi)
		return
	}
	// The watch may already have confirmed the binding: not an error.
	if err := sh.s.cache.FinishBinding(assumed); err != nil && !errors.Is(err, cache.ErrNotAssumed) {
		sh.s.logger.Warn("finish binding", zap.String("pod", assumed.Key()), zap.Error(err))
	}
	fwk.RunPostBindPlugins(ctx, state, assumed, node)
	e2e := time.Since(qpi.Timestamp)
	if qpi.InitialAttemptTimestamp != nil {
		e2e = time.Since(*qpi.InitialAttemptTimestamp)
	}
	sh.s.metrics.bound(time.Since(start).Seconds(), e2e.Seconds())
	sh.settle(assumed.Key(), nil)
}

func (sh *shard) forget(assumed *framework.Pod) {
	if err := sh.s.cache.ForgetPod(assumed); err != nil {
		sh.s.logger.Warn("forget assumed pod", zap.String("pod", assumed.Key()), zap.Error(err))
	}
}

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
	sh.mu.Lock()
	if latest, ok := sh.pending[pod.Key()]; ok {
		recorded = latest
	}
	sh.mu.Unlock()
	return msg != recorded.StatusMessage || recorded.Phase != framework.PodUnschedulable ||
		pod.NominatedNodeName != recorded.NominatedNodeName
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
			wctx, cancel := context.WithTimeout(context.Background(), sh.s.cfg.BindTimeout)
			defer cancel()
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
	nominated.NominatedNodeName = node
	pi := withPod(qpi.PodInfo, &nominated)
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
func (sh *shard) settle(key string, requeue func()) {
	sh.mu.Lock()
	attempted := sh.inFlight[key]
	delete(sh.inFlight, key)
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
	sh.mu.Unlock()
	sh.queue.Done(key)
}

// withPod returns a copy of pi describing p, keeping the precomputed parts:
// only the pod's node or stored revision differ.
func withPod(pi *framework.PodInfo, p *framework.Pod) *framework.PodInfo {
	c := *pi
	c.Pod = p
	return &c
}
