package defaultpreemption

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/framework/runtime"
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
		"Requested": true, "NonZeroRequested": true, "Allocatable": true, "ImageStates": true, "Generation": true, "byPriority": true, "name": true, "nameHash": true, "unschedulable": true, "tainted": true,
		"topology": true, "hasTopology": true, "canonical": true,
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

// Long for its table: one case per behaviour, kept together so they
// read side by side.
func TestSelectVictimsOnNode(t *testing.T) {
	tests := []struct {
		name           string
		pods           []*framework.Pod
		budgets        budgets
		preemptorCPU   int64
		wantVictims    []string
		wantViolations int
		wantCode       framework.Code
		wantMsg        string
	}{
		{
			name:         "reprieves the most important pods first",
			pods:         []*framework.Pod{pod("a", 1, 2000), pod("b", 2, 1000), pod("c", 3, 1000)},
			preemptorCPU: 2000,
			wantVictims:  []string{"a"},
		},
		{
			name:         "equal priority: the earlier started pod is kept",
			pods:         []*framework.Pod{started(pod("new", 1, 2000), 1), started(pod("old", 1, 2000), 10)},
			preemptorCPU: 2000,
			wantVictims:  []string{"new"},
		},
		{
			name:         "equal priority, reversed start times",
			pods:         []*framework.Pod{started(pod("ten", 1, 2000), 10), started(pod("twenty", 1, 2000), 20)},
			preemptorCPU: 2000,
			wantVictims:  []string{"ten"},
		},
		{
			name:         "a pod not started yet counts as starting now",
			pods:         []*framework.Pod{pod("unstarted", 1, 2000), started(pod("running", 1, 2000), 1)},
			preemptorCPU: 2000,
			wantVictims:  []string{"unstarted"},
		},
		{
			name:         "without budgets the lower priority pod goes",
			pods:         []*framework.Pod{labeled(pod("db", 1, 2000), "app", "db"), pod("web", 2, 2000)},
			preemptorCPU: 2000,
			wantVictims:  []string{"db"},
		},
		{
			name:         "budget-protected pods are reprieved before more important ones",
			pods:         []*framework.Pod{labeled(pod("db", 1, 2000), "app", "db"), pod("web", 2, 2000)},
			budgets:      budgets{appBudget("db", 0)},
			preemptorCPU: 2000,
			wantVictims:  []string{"web"},
		},
		{
			name:           "violations are counted when they cannot be spared",
			pods:           []*framework.Pod{labeled(pod("db1", 1, 2000), "app", "db"), labeled(pod("db2", 2, 2000), "app", "db")},
			budgets:        budgets{appBudget("db", 0)},
			preemptorCPU:   4000,
			wantVictims:    []string{"db2", "db1"},
			wantViolations: 2,
		},
		{
			name: "budget room goes to the most important pod first",
			// db2 is more important, so it uses the one allowed disruption
			// and db1 is the violating one, reprieved first.
			pods:         []*framework.Pod{labeled(pod("db1", 1, 2000), "app", "db"), labeled(pod("db2", 2, 2000), "app", "db")},
			budgets:      budgets{appBudget("db", 1)},
			preemptorCPU: 2000,
			wantVictims:  []string{"db2"},
		},
		{
			name:           "victims from both groups are merged by importance",
			pods:           []*framework.Pod{labeled(pod("db", 1, 2000), "app", "db"), pod("web", 5, 2000)},
			budgets:        budgets{appBudget("db", 0)},
			preemptorCPU:   4000,
			wantVictims:    []string{"web", "db"},
			wantViolations: 1,
		},
		{
			name:         "no lower priority pods",
			pods:         []*framework.Pod{pod("same", 100, 2000)},
			preemptorCPU: 2000,
			wantCode:     framework.UnschedulableAndUnresolvable,
			wantMsg:      "No preemption victims found for incoming pod",
		},
		{
			name:         "does not fit even with every victim gone",
			pods:         []*framework.Pod{pod("high", 200, 3000), pod("low", 1, 1000)},
			preemptorCPU: 2000,
			wantCode:     framework.Unschedulable,
			wantMsg:      "Insufficient cpu",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ni := node("n1", 4000, tt.pods...)
			e := newEnv(t, envConfig{}, ni)
			state, pi, _ := e.filter(t, pod("p", 100, tt.preemptorCPU))
			before := ni.Clone()
			victims, violations, st := e.pl.selectVictimsOnNode(ctx, state, pi, ni, compileBudgets(tt.budgets), t0)
			if st.Code() != tt.wantCode || st.Message() != tt.wantMsg {
				t.Fatalf("status = %v %q, want %v %q", st.Code(), st.Message(), tt.wantCode, tt.wantMsg)
			}
			if diff := cmp.Diff(tt.wantVictims, podNames(victims)); diff != "" {
				t.Errorf("victims (-want,+got):\n%s", diff)
			}
			if violations != tt.wantViolations {
				t.Errorf("violations = %d, want %d", violations, tt.wantViolations)
			}
			if diff := cmp.Diff(before, ni, cmp.Exporter(func(reflect.Type) bool { return true }), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("the snapshot NodeInfo changed (-before,+after):\n%s", diff)
			}
		})
	}
}

func infoNames(infos []*framework.PodInfo) []string {
	var out []string
	for _, pi := range infos {
		out = append(out, pi.Pod.Name)
	}
	return out
}

// victim is a victim with a priority, started minutesAgo (<0: not started).
func victim(priority int32, minutesAgo int) *framework.Pod {
	p := &framework.Pod{Namespace: "default", Name: fmt.Sprintf("v%d-%d", priority, minutesAgo), Priority: priority}
	if minutesAgo >= 0 {
		p.StartTime = t0.Add(-time.Duration(minutesAgo) * time.Minute)
	}
	return p
}

// Long for its table: one case per behaviour, kept together so they
// read side by side.
func TestSelectCandidate(t *testing.T) {
	const minInt32 = -1 << 31
	cand := func(name string, violations int64, victims ...*framework.Pod) Candidate {
		return Candidate{Name: name, NumPDBViolations: violations, Victims: victims}
	}
	// In every case the winner is not first, and it loses on every rule
	// after the one named, so only that rule can pick it.
	tests := []struct {
		name       string
		candidates []Candidate
		want       string
	}{
		{
			name:       "single candidate",
			candidates: []Candidate{cand("only", 3, victim(9, 1))},
			want:       "only",
		},
		{
			name: "1. fewest budget violations",
			candidates: []Candidate{
				cand("a", 1, victim(1, 100)),
				cand("b", 0, victim(50, 1), victim(50, 1), victim(50, 1)),
			},
			want: "b",
		},
		{
			name: "2. lowest highest victim priority",
			candidates: []Candidate{
				cand("a", 0, victim(5, 100)),
				cand("b", 0, victim(4, 1), victim(4, 1), victim(4, 1)),
			},
			want: "b",
		},
		{
			name: "3. smallest shifted priority sum, even with more victims",
			candidates: []Candidate{
				cand("a", 0, victim(-100, 100), victim(-100, 100)),
				cand("b", 0, victim(-100, 1), victim(minInt32, 1), victim(minInt32, 1)),
			},
			want: "b",
		},
		{
			name: "3. shifting keeps many negative victims from winning",
			candidates: []Candidate{
				cand("a", 0, victim(-10, 1), victim(-10, 1)),
				cand("b", 0, victim(-10, 100)),
			},
			want: "b",
		},
		{
			name: "4. fewest victims",
			candidates: []Candidate{
				cand("a", 0, victim(0, 100), victim(minInt32, 100), victim(minInt32, 100)),
				cand("b", 0, victim(0, 1), victim(minInt32, 1)),
			},
			want: "b",
		},
		{
			name: "5. latest start of the highest priority victims",
			candidates: []Candidate{
				cand("a", 0, victim(5, 10), victim(1, 1)),
				cand("b", 0, victim(5, 5), victim(1, 100)),
			},
			want: "b",
		},
		{
			name: "5. the earliest among equally important victims counts",
			candidates: []Candidate{
				cand("a", 0, victim(5, 1), victim(5, 30)),
				cand("b", 0, victim(5, 20), victim(5, 20)),
			},
			want: "b",
		},
		{
			name: "5. a victim not started yet counts as starting now",
			candidates: []Candidate{
				cand("a", 0, victim(5, 1)),
				cand("b", 0, victim(5, -1)),
			},
			want: "b",
		},
		{
			name: "6. full tie: the first",
			candidates: []Candidate{
				cand("a", 0, victim(5, 1)),
				cand("b", 0, victim(5, 1)),
			},
			want: "a",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := SelectCandidate(tt.candidates, t0)
			if got == nil || got.Name != tt.want {
				t.Errorf("got %+v, want %s", got, tt.want)
			}
		})
	}
	if SelectCandidate(nil, t0) != nil {
		t.Error("no candidates: want nil")
	}
}

func TestDryRunStopsWithEnoughCandidates(t *testing.T) {
	// Ten nodes, each with one victim; on n4..n6 the victim is protected by
	// an exhausted budget. Three candidates wanted, starting at n4.
	var nodes []*framework.NodeInfo
	for i := range 10 {
		v := pod(fmt.Sprintf("v%d", i), 1, 2000)
		if i >= 4 && i <= 6 {
			labeled(v, "app", "db")
		}
		nodes = append(nodes, node(fmt.Sprintf("n%d", i), 2000, v))
	}
	tests := []struct {
		name    string
		offset  int
		budgets budgets
		want    []string
	}{
		{
			name:   "stops after three candidates, wrapping round",
			offset: 8,
			want:   []string{"n8", "n9", "n0"},
		},
		{
			name:    "goes on past violating candidates until one is clean; clean first",
			offset:  4,
			budgets: budgets{appBudget("db", 0)},
			want:    []string{"n7", "n4", "n5", "n6"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envConfig{}, nodes...)
			state, pi, _ := e.filter(t, pod("p", 100, 2000))
			got, failed, err := e.pl.dryRun(ctx, state, pi, nodes, compileBudgets(tt.budgets), tt.offset, 3, t0)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range got {
				names = append(names, c.Name)
			}
			if diff := cmp.Diff(tt.want, names); diff != "" {
				t.Errorf("candidates (-want,+got):\n%s", diff)
			}
			if n := failed.nodeToStatus().Len(); n != 0 {
				t.Errorf("no node failed, yet %d statuses recorded", n)
			}
		})
	}
}

func TestMinCandidateArgsBoundTheDryRun(t *testing.T) {
	// 20 identical nodes; the number of candidates found is what the args
	// ask for, and the same seed gives the same candidates.
	var nodes []*framework.NodeInfo
	for i := range 20 {
		nodes = append(nodes, node(fmt.Sprintf("n%02d", i), 2000, pod(fmt.Sprintf("v%d", i), 1, 2000)))
	}
	ptr := func(v int32) *int32 { return &v }
	tests := []struct {
		name            string
		percentage, abs *int32
		want            int
	}{
		{name: "defaults: absolute 100 caps at all nodes", want: 20},
		{name: "absolute", percentage: ptr(0), abs: ptr(4), want: 4},
		{name: "percentage above absolute", percentage: ptr(50), abs: ptr(3), want: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := func() []string {
				e := newEnv(t, envConfig{args: Args{MinCandidateNodesPercentage: tt.percentage, MinCandidateNodesAbsolute: tt.abs, Seed: 42}}, nodes...)
				state, pi, m := e.filter(t, pod("p", 100, 2000))
				got, _, err := e.pl.FindCandidates(ctx, state, pi, m)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, c := range got {
					names = append(names, c.Name)
				}
				return names
			}
			first := run()
			if len(first) != tt.want {
				t.Errorf("got %d candidates %v, want %d", len(first), first, tt.want)
			}
			if diff := cmp.Diff(first, run()); diff != "" {
				t.Errorf("same seed, different candidates (-first,+second):\n%s", diff)
			}
		})
	}
}

func TestParallelDryRun(t *testing.T) {
	// With two workers, chunks already started finish after the stop, so
	// more nodes may be tried, but no more candidates than asked are kept
	// and the outcome is one of them.
	var nodes []*framework.NodeInfo
	for i := range 60 {
		nodes = append(nodes, node(fmt.Sprintf("n%02d", i), 2000, pod(fmt.Sprintf("v%d", i), int32(i%3), 2000)))
	}
	abs := int32(5)
	pct := int32(0)
	// Two workers from the framework, or from Args with a framework of one.
	for _, cfg := range []envConfig{
		{args: Args{MinCandidateNodesAbsolute: &abs, MinCandidateNodesPercentage: &pct}, opts: []runtime.Option{runtime.WithParallelism(2)}},
		{args: Args{MinCandidateNodesAbsolute: &abs, MinCandidateNodesPercentage: &pct, Parallelism: 2}},
	} {
		e := newEnv(t, cfg, nodes...)
		if got := e.pl.parallelizer().Parallelism(); got != 2 {
			t.Errorf("dry run parallelism %d, want 2", got)
		}
		state, pi, m := e.filter(t, pod("p", 100, 2000))
		got, _, err := e.pl.FindCandidates(ctx, state, pi, m)
		if err != nil || len(got) != 5 {
			t.Fatalf("FindCandidates = %d candidates, %v; want 5", len(got), err)
		}
		nodeName, victims, st := e.pl.Preempt(ctx, state, pi, m, true)
		if !st.IsSuccess() || len(victims) != 1 || nodeName == "" {
			t.Errorf("Preempt = %q, %v, %v", nodeName, podNames(victims), st)
		}
	}
}
