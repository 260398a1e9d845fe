package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/scheduler"
	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/store"
)

// committer writes the core's decisions through the store's group commit:
// concurrent binding cycles share etcd Txns.
type committer struct{ store *store.Store }

var _ scheduler.Committer = committer{}

func sourceOf(p *framework.Pod) (*berthv1.Pod, error) {
	src, ok := p.Source.(*berthv1.Pod)
	if !ok || src == nil {
		return nil, fmt.Errorf("server: pod %s has no stored record", p.Key())
	}
	return proto.Clone(src).(*berthv1.Pod), nil
}

func (c committer) update(ctx context.Context, p *framework.Pod, next *berthv1.Pod) error {
	res := c.store.UpdatePods(ctx, []store.PodUpdate{{Pod: next, ExpectedModRevision: p.Revision}})[0]
	if errors.Is(res.Err, store.ErrConflict) {
		return fmt.Errorf("%w: %v", scheduler.ErrCommitConflict, res.Err)
	}
	return res.Err
}

// Bind records pod -> node if the pod is still the one that was scheduled,
// nobody else added to the node since the placement's view, and this
// replica still owns the pod's shard.
func (c committer) Bind(ctx context.Context, p *framework.Pod, nodeName string) error {
	b, err := c.binding(p, nodeName)
	if err != nil {
		return err
	}
	res := c.store.Bind(ctx, []store.Binding{b})[0]
	return coreConflict(res.Err)
}

// binding builds the store's binding of p to nodeName.
func (c committer) binding(p *framework.Pod, nodeName string) (store.Binding, error) {
	next, err := sourceOf(p)
	if err != nil {
		return store.Binding{}, err
	}
	next.NodeName = nodeName
	next.Status = &berthv1.PodStatus{
		Phase:       berthv1.PodPhase_POD_PHASE_BOUND,
		StartTime:   timestamppb.Now(),
		ScheduledBy: c.store.ReplicaID(),
		Rejections:  next.GetStatus().GetRejections(), // kept for the pod's life
	}
	return store.Binding{
		Pod:                 next,
		ExpectedModRevision: p.Revision,
		ViewRevision:        p.ViewRevision,
		Shard:               p.Shard,
		ShardEpoch:          p.ShardEpoch,
	}, nil
}

// RecordUnschedulable stores the diagnosis where GetPod shows it.
func (c committer) RecordUnschedulable(ctx context.Context, p *framework.Pod, why scheduler.Unschedulable) error {
	next, err := sourceOf(p)
	if err != nil {
		return err
	}
	diag := &berthv1.SchedulingDiagnosis{NodesEvaluated: int32(why.NumNodes), Time: timestamppb.New(time.Now())}
	for _, rc := range why.Reasons {
		diag.Reasons = append(diag.Reasons, &berthv1.ReasonCount{Plugin: rc.Plugin, Reason: rc.Reason, NodeCount: int32(rc.Count)})
	}
	next.Status = &berthv1.PodStatus{
		Phase:             berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE,
		Message:           why.Message,
		NominatedNodeName: p.NominatedNodeName,
		Diagnosis:         diag,
		Rejections:        next.GetStatus().GetRejections(),
	}
	return c.update(ctx, p, next)
}

// Evict marks each victim with its preemptor. The mark is the durable
// record that WatchBindings turns into an EVICT event; the victim keeps its
// node until the orchestrator deletes it. A victim deleted meanwhile needs
// no mark.
func (c committer) Evict(ctx context.Context, preemptor *framework.Pod, _ string, victims []*framework.Pod) error {
	by := preemptor.Key()
	mark := func(p *berthv1.Pod) error {
		if p.Status == nil {
			p.Status = &berthv1.PodStatus{}
		}
		p.Status.PreemptedBy = by
		return nil
	}
	// Marks go out together from the records the cache holds; a victim
	// that changed since is read and marked again on its own.
	updates := make([]store.PodUpdate, 0, len(victims))
	var stale []*framework.Pod
	for _, v := range victims {
		next, err := sourceOf(v)
		if err != nil {
			stale = append(stale, v)
			continue
		}
		_ = mark(next)
		updates = append(updates, store.PodUpdate{Pod: next, ExpectedModRevision: v.Revision})
	}
	var errs []error
	for i, res := range c.store.UpdatePods(ctx, updates) {
		switch {
		case res.Err == nil:
		case errors.Is(res.Err, store.ErrConflict):
			stale = append(stale, victimOf(victims, updates[i].Pod))
		default:
			errs = append(errs, fmt.Errorf("evict %s/%s: %w", updates[i].Pod.GetNamespace(), updates[i].Pod.GetName(), res.Err))
		}
	}
	for _, v := range stale {
		if _, _, err := c.store.UpdatePod(ctx, v.Namespace, v.Name, v.UID, mark); err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, fmt.Errorf("evict %s: %w", v.Key(), err))
		}
	}
	return errors.Join(errs...)
}

// victimOf finds the core pod a wire update was made from.
func victimOf(victims []*framework.Pod, p *berthv1.Pod) *framework.Pod {
	for _, v := range victims {
		if v.Namespace == p.GetNamespace() && v.Name == p.GetName() {
			return v
		}
	}
	return &framework.Pod{Namespace: p.GetNamespace(), Name: p.GetName(), UID: p.GetUid()}
}

func budgetToCore(b *berthv1.DisruptionBudget) framework.DisruptionBudget {
	return framework.DisruptionBudget{
		Namespace:          b.GetNamespace(),
		Selector:           labelSelectorToCore(b.GetSelector()),
		DisruptionsAllowed: b.GetAllowedDisruptions(),
	}
}

// syncer feeds the store's watch into the scheduling core, converting as it
// goes.
type syncer struct {
	sched    *scheduler.Scheduler
	ready    chan struct{}
	revision func(int64)
	// syncerLeaseState: node revisions and leases (nodeleases.go).
	syncerLeaseState
}

var (
	_ store.SyncHandler    = (*syncer)(nil)
	_ store.BudgetHandler  = (*syncer)(nil)
	_ store.AppliedHandler = (*syncer)(nil)
)

// Applied tells the core how far its view reaches, for the commits' node
// fences.
func (s *syncer) Applied(rev int64) { s.sched.SetViewRevision(rev) }

func (s *syncer) BudgetsReset(budgets []*berthv1.DisruptionBudget) {
	m := make(map[string]framework.DisruptionBudget, len(budgets))
	for _, b := range budgets {
		m[b.GetNamespace()+"/"+b.GetName()] = budgetToCore(b)
	}
	s.sched.ResetBudgets(m)
}

func (s *syncer) BudgetPut(b *berthv1.DisruptionBudget, rev int64) {
	s.sched.UpsertBudget(b.GetNamespace()+"/"+b.GetName(), budgetToCore(b))
	s.revision(rev)
}

func (s *syncer) BudgetDeleted(namespace, name string, rev int64) {
	s.sched.DeleteBudget(namespace + "/" + name)
	s.revision(rev)
}

func (s *syncer) Reset(nodes []*berthv1.Node, pods []store.PodRecord, rev int64) {
	cn := make([]*framework.Node, len(nodes))
	for i, n := range nodes {
		cn[i] = s.nodes.put(n, s.nodes.listed[n.GetName()])
	}
	cp := make([]*framework.Pod, len(pods))
	for i, p := range pods {
		cp[i] = podToCore(p.Pod, p.ModRevision)
	}
	s.sched.Reset(cn, cp)
	s.checkLost(cp...)
	s.revision(rev)
	select {
	case <-s.ready:
	default:
		close(s.ready)
	}
}

func (s *syncer) NodePut(n *berthv1.Node, rev int64) {
	s.sched.UpsertNodeRecord(s.nodes.put(n, rev))
	s.revision(rev)
}

func (s *syncer) NodeDeleted(name string, rev int64) {
	s.nodes.forget(name)
	s.sched.DeleteNode(name)
	s.revision(rev)
}

func (s *syncer) PodPut(p store.PodRecord, _ *berthv1.Pod) {
	cp := podToCore(p.Pod, p.ModRevision)
	s.sched.UpsertPod(cp)
	s.checkLost(cp)
	s.revision(p.ModRevision)
}

func (s *syncer) PodDeleted(prev *berthv1.Pod, rev int64) {
	if prev != nil {
		s.sched.DeletePod(podToCore(prev, rev))
	}
	s.revision(rev)
}

// coreConflict translates the store's conflicts into the core's.
func coreConflict(err error) error {
	var stale *store.StaleViewError
	switch {
	case errors.As(err, &stale):
		return &scheduler.NodeChargedError{Revision: stale.Revision}
	case errors.Is(err, store.ErrConflict):
		return fmt.Errorf("%w: %v", scheduler.ErrCommitConflict, err)
	}
	return err
}
