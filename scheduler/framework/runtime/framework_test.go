package runtime_test

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

type runtimeRef = runtime.PluginRef

var ctx = context.Background()

func mustFramework(t *testing.T, reg framework.Registry, prof *runtime.Profile, opts ...runtime.Option) *runtime.Framework {
	t.Helper()
	f, err := runtime.NewFramework(ctx, reg, prof, opts...)
	if err != nil {
		t.Fatalf("NewFramework: %v", err)
	}
	return f
}

func podInfo(name string) *framework.PodInfo { return framework.NewPodInfo(fwtest.Pod(name, nil)) }

func TestNewFrameworkErrors(t *testing.T) {
	a := &filterPlugin{name: "A"}
	s := &scorePlugin{name: "S"}
	tests := []struct {
		name    string
		prof    runtime.Profile
		wantErr string
	}{
		{name: "unknown plugin", prof: runtime.Profile{Plugins: runtime.Plugins{Filter: runtime.PluginSet{Enabled: refs("Nope")}}}, wantErr: `plugin "Nope" is not in the registry`},
		{name: "wrong extension point", prof: runtime.Profile{Plugins: runtime.Plugins{Score: runtime.PluginSet{Enabled: refs("A")}}}, wantErr: `plugin "A" does not extend Score`},
		{name: "enabled twice", prof: runtime.Profile{Plugins: runtime.Plugins{Filter: runtime.PluginSet{Enabled: refs("A", "A")}}}, wantErr: `enabled twice at Filter`},
		{name: "twice in multipoint", prof: runtime.Profile{Plugins: runtime.Plugins{MultiPoint: runtime.PluginSet{Enabled: refs("A", "A")}}}, wantErr: `enabled twice in MultiPoint`},
		{name: "bad weight", prof: runtime.Profile{Plugins: runtime.Plugins{Score: runtime.PluginSet{Enabled: []runtimeRef{{Name: "S", Weight: 101}}}}}, wantErr: `weight 101`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runtime.NewFramework(ctx, registryOf(a, s), &tt.prof)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
	failing := framework.Registry{"F": func(context.Context, any, framework.Handle) (framework.Plugin, error) {
		return nil, errors.New("bad args")
	}}
	_, err := runtime.NewFramework(ctx, failing, &runtime.Profile{Plugins: runtime.Plugins{MultiPoint: runtime.PluginSet{Enabled: refs("F")}}})
	if err == nil || !strings.Contains(err.Error(), `initializing plugin "F": bad args`) {
		t.Errorf("factory error = %v", err)
	}
}

func TestMultiPointExpansion(t *testing.T) {
	reg := registryOf(&filterPlugin{name: "A"}, &filterPlugin{name: "B"}, &filterOnly{filterPlugin{name: "C"}},
		&scorePlugin{name: "S1"}, &scorePlugin{name: "S2"}, &bindingPlugin{name: "X", rec: &recorder{}})
	prof := &runtime.Profile{Plugins: runtime.Plugins{
		MultiPoint: runtime.PluginSet{Enabled: []runtimeRef{{Name: "A"}, {Name: "B"}, {Name: "S1", Weight: 3}, {Name: "S2", Weight: 2}, {Name: "X"}}},
		// B named again: it moves to the front of Filter; C is appended.
		Filter: runtime.PluginSet{Enabled: refs("C", "B")},
		// S2 re-enabled with its own weight; S1 disabled.
		Score:    runtime.PluginSet{Enabled: []runtimeRef{{Name: "S2", Weight: 5}}, Disabled: []string{"S1"}},
		PreScore: runtime.PluginSet{Disabled: []string{"*"}},
	}}
	f := mustFramework(t, reg, prof)
	want := map[string][]string{
		"PreFilter": {"A", "B"},
		"Filter":    {"B", "A", "C"},
		"Score":     {"S2"},
		"Reserve":   {"X"},
		"Permit":    {"X"},
		"PreBind":   {"X"},
		"Bind":      {"X"},
		"PostBind":  {"X"},
	}
	if diff := cmp.Diff(want, f.ListPlugins()); diff != "" {
		t.Errorf("ListPlugins (-want,+got):\n%s", diff)
	}
	// The weight comes from the Score list, not MultiPoint.
	st := framework.NewCycleState()
	nodes := []*framework.NodeInfo{fwtest.NodeInfo(fwtest.Node("n", 1, 1, 1))}
	reg2 := registryOf(&scorePlugin{name: "S2", score: func(*framework.NodeInfo) (int64, *framework.Status) { return 10, nil }})
	f2 := mustFramework(t, reg2, &runtime.Profile{Plugins: runtime.Plugins{
		MultiPoint: runtime.PluginSet{Enabled: []runtimeRef{{Name: "S2", Weight: 2}}},
		Score:      runtime.PluginSet{Enabled: []runtimeRef{{Name: "S2", Weight: 5}}},
	}})
	var out framework.NodeScores
	if s := f2.RunScorePlugins(ctx, st, podInfo("p"), nodes, &out); !s.IsSuccess() {
		t.Fatal(s)
	}
	if out.Totals[0] != 50 {
		t.Errorf("total = %d, want 10*5", out.Totals[0])
	}
}

func TestRunFilterPluginsStopsAtFirstFailure(t *testing.T) {
	rec := &recorder{}
	a := &filterPlugin{name: "A", rec: rec}
	b := &filterPlugin{name: "B", rec: rec, filter: func(ni *framework.NodeInfo) *framework.Status {
		if ni.Node().Name == "bad" {
			return framework.NewStatus(framework.Unschedulable, "no room")
		}
		return nil
	}}
	c := &filterPlugin{name: "C", rec: rec, filter: func(*framework.NodeInfo) *framework.Status {
		return framework.NewStatus(framework.Success)
	}}
	f := mustFramework(t, registryOf(a, b, c), &runtime.Profile{Plugins: runtime.Plugins{Filter: runtime.PluginSet{Enabled: refs("A", "B", "C")}}})
	st := framework.NewCycleState()
	got := f.RunFilterPlugins(ctx, st, podInfo("p"), fwtest.NodeInfo(fwtest.Node("bad", 1, 1, 1)))
	want := framework.NewStatus(framework.Unschedulable, "no room").WithPlugin("B")
	if !got.Equal(want) {
		t.Errorf("status = %v (plugin %q), want %v from B", got, got.Plugin(), want)
	}
	if diff := cmp.Diff([]string{"Filter/A/bad", "Filter/B/bad"}, rec.get()); diff != "" {
		t.Errorf("calls (-want,+got):\n%s", diff)
	}
	if got := f.RunFilterPlugins(ctx, st, podInfo("p"), fwtest.NodeInfo(fwtest.Node("good", 1, 1, 1))); !got.IsSuccess() {
		t.Errorf("good node: %v", got)
	}

	// A status that is neither success nor a rejection becomes an Error.
	w := &filterPlugin{name: "W", filter: func(*framework.NodeInfo) *framework.Status { return framework.NewStatus(framework.Wait, "huh") }}
	fw := mustFramework(t, registryOf(w), &runtime.Profile{Plugins: runtime.Plugins{Filter: runtime.PluginSet{Enabled: refs("W")}}})
	got = fw.RunFilterPlugins(ctx, st, podInfo("p"), fwtest.NodeInfo(fwtest.Node("n", 1, 1, 1)))
	if got.Code() != framework.Error || got.Plugin() != "W" || !strings.Contains(got.Message(), `running "W" filter plugin`) {
		t.Errorf("wait from filter = %v / %v / %q", got.Code(), got.Plugin(), got.Message())
	}
}

// A plugin's shared rejection (framework.NewRejection) comes back as it
// is, from every node at once, and nothing writes to it: under -race a
// write from the framework would be a race between the walk's goroutines.
func TestRunFilterPluginsLeavesASharedRejection(t *testing.T) {
	shared := framework.NewRejection(framework.Unschedulable, "S", "full")
	s := &filterPlugin{name: "S", filter: func(*framework.NodeInfo) *framework.Status { return shared }}
	f := mustFramework(t, registryOf(s), &runtime.Profile{Plugins: runtime.Plugins{Filter: runtime.PluginSet{Enabled: refs("S")}}})
	nodes := make([]*framework.NodeInfo, 64)
	for i := range nodes {
		nodes[i] = fwtest.NodeInfo(fwtest.Node(fmt.Sprint("n", i), 1, 1, 1))
	}
	got := make([]*framework.Status, len(nodes))
	framework.NewParallelizer(4).Until(ctx, len(nodes), func(i int) {
		got[i] = f.RunFilterPlugins(ctx, framework.NewCycleState(), podInfo("p"), nodes[i])
	})
	for i, st := range got {
		if st != shared {
			t.Fatalf("node %d: got %v, want the shared status itself", i, st)
		}
	}
	if want := framework.NewStatus(framework.Unschedulable, "full").WithPlugin("S"); !shared.Equal(want) {
		t.Errorf("shared status became %v (plugin %q)", shared, shared.Plugin())
	}
}

func TestRunPreFilterPlugins(t *testing.T) {
	set := func(ns ...string) *framework.PreFilterResult {
		m := map[string]struct{}{}
		for _, n := range ns {
			m[n] = struct{}{}
		}
		return &framework.PreFilterResult{NodeNames: m}
	}
	type pf = func(*framework.PodInfo) (*framework.PreFilterResult, *framework.Status)
	ret := func(r *framework.PreFilterResult, s *framework.Status) pf {
		return func(*framework.PodInfo) (*framework.PreFilterResult, *framework.Status) { return r, s }
	}
	tests := []struct {
		name       string
		a, b       pf
		wantCode   framework.Code
		wantMsg    string
		wantPlugin string
		wantCalls  []string
		wantNodes  []string // nil: all nodes
		withNodes  []string
	}{
		{name: "both succeed", a: ret(nil, nil), b: ret(nil, nil), wantCalls: []string{"PreFilter/A", "PreFilter/B"}},
		{name: "unresolvable stops at once", a: ret(nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, "never")), b: ret(nil, nil),
			wantCode: framework.UnschedulableAndUnresolvable, wantMsg: "never", wantPlugin: "A", wantCalls: []string{"PreFilter/A"}},
		{name: "unschedulable lets the others run", a: ret(nil, framework.NewStatus(framework.Unschedulable, "maybe")), b: ret(nil, nil),
			wantCode: framework.Unschedulable, wantMsg: "maybe", wantPlugin: "A", wantCalls: []string{"PreFilter/A", "PreFilter/B"}},
		{name: "error is wrapped", a: ret(nil, framework.AsStatus(errors.New("boom"))), b: ret(nil, nil),
			wantCode: framework.Error, wantMsg: `running PreFilter plugin "A": boom`, wantPlugin: "A", wantCalls: []string{"PreFilter/A"}},
		{name: "results intersect", a: ret(set("n1", "n2"), nil), b: ret(set("n2", "n3"), nil),
			wantCalls: []string{"PreFilter/A", "PreFilter/B"}, wantNodes: []string{"n2"}, withNodes: []string{"A", "B"}},
		{name: "empty intersection of two", a: ret(set("n1"), nil), b: ret(set("n3"), nil),
			wantCode: framework.UnschedulableAndUnresolvable, wantMsg: "node(s) didn't satisfy plugin(s) [A B] simultaneously",
			wantCalls: []string{"PreFilter/A", "PreFilter/B"}, wantNodes: []string{}, withNodes: []string{"A", "B"}},
		{name: "empty set from one", a: ret(nil, nil), b: ret(set(), nil),
			wantCode: framework.UnschedulableAndUnresolvable, wantMsg: "node(s) didn't satisfy plugin B",
			wantCalls: []string{"PreFilter/A", "PreFilter/B"}, wantNodes: []string{}, withNodes: []string{"B"}},
		{name: "skip ignores the result", a: ret(set("n1"), framework.NewStatus(framework.Skip)), b: ret(nil, nil),
			wantCalls: []string{"PreFilter/A", "PreFilter/B"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			f := mustFramework(t, registryOf(&filterPlugin{name: "A", rec: rec, preFilter: tt.a}, &filterPlugin{name: "B", rec: rec, preFilter: tt.b}),
				&runtime.Profile{Plugins: runtime.Plugins{MultiPoint: runtime.PluginSet{Enabled: refs("A", "B")}}},
				runtime.WithSnapshotSharedLister(fwtest.NewLister()))
			res, st, with := f.RunPreFilterPlugins(ctx, framework.NewCycleState(), podInfo("p"))
			if st.Code() != tt.wantCode || st.Message() != tt.wantMsg || st.Plugin() != tt.wantPlugin {
				t.Errorf("status = %v %q %q, want %v %q %q", st.Code(), st.Message(), st.Plugin(), tt.wantCode, tt.wantMsg, tt.wantPlugin)
			}
			if diff := cmp.Diff(tt.wantCalls, rec.get()); diff != "" {
				t.Errorf("calls (-want,+got):\n%s", diff)
			}
			if tt.wantNodes == nil {
				if !res.AllNodes() {
					t.Errorf("result narrowed to %v", res.NodeNames)
				}
			} else if diff := cmp.Diff(tt.wantNodes, runtime.SortedNames(res.NodeNames)); diff != "" {
				t.Errorf("nodes (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.withNodes, nilIfEmpty(runtime.SortedNames(with))); diff != "" {
				t.Errorf("plugins with nodes (-want,+got):\n%s", diff)
			}
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func TestPreFilterSkipSkipsFilterAndExtensions(t *testing.T) {
	rec := &recorder{}
	ext := &countingExt{}
	skipper := &filterPlugin{name: "Skipper", rec: rec, ext: ext,
		preFilter: func(*framework.PodInfo) (*framework.PreFilterResult, *framework.Status) {
			return nil, framework.NewStatus(framework.Skip)
		},
		filter: func(*framework.NodeInfo) *framework.Status {
			return framework.NewStatus(framework.Unschedulable, "should not run")
		}}
	other := &filterPlugin{name: "Other", rec: rec, ext: ext}
	f := mustFramework(t, registryOf(skipper, other), &runtime.Profile{Plugins: runtime.Plugins{MultiPoint: runtime.PluginSet{Enabled: refs("Skipper", "Other")}}})
	st := framework.NewCycleState()
	if _, s, _ := f.RunPreFilterPlugins(ctx, st, podInfo("p")); !s.IsSuccess() {
		t.Fatal(s)
	}
	ni := fwtest.NodeInfo(fwtest.Node("n", 1, 1, 1))
	if s := f.RunFilterPlugins(ctx, st, podInfo("p"), ni); !s.IsSuccess() {
		t.Errorf("skipped filter ran: %v", s)
	}
	if diff := cmp.Diff([]string{"PreFilter/Skipper", "PreFilter/Other", "Filter/Other/n"}, rec.get()); diff != "" {
		t.Errorf("calls (-want,+got):\n%s", diff)
	}
	if s := f.RunPreFilterExtensionAddPod(ctx, st, podInfo("p"), podInfo("q"), ni); !s.IsSuccess() {
		t.Fatal(s)
	}
	if ext.added != 1 {
		t.Errorf("AddPod ran %d times, want 1 (skipped plugin excluded)", ext.added)
	}
	// A fresh cycle forgets the skip.
	st2 := framework.NewCycleState()
	if s := f.RunFilterPlugins(ctx, st2, podInfo("p"), ni); s.IsSuccess() {
		t.Error("filter of Skipper did not run in a cycle where it did not skip")
	}
}

type countingExt struct{ added, removed int }

func (e *countingExt) AddPod(context.Context, *framework.CycleState, *framework.PodInfo, *framework.PodInfo, *framework.NodeInfo) *framework.Status {
	e.added++
	return nil
}

func (e *countingExt) RemovePod(context.Context, *framework.CycleState, *framework.PodInfo, *framework.PodInfo, *framework.NodeInfo) *framework.Status {
	e.removed++
	return nil
}

type fakeNominator map[string][]*framework.PodInfo

func (n fakeNominator) NominatedPodsForNode(node string) []*framework.PodInfo { return n[node] }

func TestRunFilterPluginsWithNominatedPods(t *testing.T) {
	// The filter passes only when the node has fewer than max pods.
	maxPods := func(max int) func(*framework.NodeInfo) *framework.Status {
		return func(ni *framework.NodeInfo) *framework.Status {
			if len(ni.Pods) >= max {
				return framework.NewStatus(framework.Unschedulable, "full")
			}
			return nil
		}
	}
	high := fwtest.Pod("high", nil)
	high.Priority = 10
	low := fwtest.Pod("low", nil)
	low.Priority = -1
	tests := []struct {
		name      string
		nominated []*framework.Pod
		max       int
		want      framework.Code
	}{
		{name: "no nominated pods", max: 1, want: framework.Success},
		{name: "higher priority nominated pod takes the room", nominated: []*framework.Pod{high}, max: 1, want: framework.Unschedulable},
		{name: "lower priority nominated pod is ignored", nominated: []*framework.Pod{low}, max: 1, want: framework.Success},
		{name: "fits with and without", nominated: []*framework.Pod{high}, max: 2, want: framework.Success},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var infos []*framework.PodInfo
			for _, p := range tt.nominated {
				infos = append(infos, framework.NewPodInfo(p))
			}
			p := &filterPlugin{name: "Max", filter: maxPods(tt.max)}
			f := mustFramework(t, registryOf(p), &runtime.Profile{Plugins: runtime.Plugins{Filter: runtime.PluginSet{Enabled: refs("Max")}}},
				runtime.WithPodNominator(fakeNominator{"n": infos}))
			ni := fwtest.NodeInfo(fwtest.Node("n", 1, 1, 10))
			got := f.RunFilterPluginsWithNominatedPods(ctx, framework.NewCycleState(), podInfo("p"), ni)
			if got.Code() != tt.want {
				t.Errorf("code = %v, want %v", got.Code(), tt.want)
			}
			if len(ni.Pods) != 0 {
				t.Errorf("the snapshot's NodeInfo was changed")
			}
		})
	}
}

// Long for its table: one case per behaviour, kept together so they
// read side by side.
func TestRunScorePlugins(t *testing.T) {
	nodes := []*framework.NodeInfo{
		fwtest.NodeInfo(fwtest.Node("a", 1, 1, 1)),
		fwtest.NodeInfo(fwtest.Node("b", 1, 1, 1)),
		fwtest.NodeInfo(fwtest.Node("c", 1, 1, 1)),
	}
	raw := map[string]int64{"a": 1, "b": 2, "c": 4}
	byName := func(ni *framework.NodeInfo) (int64, *framework.Status) { return raw[ni.Node().Name], nil }
	fixed := func(v int64) func(*framework.NodeInfo) (int64, *framework.Status) {
		return func(*framework.NodeInfo) (int64, *framework.Status) { return v, nil }
	}
	// Normalize to 0..100 by the max, as DefaultNormalizeScore does.
	scaleToMax := func(s framework.NodeScoreList) *framework.Status {
		var m int64
		for _, x := range s {
			m = max(m, x.Score)
		}
		for i := range s {
			s[i].Score = s[i].Score * 100 / m
		}
		return nil
	}
	tests := []struct {
		name       string
		plugins    []*scorePlugin
		weights    []int32
		skip       string
		par        int
		wantTotals []int64
		wantScores [][]int64 // per node, per plugin, before weight
		wantErr    string
	}{
		{
			name:       "normalize then weight",
			plugins:    []*scorePlugin{{name: "N", score: byName, normalize: scaleToMax}, {name: "F", score: fixed(10)}},
			weights:    []int32{2, 3},
			wantScores: [][]int64{{25, 10}, {50, 10}, {100, 10}},
			wantTotals: []int64{25*2 + 30, 50*2 + 30, 100*2 + 30},
		},
		{
			name:       "parallel gives the same",
			plugins:    []*scorePlugin{{name: "N", score: byName, normalize: scaleToMax}, {name: "F", score: fixed(10)}},
			weights:    []int32{2, 3},
			par:        4,
			wantScores: [][]int64{{25, 10}, {50, 10}, {100, 10}},
			wantTotals: []int64{80, 130, 230},
		},
		{
			name: "prescore skip drops the plugin",
			plugins: []*scorePlugin{{name: "N", score: byName, normalize: scaleToMax,
				preScore: func() *framework.Status { return framework.NewStatus(framework.Skip) }}, {name: "F", score: fixed(10)}},
			weights:    []int32{2, 3},
			wantScores: [][]int64{{10}, {10}, {10}},
			wantTotals: []int64{30, 30, 30},
		},
		{
			name:    "out of range after normalize",
			plugins: []*scorePlugin{{name: "Big", score: fixed(101)}},
			weights: []int32{1},
			wantErr: `applying score defaultWeights on Score plugins: plugin "Big" returns an invalid score 101, it should in the range of [0, 100] after normalizing`,
		},
		{
			name:    "score error",
			plugins: []*scorePlugin{{name: "E", score: func(*framework.NodeInfo) (int64, *framework.Status) { return 0, framework.AsStatus(errors.New("boom")) }}},
			weights: []int32{1},
			wantErr: `running Score plugins: plugin "E" failed with: boom`,
		},
		{
			name:    "normalize error",
			plugins: []*scorePlugin{{name: "E", score: fixed(1), normalize: func(framework.NodeScoreList) *framework.Status { return framework.AsStatus(errors.New("boom")) }}},
			weights: []int32{1},
			wantErr: `running Normalize on Score plugins: plugin "E" failed with: boom`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ps []framework.Plugin
			var enabled []runtimeRef
			for i, p := range tt.plugins {
				ps = append(ps, p)
				enabled = append(enabled, runtimeRef{Name: p.name, Weight: tt.weights[i]})
			}
			f := mustFramework(t, registryOf(ps...), &runtime.Profile{Plugins: runtime.Plugins{MultiPoint: runtime.PluginSet{Enabled: enabled}}},
				runtime.WithParallelism(tt.par))
			st := framework.NewCycleState()
			if s := f.RunPreScorePlugins(ctx, st, podInfo("p"), nodes); !s.IsSuccess() {
				t.Fatal(s)
			}
			var out framework.NodeScores
			s := f.RunScorePlugins(ctx, st, podInfo("p"), nodes, &out)
			if tt.wantErr != "" {
				if s.Code() != framework.Error || s.Message() != tt.wantErr {
					t.Fatalf("status = %v %q, want Error %q", s.Code(), s.Message(), tt.wantErr)
				}
				return
			}
			if !s.IsSuccess() {
				t.Fatal(s)
			}
			if diff := cmp.Diff(tt.wantTotals, out.Totals); diff != "" {
				t.Errorf("totals (-want,+got):\n%s", diff)
			}
			var gotScores [][]int64
			for i := range nodes {
				var row []int64
				for _, ps := range out.NodePluginScores(i) {
					row = append(row, ps.Score)
				}
				gotScores = append(gotScores, row)
			}
			if diff := cmp.Diff(tt.wantScores, gotScores); diff != "" {
				t.Errorf("scores (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestRunPreScoreError(t *testing.T) {
	p := &scorePlugin{name: "P", preScore: func() *framework.Status { return framework.NewStatus(framework.Unschedulable, "no") },
		score: func(*framework.NodeInfo) (int64, *framework.Status) { return 0, nil }}
	f := mustFramework(t, registryOf(p), &runtime.Profile{Plugins: runtime.Plugins{MultiPoint: runtime.PluginSet{Enabled: refs("P")}}})
	s := f.RunPreScorePlugins(ctx, framework.NewCycleState(), podInfo("p"), nil)
	if s.Code() != framework.Error || s.Message() != `running PreScore plugin "P": no` {
		t.Errorf("status = %v %q", s.Code(), s.Message())
	}
}

func TestRunPostFilterPlugins(t *testing.T) {
	nominate := &framework.PostFilterResult{NominatingInfo: &framework.NominatingInfo{NominatedNodeName: "n", NominatingMode: framework.ModeOverride}}
	tests := []struct {
		name       string
		a, b       *postFilterPlugin
		wantCode   framework.Code
		wantMsg    string
		wantPlugin string
		wantNode   string
	}{
		{name: "first success wins", a: &postFilterPlugin{name: "A", result: nominate}, b: &postFilterPlugin{name: "B", status: framework.NewStatus(framework.Unschedulable, "b")},
			wantNode: "n"},
		{name: "reasons gathered, first rejector named, last real result kept",
			a:        &postFilterPlugin{name: "A", status: framework.NewStatus(framework.Unschedulable, "a"), result: nominate},
			b:        &postFilterPlugin{name: "B", status: framework.NewStatus(framework.Unschedulable, "b")},
			wantCode: framework.Unschedulable, wantMsg: "a, b", wantPlugin: "A", wantNode: "n"},
		{name: "unresolvable stops", a: &postFilterPlugin{name: "A", status: framework.NewStatus(framework.UnschedulableAndUnresolvable, "a")},
			b:        &postFilterPlugin{name: "B", result: nominate},
			wantCode: framework.UnschedulableAndUnresolvable, wantMsg: "a", wantPlugin: "A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := mustFramework(t, registryOf(tt.a, tt.b), &runtime.Profile{Plugins: runtime.Plugins{PostFilter: runtime.PluginSet{Enabled: refs("A", "B")}}})
			r, st := f.RunPostFilterPlugins(ctx, framework.NewCycleState(), podInfo("p"), framework.NewNodeToStatus())
			if st.Code() != tt.wantCode || st.Message() != tt.wantMsg || st.Plugin() != tt.wantPlugin {
				t.Errorf("status = %v %q %q", st.Code(), st.Message(), st.Plugin())
			}
			var node string
			if r != nil && r.NominatingInfo != nil {
				node = r.NominatedNodeName
			}
			if node != tt.wantNode {
				t.Errorf("nominated %q, want %q", node, tt.wantNode)
			}
		})
	}
}

func TestEventsAndPreEnqueue(t *testing.T) {
	nodeAdd := framework.ClusterEventWithHint{Event: framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionAdd}}
	gate := &gatePlugin{name: "Gate", status: framework.NewStatus(framework.UnschedulableAndUnresolvable, "gated"), events: []framework.ClusterEventWithHint{nodeAdd}}
	filter := &filterOnly{filterPlugin{name: "NoEvents"}}
	score := &scorePlugin{name: "ScoreOnly"}
	f := mustFramework(t, registryOf(gate, filter, score), &runtime.Profile{Plugins: runtime.Plugins{MultiPoint: runtime.PluginSet{Enabled: refs("Gate", "NoEvents", "ScoreOnly")}}})
	got := f.EventsToRegister()
	if diff := cmp.Diff([]framework.ClusterEvent{nodeAdd.Event}, events(got["Gate"])); diff != "" {
		t.Errorf("Gate events (-want,+got):\n%s", diff)
	}
	wild := framework.ClusterEvent{Resource: framework.EventResourceWildcard, ActionType: framework.ActionAll, Label: "WildCardEvent"}
	if diff := cmp.Diff([]framework.ClusterEvent{wild}, events(got["NoEvents"])); diff != "" {
		t.Errorf("a plugin without EnqueueExtensions should get every event (-want,+got):\n%s", diff)
	}
	if _, ok := got["ScoreOnly"]; ok {
		t.Error("score-only plugins cannot reject, so register nothing")
	}
	st := f.PreEnqueueCheck(fwtest.Pod("p", nil))
	if st.Code() != framework.UnschedulableAndUnresolvable || st.Plugin() != "Gate" {
		t.Errorf("PreEnqueueCheck = %v from %q", st.Code(), st.Plugin())
	}
	gate.status = nil
	if st := f.PreEnqueueCheck(fwtest.Pod("p", nil)); st != nil {
		t.Errorf("PreEnqueueCheck = %v", st)
	}
}

func events(evs []framework.ClusterEventWithHint) []framework.ClusterEvent {
	var out []framework.ClusterEvent
	for _, e := range evs {
		out = append(out, e.Event)
	}
	return out
}

func TestQueueSortFallback(t *testing.T) {
	f := mustFramework(t, framework.Registry{}, &runtime.Profile{})
	less := f.QueueSortFunc()
	early := &framework.QueuedPodInfo{PodInfo: podInfo("a"), Timestamp: time.Unix(1, 0)}
	late := &framework.QueuedPodInfo{PodInfo: podInfo("b"), Timestamp: time.Unix(2, 0)}
	if !less(early, late) || less(late, early) {
		t.Error("fallback order is not FIFO")
	}
}

func TestDefaultProfileBuilds(t *testing.T) {
	// Names of every default plugin must resolve in a registry; with an
	// empty registry the error names the first missing one.
	_, err := runtime.NewFramework(ctx, framework.Registry{}, runtime.DefaultProfile())
	if err == nil || !strings.Contains(err.Error(), `"SchedulingGates" is not in the registry`) {
		t.Errorf("error = %v", err)
	}
}
