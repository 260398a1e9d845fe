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
		return fmt.Errorf("%w: %v", scheduler.ErrConflict, res.Err)
	}
	return res.Err
}

// Bind records pod -> node if the pod is still the one that was scheduled.
func (c committer) Bind(ctx context.Context, p *framework.Pod, nodeName string) error {
	next, err := sourceOf(p)
	if err != nil {
		return err
	}
	next.NodeName = nodeName
	next.Status = &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_BOUND, StartTime: timestamppb.Now()}
	return c.update(ctx, p, next)
}

// RecordUnschedulable stores the diagnosis where GetPod shows it.
func (c committer) RecordUnschedulable(ctx context.Context, p *framework.Pod, fitErr *framework.FitError) error {
	next, err := sourceOf(p)
	if err != nil {
		return err
	}
	diag := &berthv1.SchedulingDiagnosis{NodesEvaluated: int32(fitErr.NumAllNodes), Time: timestamppb.New(time.Now())}
	for _, rc := range fitErr.ReasonCounts() {
		diag.Reasons = append(diag.Reasons, &berthv1.ReasonCount{Plugin: rc.Plugin, Reason: rc.Reason, NodeCount: int32(rc.Count)})
	}
	next.Status = &berthv1.PodStatus{
		Phase:             berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE,
		Message:           fitErr.Error(),
		NominatedNodeName: p.NominatedNodeName,
		Diagnosis:         diag,
	}
	return c.update(ctx, p, next)
}

// syncer feeds the store's watch into the scheduling core, converting as it
// goes.
type syncer struct {
	sched    *scheduler.Scheduler
	ready    chan struct{}
	revision func(int64)
}

var _ store.SyncHandler = (*syncer)(nil)

func (s *syncer) Reset(nodes []*berthv1.Node, pods []store.PodRecord, rev int64) {
	cn := make([]*framework.Node, len(nodes))
	for i, n := range nodes {
		cn[i] = nodeToCore(n)
	}
	cp := make([]*framework.Pod, len(pods))
	for i, p := range pods {
		cp[i] = podToCore(p.Pod, p.ModRevision)
	}
	s.sched.Reset(cn, cp)
	s.revision(rev)
	select {
	case <-s.ready:
	default:
		close(s.ready)
	}
}

func (s *syncer) NodePut(n *berthv1.Node, rev int64) {
	s.sched.UpsertNode(nodeToCore(n))
	s.revision(rev)
}

func (s *syncer) NodeDeleted(name string, rev int64) {
	s.sched.DeleteNode(name)
	s.revision(rev)
}

func (s *syncer) PodPut(p store.PodRecord, _ *berthv1.Pod) {
	s.sched.UpsertPod(podToCore(p.Pod, p.ModRevision))
	s.revision(p.ModRevision)
}

func (s *syncer) PodDeleted(prev *berthv1.Pod, rev int64) {
	if prev != nil {
		s.sched.DeletePod(podToCore(prev, rev))
	}
	s.revision(rev)
}
