package runtime_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework/runtime"
)

// kubeDefaultOrder is kube-scheduler's default MultiPoint list with its
// score weights (0 where the plugin does not score).
var kubeDefaultOrder = []runtime.PluginRef{
	{Name: "SchedulingGates"},
	{Name: "PrioritySort"},
	{Name: "NodeUnschedulable"},
	{Name: "NodeName"},
	{Name: "TaintToleration", Weight: 3},
	{Name: "NodeAffinity", Weight: 2},
	{Name: "NodePorts"},
	{Name: "NodeResourcesFit", Weight: 1},
	{Name: "VolumeRestrictions"},
	{Name: "NodeVolumeLimits"},
	{Name: "VolumeBinding"},
	{Name: "VolumeZone"},
	{Name: "PodTopologySpread", Weight: 2},
	{Name: "InterPodAffinity", Weight: 2},
	{Name: "DefaultPreemption"},
	{Name: "NodeResourcesBalancedAllocation", Weight: 1},
	{Name: "ImageLocality", Weight: 1},
	{Name: "DefaultBinder"},
}

// The default profile is kube's list minus plugins Berth lacks: same
// relative order, same weights, and at least the plugins named here.
func TestDefaultProfileFollowsKube(t *testing.T) {
	got := runtime.DefaultProfile().Plugins.MultiPoint.Enabled
	next := 0
	for _, ref := range got {
		for next < len(kubeDefaultOrder) && kubeDefaultOrder[next].Name != ref.Name {
			next++
		}
		if next == len(kubeDefaultOrder) {
			t.Fatalf("%s is out of kube's order or not a kube default plugin; profile: %v", ref.Name, got)
		}
		if diff := cmp.Diff(kubeDefaultOrder[next], ref); diff != "" {
			t.Errorf("(-kube,+berth):\n%s", diff)
		}
		next++
	}
	have := map[string]bool{}
	for _, ref := range got {
		have[ref.Name] = true
	}
	for _, name := range []string{"SchedulingGates", "PrioritySort", "NodeUnschedulable", "NodeName", "TaintToleration",
		"NodeAffinity", "NodePorts", "NodeResourcesFit", "InterPodAffinity", "NodeResourcesBalancedAllocation", "ImageLocality", "DefaultBinder"} {
		if !have[name] {
			t.Errorf("default profile lacks %s", name)
		}
	}
}
