package defaultpreemption

import (
	"fmt"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

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
	// One copy's room serves every case, as the pool reuses it: what an
	// earlier case left in it must not show.
	reused := new(nodeCopy)
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
			got, removed := reused.withoutLowerPriority(ni, 100)
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
				{"freed below 201", want.FreedBelow(201), got.FreedBelow(201)},
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
			if diff := cmp.Diff(before, ni, cmp.Exporter(func(reflect.Type) bool { return true }), cmpopts.EquateEmpty()); diff != "" {
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
		"Requested": true, "NonZeroRequested": true, "Allocatable": true, "ImageStates": true, "Generation": true, "byPriority": true, "nameHash": true, "unschedulable": true, "tainted": true,
		"topology": true, "hasTopology": true,
	}
	typ := reflect.TypeFor[framework.NodeInfo]()
	for i := range typ.NumField() {
		if !known[typ.Field(i).Name] {
			t.Errorf("NodeInfo.%s is new: check withoutLowerPriority, then list it here", typ.Field(i).Name)
		}
	}
}

// TestRuledOutNodesCannotBeCandidates: the dry run skips a node, or a pod
// it would add back, when the filters' totals test says there is no room.
// That must never change the outcome: on random nodes, the victims match a
// plain selection, and no ruled-out node has victims that make room.
func TestRuledOutNodesCannotBeCandidates(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var nodes []*framework.NodeInfo
	for i := range 300 {
		var pods []*framework.Pod
		for j := range rng.IntN(6) {
			p := pod(fmt.Sprintf("n%d-p%d", i, j), int32(rng.IntN(4)*50), int64(rng.IntN(4)*500))
			p.Containers[0].Requests[framework.ResourceMemory] = int64(rng.IntN(4)) << 30
			if rng.IntN(3) > 0 { // the others not started yet
				started(p, rng.IntN(5))
			}
			pods = append(pods, p)
		}
		ni := fwtest.NodeInfo(fwtest.Node(fmt.Sprintf("n%d", i), 4000, 4<<30, int64(2+rng.IntN(5))), pods...)
		nodes = append(nodes, ni)
	}
	e := newEnv(t, envConfig{}, nodes...)
	ruledOut, candidates := 0, 0
	for _, prio := range []int32{0, 60, 120, 200} {
		for _, cpu := range []int64{0, 1000, 3000} {
			p := pod("preemptor", prio, cpu)
			p.Containers[0].Requests[framework.ResourceMemory] = int64(rng.IntN(3)) << 30
			state, pi, _ := e.filter(t, p)
			for _, ni := range nodes {
				freed := ni.FreedBelow(prio)
				skipped := freed.Pods > 0 && !e.f.CouldFitWithFreed(state, pi, ni, freed)
				victims, _, st := e.pl.selectVictimsOnNode(ctx, state, pi, ni, nil, t0)
				if diff := cmp.Diff(referenceVictims(t, e, state, pi, ni), podNames(victims)); diff != "" {
					t.Errorf("prio %d cpu %d node %s: victims differ from plain kube selection (-want,+got):\n%s", prio, cpu, ni.Node().Name, diff)
				}
				if st.IsSuccess() && len(victims) > 0 {
					candidates++
					if skipped {
						t.Errorf("prio %d cpu %d: node %s ruled out on totals, yet victims %v make room", prio, cpu, ni.Node().Name, podNames(victims))
					}
				}
				if skipped {
					ruledOut++
				}
			}
		}
	}
	if ruledOut == 0 || candidates == 0 {
		t.Fatalf("the random cluster tested nothing: %d nodes ruled out, %d candidates", ruledOut, candidates)
	}
}

// referenceVictims is kube's victim selection written plainly, without
// the shortcuts: a clone without every lower-priority pod, then each pod
// added back in importance order and kept if the filters still pass. nil
// when the preemptor does not fit even on the emptied node.
func referenceVictims(t *testing.T, e *env, state *framework.CycleState, pi *framework.PodInfo, ni *framework.NodeInfo) []string {
	t.Helper()
	c := ni.Clone()
	var lower []*framework.PodInfo
	for _, p := range ni.Pods {
		if p.Pod.Priority < pi.Pod.Priority {
			lower = append(lower, p)
			if err := c.RemovePod(p.Pod); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(lower) == 0 || !e.f.RunFilterPluginsWithNominatedPods(ctx, state, pi, c).IsSuccess() {
		return nil
	}
	slices.SortStableFunc(lower, func(a, b *framework.PodInfo) int { return importanceOrder(a.Pod, b.Pod, t0) })
	var victims []string
	for _, p := range lower {
		c.AddPodInfo(p)
		if e.f.RunFilterPluginsWithNominatedPods(ctx, state, pi, c).IsSuccess() {
			continue
		}
		if err := c.RemovePod(p.Pod); err != nil {
			t.Fatal(err)
		}
		victims = append(victims, p.Pod.Name)
	}
	return victims
}
