package interpodaffinity

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/berth-io/berth/scheduler/framework"
)

func int32p(v int32) *int32 { return &v }

// scoringNodes are n1, n2 in zone z1, n3 in z2, n4 in no zone and n5 with
// no labels at all; existing pods go by node name.
func scoringNodes(pods map[string][]*framework.Pod) []*framework.NodeInfo {
	return []*framework.NodeInfo{
		nodeInfo(node("n1", "zone", "z1", "host", "n1"), pods["n1"]...),
		nodeInfo(node("n2", "zone", "z1", "host", "n2"), pods["n2"]...),
		nodeInfo(node("n3", "zone", "z2", "host", "n3"), pods["n3"]...),
		nodeInfo(node("n4", "host", "n4"), pods["n4"]...),
		nodeInfo(node("n5"), pods["n5"]...),
	}
}

// Raw scores are hand-summed term weights per node; normalized scores are
// 100*(raw-min)/(max-min) in float64, truncated.
//
// Long for its table: one case per behaviour, kept together so they
// read side by side.
func TestScore(t *testing.T) {
	web := func() *podBuilder { return pod("p").labels("app", "web") }
	db := func(name string) *framework.Pod { return pod(name).labels("app", "db").obj() }
	tests := []struct {
		name     string
		args     *Args
		pod      *framework.Pod
		existing map[string][]*framework.Pod
		wantSkip bool
		wantRaw  []int64 // n1..n5
		wantNorm []int64
	}{
		{
			name:     "no affinity anywhere: skip",
			pod:      web().obj(),
			existing: map[string][]*framework.Pod{"n1": {db("d1")}},
			wantSkip: true,
		},
		{
			name:     "the pod's preferred terms match nothing: skip",
			pod:      web().preferredAffinity(8, termIn("app", "zone", "cache")).obj(),
			existing: map[string][]*framework.Pod{"n1": {db("d1")}},
			wantSkip: true,
		},
		{
			// zone: z1 +8 (d1), z2 +8 (d3); d4's node has no zone and d5's
			// no labels. host: n3 -3 (cache). n3 = 8-3 = 5, so 100*5/8 = 62.5.
			name: "the pod's preferred affinity and anti-affinity",
			pod:  web().preferredAffinity(8, termIn("app", "zone", "db")).preferredAnti(3, termIn("app", "host", "cache")).obj(),
			existing: map[string][]*framework.Pod{
				"n1": {db("d1")},
				"n3": {db("d3"), pod("c3").labels("app", "cache").obj()},
				"n4": {db("d4")},
				"n5": {db("d5")},
			},
			wantRaw:  []int64{8, 8, 5, 0, 0},
			wantNorm: []int64{100, 100, 62, 0, 0},
		},
		{
			// Symmetry: z1 +7 (a1's preferred affinity), z2 -4 (a3's
			// preferred anti-affinity), host n3 +1 (a3's required affinity
			// at the default hard weight). min -3, max 7: n4 is 100*3/10.
			name: "existing pods' terms that select the pod",
			pod:  web().obj(),
			existing: map[string][]*framework.Pod{
				"n1": {pod("a1").preferredAffinity(7, termIn("app", "zone", "web")).obj()},
				"n3": {pod("a3").preferredAnti(4, termIn("app", "zone", "web")).requiredAffinity(termIn("app", "host", "web")).obj()},
			},
			wantRaw:  []int64{7, 7, -3, 0, 0},
			wantNorm: []int64{100, 100, 0, 30, 30},
		},
		{
			// Hard weight 5: n3 = -4+5 = 1; 100*1/7 = 14.28.
			name: "hard pod affinity weight from args",
			args: &Args{HardPodAffinityWeight: int32p(5)},
			pod:  web().obj(),
			existing: map[string][]*framework.Pod{
				"n1": {pod("a1").preferredAffinity(7, termIn("app", "zone", "web")).obj()},
				"n3": {pod("a3").preferredAnti(4, termIn("app", "zone", "web")).requiredAffinity(termIn("app", "host", "web")).obj()},
			},
			wantRaw:  []int64{7, 7, 1, 0, 0},
			wantNorm: []int64{100, 100, 14, 0, 0},
		},
		{
			name:     "hard weight 0 ignores existing pods' required affinity",
			args:     &Args{HardPodAffinityWeight: int32p(0)},
			pod:      web().obj(),
			existing: map[string][]*framework.Pod{"n3": {pod("a3").requiredAffinity(termIn("app", "host", "web")).obj()}},
			wantSkip: true,
		},
		{
			name:     "existing required affinity that does not select the pod",
			pod:      web().obj(),
			existing: map[string][]*framework.Pod{"n3": {pod("a3").requiredAffinity(termIn("app", "host", "db")).obj()}},
			wantSkip: true,
		},
		{
			name:     "an existing pod's term selects its own namespace",
			pod:      web().obj(),
			existing: map[string][]*framework.Pod{"n1": {pod("a1").ns("other").preferredAffinity(7, termIn("app", "zone", "web")).obj()}},
			wantSkip: true,
		},
		{
			name:     "an existing pod's term over all namespaces",
			pod:      web().ns("team").obj(),
			existing: map[string][]*framework.Pod{"n1": {pod("a1").ns("other").preferredAffinity(7, withNamespaces(termIn("app", "zone", "web"), true)).obj()}},
			wantRaw:  []int64{7, 7, 0, 0, 0},
			wantNorm: []int64{100, 100, 0, 0, 0},
		},
		{
			name:     "matchLabelKeys of the pod's preferred term",
			pod:      web().labels("app", "web", "ver", "v1").preferredAffinity(9, withMatchKeys(termExists("app", "zone"), []string{"ver"}, nil)).obj(),
			existing: map[string][]*framework.Pod{"n1": {pod("v1").labels("app", "x", "ver", "v1").obj()}, "n3": {pod("v2").labels("app", "x", "ver", "v2").obj()}},
			wantRaw:  []int64{9, 9, 0, 0, 0},
			wantNorm: []int64{100, 100, 0, 0, 0},
		},
		{
			name: "ignoring existing pods' preferred terms skips a pod without its own",
			args: &Args{IgnorePreferredTermsOfExistingPods: true},
			pod:  web().obj(),
			existing: map[string][]*framework.Pod{
				"n1": {pod("a1").preferredAffinity(7, termIn("app", "zone", "web")).obj()},
			},
			wantSkip: true,
		},
		{
			// The flag only decides the skip: with terms of its own the pod
			// still sees existing pods' terms (z1 +7 and +2).
			name: "ignoring existing pods' preferred terms keeps them for a pod with its own",
			args: &Args{IgnorePreferredTermsOfExistingPods: true},
			pod:  web().preferredAffinity(2, termIn("app", "zone", "web")).obj(),
			existing: map[string][]*framework.Pod{
				"n1": {pod("a1").labels("app", "web").preferredAffinity(7, termIn("app", "zone", "web")).obj()},
			},
			wantRaw:  []int64{9, 9, 0, 0, 0},
			wantNorm: []int64{100, 100, 0, 0, 0},
		},
		{
			// Weights cancel to zero in z1: the plugin still scores (terms
			// applied), every raw score is 0 and so is every normalized one.
			name:     "weights that cancel",
			pod:      web().preferredAffinity(5, termIn("app", "zone", "db")).preferredAnti(5, termIn("app", "zone", "db")).obj(),
			existing: map[string][]*framework.Pod{"n1": {db("d1")}},
			wantRaw:  []int64{0, 0, 0, 0, 0},
			wantNorm: []int64{0, 0, 0, 0, 0},
		},
		{
			// Only pods with affinity are visited when the pod has no
			// preferred terms; d1 (none) adds nothing.
			name: "existing pods without affinity do not count for a pod without preferred terms",
			pod:  web().obj(),
			existing: map[string][]*framework.Pod{
				"n1": {db("d1")},
				"n3": {pod("a3").preferredAffinity(1, termIn("app", "host", "web")).obj()},
			},
			wantRaw:  []int64{0, 0, 1, 0, 0},
			wantNorm: []int64{0, 0, 100, 0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := scoringNodes(tt.existing)
			var args any
			if tt.args != nil {
				args = tt.args
			}
			pl := newPlugin(t, args, 1, nodes...)
			state := framework.NewCycleState()
			pi := framework.NewPodInfo(tt.pod)
			st := pl.PreScore(ctx, state, pi, nodes)
			if tt.wantSkip {
				if !st.IsSkip() {
					t.Fatalf("PreScore = %v, want Skip", st)
				}
				return
			}
			if !st.IsSuccess() {
				t.Fatalf("PreScore = %v", st)
			}
			scores := make(framework.NodeScoreList, len(nodes))
			var raw []int64
			for i, ni := range nodes {
				s, st := pl.Score(ctx, state, pi, ni)
				if !st.IsSuccess() {
					t.Fatalf("Score(%s) = %v", ni.Node().Name, st)
				}
				scores[i] = framework.NodeScore{Name: ni.Node().Name, Score: s}
				raw = append(raw, s)
			}
			if diff := cmp.Diff(tt.wantRaw, raw); diff != "" {
				t.Errorf("raw scores (-want,+got):\n%s", diff)
			}
			if st := pl.ScoreExtensions().NormalizeScore(ctx, state, pi, scores); !st.IsSuccess() {
				t.Fatalf("NormalizeScore = %v", st)
			}
			var norm []int64
			for _, s := range scores {
				norm = append(norm, s.Score)
			}
			if diff := cmp.Diff(tt.wantNorm, norm); diff != "" {
				t.Errorf("normalized scores (-want,+got):\n%s", diff)
			}
		})
	}
}

// Kube computes 100*((s-min)/(max-min)) in float64 and truncates, which is
// not always the integer quotient: 29/100 is 0.28999..., giving 28.
func TestNormalizeScoreRounding(t *testing.T) {
	tests := []struct {
		name string
		raw  []int64
		want []int64
	}{
		{name: "float truncation below the integer quotient", raw: []int64{-10, 19, 90}, want: []int64{0, 28, 100}},
		{name: "57 of 100 is 56", raw: []int64{0, 57, 100}, want: []int64{0, 56, 100}},
		{name: "thirds truncate", raw: []int64{0, 1, 2, 3}, want: []int64{0, 33, 66, 100}},
		{name: "all negative", raw: []int64{-8, -4, -2}, want: []int64{0, 66, 100}},
		{name: "all equal", raw: []int64{5, 5, 5}, want: []int64{0, 0, 0}},
		{name: "one node", raw: []int64{7}, want: []int64{0}},
		{name: "no nodes", raw: nil, want: nil},
	}
	pl := newPlugin(t, nil, 1)
	state := framework.NewCycleState()
	state.Write(preScoreStateKey, newPreScoreState(scoreMap{"zone": {"z1": 1}}))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			scores := make(framework.NodeScoreList, len(tt.raw))
			for i, s := range tt.raw {
				scores[i].Score = s
			}
			if st := pl.NormalizeScore(ctx, state, nil, scores); !st.IsSuccess() {
				t.Fatalf("NormalizeScore = %v", st)
			}
			var got []int64
			for _, s := range scores {
				got = append(got, s.Score)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

func TestNormalizeScoreWithoutTopologyScoreLeavesScores(t *testing.T) {
	pl := newPlugin(t, nil, 1)
	state := framework.NewCycleState()
	state.Write(preScoreStateKey, &preScoreState{})
	scores := framework.NodeScoreList{{Name: "a", Score: 3}, {Name: "b", Score: 9}}
	if st := pl.NormalizeScore(ctx, state, nil, scores); !st.IsSuccess() {
		t.Fatalf("NormalizeScore = %v", st)
	}
	if scores[0].Score != 3 || scores[1].Score != 9 {
		t.Errorf("scores = %v, want unchanged", scores)
	}
}

func TestScoreWithoutPreScore(t *testing.T) {
	nodes := scoringNodes(nil)
	pl := newPlugin(t, nil, 1, nodes...)
	if _, st := pl.Score(ctx, framework.NewCycleState(), framework.NewPodInfo(pod("p").obj()), nodes[0]); !st.IsError() {
		t.Errorf("Score = %v, want Error", st)
	}
	if st := pl.NormalizeScore(ctx, framework.NewCycleState(), nil, nil); !st.IsError() {
		t.Errorf("NormalizeScore = %v, want Error", st)
	}
}

// The chunked parallel PreScore must sum exactly what the inline one does.
func TestPreScoreParallelMatchesSerial(t *testing.T) {
	var nodes []*framework.NodeInfo
	for i := range 60 {
		n := node("n"+string(rune('A'+i)), "zone", []string{"z1", "z2", "z3", "z4"}[i%4], "host", string(rune('A'+i)))
		var ps []*framework.Pod
		if i%2 == 0 {
			ps = append(ps, pod("db").labels("app", "db").obj())
		}
		if i%3 == 0 {
			ps = append(ps, pod("a").preferredAffinity(int32(i%7+1), termIn("app", "zone", "web")).obj())
		}
		nodes = append(nodes, nodeInfo(n, ps...))
	}
	pi := framework.NewPodInfo(pod("p").labels("app", "web").
		preferredAffinity(3, termIn("app", "zone", "db")).preferredAnti(2, termIn("app", "host", "db")).obj())
	var got []scoreMap
	for _, par := range []int{1, 3} {
		pl := newPlugin(t, nil, par, nodes...)
		state := framework.NewCycleState()
		if st := pl.PreScore(ctx, state, pi, nodes); !st.IsSuccess() {
			t.Fatalf("PreScore = %v", st)
		}
		s, err := framework.ReadState[*preScoreState](state, preScoreStateKey)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, s.scores())
	}
	if diff := cmp.Diff(got[0], got[1]); diff != "" {
		t.Errorf("serial vs parallel (-serial,+parallel):\n%s", diff)
	}
	// z1 holds i = 0, 4, ..., 56: 15 db pods at +3, and the pods with
	// preferred affinity at i = 0, 12, 24, 36, 48 weigh 1+6+4+2+7.
	if got[0]["zone"]["z1"] != 65 || got[0]["host"]["A"] != -2 {
		t.Errorf("z1 = %d, host A = %d, want 65 and -2", got[0]["zone"]["z1"], got[0]["host"]["A"])
	}
}

// TestPreScoreJudgesEachClassOnce: PreScore judges each affinity class of
// existing pods once and applies the result to all its pods. On random
// clusters whose pods vary in every field affinity reads, its sums must
// equal those of judging every pod on its own.
func TestPreScoreJudgesEachClassOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 20 {
		nodes, incoming := randomAffinityCluster(rng)
		if round%2 == 0 {
			incoming.Affinity = nil // only existing pods' terms count
		}
		pl := newPlugin(t, nil, 4, nodes...)
		state := framework.NewCycleState()
		var got scoreMap
		if st := pl.PreScore(ctx, state, framework.NewPodInfo(incoming), nodes); st.IsSuccess() {
			s, err := framework.ReadState[*preScoreState](state, preScoreStateKey)
			if err != nil {
				t.Fatal(err)
			}
			got = s.scores()
		} else if !st.IsSkip() {
			t.Fatal(st)
		}
		var want scoreMap
		preferred, preferredAnti := preferredAffinityTerms(incoming), preferredAntiAffinityTerms(incoming)
		for _, ni := range nodes {
			for _, existing := range ni.Pods {
				for _, c := range pl.scoreExistingPod(incoming, preferred, preferredAnti, existing.Pod) {
					// Each pod on its own, its node's label read from the map.
					if value, ok := ni.Node().Labels[c.key.Name]; ok {
						want.add(c.key.Name, value, c.delta)
					}
				}
			}
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round %d: sums (-each pod on its own +by class):\n%s", round, diff)
		}
	}
}

// randomAffinityCluster is 30 nodes in 3 zones running up to 3 pods each,
// and an incoming pod. Pods vary in every field affinity reads (namespace,
// labels, each kind of term, term namespaces, matchLabelKeys) over few
// values, so that many pods share an affinity class and many do not.
func randomAffinityCluster(rng *rand.Rand) ([]*framework.NodeInfo, *framework.Pod) {
	pick := func(vals ...string) string { return vals[rng.IntN(len(vals))] }
	randomTerm := func() framework.PodAffinityTerm {
		// Custom keys, and the well-known ones NodeInfo answers for itself.
		t := termIn("app", pick("host", "zone", framework.LabelHostname, framework.LabelTopologyZone), pick("web", "db"))
		if rng.IntN(3) == 0 {
			t.Namespaces = []string{pick("ns1", "ns2")}
		}
		if rng.IntN(4) == 0 {
			t.MatchLabelKeys = []string{"rev"}
		}
		return t
	}
	randomPod := func(name string) *framework.Pod {
		b := pod(name).ns(pick("ns1", "ns2")).labels("app", pick("web", "db", "cache"), "rev", pick("1", "2"))
		switch rng.IntN(6) {
		case 0:
			b.preferredAffinity(int32(rng.IntN(100)+1), randomTerm())
		case 1:
			b.preferredAnti(int32(rng.IntN(100)+1), randomTerm())
		case 2:
			b.requiredAffinity(randomTerm())
		case 3:
			b.requiredAnti(randomTerm())
		}
		return b.obj()
	}
	var nodes []*framework.NodeInfo
	for i := range 30 {
		var pods []*framework.Pod
		for j := range rng.IntN(4) {
			pods = append(pods, randomPod(fmt.Sprintf("p%d-%d", i, j)))
		}
		name := fmt.Sprintf("n%d", i)
		zone := fmt.Sprintf("z%d", i%3)
		nodes = append(nodes, nodeInfo(node(name, "host", name, "zone", zone,
			framework.LabelHostname, name, framework.LabelTopologyZone, zone), pods...))
	}
	return nodes, randomPod("incoming")
}

// scores is the state's sums as one map, as PreScore summed them.
func (s *preScoreState) scores() scoreMap {
	var m scoreMap
	for _, k := range s.byKey {
		if m == nil {
			m = scoreMap{}
		}
		m[k.key.Name] = k.values
	}
	return m
}
