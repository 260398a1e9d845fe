package server

import (
	"context"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/store"
)

// podStore is what the pod service reads and writes.
type podStore interface {
	CreatePods(ctx context.Context, pods []*berthv1.Pod) []store.CreateResult
	GetPod(ctx context.Context, namespace, name string) (*berthv1.Pod, int64, error)
	ListPods(ctx context.Context, filter store.PodFilter, limit int, pageToken string) ([]*berthv1.Pod, string, error)
	DeletePod(ctx context.Context, namespace, name, uid string) (int64, error)
	UpdatePod(ctx context.Context, namespace, name, uid string, mutate func(*berthv1.Pod) error) (*berthv1.Pod, int64, error)
	// ModifyPod and NodeModRevision serve the orchestrator's reports.
	ModifyPod(ctx context.Context, namespace, name, uid string, mutate func(*berthv1.Pod) (bool, error)) (*berthv1.Pod, int64, error)
	NodeModRevision(ctx context.Context, name string) (int64, error)

	PutPodGroup(ctx context.Context, g *berthv1.PodGroup) (*berthv1.PodGroup, int64, error)
	DeletePodGroup(ctx context.Context, namespace, name string) (int64, error)
	GetPodGroup(ctx context.Context, namespace, name string) (*berthv1.PodGroup, error)
	ListPodGroups(ctx context.Context, namespace string) ([]*berthv1.PodGroup, error)
}

// podService takes pods in and answers for them: submit, read, update and
// delete here; the orchestrator's reports in pod_reports.go; pod groups in
// podgroup_service.go. The pod lifecycle's transitions they ask for are the
// store's (store/lifecycle.go).
type podService struct {
	berthv1.UnimplementedPodServiceServer
	store  podStore
	sched  Scheduler
	admits admitTracer
}

func (ps *podService) SubmitPod(ctx context.Context, req *berthv1.SubmitPodRequest) (_ *berthv1.SubmitPodResponse, err error) {
	ctx, end := ps.admits.start(ctx, 1)
	defer func() { end(err) }()
	ps.admits.storing(ctx, req.GetPod())
	res := ps.store.CreatePods(ctx, []*berthv1.Pod{store.Admit(req.GetPod(), time.Now())})[0]
	if res.Err != nil {
		ps.admits.stored(ctx, req.GetPod(), res.Err)
		return nil, toStatus(res.Err, "pod "+req.GetPod().GetNamespace()+"/"+req.GetPod().GetName())
	}
	ps.admits.stored(ctx, res.Pod, nil)
	return &berthv1.SubmitPodResponse{Pod: res.Pod, Revision: res.Revision}, nil
}

func (ps *podService) SubmitPods(ctx context.Context, req *berthv1.SubmitPodsRequest) (*berthv1.SubmitPodsResponse, error) {
	ctx, end := ps.admits.start(ctx, len(req.GetPods()))
	defer end(nil)
	results := make([]*berthv1.SubmitPodResult, len(req.GetPods()))
	valid := make([]*berthv1.Pod, 0, len(req.GetPods()))
	index := make([]int, 0, len(req.GetPods()))
	now := time.Now()
	for i, p := range req.GetPods() {
		var v violations
		validateSubmittedPod(&v, "pod", p)
		if err := v.err(); err != nil {
			st, _ := status.FromError(err)
			results[i] = &berthv1.SubmitPodResult{Code: int32(st.Code()), Message: st.Message()}
			continue
		}
		ps.admits.storing(ctx, p)
		valid = append(valid, store.Admit(p, now))
		index = append(index, i)
	}
	for j, res := range ps.store.CreatePods(ctx, valid) {
		i := index[j]
		if res.Err != nil {
			ps.admits.stored(ctx, valid[j], res.Err)
			st, _ := status.FromError(toStatus(res.Err, "pod "+valid[j].GetNamespace()+"/"+valid[j].GetName()))
			results[i] = &berthv1.SubmitPodResult{Code: int32(st.Code()), Message: st.Message()}
			continue
		}
		ps.admits.stored(ctx, res.Pod, nil)
		results[i] = &berthv1.SubmitPodResult{Pod: res.Pod, Revision: res.Revision}
	}
	return &berthv1.SubmitPodsResponse{Results: results}, nil
}

func (ps *podService) DeletePod(ctx context.Context, req *berthv1.DeletePodRequest) (*berthv1.DeletePodResponse, error) {
	rev, err := ps.store.DeletePod(ctx, req.GetNamespace(), req.GetName(), req.GetUid())
	if err != nil {
		return nil, toStatus(err, "pod "+req.GetNamespace()+"/"+req.GetName())
	}
	return &berthv1.DeletePodResponse{Revision: rev}, nil
}

func (ps *podService) GetPod(ctx context.Context, req *berthv1.GetPodRequest) (*berthv1.GetPodResponse, error) {
	p, _, err := ps.store.GetPod(ctx, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, toStatus(err, "pod "+req.GetNamespace()+"/"+req.GetName())
	}
	return &berthv1.GetPodResponse{Pod: p}, nil
}

func (ps *podService) ListPods(ctx context.Context, req *berthv1.ListPodsRequest) (*berthv1.ListPodsResponse, error) {
	filter := store.PodFilter{Namespace: req.GetNamespace(), Phase: req.GetPhase(), NodeName: req.GetNodeName()}
	pods, next, err := ps.store.ListPods(ctx, filter, pageSize(req.GetPageSize()), req.GetPageToken())
	if err != nil {
		return nil, pageError(err, "list pods")
	}
	return &berthv1.ListPodsResponse{Pods: pods, NextPageToken: next}, nil
}

// UpdatePod edits the mutable fields of a pending pod.
func (ps *podService) UpdatePod(ctx context.Context, req *berthv1.UpdatePodRequest) (*berthv1.UpdatePodResponse, error) {
	what := "pod " + req.GetNamespace() + "/" + req.GetName()
	p, rev, err := ps.store.UpdatePod(ctx, req.GetNamespace(), req.GetName(), req.GetUid(), func(p *berthv1.Pod) error {
		if !store.AwaitsPlacement(p.GetStatus().GetPhase()) {
			return status.Errorf(codes.FailedPrecondition, "%s is %v; only pending pods can be updated", what, p.GetStatus().GetPhase())
		}
		if req.GetUpdateSchedulingGates() {
			for _, g := range req.GetSchedulingGates() {
				if !slices.Contains(p.GetSchedulingGates(), g) {
					var v violations
					v.add("scheduling_gates", "gate %q is not on the pod: gates can only be removed", g)
					return v.err()
				}
			}
			p.SchedulingGates = req.GetSchedulingGates()
		}
		if req.Priority != nil {
			p.Priority = req.GetPriority()
		}
		return nil
	})
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err
		}
		return nil, toStatus(err, what)
	}
	return &berthv1.UpdatePodResponse{Pod: p, Revision: rev}, nil
}
