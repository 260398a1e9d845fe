package defaultpreemption

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/framework/runtime"
)

func TestPostFilter(t *testing.T) {
	cordoned := func(ni *framework.NodeInfo) *framework.NodeInfo {
		n := *ni.Node()
		n.Unschedulable = true
		ni.SetNode(&n)
		return ni
	}
	never := pod("p", 100, 1000)
	never.PreemptionPolicy = framework.PreemptNever
	tests := []struct {
		name       string
		nodes      []*framework.NodeInfo
		pod        *framework.Pod
		evictErr   error
		wantCode   framework.Code
		wantMsg    string
		wantResult *framework.PostFilterResult
		wantEvicts []evictCall
	}{
		{
			name: "nominates the node with the least important victims and evicts them",
			nodes: []*framework.NodeInfo{
				node("n1", 2000, pod("mid", 20, 2000)),
				node("n2", 2000, pod("low", 10, 2000)),
			},
			pod:        pod("p", 100, 1000),
			wantCode:   framework.Success,
			wantResult: nominate("n2"),
			wantEvicts: []evictCall{{Preemptor: "p", Node: "n2", Victims: []string{"low"}}},
		},
		{
			name:     "preemptionPolicy Never",
			nodes:    []*framework.NodeInfo{node("n1", 2000, pod("low", 10, 2000))},
			pod:      never,
			wantCode: framework.Unschedulable,
			wantMsg:  "preemption: not eligible due to preemptionPolicy=Never.",
		},
		{
			name: "every node unresolvable: no candidates, nomination cleared",
			nodes: []*framework.NodeInfo{
				cordoned(node("n1", 2000, pod("low", 10, 2000))),
				cordoned(node("n2", 2000, pod("low2", 10, 2000))),
			},
			pod:        pod("p", 100, 1000),
			wantCode:   framework.Unschedulable,
			wantMsg:    "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
			wantResult: nominate(""),
		},
		{
			name: "nodes without victims or room explain why",
			nodes: []*framework.NodeInfo{
				node("n1", 2000, pod("high", 200, 2000)),
				node("n2", 2000, pod("high2", 200, 1000), pod("low", 10, 1000)),
				cordoned(node("n3", 2000, pod("low2", 10, 2000))),
			},
			pod:        pod("p", 100, 1500),
			wantCode:   framework.Unschedulable,
			wantMsg:    "preemption: 0/3 nodes are available: 1 Insufficient cpu, 1 No preemption victims found for incoming pod, 1 Preemption is not helpful for scheduling.",
			wantResult: nominate(""),
		},
		{
			// Fit says UnschedulableAndUnresolvable when the request exceeds
			// the node's total: no eviction helps, so the node is not tried.
			name:       "node smaller than the pod is skipped",
			nodes:      []*framework.NodeInfo{node("small", 1000, pod("low", 10, 1000))},
			pod:        pod("p", 100, 1500),
			wantCode:   framework.Unschedulable,
			wantMsg:    "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
			wantResult: nominate(""),
		},
		{
			name:       "evictor failure is an error and nominates nothing",
			nodes:      []*framework.NodeInfo{node("n1", 2000, pod("low", 10, 2000))},
			pod:        pod("p", 100, 1000),
			evictErr:   errEvict,
			wantCode:   framework.Error,
			wantMsg:    `preemption: evicting victims on node "n1": evictor down`,
			wantEvicts: []evictCall{{Preemptor: "p", Node: "n1", Victims: []string{"low"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := &recordingEvictor{err: tt.evictErr}
			e := newEnv(t, envConfig{args: Args{Evictor: ev}}, tt.nodes...)
			state, pi, m := e.filter(t, tt.pod)
			res, st := e.pl.PostFilter(ctx, state, pi, m)
			if st.Code() != tt.wantCode || st.Message() != tt.wantMsg {
				t.Errorf("status = %v %q, want %v %q", st.Code(), st.Message(), tt.wantCode, tt.wantMsg)
			}
			if diff := cmp.Diff(tt.wantResult, res); diff != "" {
				t.Errorf("result (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantEvicts, ev.calls); diff != "" {
				t.Errorf("evictions (-want,+got):\n%s", diff)
			}
			if tt.evictErr != nil && !errors.Is(st.AsError(), tt.evictErr) {
				t.Errorf("status error %v does not wrap %v", st.AsError(), tt.evictErr)
			}
		})
	}
}

func TestPostFilterThroughFramework(t *testing.T) {
	ev := &recordingEvictor{}
	e := newEnv(t, envConfig{args: Args{Evictor: ev}}, node("n1", 2000, pod("low", 10, 2000)))
	state, pi, m := e.filter(t, pod("p", 100, 1000))
	if got := e.f.ListPlugins()["PostFilter"]; !cmp.Equal(got, []string{Name}) {
		t.Fatalf("PostFilter plugins = %v", got)
	}
	res, st := e.f.RunPostFilterPlugins(ctx, state, pi, m)
	if !st.IsSuccess() || res.NominatedNodeName != "n1" {
		t.Errorf("RunPostFilterPlugins = %+v, %v; want n1, success", res, st)
	}
}

func TestNilEvictorNominatesButEvictsNothing(t *testing.T) {
	e := newEnv(t, envConfig{}, node("n1", 2000, pod("low", 10, 2000)))
	state, pi, m := e.filter(t, pod("p", 100, 1000))
	res, st := e.pl.PostFilter(ctx, state, pi, m)
	if !st.IsSuccess() || res.NominatedNodeName != "n1" {
		t.Errorf("PostFilter = %+v, %v; want n1, success", res, st)
	}
}

func TestPodEligibleToPreemptOthers(t *testing.T) {
	low := pod("low", 10, 2000)
	terminating := func(p *framework.Pod) bool { return p.Name == "low" }
	nominated := func(p *framework.Pod) *framework.Pod { p.NominatedNodeName = "n1"; return p }
	never := pod("p", 100, 1000)
	never.PreemptionPolicy = framework.PreemptNever
	tests := []struct {
		name        string
		pod         *framework.Pod
		terminating func(*framework.Pod) bool
		status      *framework.Status
		want        bool
		wantMsg     string
	}{
		{name: "default policy", pod: pod("p", 100, 1000), want: true},
		{name: "explicit PreemptLowerPriority", pod: func() *framework.Pod {
			p := pod("p", 100, 1000)
			p.PreemptionPolicy = framework.PreemptLowerPriority
			return p
		}(), want: true},
		{name: "Never", pod: never, want: false, wantMsg: "not eligible due to preemptionPolicy=Never."},
		{name: "nominated, victim terminating: waits", pod: nominated(pod("p", 100, 1000)), terminating: terminating,
			status: framework.NewStatus(framework.Unschedulable), want: false, wantMsg: "not eligible due to a terminating pod on the nominated node."},
		{name: "nominated, terminating pod has higher priority: not ours", pod: nominated(pod("p", 5, 1000)), terminating: terminating,
			status: framework.NewStatus(framework.Unschedulable), want: true},
		{name: "nominated node now unresolvable: preempt again", pod: nominated(pod("p", 100, 1000)), terminating: terminating,
			status: framework.NewStatus(framework.UnschedulableAndUnresolvable), want: true},
		{name: "no terminating state known: check skipped", pod: nominated(pod("p", 100, 1000)),
			status: framework.NewStatus(framework.Unschedulable), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envConfig{args: Args{Terminating: tt.terminating}}, node("n1", 2000, low))
			got, msg := e.pl.PodEligibleToPreemptOthers(tt.pod, tt.status)
			if got != tt.want || msg != tt.wantMsg {
				t.Errorf("got (%v, %q), want (%v, %q)", got, msg, tt.want, tt.wantMsg)
			}
		})
	}
}

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

func TestFilterPodsWithPDBViolation(t *testing.T) {
	sel := func(reqs ...framework.LabelSelectorRequirement) *framework.LabelSelector {
		return &framework.LabelSelector{MatchExpressions: reqs}
	}
	req := func(key string, op framework.LabelSelectorOperator, values ...string) framework.LabelSelectorRequirement {
		return framework.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	inNS := func(p *framework.Pod, ns string) *framework.Pod { p.Namespace = ns; return p }
	tests := []struct {
		name          string
		pods          []*framework.Pod
		budgets       []framework.DisruptionBudget
		wantViolating []string
		wantFine      []string
	}{
		{
			name:          "each covered pod uses one allowed disruption, in order",
			pods:          []*framework.Pod{labeled(pod("a", 0, 0), "app", "db"), labeled(pod("b", 0, 0), "app", "db"), labeled(pod("c", 0, 0), "app", "db")},
			budgets:       []framework.DisruptionBudget{appBudget("db", 1)},
			wantViolating: []string{"b", "c"},
			wantFine:      []string{"a"},
		},
		{
			name:     "other namespace is not covered",
			pods:     []*framework.Pod{inNS(labeled(pod("a", 0, 0), "app", "db"), "prod")},
			budgets:  []framework.DisruptionBudget{appBudget("db", 0)},
			wantFine: []string{"a"},
		},
		{
			name: "pods without labels match nothing, even DoesNotExist",
			pods: []*framework.Pod{pod("bare", 0, 0), labeled(pod("tagged", 0, 0), "tier", "x")},
			budgets: []framework.DisruptionBudget{{Namespace: "default",
				Selector: sel(req("app", framework.LabelSelectorOpDoesNotExist))}},
			wantViolating: []string{"tagged"},
			wantFine:      []string{"bare"},
		},
		{
			name: "nil, empty and invalid selectors match nothing",
			pods: []*framework.Pod{labeled(pod("a", 0, 0), "app", "db")},
			budgets: []framework.DisruptionBudget{
				{Namespace: "default"},
				{Namespace: "default", Selector: &framework.LabelSelector{}},
				{Namespace: "default", Selector: sel(req("app", framework.LabelSelectorOpIn))},
				{Namespace: "default", Selector: sel(req("app", framework.LabelSelectorOpExists, "db"))},
				{Namespace: "default", Selector: sel(req("app", "Like", "db"))},
			},
			wantFine: []string{"a"},
		},
		{
			name: "expressions: In, NotIn, Exists",
			pods: []*framework.Pod{
				labeled(pod("in", 0, 0), "app", "db", "env", "prod"),
				labeled(pod("notin", 0, 0), "app", "db", "env", "dev"),
				labeled(pod("missing", 0, 0), "env", "prod"),
			},
			budgets: []framework.DisruptionBudget{{Namespace: "default", Selector: sel(
				req("env", framework.LabelSelectorOpIn, "prod", "stage"),
				req("tier", framework.LabelSelectorOpNotIn, "cache"),
				req("app", framework.LabelSelectorOpExists))}},
			wantViolating: []string{"in"},
			wantFine:      []string{"notin", "missing"},
		},
		{
			name: "any exhausted budget makes a pod violating; every covering budget is charged",
			pods: []*framework.Pod{labeled(pod("a", 0, 0), "app", "db", "team", "x"), labeled(pod("b", 0, 0), "team", "x")},
			budgets: []framework.DisruptionBudget{appBudget("db", 5), {Namespace: "default", DisruptionsAllowed: 1,
				Selector: &framework.LabelSelector{MatchLabels: map[string]string{"team": "x"}}}},
			wantViolating: []string{"b"},
			wantFine:      []string{"a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			infos := make([]*framework.PodInfo, len(tt.pods))
			for i, p := range tt.pods {
				infos[i] = framework.NewPodInfo(p)
			}
			violating, fine := filterPodsWithPDBViolation(infos, compileBudgets(tt.budgets))
			if diff := cmp.Diff(tt.wantViolating, infoNames(violating)); diff != "" {
				t.Errorf("violating (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantFine, infoNames(fine)); diff != "" {
				t.Errorf("non-violating (-want,+got):\n%s", diff)
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

func TestNumCandidates(t *testing.T) {
	tests := []struct {
		nodes           int
		percentage, abs int32
		want            int
	}{
		{nodes: 5000, percentage: 10, abs: 100, want: 500},
		{nodes: 500, percentage: 10, abs: 100, want: 100},
		{nodes: 50, percentage: 10, abs: 100, want: 50},
		{nodes: 1000, percentage: 0, abs: 7, want: 7},
		{nodes: 1000, percentage: 50, abs: 0, want: 500},
		{nodes: 9, percentage: 100, abs: 0, want: 9},
		{nodes: 15, percentage: 10, abs: 0, want: 1},
	}
	for _, tt := range tests {
		if got := numCandidates(tt.nodes, tt.percentage, tt.abs); got != tt.want {
			t.Errorf("numCandidates(%d, %d%%, %d) = %d, want %d", tt.nodes, tt.percentage, tt.abs, got, tt.want)
		}
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

func TestDryRunEvictsNothing(t *testing.T) {
	// n1 holds a bound victim and one waiting at Permit; the preemptor
	// needs both gone.
	tests := []struct {
		dryRun      bool
		wantEvicts  []evictCall
		wantPending bool // the waiting victim is still undecided
	}{
		{dryRun: true, wantPending: true},
		{dryRun: false, wantEvicts: []evictCall{{Preemptor: "p", Node: "n1", Victims: []string{"bound"}}}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("dryRun=%v", tt.dryRun), func(t *testing.T) {
			clock := fwtest.NewFakeClock(t0)
			ev := &recordingEvictor{}
			waiting := pod("waiting", 1, 1000)
			e := newEnv(t, envConfig{args: Args{Evictor: ev, Clock: clock}, extra: []framework.Plugin{&holdPermit{}},
				opts: []runtime.Option{runtime.WithClock(clock)}},
				node("n1", 2000, waiting, pod("bound", 2, 1000)))
			if st := e.f.RunPermitPlugins(ctx, framework.NewCycleState(), waiting, "n1"); !st.IsWait() {
				t.Fatalf("Permit = %v, want Wait", st)
			}
			state, pi, m := e.filter(t, pod("p", 100, 2000))

			nodeName, victims, st := e.pl.Preempt(ctx, state, pi, m, tt.dryRun)
			if !st.IsSuccess() || nodeName != "n1" {
				t.Fatalf("Preempt = %q, %v; want n1, success", nodeName, st)
			}
			if diff := cmp.Diff([]string{"bound", "waiting"}, podNames(victims)); diff != "" {
				t.Errorf("victims (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantEvicts, ev.calls); diff != "" {
				t.Errorf("evictions (-want,+got):\n%s", diff)
			}
			wp := e.f.GetWaitingPod(framework.WaitingPodKey(waiting))
			if wp == nil {
				t.Fatal("the waiting pod is gone")
			}
			// Reject succeeds only on an undecided pod; either way the
			// decision is then waiting in WaitOnPermit, which cannot block.
			if pending := wp.Reject("test", "probe"); pending != tt.wantPending {
				t.Errorf("waiting victim undecided = %v, want %v", pending, tt.wantPending)
			}
			got := e.f.WaitOnPermit(ctx, waiting)
			if !tt.wantPending && (got.Code() != framework.Unschedulable || got.Plugin() != Name || got.Message() != "preempted") {
				t.Errorf("waiting victim got %v %q from %q, want Unschedulable \"preempted\" from %s", got.Code(), got.Message(), got.Plugin(), Name)
			}
		})
	}
}

func TestTerminatingVictimsAreNotEvictedAgain(t *testing.T) {
	ev := &recordingEvictor{}
	gone := pod("going", 1, 1000)
	e := newEnv(t, envConfig{args: Args{Evictor: ev, Terminating: func(p *framework.Pod) bool { return p == gone }}},
		node("n1", 2000, gone, pod("stays", 2, 1000)))
	state, pi, m := e.filter(t, pod("p", 100, 2000))
	if _, st := e.pl.PostFilter(ctx, state, pi, m); !st.IsSuccess() {
		t.Fatal(st)
	}
	if diff := cmp.Diff([]evictCall{{Preemptor: "p", Node: "n1", Victims: []string{"stays"}}}, ev.calls); diff != "" {
		t.Errorf("evictions (-want,+got):\n%s", diff)
	}
}

func TestNominatedPodsCountInPreemption(t *testing.T) {
	// n1's victim is the least important, but a higher-priority pod
	// nominated to n1 keeps the room even after evicting it.
	nominatedPod := framework.NewPodInfo(pod("nominated", 200, 3000))
	tests := []struct {
		name      string
		nominator framework.PodNominator
		want      string
	}{
		{name: "without nominated pods", want: "n1"},
		{name: "nominated pod takes n1's room", nominator: fakeNominator{"n1": {nominatedPod}}, want: "n2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []runtime.Option
			if tt.nominator != nil {
				opts = append(opts, runtime.WithPodNominator(tt.nominator))
			}
			e := newEnv(t, envConfig{opts: opts},
				node("n1", 4000, pod("x", 1, 3000)),
				node("n2", 4000, pod("y", 5, 4000)))
			state, pi, m := e.filter(t, pod("p", 100, 2000))
			nodeName, _, st := e.pl.Preempt(ctx, state, pi, m, true)
			if !st.IsSuccess() || nodeName != tt.want {
				t.Errorf("Preempt = %q, %v; want %q", nodeName, st, tt.want)
			}
		})
	}
}

func TestPreFilterExtensionsFollowHypotheticalChanges(t *testing.T) {
	// podCount decides fit from its PreFilter state alone, so preemption
	// finds room only if it reports every removal and reprieve, on a copy.
	pc := &podCount{limit: 2}
	e := newEnv(t, envConfig{extra: []framework.Plugin{pc}},
		node("n1", 100000, pod("a", 1, 0), pod("b", 2, 0)))
	state, pi, m := e.filter(t, pod("p", 100, 0))
	nodeName, victims, st := e.pl.Preempt(ctx, state, pi, m, true)
	if !st.IsSuccess() || nodeName != "n1" {
		t.Fatalf("Preempt = %q, %v; want n1", nodeName, st)
	}
	if diff := cmp.Diff([]string{"a"}, podNames(victims)); diff != "" {
		t.Errorf("victims (-want,+got):\n%s", diff)
	}
	s, err := framework.ReadState[*podCountState](state, podCountKey)
	if err != nil || s.count["n1"] != 2 {
		t.Errorf("the cycle's own state changed: %+v, %v", s, err)
	}
}

func TestNewRejectsBadArgs(t *testing.T) {
	ptr := func(v int32) *int32 { return &v }
	tests := []struct {
		name string
		args any
		h    framework.Handle
		want string
	}{
		{name: "both bounds zero", args: &Args{MinCandidateNodesPercentage: ptr(0), MinCandidateNodesAbsolute: ptr(0)}, want: "cannot both be zero"},
		{name: "percentage above 100", args: Args{MinCandidateNodesPercentage: ptr(101)}, want: "not in [0, 100]"},
		{name: "negative absolute", args: &Args{MinCandidateNodesAbsolute: ptr(-1)}, want: "not in [0, inf)"},
		{name: "negative parallelism", args: Args{Parallelism: -1}, want: "parallelism is -1"},
		{name: "wrong args type", args: 3, want: "want args of type *Args"},
		{name: "handle cannot run filters", args: nil, h: handleOnly{}, want: "cannot run filters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(ctx, tt.args, tt.h)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestLowerPriorityNominatedPods(t *testing.T) {
	n := fakeNominator{"n1": {framework.NewPodInfo(pod("low", 1, 0)), framework.NewPodInfo(pod("same", 100, 0)), framework.NewPodInfo(pod("high", 200, 0))}}
	if diff := cmp.Diff([]string{"low"}, podNames(LowerPriorityNominatedPods(n, pod("p", 100, 0), "n1"))); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	if got := LowerPriorityNominatedPods(nil, pod("p", 100, 0), "n1"); got != nil {
		t.Errorf("nil nominator: got %v", got)
	}
}

// handleOnly is a Handle that cannot run filters.
type handleOnly struct{ framework.Handle }

// holdPermit makes every pod wait at Permit.
type holdPermit struct{}

func (*holdPermit) Name() string { return "Hold" }

func (*holdPermit) Permit(context.Context, *framework.CycleState, *framework.Pod, string) (*framework.Status, time.Duration) {
	return framework.NewStatus(framework.Wait), time.Hour
}

// podCount admits a pod while its state's count of pods on the node is
// below limit; the count comes from PreFilter and its extensions only.
type podCount struct{ limit int }

const podCountKey framework.StateKey = "test/podCount"

type podCountState struct{ count map[string]int }

func (s *podCountState) Clone() framework.StateData {
	c := &podCountState{count: map[string]int{}}
	for k, v := range s.count {
		c.count[k] = v
	}
	return c
}

func (*podCount) Name() string { return "PodCount" }

func (*podCount) PreFilter(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, nodes []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	s := &podCountState{count: map[string]int{}}
	for _, ni := range nodes {
		s.count[ni.Node().Name] = len(ni.Pods)
	}
	state.Write(podCountKey, s)
	return nil, nil
}

func (pc *podCount) PreFilterExtensions() framework.PreFilterExtensions { return pc }

func (*podCount) AddPod(_ context.Context, state *framework.CycleState, _, _ *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadState[*podCountState](state, podCountKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	s.count[ni.Node().Name]++
	return nil
}

func (*podCount) RemovePod(_ context.Context, state *framework.CycleState, _, _ *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadState[*podCountState](state, podCountKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	s.count[ni.Node().Name]--
	return nil
}

func (pc *podCount) Filter(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadState[*podCountState](state, podCountKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	if s.count[ni.Node().Name] >= pc.limit {
		return framework.NewStatus(framework.Unschedulable, "too many pods by count")
	}
	return nil
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
