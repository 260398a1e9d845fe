package algorithm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/framework/runtime"
	"github.com/berth-io/berth/scheduler/plugins"
)

const Gi = 1 << 30

var ctx = context.Background()

// recorder is a Filter plugin that notes every node it sees.
type recorder struct {
	mu    sync.Mutex
	nodes []string
}

func (r *recorder) Name() string { return "Recorder" }

func (r *recorder) Filter(_ context.Context, _ *framework.CycleState, _ *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	r.mu.Lock()
	r.nodes = append(r.nodes, ni.Node().Name)
	r.mu.Unlock()
	return nil
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.nodes
	r.nodes = nil
	return out
}

// narrower is a PreFilter plugin returning a fixed node set or status.
type narrower struct {
	nodes  []string
	status *framework.Status
}

func (n *narrower) Name() string { return "Narrow" }

func (n *narrower) PreFilter(context.Context, *framework.CycleState, *framework.PodInfo, []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	if n.status != nil {
		return nil, n.status
	}
	set := map[string]struct{}{}
	for _, x := range n.nodes {
		set[x] = struct{}{}
	}
	return &framework.PreFilterResult{NodeNames: set}, nil
}

func (n *narrower) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// setup builds the default profile over nodes, plus extra plugins: each
// extra plugin is enabled at the points it implements, after the defaults.
func setup(t testing.TB, nodes []*framework.NodeInfo, par int, extra ...framework.Plugin) *runtime.Framework {
	t.Helper()
	reg := plugins.NewInTreeRegistry()
	prof := runtime.DefaultProfile()
	for _, p := range extra {
		reg[p.Name()] = func(context.Context, any, framework.Handle) (framework.Plugin, error) { return p, nil }
		prof.Plugins.MultiPoint.Enabled = append(prof.Plugins.MultiPoint.Enabled, runtime.PluginRef{Name: p.Name()})
	}
	f, err := runtime.NewFramework(ctx, reg, prof, runtime.WithSnapshotSharedLister(fwtest.NewLister(nodes...)),
		runtime.WithBinder(&fwtest.Binder{}), runtime.WithParallelism(par))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// uniformNodes returns n identical nodes named node-000...
func uniformNodes(n int) []*framework.NodeInfo {
	out := make([]*framework.NodeInfo, n)
	for i := range out {
		out[i] = fwtest.NodeInfo(fwtest.Node(fmt.Sprintf("node-%03d", i), 32000, 128*Gi, 110))
	}
	return out
}

func smallPod(name string) *framework.PodInfo {
	return framework.NewPodInfo(fwtest.Pod(name, fwtest.Resources(100, Gi/4)))
}

func TestNumFeasibleNodesToFind(t *testing.T) {
	pct := func(v int32) *int32 { return &v }
	tests := []struct {
		name     string
		global   int32
		override *int32
		nodes    int
		want     int
	}{
		{name: "few nodes: all", nodes: 10, want: 10},
		{name: "99 nodes: all", nodes: 99, want: 99},
		{name: "100 nodes: 50% is below the minimum", nodes: 100, want: 100},
		{name: "1000 nodes: 50-8 = 42%", nodes: 1000, want: 420},
		{name: "5000 nodes: 50-40 = 10%", nodes: 5000, want: 500},
		{name: "6000 nodes: 50-48 = 2% -> floor 5%", nodes: 6000, want: 300},
		{name: "20000 nodes: 5%", nodes: 20000, want: 1000},
		{name: "fixed 10% of 500 is below the minimum", global: 10, nodes: 500, want: 100},
		{name: "fixed 30%", global: 30, nodes: 1000, want: 300},
		{name: "100% is all", global: 100, nodes: 5000, want: 5000},
		{name: "profile override wins", global: 100, override: pct(20), nodes: 1000, want: 200},
		{name: "profile override 0 is adaptive", global: 100, override: pct(0), nodes: 1000, want: 420},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := New(tt.global).numFeasibleNodesToFind(tt.override, tt.nodes); got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func TestWindowRotatesOverEveryNode(t *testing.T) {
	// 300 nodes: adaptive 48% -> 144 feasible nodes per cycle.
	nodes := uniformNodes(300)
	rec := &recorder{}
	fwk := setup(t, nodes, 1, rec)
	s := New(0, WithRandSeed(1, 2))
	seen := map[string]int{}
	wantStarts := []int{0, 144, 288, 132, 276}
	for cycle, start := range wantStarts {
		if s.nextStartNodeIndex != start {
			t.Fatalf("cycle %d starts at %d, want %d", cycle, s.nextStartNodeIndex, start)
		}
		res, err := s.Schedule(ctx, fwk, framework.NewCycleState(), smallPod("p"))
		if err != nil {
			t.Fatal(err)
		}
		if res.EvaluatedNodes != 144 || res.FeasibleNodes != 144 {
			t.Errorf("cycle %d: evaluated %d, feasible %d; want 144, 144", cycle, res.EvaluatedNodes, res.FeasibleNodes)
		}
		visited := rec.take()
		var want []string
		for i := range 144 {
			want = append(want, nodes[(start+i)%300].Node().Name)
		}
		if diff := cmp.Diff(want, visited); diff != "" {
			t.Fatalf("cycle %d visited (-want,+got):\n%s", cycle, diff)
		}
		for _, n := range visited {
			seen[n]++
		}
	}
	if len(seen) != 300 {
		t.Errorf("%d of 300 nodes examined over %d cycles", len(seen), len(wantStarts))
	}
}

func TestEarlyExitCountsRejectedNodes(t *testing.T) {
	// Every third node (0, 3, 6, ...) is tainted. 144 feasible nodes are
	// found within the first 216 nodes (216 - 72 rejected).
	nodes := uniformNodes(300)
	for i := 0; i < 300; i += 3 {
		nodes[i].Node().Taints = []framework.Taint{{Key: "a", Value: "b", Effect: framework.TaintEffectNoSchedule}}
		nodes[i].SetNode(nodes[i].Node()) // a changed Node is set again
	}
	for _, par := range []int{1, 2, 8} {
		t.Run(fmt.Sprintf("parallelism %d", par), func(t *testing.T) {
			s := New(0, WithRandSeed(1, 2))
			res, err := s.Schedule(ctx, setup(t, nodes, par), framework.NewCycleState(), smallPod("p"))
			if err != nil {
				t.Fatal(err)
			}
			if res.FeasibleNodes != 144 {
				t.Errorf("feasible = %d, want 144", res.FeasibleNodes)
			}
			if res.EvaluatedNodes != 216 || s.nextStartNodeIndex != 216 {
				t.Errorf("evaluated %d, next start %d; want 216, 216", res.EvaluatedNodes, s.nextStartNodeIndex)
			}
			var idx int
			fmt.Sscanf(res.SuggestedHost, "node-%d", &idx)
			if idx%3 == 0 {
				t.Errorf("chose tainted node %s", res.SuggestedHost)
			}
		})
	}
}

func TestTieBreakIsUniformAndSeeded(t *testing.T) {
	nodes := uniformNodes(3)
	fwk := setup(t, nodes, 1)
	run := func(seed uint64) []string {
		s := New(0, WithRandSeed(seed, 7))
		var out []string
		for i := range 300 {
			res, err := s.Schedule(ctx, fwk, framework.NewCycleState(), smallPod(fmt.Sprint("p", i)))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, res.SuggestedHost)
		}
		return out
	}
	a := run(42)
	counts := map[string]int{}
	for _, h := range a {
		counts[h]++
	}
	for _, n := range nodes {
		// Expected 100 each; a fair draw lands in [60, 140] far beyond 4 sigma.
		if c := counts[n.Node().Name]; c < 60 || c > 140 {
			t.Errorf("%s chosen %d/300 times: %v", n.Node().Name, c, counts)
		}
	}
	if diff := cmp.Diff(a, run(42)); diff != "" {
		t.Errorf("same seed, different choices")
	}
}

func TestSelectHost(t *testing.T) {
	s := New(0, WithRandSeed(3, 4))
	if got := selectHost([]int64{5, 9, 2, 8}, s.ties); got != 1 {
		t.Errorf("selectHost = %d, want 1", got)
	}
	if got := selectHost([]int64{7}, s.ties); got != 0 {
		t.Errorf("single = %d", got)
	}
	hits := map[int]int{}
	for range 3000 {
		hits[selectHost([]int64{1, 5, 5, 0, 5}, s.ties)]++
	}
	if hits[0] != 0 || hits[3] != 0 || len(hits) != 3 {
		t.Errorf("ties picked outside the best: %v", hits)
	}
	for _, i := range []int{1, 2, 4} {
		if hits[i] < 800 || hits[i] > 1200 {
			t.Errorf("tie %d picked %d/3000 times", i, hits[i])
		}
	}
}

// TestSelectHostDrawsOnce: ties cost one draw over their number, and a
// lone best node none, however many nodes tie.
func TestSelectHostDrawsOnce(t *testing.T) {
	for _, tc := range []struct {
		totals []int64
		draws  []int // the IntN bounds the draws must match
	}{
		{[]int64{3, 9, 1}, nil},
		{[]int64{9, 9}, []int{2}},
		{[]int64{1, 4, 4, 0, 4, 2, 4}, []int{4}},
		{make([]int64, 5000), []int{5000}},
	} {
		s := New(0, WithRandSeed(11, 13))
		ref := rand.New(rand.NewPCG(11, 13))
		best := selectHost(tc.totals, s.ties)
		var tiedAt []int // the nodes at the best total, in order
		top := slices.Max(tc.totals)
		for i, v := range tc.totals {
			if v == top {
				tiedAt = append(tiedAt, i)
			}
		}
		want := tiedAt[0]
		for _, n := range tc.draws {
			want = tiedAt[ref.IntN(n)]
		}
		if best != want {
			t.Errorf("selectHost(%v) = %d, want %d", tc.totals[:min(len(tc.totals), 8)], best, want)
		}
		if a, b := s.pcg.Uint64(), ref.Uint64(); a != b {
			t.Errorf("selectHost(%d totals) drew other than %v", len(tc.totals), tc.draws)
		}
	}
}

func TestScoringPicksLeastAllocated(t *testing.T) {
	nodes := uniformNodes(4)
	for i, ni := range nodes {
		// Load: node-000 most, node-003 least.
		ni.AddPodInfo(framework.NewPodInfo(fwtest.Pod(fmt.Sprint("load", i), fwtest.Resources(int64(7000*(4-i)), int64(16*Gi*(4-i))))))
	}
	res, err := New(0).Schedule(ctx, setup(t, nodes, 1), framework.NewCycleState(), smallPod("p"))
	if err != nil {
		t.Fatal(err)
	}
	if res.SuggestedHost != "node-003" || res.FeasibleNodes != 4 || res.EvaluatedNodes != 4 {
		t.Errorf("result = %+v", res)
	}
}

func TestFitError(t *testing.T) {
	small := fwtest.NodeInfo(fwtest.Node("n1", 1000, 128*Gi, 110))
	tainted := func(name string) *framework.NodeInfo {
		n := fwtest.Node(name, 32000, 128*Gi, 110)
		n.Taints = []framework.Taint{{Key: "a", Value: "b", Effect: framework.TaintEffectNoSchedule}}
		return fwtest.NodeInfo(n)
	}
	nodes := []*framework.NodeInfo{small, tainted("n2"), tainted("n3")}
	pod := framework.NewPodInfo(fwtest.Pod("big", fwtest.Resources(2000, Gi)))
	_, err := New(0).Schedule(ctx, setup(t, nodes, 1), framework.NewCycleState(), pod)
	var fe *framework.FitError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want FitError", err)
	}
	if got, want := fe.Error(), "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had untolerated taint {a: b}."; got != want {
		t.Errorf("message:\n got %q\nwant %q", got, want)
	}
	if diff := cmp.Diff(map[string]struct{}{"NodeResourcesFit": {}, "TaintToleration": {}}, fe.Diagnosis.UnschedulablePlugins); diff != "" {
		t.Errorf("UnschedulablePlugins (-want,+got):\n%s", diff)
	}
	want := []framework.ReasonCount{
		{Plugin: "NodeResourcesFit", Reason: "Insufficient cpu", Count: 1},
		{Plugin: "TaintToleration", Reason: "node(s) had untolerated taint {a: b}", Count: 2},
	}
	if diff := cmp.Diff(want, fe.ReasonCounts()); diff != "" {
		t.Errorf("ReasonCounts (-want,+got):\n%s", diff)
	}
	if fe.Pod != pod.Pod {
		t.Error("FitError.Pod is not the pod")
	}
}

func TestNoNodes(t *testing.T) {
	_, err := New(0).Schedule(ctx, setup(t, nil, 1), framework.NewCycleState(), smallPod("p"))
	if !errors.Is(err, framework.ErrNoNodesAvailable) {
		t.Errorf("err = %v", err)
	}
}

func TestPreFilterNarrowing(t *testing.T) {
	nodes := uniformNodes(10)
	fwk := setup(t, nodes, 1, &narrower{nodes: []string{"node-005", "node-003", "gone"}})
	s := New(0, WithRandSeed(1, 1))
	for range 20 {
		res, err := s.Schedule(ctx, fwk, framework.NewCycleState(), smallPod("p"))
		if err != nil {
			t.Fatal(err)
		}
		if res.SuggestedHost != "node-003" && res.SuggestedHost != "node-005" {
			t.Fatalf("chose %s outside the PreFilter result", res.SuggestedHost)
		}
		if res.EvaluatedNodes != 2 {
			t.Errorf("evaluated %d", res.EvaluatedNodes)
		}
	}
	_, err := s.Schedule(ctx, fwk, framework.NewCycleState(), framework.NewPodInfo(fwtest.Pod("huge", fwtest.Resources(64000, 0))))
	var fe *framework.FitError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v", err)
	}
	if got, want := fe.Error(), "0/10 nodes are available: 2 Insufficient cpu, 8 node(s) didn't satisfy plugin(s) [Narrow]."; got != want {
		t.Errorf("message:\n got %q\nwant %q", got, want)
	}
	if diff := cmp.Diff(map[string]struct{}{"Narrow": {}, "NodeResourcesFit": {}}, fe.Diagnosis.UnschedulablePlugins); diff != "" {
		t.Errorf("UnschedulablePlugins (-want,+got):\n%s", diff)
	}
}

func TestPreFilterRejection(t *testing.T) {
	fwk := setup(t, uniformNodes(3), 1, &narrower{status: framework.NewStatus(framework.UnschedulableAndUnresolvable, "gang not ready")})
	s := New(0)
	_, err := s.Schedule(ctx, fwk, framework.NewCycleState(), smallPod("p"))
	var fe *framework.FitError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v", err)
	}
	if got := fe.Error(); got != "0/3 nodes are available: gang not ready." {
		t.Errorf("message %q", got)
	}
	if _, ok := fe.Diagnosis.UnschedulablePlugins["Narrow"]; !ok {
		t.Error("rejecting PreFilter plugin not recorded")
	}
	if got := fe.Diagnosis.NodeToStatus.Get("node-001").Message(); got != "gang not ready" {
		t.Errorf("node status %q, want the PreFilter status for every node", got)
	}
	if s.nextStartNodeIndex != 0 {
		t.Error("window moved without filtering")
	}

	// An Error from PreFilter is an error, not a FitError.
	fwk = setup(t, uniformNodes(3), 1, &narrower{status: framework.AsStatus(errors.New("boom"))})
	if _, err := New(0).Schedule(ctx, fwk, framework.NewCycleState(), smallPod("p")); err == nil || errors.As(err, &fe) {
		t.Errorf("err = %v, want a plain error", err)
	}
}

func TestNominatedNodeFirst(t *testing.T) {
	nodes := uniformNodes(50)
	fwk := setup(t, nodes, 1)
	s := New(0)
	pod := fwtest.Pod("p", fwtest.Resources(100, Gi))
	pod.EditExtras().NominatedNodeName = "node-042"
	res, err := s.Schedule(ctx, fwk, framework.NewCycleState(), framework.NewPodInfo(pod))
	if err != nil {
		t.Fatal(err)
	}
	if res.SuggestedHost != "node-042" || res.EvaluatedNodes != 1 || s.nextStartNodeIndex != 0 {
		t.Errorf("result %+v, next start %d", res, s.nextStartNodeIndex)
	}
	// A nominated node that no longer fits falls back to the normal search.
	nodes[42].Node().Unschedulable = true
	nodes[42].SetNode(nodes[42].Node())
	res, err = s.Schedule(ctx, fwk, framework.NewCycleState(), framework.NewPodInfo(pod))
	if err != nil {
		t.Fatal(err)
	}
	if res.SuggestedHost == "node-042" || res.FeasibleNodes != 49 {
		t.Errorf("result %+v", res)
	}
}

func TestFilterErrorAborts(t *testing.T) {
	bad := &errFilter{}
	fwk := setup(t, uniformNodes(5), 1, bad)
	s := New(0)
	_, err := s.Schedule(ctx, fwk, framework.NewCycleState(), smallPod("p"))
	if err == nil || err.Error() != `running "Bad" filter plugin: disk on fire` {
		t.Errorf("err = %v", err)
	}
}

type errFilter struct{}

func (errFilter) Name() string { return "Bad" }
func (errFilter) Filter(context.Context, *framework.CycleState, *framework.PodInfo, *framework.NodeInfo) *framework.Status {
	return framework.AsStatus(errors.New("disk on fire"))
}

func TestParallelScheduleMatchesSerial(t *testing.T) {
	// The outcome does not depend on the parallelism: with the same seed
	// both choose the same node after evaluating the same nodes, rejected
	// ones included.
	nodes := uniformNodes(1000)
	for i := 0; i < 1000; i += 4 {
		nodes[i].Node().Unschedulable = true
		nodes[i].SetNode(nodes[i].Node())
	}
	for i, ni := range nodes {
		ni.AddPodInfo(framework.NewPodInfo(fwtest.Pod(fmt.Sprint("load", i), fwtest.Resources(int64(i%7)*1000, int64(i%5)*Gi))))
	}
	serial, parallel := New(0, WithRandSeed(9, 9)), New(0, WithRandSeed(9, 9))
	fs, fp := setup(t, nodes, 1), setup(t, nodes, 4)
	for i := range 5 {
		a, err := serial.Schedule(ctx, fs, framework.NewCycleState(), smallPod(fmt.Sprint("p", i)))
		if err != nil {
			t.Fatal(err)
		}
		b, err := parallel.Schedule(ctx, fp, framework.NewCycleState(), smallPod(fmt.Sprint("p", i)))
		if err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Errorf("cycle %d: serial %+v, parallel %+v", i, a, b)
		}
	}
}
