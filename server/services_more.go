package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/scheduler"
)

// decided reports whether the scheduler has reached a verdict on a pod.
func decided(p *berthv1.Pod) bool {
	switch p.GetStatus().GetPhase() {
	case berthv1.PodPhase_POD_PHASE_PENDING, berthv1.PodPhase_POD_PHASE_UNSPECIFIED:
		return false
	}
	return true
}

// Schedule is SubmitPod followed by a wait on the pod's own key, so the
// answer comes from the same durable record every replica sees.
func (ss *schedulerService) Schedule(ctx context.Context, req *berthv1.ScheduleRequest) (*berthv1.ScheduleResponse, error) {
	what := "pod " + req.GetPod().GetNamespace() + "/" + req.GetPod().GetName()
	res := ss.srv.store.CreatePods(ctx, []*berthv1.Pod{admit(req.GetPod(), time.Now())})[0]
	if res.Err != nil {
		return nil, toStatus(res.Err, what)
	}
	if decided(res.Pod) {
		return &berthv1.ScheduleResponse{Pod: res.Pod, Revision: res.Revision}, nil
	}
	uid := res.Pod.GetUid()
	p, rev, err := ss.srv.store.WaitPod(ctx, res.Pod.GetNamespace(), res.Pod.GetName(), res.Revision+1, func(p *berthv1.Pod) bool {
		return p.GetUid() == uid && decided(p)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.Errorf(status.FromContextError(ctx.Err()).Code(), "%s: no decision before the deadline; it stays queued", what)
		}
		return nil, toStatus(err, what)
	}
	return &berthv1.ScheduleResponse{Pod: p, Revision: rev}, nil
}

// Explain dry-runs a pod, inline or stored, in the shard that owns it.
func (ss *schedulerService) Explain(ctx context.Context, req *berthv1.ExplainRequest) (*berthv1.ExplainResponse, error) {
	var wire *berthv1.Pod
	var rev int64
	if ref := req.GetExisting(); ref != nil {
		p, r, err := ss.srv.store.GetPod(ctx, ref.GetNamespace(), ref.GetName())
		if err != nil {
			return nil, toStatus(err, "pod "+ref.GetNamespace()+"/"+ref.GetName())
		}
		if p.GetNodeName() != "" {
			return nil, status.Errorf(codes.FailedPrecondition, "pod %s/%s is already bound to %s; explain a pending pod or give the pod inline", ref.GetNamespace(), ref.GetName(), p.GetNodeName())
		}
		wire, rev = p, r
	} else {
		wire = admit(req.GetPod(), time.Now())
		wire.NodeName = ""
	}
	ex, err := ss.srv.sched.Explain(ctx, podToCore(wire, rev))
	if errors.Is(err, scheduler.ErrUnknownProfile) {
		var v violations
		v.add("pod.scheduler_name", "no scheduling profile named %q", wire.GetSchedulerName())
		return nil, v.err()
	}
	if err != nil {
		return nil, toStatus(err, "explain")
	}
	return explanationToWire(ex), nil
}

func explanationToWire(ex scheduler.Explanation) *berthv1.ExplainResponse {
	out := &berthv1.ExplainResponse{ChosenNodeName: ex.Chosen, TiedNodeNames: ex.Tied}
	for _, n := range ex.Nodes {
		ne := &berthv1.NodeExplanation{NodeName: n.Node, Feasible: n.Feasible, TotalScore: n.Total}
		if !n.Feasible {
			ne.Code, ne.Plugin, ne.Reasons = n.Code.String(), n.Plugin, n.Reasons
		}
		for _, s := range n.Scores {
			ne.Scores = append(ne.Scores, &berthv1.PluginScore{Plugin: s.Plugin, Score: s.Score, WeightedScore: s.Weighted})
		}
		out.Nodes = append(out.Nodes, ne)
	}
	if ex.FitError != nil {
		out.Message = ex.FitError.Error()
	}
	if pp := ex.Preemption; pp != nil {
		plan := &berthv1.PreemptionPlan{NodeName: pp.Node, Message: pp.Message}
		for _, v := range pp.Victims {
			plan.Victims = append(plan.Victims, &berthv1.PodReference{Namespace: v.Namespace, Name: v.Name})
		}
		out.Preemption = plan
	}
	return out
}

// UpdatePod edits the mutable fields of a pending pod.
func (ps *podService) UpdatePod(ctx context.Context, req *berthv1.UpdatePodRequest) (*berthv1.UpdatePodResponse, error) {
	what := "pod " + req.GetNamespace() + "/" + req.GetName()
	p, rev, err := ps.srv.store.UpdatePod(ctx, req.GetNamespace(), req.GetName(), req.GetUid(), func(p *berthv1.Pod) error {
		if decided(p) && p.GetStatus().GetPhase() != berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE {
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

func (c *clusterService) UpsertDisruptionBudget(ctx context.Context, req *berthv1.UpsertDisruptionBudgetRequest) (*berthv1.UpsertDisruptionBudgetResponse, error) {
	b := req.GetBudget()
	rev, err := c.srv.store.PutBudget(ctx, b)
	if err != nil {
		return nil, toStatus(err, fmt.Sprintf("budget %s/%s", b.GetNamespace(), b.GetName()))
	}
	return &berthv1.UpsertDisruptionBudgetResponse{Budget: b, Revision: rev}, nil
}

func (c *clusterService) DeleteDisruptionBudget(ctx context.Context, req *berthv1.DeleteDisruptionBudgetRequest) (*berthv1.DeleteDisruptionBudgetResponse, error) {
	rev, err := c.srv.store.DeleteBudget(ctx, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, toStatus(err, fmt.Sprintf("budget %s/%s", req.GetNamespace(), req.GetName()))
	}
	return &berthv1.DeleteDisruptionBudgetResponse{Revision: rev}, nil
}

func (c *clusterService) ListDisruptionBudgets(ctx context.Context, req *berthv1.ListDisruptionBudgetsRequest) (*berthv1.ListDisruptionBudgetsResponse, error) {
	bs, err := c.srv.store.ListBudgets(ctx, req.GetNamespace())
	if err != nil {
		return nil, toStatus(err, "list budgets")
	}
	return &berthv1.ListDisruptionBudgetsResponse{Budgets: bs}, nil
}
