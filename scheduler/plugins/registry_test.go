package plugins_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/framework/runtime"
	"github.com/berth-io/berth/scheduler/plugins"
)

func TestDefaultProfileWithInTreeRegistry(t *testing.T) {
	f, err := runtime.NewFramework(context.Background(), plugins.NewInTreeRegistry(), runtime.DefaultProfile(),
		runtime.WithSnapshotSharedLister(fwtest.NewLister()), runtime.WithBinder(&fwtest.Binder{}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"QueueSort":  {"PrioritySort"},
		"PreEnqueue": {"SchedulingGates", "Coscheduling"},
		"PostFilter": {"DefaultPreemption"},
		"PreFilter":  {"NodeAffinity", "NodePorts", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity", "Coscheduling"},
		"Filter":     {"NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity", "RejectedNodes"},
		"PreScore":   {"TaintToleration", "NodeAffinity", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity", "NodeResourcesBalancedAllocation", "ImageLocality"},
		"Score":      {"TaintToleration", "NodeAffinity", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity", "NodeResourcesBalancedAllocation", "ImageLocality"},
		"Reserve":    {"Coscheduling"},
		"Permit":     {"Coscheduling"},
		"Bind":       {"DefaultBinder"},
	}
	if diff := cmp.Diff(want, f.ListPlugins()); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	var withEvents []string
	for name := range f.EventsToRegister() {
		withEvents = append(withEvents, name)
	}
	if diff := cmp.Diff([]string{"Coscheduling", "InterPodAffinity", "NodeAffinity", "NodeName", "NodePorts", "NodeResourcesFit", "NodeUnschedulable", "PodTopologySpread", "RejectedNodes", "SchedulingGates", "TaintToleration"}, runtime.SortedNames(toSet(withEvents))); diff != "" {
		t.Errorf("plugins with events (-want,+got):\n%s", diff)
	}
}

func toSet(s []string) map[string]struct{} {
	m := map[string]struct{}{}
	for _, v := range s {
		m[v] = struct{}{}
	}
	return m
}

// The default profile's Score plugins run with kube's weights.
func TestDefaultProfileScoreWeights(t *testing.T) {
	node := fwtest.NodeInfo(fwtest.Node("n", 4000, 1<<30, 10))
	f, err := runtime.NewFramework(context.Background(), plugins.NewInTreeRegistry(), runtime.DefaultProfile(),
		runtime.WithSnapshotSharedLister(fwtest.NewLister(node)), runtime.WithBinder(&fwtest.Binder{}))
	if err != nil {
		t.Fatal(err)
	}
	pod := fwtest.Pod("p", fwtest.Resources(100, 1<<20))
	// A preference keeps NodeAffinity from skipping its Score.
	pod.Affinity = &framework.Affinity{NodeAffinity: &framework.NodeAffinity{Preferred: []framework.PreferredSchedulingTerm{{
		Weight: 1, Preference: framework.NodeSelectorTerm{MatchFields: []framework.NodeSelectorRequirement{{Key: "metadata.name", Operator: framework.NodeSelectorOpIn, Values: []string{"n"}}}}}}}}
	// A soft constraint of its own makes PodTopologySpread score too.
	pod.Labels = map[string]string{"app": "web"}
	pod.TopologySpreadConstraints = []framework.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: framework.ScheduleAnyway,
		LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
	}}
	pi := framework.NewPodInfo(pod)
	state := framework.NewCycleState()
	nodes := []*framework.NodeInfo{node}
	if st := f.RunPreScorePlugins(context.Background(), state, pi, nodes); !st.IsSuccess() {
		t.Fatal(st)
	}
	var out framework.NodeScores
	if st := f.RunScorePlugins(context.Background(), state, pi, nodes, &out); !st.IsSuccess() {
		t.Fatal(st)
	}
	got := map[string]int64{}
	for i, name := range out.Plugins {
		got[name] = out.Weights[i]
	}
	want := map[string]int64{"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1, "PodTopologySpread": 2, "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("weight of %s = %d, want %d (all: %v)", name, got[name], w, got)
		}
	}
}
