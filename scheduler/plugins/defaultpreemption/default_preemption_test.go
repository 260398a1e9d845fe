package defaultpreemption

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/framework/runtime"
)

// Long for its table: one case per behaviour, kept together so they
// read side by side.
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
			e := newEnv(t, envConfig{evictor: ev}, tt.nodes...)
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
	e := newEnv(t, envConfig{evictor: ev}, node("n1", 2000, pod("low", 10, 2000)))
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
	nominated := func(p *framework.Pod) *framework.Pod { p.EditExtras().NominatedNodeName = "n1"; return p }
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
			e := newEnv(t, envConfig{terminating: tt.terminating}, node("n1", 2000, low))
			got, msg := e.pl.PodEligibleToPreemptOthers(tt.pod, tt.status)
			if got != tt.want || msg != tt.wantMsg {
				t.Errorf("got (%v, %q), want (%v, %q)", got, msg, tt.want, tt.wantMsg)
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
			e := newEnv(t, envConfig{evictor: ev, extra: []framework.Plugin{&holdPermit{}},
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
	e := newEnv(t, envConfig{evictor: ev, terminating: func(p *framework.Pod) bool { return p == gone }},
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
	if diff := cmp.Diff([]string{"low"}, podNames(framework.LowerPriorityNominatedPods(n, pod("p", 100, 0), "n1"))); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	if got := framework.LowerPriorityNominatedPods(nil, pod("p", 100, 0), "n1"); got != nil {
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
