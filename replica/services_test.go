package replica_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func TestScheduleReturnsTheDecision(t *testing.T) {
	e := newEnv(t)
	if _, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: node("n1")}); err != nil {
		t.Fatal(err)
	}
	resp, err := e.sched.Schedule(tctx(t), &berthv1.ScheduleRequest{Pod: pod("fits")})
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.GetPod(); p.GetStatus().GetPhase() != berthv1.PodPhase_POD_PHASE_BOUND || p.GetNodeName() != "n1" {
		t.Fatalf("Schedule = %v, want bound to n1", p)
	}
	big := pod("too-big")
	big.Containers[0].Requests["cpu"] = 64000
	resp, err = e.sched.Schedule(tctx(t), &berthv1.ScheduleRequest{Pod: big})
	if err != nil {
		t.Fatal(err)
	}
	st := resp.GetPod().GetStatus()
	if st.GetPhase() != berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE || len(st.GetDiagnosis().GetReasons()) == 0 {
		t.Fatalf("Schedule of an oversized pod = %v, want unschedulable with a diagnosis", st)
	}
}

// TestExplainMatchesTheRealDecision: the dry run's chosen node is where the
// pod then lands, and each rejected node says why.
func TestExplainMatchesTheRealDecision(t *testing.T) {
	e := newEnv(t)
	small := node("small")
	small.Allocatable["cpu"] = 50
	tainted := node("tainted")
	tainted.Taints = []*berthv1.Taint{{Key: "dedicated", Value: "gpu", Effect: berthv1.TaintEffect_TAINT_EFFECT_NO_SCHEDULE}}
	busy := node("busy")
	for _, n := range []*berthv1.Node{small, tainted, busy, node("free")} {
		if _, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: n}); err != nil {
			t.Fatal(err)
		}
	}
	filler := pod("filler")
	filler.NodeName = "busy"
	filler.Containers[0].Requests["cpu"] = 600
	if _, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: filler}); err != nil {
		t.Fatal(err)
	}
	// Wait until the replica's cache has the filler charged to busy.
	eventually(t, 10*time.Second, "filler charged", func() error {
		n, err := e.cluster.GetNode(tctx(t), &berthv1.GetNodeRequest{Name: "busy"})
		if err != nil || n.GetUsage().GetPodCount() != 1 {
			return status.Errorf(codes.Unavailable, "usage %v %v", n.GetUsage(), err)
		}
		return nil
	})
	ex, err := e.sched.Explain(tctx(t), &berthv1.ExplainRequest{Target: &berthv1.ExplainRequest_Pod{Pod: pod("probe")}})
	if err != nil {
		t.Fatal(err)
	}
	byNode := map[string]*berthv1.NodeExplanation{}
	for _, n := range ex.GetNodes() {
		byNode[n.GetNodeName()] = n
	}
	if n := byNode["small"]; n.GetFeasible() || n.GetPlugin() != "NodeResourcesFit" || len(n.GetReasons()) != 1 || n.GetReasons()[0] != "Insufficient cpu" {
		t.Errorf("small: %v, want rejected by NodeResourcesFit for Insufficient cpu", n)
	}
	if n := byNode["tainted"]; n.GetFeasible() || n.GetPlugin() != "TaintToleration" {
		t.Errorf("tainted: %v, want rejected by TaintToleration", n)
	}
	for _, name := range []string{"busy", "free"} {
		if n := byNode[name]; !n.GetFeasible() || len(n.GetScores()) == 0 || n.GetTotalScore() <= 0 {
			t.Errorf("%s: %v, want feasible with scores", name, n)
		}
	}
	if ex.GetChosenNodeName() != "free" {
		t.Fatalf("explain chose %q, want the emptier node free (scores busy %d, free %d)",
			ex.GetChosenNodeName(), byNode["busy"].GetTotalScore(), byNode["free"].GetTotalScore())
	}
	resp, err := e.sched.Schedule(tctx(t), &berthv1.ScheduleRequest{Pod: pod("probe")})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetPod().GetNodeName(); got != ex.GetChosenNodeName() {
		t.Fatalf("real cycle bound to %q, explain said %q", got, ex.GetChosenNodeName())
	}
	// Nothing was stored by the dry run of an inline pod beyond the probe.
	if _, err := e.sched.Explain(tctx(t), &berthv1.ExplainRequest{Target: &berthv1.ExplainRequest_Existing{
		Existing: &berthv1.PodReference{Namespace: "ns", Name: "probe"}}}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("explain of a bound pod: %v, want FailedPrecondition", err)
	}
}

func TestUpdatePodRules(t *testing.T) {
	e := newEnv(t)
	gated := pod("gated")
	gated.SchedulingGates = []string{"example.com/quota"}
	if _, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: gated}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pods.UpdatePod(tctx(t), &berthv1.UpdatePodRequest{Namespace: "ns", Name: "gated",
		UpdateSchedulingGates: true, SchedulingGates: []string{"example.com/quota", "example.com/new"}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("adding a gate: %v, want InvalidArgument", err)
	}
	prio := int32(50)
	resp, err := e.pods.UpdatePod(tctx(t), &berthv1.UpdatePodRequest{Namespace: "ns", Name: "gated", UpdateSchedulingGates: true, Priority: &prio})
	if err != nil {
		t.Fatal(err)
	}
	if p := resp.GetPod(); len(p.GetSchedulingGates()) != 0 || p.GetPriority() != 50 {
		t.Fatalf("after update: gates %v priority %d", p.GetSchedulingGates(), p.GetPriority())
	}
	bound := pod("bound")
	bound.NodeName = "n1"
	if _, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: bound}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pods.UpdatePod(tctx(t), &berthv1.UpdatePodRequest{Namespace: "ns", Name: "bound", Priority: &prio}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("updating a bound pod: %v, want FailedPrecondition", err)
	}
	if _, err := e.pods.UpdatePod(tctx(t), &berthv1.UpdatePodRequest{Namespace: "ns", Name: "nope", Priority: &prio}); status.Code(err) != codes.NotFound {
		t.Fatalf("updating a missing pod: %v, want NotFound", err)
	}
}

func TestDisruptionBudgets(t *testing.T) {
	e := newEnv(t)
	b := &berthv1.DisruptionBudget{Namespace: "ns", Name: "web", AllowedDisruptions: 1,
		Selector: &berthv1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	if _, err := e.cluster.UpsertDisruptionBudget(tctx(t), &berthv1.UpsertDisruptionBudgetRequest{Budget: b}); err != nil {
		t.Fatal(err)
	}
	list, err := e.cluster.ListDisruptionBudgets(tctx(t), &berthv1.ListDisruptionBudgetsRequest{Namespace: "ns"})
	if err != nil || len(list.GetBudgets()) != 1 || list.GetBudgets()[0].GetName() != "web" {
		t.Fatalf("list: %v, %v", list, err)
	}
	bad := &berthv1.DisruptionBudget{Namespace: "ns", Name: "bad", AllowedDisruptions: -1}
	fields := badFields(t, func() error {
		_, err := e.cluster.UpsertDisruptionBudget(tctx(t), &berthv1.UpsertDisruptionBudgetRequest{Budget: bad})
		return err
	}())
	if len(fields) != 2 {
		t.Fatalf("violations %v, want selector and allowed_disruptions", fields)
	}
	if _, err := e.cluster.DeleteDisruptionBudget(tctx(t), &berthv1.DeleteDisruptionBudgetRequest{Namespace: "ns", Name: "web"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cluster.DeleteDisruptionBudget(tctx(t), &berthv1.DeleteDisruptionBudgetRequest{Namespace: "ns", Name: "web"}); status.Code(err) != codes.NotFound {
		t.Fatalf("second delete: %v, want NotFound", err)
	}
}
