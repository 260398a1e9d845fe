package interpodaffinity_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/framework/runtime"
	"github.com/berth-io/berth/scheduler/plugins"
	"github.com/berth-io/berth/scheduler/plugins/interpodaffinity"
)

// In the default profile the plugin filters through the framework (which
// names it in the status) and scores with weight 2.
func TestInDefaultProfile(t *testing.T) {
	ctx := context.Background()
	web := func(name string) *framework.Pod {
		p := fwtest.Pod(name, fwtest.Resources(100, 1<<20))
		p.Labels = map[string]string{"app": "web"}
		p.Affinity = &framework.Affinity{PodAntiAffinity: &framework.PodAntiAffinity{
			Required: []framework.PodAffinityTerm{{
				LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				TopologyKey:   "host",
			}},
			Preferred: []framework.WeightedPodAffinityTerm{{Weight: 10, Term: framework.PodAffinityTerm{
				LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				TopologyKey:   "zone",
			}}},
		}}
		return p
	}
	var nodes []*framework.NodeInfo
	for _, n := range []struct{ name, zone string }{{"a", "z1"}, {"b", "z1"}, {"c", "z2"}} {
		node := fwtest.Node(n.name, 4000, 1<<32, 100)
		node.Labels = map[string]string{"host": n.name, "zone": n.zone}
		ni := fwtest.NodeInfo(node)
		if n.name == "a" {
			running := web("web-0")
			running.NodeName = "a"
			ni.AddPodInfo(framework.NewPodInfo(running))
		}
		nodes = append(nodes, ni)
	}
	f, err := runtime.NewFramework(ctx, plugins.NewInTreeRegistry(), runtime.DefaultProfile(),
		runtime.WithSnapshotSharedLister(fwtest.NewLister(nodes...)), runtime.WithBinder(&fwtest.Binder{}))
	if err != nil {
		t.Fatal(err)
	}
	pi := framework.NewPodInfo(web("web-1"))
	state := framework.NewCycleState()
	if _, st, _ := f.RunPreFilterPlugins(ctx, state, pi); !st.IsSuccess() {
		t.Fatalf("PreFilter = %v", st)
	}
	st := f.RunFilterPlugins(ctx, state, pi, nodes[0])
	if st.Code() != framework.Unschedulable || st.Plugin() != interpodaffinity.Name || st.Message() != interpodaffinity.ErrReasonAntiAffinityRulesNotMatch {
		t.Errorf("Filter(a) = %v %q by %q", st.Code(), st.Message(), st.Plugin())
	}
	feasible := nodes[1:]
	for _, ni := range feasible {
		if st := f.RunFilterPlugins(ctx, state, pi, ni); !st.IsSuccess() {
			t.Errorf("Filter(%s) = %v", ni.Node().Name, st)
		}
	}
	if st := f.RunPreScorePlugins(ctx, state, pi, feasible); !st.IsSuccess() {
		t.Fatal(st)
	}
	var out framework.NodeScores
	if st := f.RunScorePlugins(ctx, state, pi, feasible, &out); !st.IsSuccess() {
		t.Fatal(st)
	}
	got := map[string][2]int64{} // node -> {normalized score, weight}
	for p, name := range out.Plugins {
		if name != interpodaffinity.Name {
			continue
		}
		for i, ni := range feasible {
			got[ni.Node().Name] = [2]int64{out.Score(i, p), out.Weights[p]}
		}
	}
	// b shares zone z1 with web-0: raw -20, its own preferred anti-affinity
	// and web-0's; c does not (raw 0).
	want := map[string][2]int64{"b": {0, 2}, "c": {100, 2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("InterPodAffinity score and weight (-want,+got):\n%s", diff)
	}
}
