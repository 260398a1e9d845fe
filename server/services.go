package server

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/store"
)

type clusterService struct {
	berthv1.UnimplementedClusterServiceServer
	srv *Server
}

func (c *clusterService) UpsertNode(ctx context.Context, req *berthv1.UpsertNodeRequest) (*berthv1.UpsertNodeResponse, error) {
	rev, err := c.srv.store.PutNodeWithLease(ctx, req.GetNode())
	if err != nil {
		return nil, toStatus(err, "node "+req.GetNode().GetName())
	}
	n := req.GetNode()
	if n.GetUnreachable() { // output only; a lease, if any, just started
		n = proto.CloneOf(n)
		n.Unreachable = false
	}
	return &berthv1.UpsertNodeResponse{Node: n, Revision: rev}, nil
}

func (c *clusterService) DeleteNode(ctx context.Context, req *berthv1.DeleteNodeRequest) (*berthv1.DeleteNodeResponse, error) {
	rev, err := c.srv.store.DeleteNodeWithLease(ctx, req.GetName())
	if err != nil {
		return nil, toStatus(err, "node "+req.GetName())
	}
	return &berthv1.DeleteNodeResponse{Revision: rev}, nil
}

func (c *clusterService) GetNode(ctx context.Context, req *berthv1.GetNodeRequest) (*berthv1.GetNodeResponse, error) {
	n, err := c.srv.store.GetNode(ctx, req.GetName())
	if err == nil {
		err = c.srv.store.FillUnreachable(ctx, n)
	}
	if err != nil {
		return nil, toStatus(err, "node "+req.GetName())
	}
	resp := &berthv1.GetNodeResponse{Node: n, Usage: &berthv1.NodeUsage{}}
	if ni, ok := c.srv.sched.NodeInfo(req.GetName()); ok {
		resp.Usage = usageToWire(ni)
	}
	return resp, nil
}

func (c *clusterService) ListNodes(ctx context.Context, req *berthv1.ListNodesRequest) (*berthv1.ListNodesResponse, error) {
	nodes, next, err := c.srv.store.ListNodes(ctx, pageSize(req.GetPageSize()), req.GetPageToken())
	if err != nil {
		return nil, pageError(err, "list nodes")
	}
	if err := c.srv.store.FillUnreachable(ctx, nodes...); err != nil {
		return nil, toStatus(err, "list nodes")
	}
	return &berthv1.ListNodesResponse{Nodes: nodes, NextPageToken: next}, nil
}

// pageError names page_token when the store rejects it.
func pageError(err error, what string) error {
	if errors.Is(err, store.ErrInvalidArgument) {
		var v violations
		v.add("page_token", "not a token from a previous response to the same query")
		return v.err()
	}
	return toStatus(err, what)
}

func pageSize(n int32) int {
	if n <= 0 {
		return defaultPageSize
	}
	return int(n)
}

type podService struct {
	berthv1.UnimplementedPodServiceServer
	srv *Server
}

// admit prepares a validated pod for storage: Berth owns uid and status.
func admit(p *berthv1.Pod, now time.Time) *berthv1.Pod {
	// The store assigns a uid when none is given, after its identical-pod
	// check, so a plain resubmit stays idempotent.
	p = proto.Clone(p).(*berthv1.Pod)
	p.Status = &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_PENDING}
	if p.NodeName != "" {
		// The orchestrator declares a pod that already runs there.
		p.Status = &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_BOUND, StartTime: timestamppb.New(now)}
	}
	return p
}

func (ps *podService) SubmitPod(ctx context.Context, req *berthv1.SubmitPodRequest) (*berthv1.SubmitPodResponse, error) {
	res := ps.srv.store.CreatePods(ctx, []*berthv1.Pod{admit(req.GetPod(), time.Now())})[0]
	if res.Err != nil {
		return nil, toStatus(res.Err, "pod "+req.GetPod().GetNamespace()+"/"+req.GetPod().GetName())
	}
	return &berthv1.SubmitPodResponse{Pod: res.Pod, Revision: res.Revision}, nil
}

func (ps *podService) SubmitPods(ctx context.Context, req *berthv1.SubmitPodsRequest) (*berthv1.SubmitPodsResponse, error) {
	results := make([]*berthv1.SubmitPodResult, len(req.GetPods()))
	valid := make([]*berthv1.Pod, 0, len(req.GetPods()))
	index := make([]int, 0, len(req.GetPods()))
	now := time.Now()
	for i, p := range req.GetPods() {
		var v violations
		validatePod(&v, "pod", p)
		if err := v.err(); err != nil {
			st, _ := status.FromError(err)
			results[i] = &berthv1.SubmitPodResult{Code: int32(st.Code()), Message: st.Message()}
			continue
		}
		valid = append(valid, admit(p, now))
		index = append(index, i)
	}
	for j, res := range ps.srv.store.CreatePods(ctx, valid) {
		i := index[j]
		if res.Err != nil {
			st, _ := status.FromError(toStatus(res.Err, "pod "+valid[j].GetNamespace()+"/"+valid[j].GetName()))
			results[i] = &berthv1.SubmitPodResult{Code: int32(st.Code()), Message: st.Message()}
			continue
		}
		results[i] = &berthv1.SubmitPodResult{Pod: res.Pod, Revision: res.Revision}
	}
	return &berthv1.SubmitPodsResponse{Results: results}, nil
}

func (ps *podService) DeletePod(ctx context.Context, req *berthv1.DeletePodRequest) (*berthv1.DeletePodResponse, error) {
	rev, err := ps.srv.store.DeletePod(ctx, req.GetNamespace(), req.GetName(), req.GetUid())
	if err != nil {
		return nil, toStatus(err, "pod "+req.GetNamespace()+"/"+req.GetName())
	}
	return &berthv1.DeletePodResponse{Revision: rev}, nil
}

func (ps *podService) GetPod(ctx context.Context, req *berthv1.GetPodRequest) (*berthv1.GetPodResponse, error) {
	p, _, err := ps.srv.store.GetPod(ctx, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, toStatus(err, "pod "+req.GetNamespace()+"/"+req.GetName())
	}
	return &berthv1.GetPodResponse{Pod: p}, nil
}

func (ps *podService) ListPods(ctx context.Context, req *berthv1.ListPodsRequest) (*berthv1.ListPodsResponse, error) {
	filter := store.PodFilter{Namespace: req.GetNamespace(), Phase: req.GetPhase(), NodeName: req.GetNodeName()}
	pods, next, err := ps.srv.store.ListPods(ctx, filter, pageSize(req.GetPageSize()), req.GetPageToken())
	if err != nil {
		return nil, pageError(err, "list pods")
	}
	return &berthv1.ListPodsResponse{Pods: pods, NextPageToken: next}, nil
}

type schedulerService struct {
	berthv1.UnimplementedSchedulerServiceServer
	srv *Server
}

func (ss *schedulerService) WatchBindings(req *berthv1.WatchBindingsRequest, stream berthv1.SchedulerService_WatchBindingsServer) error {
	// Streams end with the server's shutdown as well as the client's cancel,
	// so a graceful stop does not wait on subscribers that never leave.
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	stop := context.AfterFunc(ss.srv.shutdown, cancel)
	defer stop()
	ss.srv.metrics.watchers.Inc()
	defer ss.srv.metrics.watchers.Dec()

	err := ss.srv.store.WatchBindings(ctx, req.GetFromRevision(), func(ev *berthv1.BindingEvent) error {
		return stream.Send(&berthv1.WatchBindingsResponse{Event: ev})
	}, store.OnSynced(func(rev int64) error {
		return stream.Send(&berthv1.WatchBindingsResponse{ProgressRevision: rev})
	}))
	if ss.srv.shutdown.Err() != nil && stream.Context().Err() == nil {
		return status.Error(codes.Unavailable, "server shutting down; resume from the last revision received")
	}
	if err != nil && stream.Context().Err() != nil {
		return status.FromContextError(stream.Context().Err()).Err()
	}
	return toStatus(err, "watch bindings")
}
