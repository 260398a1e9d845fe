package scheduler

import (
	"context"
	"sync"

	"github.com/berth-io/berth/scheduler/framework"
	fwruntime "github.com/berth-io/berth/scheduler/framework/runtime"
)

// victimGone retries the pod whose last victim p was, ahead of the pods
// of its priority that arrived after it: its room is free now, and waiting
// out its backoff or a backlog would only keep that room idle (Kubernetes
// requeues it on the deletion too, but after backoff and at the back).
// Called for every pod deleted from a node.
func (s *Scheduler) victimGone(p *framework.Pod) {
	if preemptor := s.nominator.victimGone(p); preemptor != nil {
		s.shardFor(preemptor).queue.Promote(preemptor.Key())
	}
}

// unnominateLower clears the nominations to node of pods less important
// than preemptor, as kube does after preempting there: the room they were
// promised is the preemptor's now, and the dry run that chose node did not
// leave room for them. They are retried at once to look elsewhere; their
// own victims, already marked, still go.
func (s *Scheduler) unnominateLower(preemptor *framework.Pod, node string) {
	for _, p := range framework.LowerPriorityNominatedPods(s.nominator, preemptor, node) {
		s.nominator.forget(p)
		s.shardFor(p).queue.Activate(p.Key())
	}
}

// nominatingEvictor records the preemptor's nomination before the victims
// are marked: the orchestrator may delete them, and the watch free their
// room, before Evict even returns, and until the nomination is recorded
// any pod of any shard could take that room. Once it is recorded, other
// preemptions may go ahead (see withPreemptionSlot) while the victims are
// written. When ctx carries a deferredEviction (see withDeferredEviction),
// the write is left in it for the caller to do off the scheduling loop.
type nominatingEvictor struct {
	nominator *nominator
	next      framework.Evictor
}

var (
	_ framework.Evictor         = nominatingEvictor{}
	_ framework.EvictionTracker = nominatingEvictor{}
)

// Terminating implements framework.EvictionTracker. A victim marked for
// eviction still holds its node until the orchestrator deletes it;
// preempting again for the same room would only pick more victims.
func (nominatingEvictor) Terminating(p *framework.Pod) bool { return p.PreemptedBy() != "" }

// Evict implements framework.Evictor.
func (e nominatingEvictor) Evict(ctx context.Context, preemptor *framework.Pod, node string, victims []*framework.Pod) error {
	nominated := *preemptor
	nominated.EditExtras().NominatedNodeName = node
	e.nominator.nominate(framework.NewPodInfo(&nominated), node, victims)
	if release, ok := ctx.Value(preemptionSlotKey{}).(func()); ok {
		release()
	}
	if d, ok := ctx.Value(deferredEvictionKey{}).(*deferredEviction); ok {
		d.write = func(ctx context.Context) error { return e.next.Evict(ctx, preemptor, node, victims) }
		return nil
	}
	return e.next.Evict(ctx, preemptor, node, victims)
}

type deferredEvictionKey struct{}

// deferredEviction is the write of one preemption's victim marks, left for
// the caller once the nomination is recorded. Writing them waits for etcd;
// a shard loop that waited too would serialise every preemptor of the
// shard behind that round trip (Kubernetes makes the same calls
// asynchronously since its async preemption).
type deferredEviction struct {
	write func(ctx context.Context) error // nil: nothing to write
	// prevPI and prevNode are the pod's nomination before this preemption,
	// put back if the write fails.
	prevPI   *framework.PodInfo
	prevNode string
}

// withDeferredEviction makes nominatingEvictor leave its write in the
// returned deferredEviction instead of doing it.
func withDeferredEviction(ctx context.Context) (context.Context, *deferredEviction) {
	d := &deferredEviction{}
	return context.WithValue(ctx, deferredEvictionKey{}, d), d
}

type preemptionSlotKey struct{}

// withPreemptionSlot takes the scheduler's preemption lock, which makes
// each preemption's dry run see the nominations of all earlier ones, so two
// shards never pick the same room. The returned release is idempotent; it
// is also carried in ctx so the evictor can let the next preemption in as
// soon as the nomination is recorded, not after the victims' writes.
func (s *Scheduler) withPreemptionSlot(ctx context.Context) (context.Context, func()) {
	s.preemptMu.Lock()
	release := sync.OnceFunc(s.preemptMu.Unlock)
	return context.WithValue(ctx, preemptionSlotKey{}, release), release
}

// budgetSet is the cluster's disruption budgets, fed by the store's watch.
type budgetSet struct {
	mu sync.RWMutex
	m  map[string]framework.DisruptionBudget
}

var _ framework.BudgetLister = (*budgetSet)(nil)

// List implements framework.BudgetLister.
func (b *budgetSet) List() []framework.DisruptionBudget {
	b.mu.RLock()
	defer b.mu.RUnlock()
	out := make([]framework.DisruptionBudget, 0, len(b.m))
	for _, db := range b.m {
		out = append(out, db)
	}
	return out
}

// ResetBudgets replaces every disruption budget, keyed by namespace/name.
func (s *Scheduler) ResetBudgets(budgets map[string]framework.DisruptionBudget) {
	s.budgets.mu.Lock()
	s.budgets.m = budgets
	s.budgets.mu.Unlock()
}

// UpsertBudget adds or replaces the budget namespace/name.
func (s *Scheduler) UpsertBudget(key string, b framework.DisruptionBudget) {
	s.budgets.mu.Lock()
	if s.budgets.m == nil {
		s.budgets.m = map[string]framework.DisruptionBudget{}
	}
	s.budgets.m[key] = b
	s.budgets.mu.Unlock()
}

// DeleteBudget removes the budget namespace/name.
func (s *Scheduler) DeleteBudget(key string) {
	s.budgets.mu.Lock()
	delete(s.budgets.m, key)
	s.budgets.mu.Unlock()
}

// preempter is what Explain needs of a PostFilter plugin: a dry run.
type preempter interface {
	Preempt(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, m framework.NodeToStatusReader, dryRun bool) (string, []*framework.Pod, *framework.Status)
}

// explainPreemption dry-runs the profile's preemption for a pod that fits
// nowhere: which node it would nominate and whom it would evict.
func explainPreemption(ctx context.Context, fwk *fwruntime.Framework, pod *framework.PodInfo, fitErr *framework.FitError) *PreemptionPlan {
	for _, pl := range fwk.PostFilterPlugins() {
		p, ok := pl.(preempter)
		if !ok {
			continue
		}
		state := framework.NewCycleState()
		if _, st, _ := fwk.RunPreFilterPlugins(ctx, state, pod); !st.IsSuccess() && !st.IsRejected() {
			return &PreemptionPlan{Message: st.Message()}
		}
		node, victims, st := p.Preempt(ctx, state, pod, fitErr.Diagnosis.NodeToStatus, true)
		if node == "" {
			return &PreemptionPlan{Message: st.Message()}
		}
		return &PreemptionPlan{Node: node, Victims: victims}
	}
	return nil
}
