package nodeaffinity

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
)

var ctx = context.Background()

func mustNew(t *testing.T, args any) *NodeAffinity {
	t.Helper()
	p, err := New(ctx, args, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p.(*NodeAffinity)
}

func nodeInfo(name string, labels map[string]string) *framework.NodeInfo {
	n := fwtest.Node(name, 1000, 1000, 10)
	n.Labels = labels
	return fwtest.NodeInfo(n)
}

func required(terms ...framework.NodeSelectorTerm) *framework.NodeSelector {
	return &framework.NodeSelector{NodeSelectorTerms: terms}
}

// podWith returns a pod with the given node selector and node affinity.
func podWith(nodeSelector map[string]string, na *framework.NodeAffinity) *framework.PodInfo {
	p := fwtest.Pod("p", nil)
	p.NodeSelector = nodeSelector
	if na != nil {
		p.Affinity = &framework.Affinity{NodeAffinity: na}
	}
	return framework.NewPodInfo(p)
}

func TestNew(t *testing.T) {
	bad := &framework.NodeAffinity{Required: required(exprTerm(req("zone", gt, "x")))}
	badPref := &framework.NodeAffinity{Preferred: []framework.PreferredSchedulingTerm{{Weight: 1, Preference: exprTerm(req("zone", in))}}}
	tests := []struct {
		name    string
		args    any
		wantErr string
	}{
		{name: "nil"},
		{name: "pointer", args: &Args{AddedAffinity: &framework.NodeAffinity{Required: required(exprTerm(req("zone", in, "a")))}}},
		{name: "nil pointer", args: (*Args)(nil)},
		{name: "value", args: Args{}},
		{name: "wrong type", args: 3, wantErr: "want args of type *Args, got int"},
		{name: "added required must parse", args: Args{AddedAffinity: bad}, wantErr: "addedAffinity.required.nodeSelectorTerms[0].matchExpressions[0]"},
		{name: "added preferred must parse", args: Args{AddedAffinity: badPref}, wantErr: "addedAffinity.preferred[0].preference.matchExpressions[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(ctx, tt.args, nil)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("New error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func set(names ...string) map[string]struct{} {
	m := map[string]struct{}{}
	for _, n := range names {
		m[n] = struct{}{}
	}
	return m
}

func TestPreFilter(t *testing.T) {
	name := func(op framework.NodeSelectorOperator, values ...string) framework.NodeSelectorRequirement {
		return req("metadata.name", op, values...)
	}
	tests := []struct {
		name         string
		args         *Args
		nodeSelector map[string]string
		required     *framework.NodeSelector
		preferred    bool
		want         *framework.PreFilterResult
		wantCode     framework.Code
		wantMsg      string
	}{
		{name: "nothing to check skips", wantCode: framework.Skip},
		{name: "preferred only skips", preferred: true, wantCode: framework.Skip},
		{name: "node selector only", nodeSelector: map[string]string{"zone": "a"}},
		{name: "added affinity only", args: &Args{AddedAffinity: &framework.NodeAffinity{Required: required(exprTerm(req("zone", exists)))}}},
		{name: "required with no terms: all nodes, Filter rejects", required: required()},
		{name: "label terms do not narrow", required: required(exprTerm(req("zone", in, "a")))},
		{name: "one name", required: required(fieldTerm(name(in, "n1"))), want: &framework.PreFilterResult{NodeNames: set("n1")}},
		{name: "several names", required: required(fieldTerm(name(in, "n1", "n2"))), want: &framework.PreFilterResult{NodeNames: set("n1", "n2")}},
		{name: "intersection within a term", required: required(fieldTerm(name(in, "n1", "n2"), name(in, "n2", "n3"))), want: &framework.PreFilterResult{NodeNames: set("n2")}},
		{name: "union across terms", required: required(fieldTerm(name(in, "n1")), fieldTerm(name(in, "n3"))), want: &framework.PreFilterResult{NodeNames: set("n1", "n3")}},
		{name: "a term without names leaves all nodes", required: required(fieldTerm(name(in, "n1")), exprTerm(req("zone", in, "a")))},
		{name: "an empty term leaves all nodes", required: required(fieldTerm(name(in, "n1")), framework.NodeSelectorTerm{})},
		{name: "NotIn does not narrow", required: required(fieldTerm(name(notIn, "n1")))},
		{name: "names with label expressions still narrow", required: required(framework.NodeSelectorTerm{
			MatchExpressions: []framework.NodeSelectorRequirement{req("zone", in, "a")}, MatchFields: []framework.NodeSelectorRequirement{name(in, "n2")}}),
			want: &framework.PreFilterResult{NodeNames: set("n2")}},
		{name: "disjoint names in one term conflict", required: required(fieldTerm(name(in, "n1"), name(in, "n2"))),
			wantCode: framework.UnschedulableAndUnresolvable, wantMsg: ErrReasonConflict},
		{name: "In with no values conflicts", required: required(fieldTerm(name(in))),
			wantCode: framework.UnschedulableAndUnresolvable, wantMsg: ErrReasonConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args any
			if tt.args != nil {
				args = tt.args
			}
			pl := mustNew(t, args)
			var na *framework.NodeAffinity
			if tt.required != nil {
				na = &framework.NodeAffinity{Required: tt.required}
			} else if tt.preferred {
				na = &framework.NodeAffinity{Preferred: []framework.PreferredSchedulingTerm{{Weight: 1, Preference: exprTerm(req("zone", exists))}}}
			}
			state := framework.NewCycleState()
			got, st := pl.PreFilter(ctx, state, podWith(tt.nodeSelector, na), nil)
			if st.Code() != tt.wantCode || st.Message() != tt.wantMsg {
				t.Fatalf("status = %v %q, want %v %q", st.Code(), st.Message(), tt.wantCode, tt.wantMsg)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want,+got):\n%s", diff)
			}
			if _, err := state.Read(preFilterStateKey); (err == nil) == (tt.wantCode == framework.Skip) {
				t.Errorf("state written = %v with code %v", err == nil, st.Code())
			}
		})
	}
}

func TestFilter(t *testing.T) {
	zoneA := map[string]string{"zone": "a", "cores": "8"}
	tests := []struct {
		name         string
		args         *Args
		nodeSelector map[string]string
		na           *framework.NodeAffinity
		labels       map[string]string
		nodeName     string
		wantMsg      string // "": passes
	}{
		{name: "node selector matches", nodeSelector: map[string]string{"zone": "a"}, labels: zoneA},
		{name: "node selector misses", nodeSelector: map[string]string{"zone": "b"}, labels: zoneA, wantMsg: ErrReasonPod},
		{name: "required matches", na: &framework.NodeAffinity{Required: required(exprTerm(req("cores", gt, "4")))}, labels: zoneA},
		{name: "required misses", na: &framework.NodeAffinity{Required: required(exprTerm(req("cores", lt, "4")))}, labels: zoneA, wantMsg: ErrReasonPod},
		{name: "required that does not parse", na: &framework.NodeAffinity{Required: required(exprTerm(req("cores", lt, "four")))}, labels: zoneA, wantMsg: ErrReasonPod},
		{name: "required with no terms", na: &framework.NodeAffinity{Required: required()}, labels: zoneA, wantMsg: ErrReasonPod},
		{name: "by node name", na: &framework.NodeAffinity{Required: required(fieldTerm(req("metadata.name", in, "n1")))}, nodeName: "n1"},
		{name: "by another node name", na: &framework.NodeAffinity{Required: required(fieldTerm(req("metadata.name", in, "n1")))}, nodeName: "n2", wantMsg: ErrReasonPod},
		{name: "preferred never filters", na: &framework.NodeAffinity{Preferred: []framework.PreferredSchedulingTerm{{Weight: 1, Preference: exprTerm(req("zone", in, "b"))}}},
			nodeSelector: map[string]string{"zone": "a"}, labels: zoneA},
		{name: "added affinity matches", args: &Args{AddedAffinity: &framework.NodeAffinity{Required: required(exprTerm(req("zone", exists)))}}, labels: zoneA},
		{name: "added affinity misses first", args: &Args{AddedAffinity: &framework.NodeAffinity{Required: required(exprTerm(req("zone", doesNotExist)))}},
			nodeSelector: map[string]string{"zone": "b"}, labels: zoneA, wantMsg: ErrReasonEnforced},
		{name: "added affinity passes, pod's misses", args: &Args{AddedAffinity: &framework.NodeAffinity{Required: required(exprTerm(req("zone", exists)))}},
			nodeSelector: map[string]string{"zone": "b"}, labels: zoneA, wantMsg: ErrReasonPod},
		{name: "added affinity with no terms rejects all", args: &Args{AddedAffinity: &framework.NodeAffinity{Required: required()}}, labels: zoneA, wantMsg: ErrReasonEnforced},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args any
			if tt.args != nil {
				args = tt.args
			}
			pl := mustNew(t, args)
			pod := podWith(tt.nodeSelector, tt.na)
			if tt.nodeName == "" {
				tt.nodeName = "n"
			}
			ni := nodeInfo(tt.nodeName, tt.labels)
			// With PreFilter, and without it (PreFilter disabled): the same.
			state := framework.NewCycleState()
			if _, st := pl.PreFilter(ctx, state, pod, nil); st.IsSkip() {
				if tt.wantMsg != "" {
					t.Fatalf("PreFilter skipped a pod Filter must reject")
				}
				return
			}
			for _, st := range []*framework.CycleState{state, framework.NewCycleState()} {
				got := pl.Filter(ctx, st, pod, ni)
				if tt.wantMsg == "" {
					if !got.IsSuccess() {
						t.Errorf("Filter = %v", got)
					}
					continue
				}
				if got.Code() != framework.UnschedulableAndUnresolvable || got.Message() != tt.wantMsg {
					t.Errorf("Filter = %v %q, want UnschedulableAndUnresolvable %q", got.Code(), got.Message(), tt.wantMsg)
				}
			}
		})
	}
}

// Scores are the sums of matching weights, then DefaultNormalizeScore
// without reverse: 100*score/max, truncated.
//
// Long for its table: one case per behaviour, kept together so they
// read side by side.
func TestScore(t *testing.T) {
	pref := func(w int32, rs ...framework.NodeSelectorRequirement) framework.PreferredSchedulingTerm {
		return framework.PreferredSchedulingTerm{Weight: w, Preference: exprTerm(rs...)}
	}
	nodes := []*framework.NodeInfo{
		nodeInfo("n0", map[string]string{"zone": "a", "disk": "ssd"}),
		nodeInfo("n1", map[string]string{"zone": "a"}),
		nodeInfo("n2", map[string]string{"disk": "ssd"}),
		nodeInfo("n3", nil),
	}
	tests := []struct {
		name      string
		args      *Args
		preferred []framework.PreferredSchedulingTerm
		wantRaw   []int64
		want      []int64
		wantSkip  bool
	}{
		{name: "no preferences skip", wantSkip: true},
		{
			// raw 7,5,2,0 -> 100, 500/7=71, 200/7=28, 0.
			name:      "weights 5 and 2",
			preferred: []framework.PreferredSchedulingTerm{pref(5, req("zone", in, "a")), pref(2, req("disk", exists))},
			wantRaw:   []int64{7, 5, 2, 0},
			want:      []int64{100, 71, 28, 0},
		},
		{
			// raw 3,1,2,0 -> 100, 33, 66, 0.
			name:      "requirements ANDed within a term",
			preferred: []framework.PreferredSchedulingTerm{pref(1, req("zone", in, "a")), pref(2, req("zone", in, "a"), req("disk", in, "ssd")), pref(2, req("zone", doesNotExist), req("disk", exists))},
			wantRaw:   []int64{3, 1, 2, 0},
			want:      []int64{100, 33, 66, 0},
		},
		{
			name:      "nothing matches: all zero",
			preferred: []framework.PreferredSchedulingTerm{pref(4, req("zone", in, "z"))},
			wantRaw:   []int64{0, 0, 0, 0},
			want:      []int64{0, 0, 0, 0},
		},
		{
			name:      "weight 0 and empty terms count nothing",
			preferred: []framework.PreferredSchedulingTerm{pref(0, req("zone", exists)), {Weight: 9}, pref(1, req("disk", exists))},
			wantRaw:   []int64{1, 0, 1, 0},
			want:      []int64{100, 0, 100, 0},
		},
		{
			// added 3 for zone; pod 1 for disk: raw 4,3,1,0 -> 100,75,25,0.
			name:      "added preferences add up with the pod's",
			args:      &Args{AddedAffinity: &framework.NodeAffinity{Preferred: []framework.PreferredSchedulingTerm{pref(3, req("zone", exists))}}},
			preferred: []framework.PreferredSchedulingTerm{pref(1, req("disk", exists))},
			wantRaw:   []int64{4, 3, 1, 0},
			want:      []int64{100, 75, 25, 0},
		},
		{
			name:    "added preferences alone",
			args:    &Args{AddedAffinity: &framework.NodeAffinity{Preferred: []framework.PreferredSchedulingTerm{pref(3, req("zone", exists))}}},
			wantRaw: []int64{3, 3, 0, 0},
			want:    []int64{100, 100, 0, 0},
		},
		{
			name:    "added preferences all weight 0 still score (zeros)",
			args:    &Args{AddedAffinity: &framework.NodeAffinity{Preferred: []framework.PreferredSchedulingTerm{pref(0, req("zone", exists))}}},
			wantRaw: []int64{0, 0, 0, 0},
			want:    []int64{0, 0, 0, 0},
		},
		{
			name:      "NotIn preferences",
			preferred: []framework.PreferredSchedulingTerm{pref(10, req("zone", notIn, "a")), pref(7, req("disk", notIn, "ssd"))},
			wantRaw:   []int64{0, 7, 10, 17},
			// 100*7/17=41, 100*10/17=58.
			want: []int64{0, 41, 58, 100},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args any
			if tt.args != nil {
				args = tt.args
			}
			pl := mustNew(t, args)
			var na *framework.NodeAffinity
			if tt.preferred != nil {
				na = &framework.NodeAffinity{Preferred: tt.preferred}
			}
			pod := podWith(nil, na)
			state := framework.NewCycleState()
			st := pl.PreScore(ctx, state, pod, nodes)
			if tt.wantSkip {
				if !st.IsSkip() {
					t.Fatalf("PreScore = %v, want Skip", st)
				}
				return
			}
			if !st.IsSuccess() {
				t.Fatal(st)
			}
			// Without PreScore's state, Score parses on its own: same raw scores.
			for _, s := range []*framework.CycleState{state, framework.NewCycleState()} {
				var scores framework.NodeScoreList
				var raw []int64
				for _, ni := range nodes {
					v, status := pl.Score(ctx, s, pod, ni)
					if !status.IsSuccess() {
						t.Fatal(status)
					}
					raw = append(raw, v)
					scores = append(scores, framework.NodeScore{Name: ni.Node().Name, Score: v})
				}
				if diff := cmp.Diff(tt.wantRaw, raw); diff != "" {
					t.Errorf("raw (-want,+got):\n%s", diff)
				}
				if st := pl.ScoreExtensions().NormalizeScore(ctx, s, pod, scores); !st.IsSuccess() {
					t.Fatal(st)
				}
				var got []int64
				for _, sc := range scores {
					got = append(got, sc.Score)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("normalized (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

// A preference of the pod that does not parse fails the cycle, unlike a
// required term, which merely does not match.
func TestPreScoreBadPreference(t *testing.T) {
	pl := mustNew(t, nil)
	pod := podWith(nil, &framework.NodeAffinity{Preferred: []framework.PreferredSchedulingTerm{{Weight: 1, Preference: exprTerm(req("cores", gt, "many"))}}})
	if st := pl.PreScore(ctx, framework.NewCycleState(), pod, nil); st.Code() != framework.Error || !strings.Contains(st.Message(), "not an integer") {
		t.Errorf("PreScore = %v %q, want Error", st.Code(), st.Message())
	}
	if _, st := pl.Score(ctx, framework.NewCycleState(), pod, nodeInfo("n", nil)); st.Code() != framework.Error {
		t.Errorf("Score without PreScore = %v, want Error", st.Code())
	}
}

func TestNodeChangeHint(t *testing.T) {
	zone := func(z string) *framework.Node { return node("n", map[string]string{"zone": z}) }
	podA := podWith(nil, &framework.NodeAffinity{Required: required(exprTerm(req("zone", in, "a")))}).Pod
	podBad := podWith(nil, &framework.NodeAffinity{Required: required(exprTerm(req("zone", gt, "x")))}).Pod
	enforced := &Args{AddedAffinity: &framework.NodeAffinity{Required: required(exprTerm(req("zone", notIn, "b")))}}
	tests := []struct {
		name     string
		args     *Args
		pod      *framework.Pod
		old, new *framework.Node
		want     framework.QueueingHint
		wantErr  bool
	}{
		{name: "matching node added", pod: podA, new: zone("a"), want: framework.Queue},
		{name: "other node added", pod: podA, new: zone("b"), want: framework.QueueSkip},
		{name: "label now matches", pod: podA, old: zone("b"), new: zone("a"), want: framework.Queue},
		{name: "label still matches", pod: podA, old: zone("a"), new: zone("a"), want: framework.QueueSkip},
		{name: "label stops matching", pod: podA, old: zone("a"), new: zone("c"), want: framework.QueueSkip},
		{name: "pod's terms do not parse", pod: podBad, new: zone("a"), want: framework.Queue, wantErr: true},
		{name: "added affinity rejects the node", args: enforced, pod: podWith(nil, nil).Pod, new: zone("b"), want: framework.QueueSkip},
		{name: "added affinity accepts the node", args: enforced, pod: podWith(nil, nil).Pod, new: zone("a"), want: framework.Queue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args any
			if tt.args != nil {
				args = tt.args
			}
			pl := mustNew(t, args)
			var old any
			if tt.old != nil {
				old = tt.old
			}
			got, err := pl.isSchedulableAfterNodeChange(tt.pod, old, tt.new)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("hint = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
	evs, err := mustNew(t, nil).EventsToRegister(ctx)
	if err != nil || len(evs) != 1 || evs[0].Event.Resource != framework.EventResourceNode ||
		evs[0].Event.ActionType != framework.ActionAdd|framework.ActionUpdateNodeLabel {
		t.Errorf("EventsToRegister = %+v, %v", evs, err)
	}
}

// Filter and Score run once per node: they must not allocate.
func BenchmarkFilterAndScore(b *testing.B) {
	p, err := New(ctx, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	pl := p.(*NodeAffinity)
	pod := podWith(map[string]string{"pool": "web"}, &framework.NodeAffinity{
		Required: required(exprTerm(req("zone", in, "a", "b"), req("cores", gt, "4"))),
		Preferred: []framework.PreferredSchedulingTerm{
			{Weight: 5, Preference: exprTerm(req("disk", in, "ssd"))},
			{Weight: 2, Preference: exprTerm(req("zone", notIn, "b"))},
		},
	})
	ni := nodeInfo("n", map[string]string{"pool": "web", "zone": "a", "cores": "8", "disk": "ssd"})
	state := framework.NewCycleState()
	pl.PreFilter(ctx, state, pod, nil)
	pl.PreScore(ctx, state, pod, nil)
	b.ReportAllocs()
	for b.Loop() {
		if st := pl.Filter(ctx, state, pod, ni); !st.IsSuccess() {
			b.Fatal(st)
		}
		if s, _ := pl.Score(ctx, state, pod, ni); s != 7 {
			b.Fatal(s)
		}
	}
}
