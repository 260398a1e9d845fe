package podtopologyspread

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
)

// withHostnames adds kubernetes.io/hostname = name to every node.
func withHostnames(nodes []*framework.Node) []*framework.Node {
	for _, n := range nodes {
		n.Labels[LabelHostname] = n.Name
	}
	return nodes
}

// Expected scores are worked by hand from kube's formulas:
// raw = round(sum over constraints of count*log(domains+2) + maxSkew-1),
// normalized = 100 * (max + min - raw) / max with integer division.
//
// Long for its table: one case per behaviour, kept together so they
// read side by side.
func TestScore(t *testing.T) {
	tests := []struct {
		name  string
		args  any
		nodes []*framework.Node
		pods  []*framework.Pod
		// filtered names the nodes that passed Filter; nil: all.
		filtered []string
		pod      *framework.Pod
		wantRaw  map[string]int64
		want     map[string]int64
	}{
		{
			// zone1=3, zone2=1; weight ln(2+2)=1.386: 4.16 -> 4, 1.39 -> 1.
			name:    "zone: counts per domain, normalized against max and min",
			nodes:   fourNodes(),
			pods:    concat(podsOn("a", 2), podsOn("b", 1), podsOn("x", 1)),
			pod:     mkPod("p").label("foo", "").spread(1, "zone", soft, exists("foo")).obj(),
			wantRaw: map[string]int64{"a": 4, "b": 4, "x": 1, "y": 1},
			// 100*(4+1-4)/4 = 25; 100*(4+1-1)/4 = 100.
			want: map[string]int64{"a": 25, "b": 25, "x": 100, "y": 100},
		},
		{
			// +maxSkew-1 = 2: 6.16 -> 6, 3.39 -> 3; 100*3/6 = 50.
			name:    "maxSkew softens the differences",
			nodes:   fourNodes(),
			pods:    concat(podsOn("a", 2), podsOn("b", 1), podsOn("x", 1)),
			pod:     mkPod("p").label("foo", "").spread(3, "zone", soft, exists("foo")).obj(),
			wantRaw: map[string]int64{"a": 6, "b": 6, "x": 3, "y": 3},
			want:    map[string]int64{"a": 50, "b": 50, "x": 100, "y": 100},
		},
		{
			// Hostname counts per node; weight ln(4+2)=1.792: 3.58 -> 4,
			// 1.79 -> 2, 0, 5.38 -> 5. max 5, min 0.
			name:    "hostname is counted per node at Score",
			nodes:   withHostnames(fourNodes()),
			pods:    concat(podsOn("a", 2), podsOn("b", 1), podsOn("y", 3)),
			pod:     mkPod("p").label("foo", "").spread(1, LabelHostname, soft, exists("foo")).obj(),
			wantRaw: map[string]int64{"a": 4, "b": 2, "x": 0, "y": 5},
			want:    map[string]int64{"a": 20, "b": 60, "x": 100, "y": 0},
		},
		{
			// a: 3*1.386+2*1.792=7.74 -> 8; b: 5.95 -> 6; x: 3.18 -> 3;
			// y: 1.39 -> 1. 100*1/8=12, 100*3/8=37, 100*6/8=75.
			name:  "two constraints add up",
			nodes: withHostnames(fourNodes()),
			pods:  concat(podsOn("a", 2), podsOn("b", 1), podsOn("x", 1)),
			pod: mkPod("p").label("foo", "").
				spread(1, "zone", soft, exists("foo")).
				spread(1, LabelHostname, soft, exists("foo")).obj(),
			wantRaw: map[string]int64{"a": 8, "b": 6, "x": 3, "y": 1},
			want:    map[string]int64{"a": 12, "b": 37, "x": 75, "y": 100},
		},
		{
			// Only a, x and nozone passed Filter; nozone lacks the key and
			// is ignored (0). Counts still come from every node: zone1
			// includes b's pod, and the domains are zone1 and zone2.
			name:     "ignored nodes score 0; counts span unfiltered nodes",
			nodes:    append(fourNodes(), mkNode("nozone").label("node", "nozone").obj()),
			pods:     concat(podsOn("a", 2), podsOn("b", 1), podsOn("x", 1), podsOn("nozone", 5)),
			filtered: []string{"a", "x", "nozone"},
			pod:      mkPod("p").label("foo", "").spread(1, "zone", soft, exists("foo")).obj(),
			wantRaw:  map[string]int64{"a": 4, "x": 1, "nozone": 0},
			want:     map[string]int64{"a": 25, "x": 100, "nozone": 0},
		},
		{
			// nozone is ignored, so the hostname weight is ln(4+2), not
			// ln(5+2). a: 6*1.386 + 5*1.792 = 17.28 -> 17; b: 10.11 -> 10;
			// x: 3.18 -> 3; y: 1.39 -> 1. 100*1/17=5, 100*8/17=47, 100*15/17=88.
			name:  "hostname weight counts the filtered nodes that are not ignored",
			nodes: withHostnames(append(fourNodes(), mkNode("nozone").obj())),
			pods:  concat(podsOn("a", 5), podsOn("b", 1), podsOn("x", 1), podsOn("nozone", 3)),
			pod: mkPod("p").label("foo", "").
				spread(1, "zone", soft, exists("foo")).
				spread(1, LabelHostname, soft, exists("foo")).obj(),
			wantRaw: map[string]int64{"a": 17, "b": 10, "x": 3, "y": 1, "nozone": 0},
			want:    map[string]int64{"a": 5, "b": 47, "x": 88, "y": 100, "nozone": 0},
		},
		{
			// Only zone2 passed: one domain, weight ln(3); y has 0.
			name:     "domains without a filtered node are not counted",
			nodes:    fourNodes(),
			pods:     concat(podsOn("a", 5), podsOn("x", 2)),
			filtered: []string{"x", "y"},
			pod:      mkPod("p").label("foo", "").spread(1, "zone", soft, exists("foo")).obj(),
			// 2*1.0986 = 2.197 -> 2 for both: max=min=2 -> 100*2/2.
			wantRaw: map[string]int64{"x": 2, "y": 2},
			want:    map[string]int64{"x": 100, "y": 100},
		},
		{
			name:    "no matching pods: every node gets the maximum",
			nodes:   fourNodes(),
			pod:     mkPod("p").label("foo", "").spread(1, "zone", soft, exists("foo")).obj(),
			wantRaw: map[string]int64{"a": 0, "b": 0, "x": 0, "y": 0},
			want:    map[string]int64{"a": 100, "b": 100, "x": 100, "y": 100},
		},
		{
			// b (zone1) is excluded by the pod's node selector: zone1=1,
			// zone2=2. 1.39 -> 1, 2.77 -> 3; 100*3/3 and 100*1/3.
			name: "nodeAffinityPolicy Honor (default) counts only nodes the pod may use",
			nodes: []*framework.Node{
				mkNode("a").label("zone", "zone1").label("pool", "blue").obj(),
				mkNode("b").label("zone", "zone1").label("pool", "red").obj(),
				mkNode("x").label("zone", "zone2").label("pool", "blue").obj(),
			},
			pods:     concat(podsOn("a", 1), podsOn("b", 5), podsOn("x", 2)),
			filtered: []string{"a", "x"},
			pod:      mkPod("p").label("foo", "").nodeSelector("pool", "blue").spread(1, "zone", soft, exists("foo")).obj(),
			wantRaw:  map[string]int64{"a": 1, "x": 3},
			want:     map[string]int64{"a": 100, "x": 33},
		},
		{
			// zone1=6: 8.32 -> 8; 100*(8+3-8)/8 = 37.
			name: "nodeAffinityPolicy Ignore counts every node",
			nodes: []*framework.Node{
				mkNode("a").label("zone", "zone1").label("pool", "blue").obj(),
				mkNode("b").label("zone", "zone1").label("pool", "red").obj(),
				mkNode("x").label("zone", "zone2").label("pool", "blue").obj(),
			},
			pods:     concat(podsOn("a", 1), podsOn("b", 5), podsOn("x", 2)),
			filtered: []string{"a", "x"},
			pod: mkPod("p").label("foo", "").nodeSelector("pool", "blue").
				spread(1, "zone", soft, exists("foo"), affinityPolicy(framework.NodeInclusionPolicyIgnore)).obj(),
			wantRaw: map[string]int64{"a": 8, "x": 3},
			want:    map[string]int64{"a": 37, "x": 100},
		},
		{
			name: "nodeTaintsPolicy Honor drops untolerated nodes from the counts",
			nodes: []*framework.Node{
				mkNode("a").label("zone", "zone1").obj(),
				mkNode("b").label("zone", "zone1").taint("t", framework.TaintEffectNoExecute).obj(),
				mkNode("x").label("zone", "zone2").obj(),
			},
			pods:     concat(podsOn("a", 1), podsOn("b", 5), podsOn("x", 2)),
			filtered: []string{"a", "x"},
			pod:      mkPod("p").label("foo", "").spread(1, "zone", soft, exists("foo"), taintsPolicy(framework.NodeInclusionPolicyHonor)).obj(),
			wantRaw:  map[string]int64{"a": 1, "x": 3},
			want:     map[string]int64{"a": 100, "x": 33},
		},
		{
			name: "nodeTaintsPolicy Ignore (default) counts tainted nodes",
			nodes: []*framework.Node{
				mkNode("a").label("zone", "zone1").obj(),
				mkNode("b").label("zone", "zone1").taint("t", framework.TaintEffectNoExecute).obj(),
				mkNode("x").label("zone", "zone2").obj(),
			},
			pods:     concat(podsOn("a", 1), podsOn("b", 5), podsOn("x", 2)),
			filtered: []string{"a", "x"},
			pod:      mkPod("p").label("foo", "").spread(1, "zone", soft, exists("foo")).obj(),
			wantRaw:  map[string]int64{"a": 8, "x": 3},
			want:     map[string]int64{"a": 37, "x": 100},
		},
		{
			// Only rev=2 pods count: zone1=0 (a has rev=1), zone2=1.
			name:    "matchLabelKeys",
			nodes:   fourNodes(),
			pods:    concat(podsOn("a", 3, "rev", "1"), podsOn("x", 1, "rev", "2")),
			pod:     mkPod("p").label("foo", "").label("rev", "2").spread(1, "zone", soft, exists("foo"), matchLabelKeys("rev")).obj(),
			wantRaw: map[string]int64{"a": 0, "b": 0, "x": 1, "y": 1},
			want:    map[string]int64{"a": 100, "b": 100, "x": 0, "y": 0},
		},
		{
			// System defaults: hostname maxSkew 3 (weight ln 6) and zone
			// maxSkew 5. y lacks a zone yet is not ignored: it is spread by
			// hostname only, and its "" domain counts towards the zone
			// weight, ln(3+2). The selector is the pod's labels {app: web},
			// which b's pod (with an extra label) also carries.
			// a: 2*1.792+2 + 3*1.609+4 = 14.41 -> 14; b: 12.62 -> 13;
			// x: 3.79+5.61 = 9.40 -> 9; y: 3.79 -> 4. max 14, min 4.
			name: "system defaults select by the pod's labels and tolerate a missing zone",
			args: &Args{DefaultingType: SystemDefaulting},
			nodes: withHostnames([]*framework.Node{
				mkNode("a").label(LabelTopologyZone, "zone1").obj(),
				mkNode("b").label(LabelTopologyZone, "zone1").obj(),
				mkNode("x").label(LabelTopologyZone, "zone2").obj(),
				mkNode("y").obj(),
			}),
			pods: []*framework.Pod{
				mkPod("a1").node("a").label("app", "web").obj(),
				mkPod("a2").node("a").label("app", "web").obj(),
				mkPod("a3").node("a").label("app", "db").obj(),
				mkPod("b1").node("b").label("app", "web").label("tier", "x").obj(),
				mkPod("x1").node("x").label("app", "web").obj(),
				mkPod("y1").node("y").label("app", "web").obj(),
			},
			pod:     mkPod("p").label("app", "web").obj(),
			wantRaw: map[string]int64{"a": 14, "b": 13, "x": 9, "y": 4},
			want:    map[string]int64{"a": 28, "b": 35, "x": 64, "y": 100},
		},
		{
			// A pod's own soft constraint on "zone" replaces the defaults
			// (which would have used hostname and the zone label).
			name:    "own constraints replace the system defaults",
			args:    nil,
			nodes:   withHostnames(fourNodes()),
			pods:    concat(podsOn("a", 2), podsOn("b", 1), podsOn("x", 1)),
			pod:     mkPod("p").label("foo", "").spread(1, "zone", soft, exists("foo")).obj(),
			wantRaw: map[string]int64{"a": 4, "b": 4, "x": 1, "y": 1},
			want:    map[string]int64{"a": 25, "b": 25, "x": 100, "y": 100},
		},
		{
			// List defaults: a zone constraint with the pod's labels.
			name: "List defaults",
			args: &Args{DefaultingType: ListDefaulting, DefaultConstraints: []framework.TopologySpreadConstraint{
				{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: soft},
			}},
			nodes:   fourNodes(),
			pods:    concat(podsOn("a", 2, "app", "web"), podsOn("b", 1, "app", "web"), podsOn("x", 1, "app", "web"), podsOn("y", 4)),
			pod:     mkPod("p").label("app", "web").obj(),
			wantRaw: map[string]int64{"a": 4, "b": 4, "x": 1, "y": 1},
			want:    map[string]int64{"a": 25, "b": 25, "x": 100, "y": 100},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			infos := place(tt.nodes, tt.pods)
			pl, _ := newPlugin(t, tt.args, infos...)
			filtered := infos
			if tt.filtered != nil {
				filtered = nil
				for _, want := range tt.filtered {
					for _, ni := range infos {
						if ni.Node().Name == want {
							filtered = append(filtered, ni)
						}
					}
				}
			}
			state := framework.NewCycleState()
			pod := framework.NewPodInfo(tt.pod)
			if st := pl.PreScore(ctx, state, pod, filtered); !st.IsSuccess() {
				t.Fatalf("PreScore: %v", st)
			}
			gotRaw := map[string]int64{}
			scores := make(framework.NodeScoreList, len(filtered))
			for i, ni := range filtered {
				s, st := pl.Score(ctx, state, pod, ni)
				if !st.IsSuccess() {
					t.Fatalf("Score(%s): %v", ni.Node().Name, st)
				}
				gotRaw[ni.Node().Name] = s
				scores[i] = framework.NodeScore{Name: ni.Node().Name, Score: s}
			}
			if diff := cmp.Diff(tt.wantRaw, gotRaw); diff != "" {
				t.Errorf("raw scores (-want,+got):\n%s", diff)
			}
			if st := pl.ScoreExtensions().NormalizeScore(ctx, state, pod, scores); !st.IsSuccess() {
				t.Fatal(st)
			}
			got := map[string]int64{}
			for _, s := range scores {
				got[s.Name] = s.Score
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("normalized (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPreScoreSkipAndErrors(t *testing.T) {
	bad := &framework.LabelSelector{MatchExpressions: []framework.LabelSelectorRequirement{{Key: "foo", Operator: "Bogus"}}}
	tests := []struct {
		name  string
		args  any
		nodes []*framework.Node
		pod   *framework.Pod
		want  framework.Code
	}{
		{name: "no nodes in the snapshot", args: listArgs, pod: mkPod("p").spread(1, "zone", soft, exists("foo")).obj(), want: framework.Skip},
		{name: "only hard constraints", args: listArgs, nodes: fourNodes(), pod: mkPod("p").spread(1, "zone", hard, exists("foo")).obj(), want: framework.Skip},
		{name: "own hard constraints suppress soft defaults", args: nil, nodes: fourNodes(), pod: mkPod("p").label("a", "b").spread(1, "zone", hard, exists("foo")).obj(), want: framework.Skip},
		{name: "system defaults need pod labels", args: nil, nodes: fourNodes(), pod: mkPod("p").obj(), want: framework.Skip},
		{name: "Berth's default: no default constraints", args: nil, nodes: fourNodes(), pod: mkPod("p").label("a", "b").obj(), want: framework.Skip},
		{name: "system defaults with labels", args: &Args{DefaultingType: SystemDefaulting}, nodes: fourNodes(), pod: mkPod("p").label("a", "b").obj(), want: framework.Success},
		{name: "no defaults with List and none given", args: listArgs, nodes: fourNodes(), pod: mkPod("p").label("a", "b").obj(), want: framework.Skip},
		{name: "invalid selector", args: listArgs, nodes: fourNodes(), pod: mkPod("p").spread(1, "zone", soft, bad).obj(), want: framework.Error},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			infos := place(tt.nodes, nil)
			pl, _ := newPlugin(t, tt.args, infos...)
			st := pl.PreScore(ctx, framework.NewCycleState(), framework.NewPodInfo(tt.pod), infos)
			if st.Code() != tt.want {
				t.Errorf("PreScore = %v (%v), want %v", st.Code(), st, tt.want)
			}
		})
	}
	t.Run("Score and NormalizeScore without state", func(t *testing.T) {
		infos := place(fourNodes(), nil)
		pl, _ := newPlugin(t, listArgs, infos...)
		if _, st := pl.Score(ctx, framework.NewCycleState(), mkPod("p").info(), infos[0]); st.Code() != framework.Error {
			t.Errorf("Score = %v, want Error", st)
		}
		if st := pl.NormalizeScore(ctx, framework.NewCycleState(), mkPod("p").info(), nil); st.Code() != framework.Error {
			t.Errorf("NormalizeScore = %v, want Error", st)
		}
	})
}

// TestScoreThroughFramework checks the plugin's weight and the Skip
// plumbing in the real framework: a pod without soft constraints gets no
// PodTopologySpread column at all.
func TestScoreThroughFramework(t *testing.T) {
	infos := place(fourNodes(), concat(podsOn("a", 2), podsOn("b", 1), podsOn("x", 1)))
	_, fwk := newPlugin(t, listArgs, infos...)
	run := func(pod *framework.PodInfo) *framework.NodeScores {
		t.Helper()
		state := framework.NewCycleState()
		if st := fwk.RunPreScorePlugins(ctx, state, pod, infos); !st.IsSuccess() {
			t.Fatal(st)
		}
		var out framework.NodeScores
		if st := fwk.RunScorePlugins(ctx, state, pod, infos, &out); !st.IsSuccess() {
			t.Fatal(st)
		}
		return &out
	}
	out := run(mkPod("p").label("foo", "").spread(1, "zone", soft, exists("foo")).info())
	if diff := cmp.Diff([]int64{50, 50, 200, 200}, out.Totals); diff != "" {
		t.Errorf("weighted totals (-want,+got):\n%s", diff)
	}
	out = run(mkPod("p").label("foo", "").info())
	if len(out.Plugins) != 0 {
		t.Errorf("plugins scored for a pod without soft constraints: %v", out.Plugins)
	}
}
