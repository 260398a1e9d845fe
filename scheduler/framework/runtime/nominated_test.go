package runtime_test

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/framework/runtime"
)

// countingNominator is a CountingPodNominator over one node's pods, all of
// which count against every pod, with one memo.
type countingNominator struct {
	node     string
	pods     []*framework.PodInfo
	overlays *runtime.NominatedOverlays
}

func (n *countingNominator) NominatedPodsForNode(node string) []*framework.PodInfo {
	if node != n.node {
		return nil
	}
	return n.pods
}

func (n *countingNominator) NominatedPodsAgainst(node *framework.NodeInfo, _ *framework.Pod) ([]*framework.PodInfo, *runtime.NominatedOverlays) {
	if node.Node().Name != n.node {
		return nil, nil
	}
	return n.pods, n.overlays
}

// seen records the NodeInfos a filter was given, and passes.
type seen struct{ nodes []*framework.NodeInfo }

func (s *seen) plugin() *filterPlugin {
	return &filterPlugin{name: "Seen", filter: func(ni *framework.NodeInfo) *framework.Status {
		s.nodes = append(s.nodes, ni)
		return nil
	}}
}

// withPorts gives a pod a host port and an extended resource, so adding it
// touches every aggregate of a NodeInfo.
func withPorts(p *framework.Pod, port int32) *framework.Pod {
	p.Containers[0].Ports = []framework.ContainerPort{{ContainerPort: port, HostPort: port, Protocol: framework.ProtocolTCP}}
	p.Containers[0].Requests = framework.ResourceList{framework.ResourceCPU: 100, "example.com/gpu": 1}
	p.Affinity = &framework.Affinity{PodAntiAffinity: &framework.PodAntiAffinity{Required: []framework.PodAffinityTerm{{
		LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, TopologyKey: "h"}}}}
	return p
}

// The copy a nominated pod is added to shares nothing the addition
// changes with the snapshot's NodeInfo.
func TestNominatedPodsLeaveTheNodeAlone(t *testing.T) {
	s := &seen{}
	nominee := withPorts(fwtest.Pod("nominee", nil), 81)
	nominee.Priority = 10
	f := mustFramework(t, registryOf(s.plugin()), &runtime.Profile{Plugins: runtime.Plugins{Filter: runtime.PluginSet{Enabled: refs("Seen")}}},
		runtime.WithPodNominator(fakeNominator{"n": {framework.NewPodInfo(nominee)}}))
	ni := fwtest.NodeInfo(fwtest.Node("n", 1000, 1000, 10), withPorts(fwtest.Pod("there", nil), 80))
	before := ni.Clone()
	if st := f.RunFilterPluginsWithNominatedPods(ctx, framework.NewCycleState(), podInfo("p"), ni); !st.IsSuccess() {
		t.Fatal(st)
	}
	if len(s.nodes) != 2 || len(s.nodes[0].Pods) != 2 || s.nodes[1] != ni {
		t.Fatalf("filtered %d nodes; want the node with the nominee, then the node itself", len(s.nodes))
	}
	with := s.nodes[0]
	if !with.UsedPorts.CheckConflict("", framework.ProtocolTCP, 81) || with.Requested.Scalar["example.com/gpu"] != 2 || len(with.PodsWithRequiredAntiAffinity) != 2 {
		t.Errorf("the nominee is not fully on the copy: ports %v, requested %+v", with.UsedPorts, with.Requested)
	}
	if diff := cmp.Diff(before, ni, cmp.Exporter(func(reflect.Type) bool { return true }), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("the snapshot's NodeInfo changed (-before,+after):\n%s", diff)
	}
}

// A node with the same nominations and no change since is given the copy
// an earlier cycle made; a change to either makes a new one, and copies of
// nodes outside the snapshot are never remembered.
func TestNominatedOverlaysAreReused(t *testing.T) {
	s := &seen{}
	nominee := fwtest.Pod("nominee", fwtest.Resources(100, 0))
	nom := &countingNominator{node: "n", pods: []*framework.PodInfo{framework.NewPodInfo(nominee)}, overlays: &runtime.NominatedOverlays{}}
	ni := fwtest.NodeInfo(fwtest.Node("n", 1000, 1000, 10))
	lister := fwtest.NewLister(ni)
	f := mustFramework(t, registryOf(s.plugin()), &runtime.Profile{Plugins: runtime.Plugins{Filter: runtime.PluginSet{Enabled: refs("Seen")}}},
		runtime.WithPodNominator(nom), runtime.WithSnapshotSharedLister(lister))
	filter := func(node *framework.NodeInfo) *framework.NodeInfo {
		t.Helper()
		s.nodes = nil
		if st := f.RunFilterPluginsWithNominatedPods(ctx, framework.NewCycleState(), podInfo("p"), node); !st.IsSuccess() {
			t.Fatal(st)
		}
		if len(s.nodes) != 2 || len(s.nodes[0].Pods) != len(node.Pods)+1 {
			t.Fatalf("filtered %d nodes; want the node with the nominee first", len(s.nodes))
		}
		return s.nodes[0]
	}

	first := filter(ni)
	if again := filter(ni); again != first {
		t.Error("unchanged node and nominations: the copy was not reused")
	}
	if other := filter(ni.Clone()); other == first {
		t.Error("a NodeInfo outside the snapshot got the snapshot's copy")
	}
	if again := filter(ni); again != first {
		t.Error("a NodeInfo outside the snapshot displaced the snapshot's copy")
	}
	ni.AddPodInfo(framework.NewPodInfo(fwtest.Pod("new", nil)))
	if changed := filter(ni); changed == first {
		t.Error("the node changed, yet the old copy was reused")
	}
	nom.overlays = &runtime.NominatedOverlays{} // new nominations
	changed := filter(ni)
	if again := filter(ni); again != changed {
		t.Error("new nominations: the copy was not remembered")
	}
}

// State is copied, and the extensions told of each nominated pod, only when
// an extension is active this cycle.
func TestNominatedPodsAndPreFilterExtensions(t *testing.T) {
	for _, skip := range []bool{false, true} {
		ext := &countingExt{}
		p := &filterPlugin{name: "Ext", ext: ext, preFilter: func(*framework.PodInfo) (*framework.PreFilterResult, *framework.Status) {
			if skip {
				return nil, framework.NewStatus(framework.Skip)
			}
			return nil, nil
		}}
		nominees := []*framework.PodInfo{framework.NewPodInfo(fwtest.Pod("a", nil)), framework.NewPodInfo(fwtest.Pod("b", nil))}
		f := mustFramework(t, registryOf(p), &runtime.Profile{Plugins: runtime.Plugins{MultiPoint: runtime.PluginSet{Enabled: refs("Ext")}}},
			runtime.WithPodNominator(fakeNominator{"n": nominees}))
		state := framework.NewCycleState()
		if _, st, _ := f.RunPreFilterPlugins(ctx, state, podInfo("p")); !st.IsSuccess() {
			t.Fatal(st)
		}
		if got := f.HasActivePreFilterExtensions(state); got == skip {
			t.Errorf("skip=%v: HasActivePreFilterExtensions = %v", skip, got)
		}
		if st := f.RunFilterPluginsWithNominatedPods(ctx, state, podInfo("p"), fwtest.NodeInfo(fwtest.Node("n", 1, 1, 10))); !st.IsSuccess() {
			t.Fatal(st)
		}
		want := 2
		if skip {
			want = 0
		}
		if ext.added != want {
			t.Errorf("skip=%v: AddPod ran %d times, want %d", skip, ext.added, want)
		}
	}
}
