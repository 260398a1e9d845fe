package defaultpreemption

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
)

// hostPorted gives p a host port, an extended resource and required
// anti-affinity, so it touches every aggregate of a NodeInfo.
func hostPorted(p *framework.Pod, port int32) *framework.Pod {
	p.Containers[0].Ports = []framework.ContainerPort{{ContainerPort: port, HostPort: port, Protocol: framework.ProtocolTCP}}
	p.Containers[0].Requests["example.com/gpu"] = 1
	p.Affinity = &framework.Affinity{PodAntiAffinity: &framework.PodAntiAffinity{Required: []framework.PodAffinityTerm{{
		LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, TopologyKey: "h"}}}}
	return p
}

// withoutLowerPriority leaves what Clone and RemovePod of each lower
// priority pod would, and nothing done to the copy reaches the original.
func TestWithoutLowerPriority(t *testing.T) {
	tests := []struct {
		name string
		pods []*framework.Pod
	}{
		{name: "plain pods", pods: []*framework.Pod{pod("a", 1, 100), pod("b", 200, 100), pod("c", 2, 100)}},
		{name: "host ports, extended resources, anti-affinity", pods: []*framework.Pod{
			hostPorted(pod("a", 1, 100), 80), pod("b", 200, 100), hostPorted(pod("c", 200, 100), 81), hostPorted(pod("d", 2, 100), 82)}},
		{name: "nothing lower", pods: []*framework.Pod{pod("a", 100, 100), pod("b", 200, 100)}},
	}
	byName := func(a, b *framework.PodInfo) int { return strings.Compare(a.Pod.Name, b.Pod.Name) }
	sorted := func(ps []*framework.PodInfo) []string {
		out := make([]string, len(ps))
		for i, pi := range ps {
			out[i] = pi.Pod.Name
		}
		slices.Sort(out)
		return out
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ni := node("n1", 4000, tt.pods...)
			before := ni.Clone()
			want := ni.Clone()
			var wantRemoved []*framework.PodInfo
			for _, pi := range ni.Pods {
				if pi.Pod.Priority < 100 {
					wantRemoved = append(wantRemoved, pi)
					if err := want.RemovePod(pi.Pod); err != nil {
						t.Fatal(err)
					}
				}
			}
			got, removed := withoutLowerPriority(ni, 100)
			if diff := cmp.Diff(podNames(podsOf(wantRemoved)), podNames(podsOf(removed))); diff != "" {
				t.Errorf("removed (-want,+got):\n%s", diff)
			}
			if len(removed) == 0 && got != ni {
				t.Error("nothing to remove, yet a copy was made")
			}
			if diff := cmp.Diff(sorted(want.Pods), sorted(got.Pods)); diff != "" {
				t.Errorf("pods (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(sorted(want.PodsWithRequiredAntiAffinity), sorted(got.PodsWithRequiredAntiAffinity)); diff != "" {
				t.Errorf("pods with anti-affinity (-want,+got):\n%s", diff)
			}
			for _, f := range []struct {
				name      string
				want, got any
			}{
				{"requested", want.Requested, got.Requested},
				{"non-zero requested", want.NonZeroRequested, got.NonZeroRequested},
				{"used ports", want.UsedPorts, got.UsedPorts},
			} {
				if diff := cmp.Diff(f.want, f.got); diff != "" {
					t.Errorf("%s (-want,+got):\n%s", f.name, diff)
				}
			}
			if len(removed) == 0 {
				return
			}
			// The dry run adds the removed pods back and takes them out again.
			slices.SortFunc(removed, byName)
			for _, pi := range removed {
				got.AddPodInfo(pi)
			}
			if err := got.RemovePod(removed[0].Pod); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, ni, cmp.AllowUnexported(framework.NodeInfo{})); diff != "" {
				t.Errorf("the original changed (-before,+after):\n%s", diff)
			}
		})
	}
}

func podsOf(pis []*framework.PodInfo) []*framework.Pod {
	out := make([]*framework.Pod, len(pis))
	for i, pi := range pis {
		out[i] = pi.Pod
	}
	return out
}

// TestWithoutLowerPriorityKnowsEveryNodeInfoField: withoutLowerPriority
// copies only what RemovePod and AddPodInfo change. A new NodeInfo field
// must be classified here, after checking withoutLowerPriority.
func TestWithoutLowerPriorityKnowsEveryNodeInfoField(t *testing.T) {
	known := map[string]bool{
		"node": true, "Pods": true, "PodsWithAffinity": true, "PodsWithRequiredAntiAffinity": true, "UsedPorts": true,
		"Requested": true, "NonZeroRequested": true, "Allocatable": true, "ImageStates": true, "Generation": true,
	}
	typ := reflect.TypeFor[framework.NodeInfo]()
	for i := range typ.NumField() {
		if !known[typ.Field(i).Name] {
			t.Errorf("NodeInfo.%s is new: check withoutLowerPriority, then list it here", typ.Field(i).Name)
		}
	}
}
