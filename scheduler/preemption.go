package scheduler

import (
	"context"
	"sort"
	"sync"

	"github.com/berth-io/berth/scheduler/framework"
	fwruntime "github.com/berth-io/berth/scheduler/framework/runtime"
	"github.com/berth-io/berth/scheduler/plugins/defaultpreemption"
	"github.com/berth-io/berth/scheduler/plugins/names"
)

// nominator remembers which pods preemption nominated to which node, so
// every shard's filters count them and nobody else takes the room being
// freed. It is shared by all shards: they share the nodes.
type nominator struct {
	mu     sync.RWMutex
	byNode map[string]map[string]*framework.PodInfo // node -> pod key -> pod
	nodeOf map[string]string                        // pod key -> node
}

var _ framework.PodNominator = (*nominator)(nil)

func newNominator() *nominator {
	return &nominator{byNode: map[string]map[string]*framework.PodInfo{}, nodeOf: map[string]string{}}
}

// NominatedPodsForNode implements framework.PodNominator.
func (n *nominator) NominatedPodsForNode(node string) []*framework.PodInfo {
	n.mu.RLock()
	defer n.mu.RUnlock()
	pods := n.byNode[node]
	if len(pods) == 0 {
		return nil
	}
	out := make([]*framework.PodInfo, 0, len(pods))
	for _, pi := range pods {
		out = append(out, pi)
	}
	// Filters add nominated pods in order; keep it stable.
	sort.Slice(out, func(i, j int) bool { return out[i].Pod.Key() < out[j].Pod.Key() })
	return out
}

// set nominates pi to node, replacing any earlier nomination; node ""
// clears it.
func (n *nominator) set(pi *framework.PodInfo, node string) {
	key := pi.Pod.Key()
	n.mu.Lock()
	defer n.mu.Unlock()
	if old, ok := n.nodeOf[key]; ok {
		delete(n.byNode[old], key)
		if len(n.byNode[old]) == 0 {
			delete(n.byNode, old)
		}
		delete(n.nodeOf, key)
	}
	if node == "" {
		return
	}
	if n.byNode[node] == nil {
		n.byNode[node] = map[string]*framework.PodInfo{}
	}
	n.byNode[node][key] = pi
	n.nodeOf[key] = node
}

func (n *nominator) forget(p *framework.Pod) {
	n.set(&framework.PodInfo{Pod: p}, "")
}

// lookup returns the pod's nomination, if any: the recorded pod and node.
func (n *nominator) lookup(key string) (*framework.PodInfo, string) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	node, ok := n.nodeOf[key]
	if !ok {
		return nil, ""
	}
	return n.byNode[node][key], node
}

// nominatingEvictor records the preemptor's nomination before the victims
// are marked: the orchestrator may delete them, and the watch free their
// room, before Evict even returns, and until the nomination is recorded
// any pod of any shard could take that room. Once it is recorded, other
// preemptions may go ahead (see withPreemptionSlot) while the victims are
// written.
type nominatingEvictor struct {
	nominator *nominator
	next      framework.Evictor
}

var _ framework.Evictor = nominatingEvictor{}

// Evict implements framework.Evictor.
func (e nominatingEvictor) Evict(ctx context.Context, preemptor *framework.Pod, node string, victims []*framework.Pod) error {
	nominated := *preemptor
	nominated.NominatedNodeName = node
	e.nominator.set(framework.NewPodInfo(&nominated), node)
	if release, ok := ctx.Value(preemptionSlotKey{}).(func()); ok {
		release()
	}
	return e.next.Evict(ctx, preemptor, node, victims)
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

// withPreemptionArgs gives each profile's DefaultPreemption what only the
// scheduler has: the evictor, the budgets, and what counts as terminating.
// Profiles are copied, not changed: they may come from a shared config.
func (s *Scheduler) withPreemptionArgs(profiles []*fwruntime.Profile) []*fwruntime.Profile {
	out := make([]*fwruntime.Profile, len(profiles))
	for i, p := range profiles {
		cp := *p
		cp.PluginArgs = map[string]any{}
		for k, v := range p.PluginArgs {
			cp.PluginArgs[k] = v
		}
		var args defaultpreemption.Args
		switch a := p.PluginArgs[names.DefaultPreemption].(type) {
		case *defaultpreemption.Args:
			args = *a
		case defaultpreemption.Args:
			args = a
		}
		args.Evictor = nominatingEvictor{nominator: s.nominator, next: s.committer}
		args.Budgets = &s.budgets
		// A victim marked for eviction still holds its node until the
		// orchestrator deletes it; preempting again for the same room
		// would only pick more victims.
		args.Terminating = func(p *framework.Pod) bool { return p.PreemptedBy != "" }
		cp.PluginArgs[names.DefaultPreemption] = &args
		out[i] = &cp
	}
	return out
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
