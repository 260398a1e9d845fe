package algorithm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/framework/runtime"
	"github.com/berth-io/berth/scheduler/plugins"
)

// mixedCluster is 60 nodes: groups of identical nodes (so ties happen),
// some loaded, some tainted (hard and soft), some cordoned.
func mixedCluster(r *rand.Rand) []*framework.NodeInfo {
	var nodes []*framework.NodeInfo
	for i := range 60 {
		n := fwtest.Node(fmt.Sprintf("node-%02d", i), 16000, 64*Gi, 110)
		switch r.IntN(6) {
		case 0:
			n.Taints = []framework.Taint{{Key: "dedicated", Value: "x", Effect: framework.TaintEffectNoSchedule}}
		case 1:
			n.Taints = []framework.Taint{{Key: "soft", Effect: framework.TaintEffectPreferNoSchedule}}
		case 2:
			n.Unschedulable = r.IntN(2) == 0
		}
		ni := fwtest.NodeInfo(n)
		// Few load levels, so many nodes share a score.
		if load := r.IntN(3); load > 0 {
			ni.AddPodInfo(framework.NewPodInfo(fwtest.Pod(fmt.Sprint("load", i), fwtest.Resources(int64(load)*6000, int64(load)*24*Gi))))
		}
		nodes = append(nodes, ni)
	}
	return nodes
}

func TestExplainAgreesWithSchedule(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	nodes := mixedCluster(r)
	fwk := setup(t, nodes, 1)
	s := New(0, WithRandSeed(5, 6))
	ties := 0
	for i := range 200 {
		pod := fwtest.Pod(fmt.Sprint("p", i), fwtest.Resources(int64(r.IntN(8))*1000, int64(r.IntN(30))*Gi))
		if r.IntN(4) == 0 {
			pod.Tolerations = []framework.Toleration{{Key: "dedicated", Operator: framework.TolerationOpExists}}
		}
		pi := framework.NewPodInfo(pod)
		ex, err := s.Explain(ctx, fwk, framework.NewCycleState(), pi)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Schedule(ctx, fwk, framework.NewCycleState(), pi)
		if ex.FitError != nil {
			if err == nil || err.Error() != ex.FitError.Error() {
				t.Fatalf("pod %d: Explain says %q, Schedule says %v", i, ex.FitError.Error(), err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("pod %d: Schedule failed (%v) where Explain chose %s", i, err, ex.Chosen)
		}
		if ex.Chosen != res.SuggestedHost {
			t.Fatalf("pod %d: Explain chose %s (tied %v), Schedule chose %s", i, ex.Chosen, ex.Tied, res.SuggestedHost)
		}
		if len(ex.Tied) > 1 {
			ties++
		}
		feasible := 0
		for _, n := range ex.Nodes {
			if n.Feasible {
				feasible++
			}
		}
		if len(ex.Nodes) != 60 || feasible != res.FeasibleNodes {
			t.Fatalf("pod %d: explained %d nodes, %d feasible; Schedule found %d feasible", i, len(ex.Nodes), feasible, res.FeasibleNodes)
		}
	}
	if ties < 20 {
		t.Errorf("only %d of 200 cycles had ties; the test does not exercise the tie-break", ties)
	}
}

func TestExplainDetails(t *testing.T) {
	hard := fwtest.Node("tainted", 4000, 16*Gi, 110)
	hard.Taints = []framework.Taint{{Key: "a", Value: "b", Effect: framework.TaintEffectNoSchedule}}
	soft := fwtest.Node("soft", 4000, 16*Gi, 110)
	soft.Taints = []framework.Taint{{Key: "s", Effect: framework.TaintEffectPreferNoSchedule}}
	nodes := []*framework.NodeInfo{
		fwtest.NodeInfo(fwtest.Node("empty", 4000, 16*Gi, 110)),
		fwtest.NodeInfo(hard),
		fwtest.NodeInfo(soft),
		fwtest.NodeInfo(fwtest.Node("small", 500, 16*Gi, 110)),
	}
	fwk := setup(t, nodes, 1)
	s := New(0, WithRandSeed(1, 1))
	pod := framework.NewPodInfo(fwtest.Pod("p", fwtest.Resources(1000, 4*Gi)))
	ex, err := s.Explain(ctx, fwk, framework.NewCycleState(), pod)
	if err != nil {
		t.Fatal(err)
	}
	// empty: taint 100*3, fit cpu 75 mem 75 -> 75; balanced (kube v1.37)
	// stays 100 with the pod (.25/.25) as without -> 50 + 50/2 = 75.
	// soft: taint count 1 is the max -> reversed 0; same fit and balance.
	// small: 1000m asked of 500m in all is UnschedulableAndUnresolvable.
	// ImageLocality: no node holds the pod's image -> 0.
	want := []NodeExplanation{
		{Node: "empty", Feasible: true, Total: 450, Scores: []framework.PluginScore{
			{Plugin: "TaintToleration", Score: 100, Weighted: 300},
			{Plugin: "NodeResourcesFit", Score: 75, Weighted: 75},
			{Plugin: "NodeResourcesBalancedAllocation", Score: 75, Weighted: 75},
			{Plugin: "ImageLocality", Score: 0, Weighted: 0},
		}},
		{Node: "tainted", Code: framework.UnschedulableAndUnresolvable, Plugin: "TaintToleration", Reasons: []string{"node(s) had untolerated taint {a: b}"}},
		{Node: "soft", Feasible: true, Total: 150, Scores: []framework.PluginScore{
			{Plugin: "TaintToleration", Score: 0, Weighted: 0},
			{Plugin: "NodeResourcesFit", Score: 75, Weighted: 75},
			{Plugin: "NodeResourcesBalancedAllocation", Score: 75, Weighted: 75},
			{Plugin: "ImageLocality", Score: 0, Weighted: 0},
		}},
		{Node: "small", Code: framework.UnschedulableAndUnresolvable, Plugin: "NodeResourcesFit", Reasons: []string{"Insufficient cpu"}},
	}
	if diff := cmp.Diff(want, ex.Nodes); diff != "" {
		t.Errorf("nodes (-want,+got):\n%s", diff)
	}
	if ex.Chosen != "empty" || !cmp.Equal(ex.Tied, []string{"empty"}) || ex.FitError != nil {
		t.Errorf("chosen %q tied %v fit error %v", ex.Chosen, ex.Tied, ex.FitError)
	}
	if s.nextStartNodeIndex != 0 {
		t.Error("Explain moved the window")
	}
}

func TestExplainPreFilter(t *testing.T) {
	nodes := uniformNodes(4)
	fwk := setup(t, nodes, 1, &narrower{nodes: []string{"node-002"}})
	ex, err := New(0).Explain(ctx, fwk, framework.NewCycleState(), smallPod("p"))
	if err != nil {
		t.Fatal(err)
	}
	if ex.Chosen != "node-002" || len(ex.Nodes) != 4 {
		t.Fatalf("chosen %q, %d nodes", ex.Chosen, len(ex.Nodes))
	}
	if got := ex.Nodes[1]; got.Node != "node-000" || got.Code != framework.UnschedulableAndUnresolvable ||
		!cmp.Equal(got.Reasons, []string{"node(s) didn't satisfy plugin(s) [Narrow]"}) {
		t.Errorf("narrowed-away node = %+v", got)
	}

	fwk = setup(t, nodes, 1, &narrower{status: framework.NewStatus(framework.Unschedulable, "wait for gang")})
	ex, err = New(0).Explain(ctx, fwk, framework.NewCycleState(), smallPod("p"))
	if err != nil {
		t.Fatal(err)
	}
	if ex.FitError == nil || ex.FitError.Error() != "0/4 nodes are available: wait for gang." || len(ex.Nodes) != 4 || ex.Nodes[0].Plugin != "Narrow" {
		t.Errorf("explanation = %+v", ex)
	}
}

func TestExplainNominated(t *testing.T) {
	nodes := uniformNodes(5)
	pod := fwtest.Pod("p", fwtest.Resources(100, Gi))
	pod.EditExtras().NominatedNodeName = "node-004"
	ex, err := New(0).Explain(ctx, setup(t, nodes, 1), framework.NewCycleState(), framework.NewPodInfo(pod))
	if err != nil {
		t.Fatal(err)
	}
	if ex.Chosen != "node-004" {
		t.Errorf("chosen %q, want the nominated node", ex.Chosen)
	}
}

func TestExplainWithoutScorePlugins(t *testing.T) {
	nodes := uniformNodes(8)
	nodes[0].Node().Unschedulable = true
	nodes[0].SetNode(nodes[0].Node())
	reg := plugins.NewInTreeRegistry()
	prof := runtime.DefaultProfile()
	prof.Plugins.Score.Disabled = []string{"*"}
	fwk, err := runtime.NewFramework(ctx, reg, prof, runtime.WithSnapshotSharedLister(fwtest.NewLister(nodes...)))
	if err != nil {
		t.Fatal(err)
	}
	s := New(0, WithRandSeed(4, 4))
	for range 5 {
		ex, err := s.Explain(ctx, fwk, framework.NewCycleState(), smallPod("p"))
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Schedule(ctx, fwk, framework.NewCycleState(), smallPod("p"))
		if err != nil {
			t.Fatal(err)
		}
		if ex.Chosen != res.SuggestedHost || res.FeasibleNodes != 1 {
			t.Fatalf("Explain %s, Schedule %+v", ex.Chosen, res)
		}
	}
}
