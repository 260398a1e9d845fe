package convert

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/scheduler"
	"github.com/berth-io/berth/scheduler/framework"
)

// BudgetToCore converts a stored disruption budget.
func BudgetToCore(b *berthv1.DisruptionBudget) framework.DisruptionBudget {
	return framework.DisruptionBudget{
		Namespace:          b.GetNamespace(),
		Selector:           labelSelectorToCore(b.GetSelector()),
		DisruptionsAllowed: b.GetAllowedDisruptions(),
	}
}

// PodGroupToCore converts a stored pod group; a group that sets no
// schedule timeout waits defaultTimeout (the store's default, passed in so
// this package needs no store).
func PodGroupToCore(g *berthv1.PodGroup, defaultTimeout time.Duration) *framework.PodGroup {
	timeout := defaultTimeout
	if g.GetScheduleTimeout() != nil {
		timeout = g.GetScheduleTimeout().AsDuration()
	}
	return &framework.PodGroup{Namespace: g.GetNamespace(), Name: g.GetName(), MinMember: g.GetMinMember(), ScheduleTimeout: timeout}
}

// UsageToWire renders what a node's pods request.
func UsageToWire(ni *framework.NodeInfo) *berthv1.NodeUsage {
	req := ni.Requested.ToList()
	return &berthv1.NodeUsage{Requested: req, PodCount: int64(len(ni.Pods))}
}

// DiagnosisToWire renders why a pod found no node, as GetPod shows it.
func DiagnosisToWire(why scheduler.Unschedulable, at time.Time) *berthv1.SchedulingDiagnosis {
	diag := &berthv1.SchedulingDiagnosis{NodesEvaluated: int32(why.NumNodes), Time: timestamppb.New(at)}
	for _, rc := range why.Reasons {
		diag.Reasons = append(diag.Reasons, &berthv1.ReasonCount{Plugin: rc.Plugin, Reason: rc.Reason, NodeCount: int32(rc.Count)})
	}
	return diag
}

// ExplanationToWire renders a dry run: every node's verdict and scores,
// the choice, and the preemption it would need.
func ExplanationToWire(ex scheduler.Explanation) *berthv1.ExplainResponse {
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
