package interpodaffinity

import (
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/berth-io/berth/scheduler/framework"
)

// Filter outcomes, by reason; the code follows from the reason.
const (
	pass     = ""
	aff      = ErrReasonAffinityRulesNotMatch
	anti     = ErrReasonAntiAffinityRulesNotMatch
	existing = ErrReasonExistingAntiAffinityRulesNotMatch
)

func wantCode(reason string) framework.Code {
	switch reason {
	case pass:
		return framework.Success
	case aff:
		return framework.UnschedulableAndUnresolvable
	default:
		return framework.Unschedulable
	}
}

// outcome renders a status as its code and reason for comparison.
func outcome(st *framework.Status) string {
	if st.IsSuccess() {
		return pass
	}
	return st.Code().String() + ": " + st.Message()
}

func want(reason string) string {
	if reason == pass {
		return pass
	}
	return wantCode(reason).String() + ": " + reason
}

// topology returns four nodes: n1 and n2 in zone z1, n3 in zone z2, n4 in
// no zone; each has its own host label.
func topology() []*framework.Node {
	return []*framework.Node{
		node("n1", "zone", "z1", "host", "n1"),
		node("n2", "zone", "z1", "host", "n2"),
		node("n3", "zone", "z2", "host", "n3"),
		node("n4", "host", "n4"),
	}
}

// place builds NodeInfos over topology() with pods placed by node name.
func place(pods map[string][]*framework.Pod) []*framework.NodeInfo {
	var out []*framework.NodeInfo
	for _, n := range topology() {
		out = append(out, nodeInfo(n, pods[n.Name]...))
	}
	return out
}

func withMatchKeys(t framework.PodAffinityTerm, match, mismatch []string) framework.PodAffinityTerm {
	t.MatchLabelKeys = match
	t.MismatchLabelKeys = mismatch
	return t
}

func withNamespaces(t framework.PodAffinityTerm, all bool, ns ...string) framework.PodAffinityTerm {
	t.AllNamespaces = all
	t.Namespaces = ns
	return t
}

// Long for its table: one case per behaviour, kept together so they
// read side by side.
func TestFilter(t *testing.T) {
	db := func() *podBuilder { return pod("db").labels("app", "db") }
	allPass := map[string]string{"n1": pass, "n2": pass, "n3": pass, "n4": pass}
	tests := []struct {
		name     string
		pod      *framework.Pod
		existing map[string][]*framework.Pod
		wantSkip bool
		want     map[string]string // node -> reason
	}{
		{
			name:     "no terms anywhere: skip",
			pod:      pod("p").labels("app", "web").obj(),
			existing: map[string][]*framework.Pod{"n1": {db().obj()}},
			wantSkip: true,
		},
		{
			name:     "an existing pod's anti-affinity that does not select the pod: skip",
			pod:      pod("p").labels("app", "web").obj(),
			existing: map[string][]*framework.Pod{"n1": {db().requiredAnti(termIn("app", "zone", "db")).obj()}},
			wantSkip: true,
		},
		{
			name:     "affinity: every node of the matching pod's zone",
			pod:      pod("p").requiredAffinity(termIn("app", "zone", "db")).obj(),
			existing: map[string][]*framework.Pod{"n1": {db().obj()}},
			want:     map[string]string{"n1": pass, "n2": pass, "n3": aff, "n4": aff},
		},
		{
			name:     "affinity: host topology keeps only the pod's node",
			pod:      pod("p").requiredAffinity(termIn("app", "host", "db")).obj(),
			existing: map[string][]*framework.Pod{"n1": {db().obj()}},
			want:     map[string]string{"n1": pass, "n2": aff, "n3": aff, "n4": aff},
		},
		{
			name: "affinity: no single pod matches all terms",
			pod:  pod("p").requiredAffinity(termIn("app", "zone", "db"), termIn("tier", "zone", "back")).obj(),
			existing: map[string][]*framework.Pod{
				"n1": {db().obj()},
				"n3": {pod("back").labels("tier", "back").obj()},
			},
			want: map[string]string{"n1": aff, "n2": aff, "n3": aff, "n4": aff},
		},
		{
			name:     "affinity: one pod matching all terms counts for each term's domain",
			pod:      pod("p").requiredAffinity(termIn("app", "zone", "db"), termIn("tier", "host", "back")).obj(),
			existing: map[string][]*framework.Pod{"n1": {pod("db").labels("app", "db", "tier", "back").obj()}},
			want:     map[string]string{"n1": pass, "n2": aff, "n3": aff, "n4": aff},
		},
		{
			name: "affinity: first pod of a self-affine group passes where the topology key exists",
			pod:  pod("p").labels("app", "web").requiredAffinity(termIn("app", "zone", "web")).obj(),
			want: map[string]string{"n1": pass, "n2": pass, "n3": pass, "n4": aff},
		},
		{
			name:     "affinity: self-affine pod must join the group once one member runs",
			pod:      pod("p").labels("app", "web").requiredAffinity(termIn("app", "zone", "web")).obj(),
			existing: map[string][]*framework.Pod{"n3": {pod("web-0").labels("app", "web").obj()}},
			want:     map[string]string{"n1": aff, "n2": aff, "n3": pass, "n4": aff},
		},
		{
			name: "affinity: no matching pod and the pod does not match itself",
			pod:  pod("p").labels("app", "other").requiredAffinity(termIn("app", "zone", "web")).obj(),
			want: map[string]string{"n1": aff, "n2": aff, "n3": aff, "n4": aff},
		},
		{
			name:     "affinity: a matching pod on a node outside every zone counts nowhere",
			pod:      pod("p").requiredAffinity(termIn("app", "zone", "db")).obj(),
			existing: map[string][]*framework.Pod{"n4": {db().obj()}},
			want:     map[string]string{"n1": aff, "n2": aff, "n3": aff, "n4": aff},
		},
		{
			name:     "anti-affinity: the matching pod's zone is refused, nodes outside zones are not",
			pod:      pod("p").requiredAnti(termIn("app", "zone", "db")).obj(),
			existing: map[string][]*framework.Pod{"n1": {db().obj()}},
			want:     map[string]string{"n1": anti, "n2": anti, "n3": pass, "n4": pass},
		},
		{
			name: "anti-affinity: one matching term is enough",
			pod:  pod("p").requiredAnti(termIn("app", "zone", "db"), termIn("app", "host", "cache")).obj(),
			existing: map[string][]*framework.Pod{
				"n3": {pod("cache").labels("app", "cache").obj()},
			},
			want: map[string]string{"n1": pass, "n2": pass, "n3": anti, "n4": pass},
		},
		{
			name:     "existing pods' anti-affinity: the repelling pod's zone is refused",
			pod:      pod("p").labels("app", "web").obj(),
			existing: map[string][]*framework.Pod{"n1": {db().requiredAnti(termIn("app", "zone", "web")).obj()}},
			want:     map[string]string{"n1": existing, "n2": existing, "n3": pass, "n4": pass},
		},
		{
			name: "existing pods' anti-affinity: two topology keys",
			pod:  pod("p").labels("app", "web").obj(),
			existing: map[string][]*framework.Pod{
				"n1": {db().requiredAnti(termIn("app", "host", "web")).obj()},
				"n3": {pod("db2").requiredAnti(termIn("app", "zone", "web")).obj()},
			},
			want: map[string]string{"n1": existing, "n2": pass, "n3": existing, "n4": pass},
		},
		{
			name: "affinity is checked before anti-affinity",
			pod:  pod("p").requiredAffinity(termIn("app", "zone", "db")).requiredAnti(termIn("app", "zone", "cache")).obj(),
			existing: map[string][]*framework.Pod{
				"n1": {db().obj()},
				"n3": {pod("cache").labels("app", "cache").obj()},
			},
			want: map[string]string{"n1": pass, "n2": pass, "n3": aff, "n4": aff},
		},
		{
			name:     "anti-affinity is checked before existing pods' anti-affinity",
			pod:      pod("p").labels("app", "web").requiredAnti(termIn("app", "zone", "cache")).obj(),
			existing: map[string][]*framework.Pod{"n3": {pod("cache").labels("app", "cache").requiredAnti(termIn("app", "zone", "web")).obj()}},
			want:     map[string]string{"n1": pass, "n2": pass, "n3": anti, "n4": pass},
		},
		{
			name:     "namespaces: a term naming none selects only its pod's namespace",
			pod:      pod("p").requiredAffinity(termIn("app", "zone", "db")).obj(),
			existing: map[string][]*framework.Pod{"n1": {db().ns("other").obj()}},
			want:     map[string]string{"n1": aff, "n2": aff, "n3": aff, "n4": aff},
		},
		{
			name:     "namespaces: listed namespaces",
			pod:      pod("p").requiredAffinity(withNamespaces(termIn("app", "zone", "db"), false, "other")).obj(),
			existing: map[string][]*framework.Pod{"n1": {db().ns("other").obj()}},
			want:     map[string]string{"n1": pass, "n2": pass, "n3": aff, "n4": aff},
		},
		{
			name:     "namespaces: listing others excludes the pod's own",
			pod:      pod("p").requiredAffinity(withNamespaces(termIn("app", "zone", "db"), false, "other")).obj(),
			existing: map[string][]*framework.Pod{"n1": {db().obj()}},
			want:     map[string]string{"n1": aff, "n2": aff, "n3": aff, "n4": aff},
		},
		{
			name:     "namespaces: all namespaces",
			pod:      pod("p").requiredAnti(withNamespaces(termIn("app", "zone", "db"), true)).obj(),
			existing: map[string][]*framework.Pod{"n3": {db().ns("kube-system").obj()}},
			want:     map[string]string{"n1": pass, "n2": pass, "n3": anti, "n4": pass},
		},
		{
			name:     "namespaces: an existing pod's term selects its own namespace, not the incoming pod's",
			pod:      pod("p").labels("app", "web").obj(),
			existing: map[string][]*framework.Pod{"n1": {db().ns("other").requiredAnti(termIn("app", "zone", "web")).obj()}},
			wantSkip: true,
		},
		{
			name:     "namespaces: an existing pod's term over all namespaces",
			pod:      pod("p").labels("app", "web").obj(),
			existing: map[string][]*framework.Pod{"n1": {db().ns("other").requiredAnti(withNamespaces(termIn("app", "zone", "web"), true)).obj()}},
			want:     map[string]string{"n1": existing, "n2": existing, "n3": pass, "n4": pass},
		},
		{
			name: "matchLabelKeys: only pods sharing the pod's value count",
			pod:  pod("p").labels("app", "web", "ver", "v1").requiredAnti(withMatchKeys(termExists("app", "host"), []string{"ver"}, nil)).obj(),
			existing: map[string][]*framework.Pod{
				"n1": {pod("a").labels("app", "web", "ver", "v2").obj()},
				"n3": {pod("b").labels("app", "web", "ver", "v1").obj()},
				"n4": {pod("c").labels("app", "web").obj()},
			},
			want: map[string]string{"n1": pass, "n2": pass, "n3": anti, "n4": pass},
		},
		{
			name: "matchLabelKeys: a key the pod lacks adds nothing",
			pod:  pod("p").labels("app", "web").requiredAnti(withMatchKeys(termExists("app", "host"), []string{"ver"}, nil)).obj(),
			existing: map[string][]*framework.Pod{
				"n1": {pod("a").labels("app", "web", "ver", "v2").obj()},
			},
			want: map[string]string{"n1": anti, "n2": pass, "n3": pass, "n4": pass},
		},
		{
			name: "mismatchLabelKeys: pods with the pod's value are excluded",
			pod:  pod("p").labels("tenant", "a").requiredAnti(withMatchKeys(termExists("tenant", "host"), nil, []string{"tenant"})).obj(),
			existing: map[string][]*framework.Pod{
				"n1": {pod("b").labels("tenant", "b").obj()},
				"n3": {pod("a").labels("tenant", "a").obj()},
			},
			want: map[string]string{"n1": anti, "n2": pass, "n3": pass, "n4": pass},
		},
		{
			name:     "matchLabelKeys of an existing pod's term read the existing pod's labels: other team",
			pod:      pod("p").labels("app", "web", "team", "y").obj(),
			existing: map[string][]*framework.Pod{"n1": {db().labels("app", "db", "team", "x").requiredAnti(withMatchKeys(termExists("app", "host"), []string{"team"}, nil)).obj()}},
			wantSkip: true,
		},
		{
			name:     "matchLabelKeys of an existing pod's term read the existing pod's labels: same team",
			pod:      pod("p").labels("app", "web", "team", "x").obj(),
			existing: map[string][]*framework.Pod{"n1": {db().labels("app", "db", "team", "x").requiredAnti(withMatchKeys(termExists("app", "host"), []string{"team"}, nil)).obj()}},
			want:     map[string]string{"n1": existing, "n2": pass, "n3": pass, "n4": pass},
		},
		{
			name:     "a nil selector selects nothing",
			pod:      pod("p").requiredAnti(framework.PodAffinityTerm{TopologyKey: "zone"}).obj(),
			existing: map[string][]*framework.Pod{"n1": {db().obj()}},
			want:     allPass,
		},
		{
			name:     "an empty selector selects every pod",
			pod:      pod("p").requiredAnti(framework.PodAffinityTerm{LabelSelector: &framework.LabelSelector{}, TopologyKey: "zone"}).obj(),
			existing: map[string][]*framework.Pod{"n3": {pod("any").obj()}},
			want:     map[string]string{"n1": pass, "n2": pass, "n3": anti, "n4": pass},
		},
		{
			name: "matchLabels selector",
			pod: pod("p").requiredAffinity(framework.PodAffinityTerm{
				LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, TopologyKey: "zone",
			}).obj(),
			existing: map[string][]*framework.Pod{"n3": {db().obj()}},
			want:     map[string]string{"n1": aff, "n2": aff, "n3": pass, "n4": aff},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := place(tt.existing)
			pl := newPlugin(t, nil, 1, nodes...)
			state := framework.NewCycleState()
			_, st := pl.PreFilter(ctx, state, framework.NewPodInfo(tt.pod), nodes)
			if tt.wantSkip {
				if !st.IsSkip() {
					t.Fatalf("PreFilter = %v, want Skip", st)
				}
				return
			}
			if !st.IsSuccess() {
				t.Fatalf("PreFilter = %v", st)
			}
			got, wantOut := map[string]string{}, map[string]string{}
			for _, ni := range nodes {
				got[ni.Node().Name] = outcome(pl.Filter(ctx, state, framework.NewPodInfo(tt.pod), ni))
			}
			for n, r := range tt.want {
				wantOut[n] = want(r)
			}
			if diff := cmp.Diff(wantOut, got); diff != "" {
				t.Errorf("Filter (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPreFilterRejectsInvalidSelector(t *testing.T) {
	bad := framework.PodAffinityTerm{
		LabelSelector: &framework.LabelSelector{MatchExpressions: []framework.LabelSelectorRequirement{{Key: "app", Operator: framework.LabelSelectorOpIn}}},
		TopologyKey:   "zone",
	}
	for name, p := range map[string]*framework.Pod{
		"required affinity":       pod("p").requiredAffinity(bad).obj(),
		"required anti-affinity":  pod("p").requiredAnti(bad).obj(),
		"preferred affinity":      pod("p").preferredAffinity(1, bad).obj(),
		"preferred anti-affinity": pod("p").preferredAnti(1, bad).obj(),
	} {
		t.Run(name, func(t *testing.T) {
			nodes := place(nil)
			pl := newPlugin(t, nil, 1, nodes...)
			_, st := pl.PreFilter(ctx, framework.NewCycleState(), framework.NewPodInfo(p), nodes)
			if st.Code() != framework.UnschedulableAndUnresolvable || !strings.HasPrefix(st.Message(), "parsing pod: ") {
				t.Errorf("PreFilter = %v %q, want UnschedulableAndUnresolvable parsing pod: ...", st.Code(), st.Message())
			}
		})
	}
}

func TestFilterWithoutPreFilter(t *testing.T) {
	nodes := place(nil)
	pl := newPlugin(t, nil, 1, nodes...)
	if st := pl.Filter(ctx, framework.NewCycleState(), framework.NewPodInfo(pod("p").obj()), nodes[0]); !st.IsError() {
		t.Errorf("Filter = %v, want Error", st)
	}
}

// AddPod and RemovePod must leave the state as a fresh PreFilter over the
// changed cluster would, for every kind of count, and Clone must isolate.
//
// Long for its table: one case per behaviour, kept together so they
// read side by side.
func TestAddRemovePod(t *testing.T) {
	incoming := pod("p").labels("app", "web").
		requiredAffinity(termIn("app", "zone", "db")).
		requiredAnti(termIn("app", "host", "cache")).obj()
	dbPod := pod("db").labels("app", "db").obj()
	cachePod := pod("cache").labels("app", "cache").obj()
	repeller := pod("repeller").labels("app", "x").requiredAnti(termIn("app", "zone", "web")).obj()
	tests := []struct {
		name    string
		pod     *framework.Pod
		node    string
		before  map[string][]*framework.Pod
		wantAdd map[string]string // after adding pod to node
	}{
		{
			name:    "pod matching the incoming affinity",
			pod:     dbPod,
			node:    "n3",
			before:  map[string][]*framework.Pod{"n1": {pod("db0").labels("app", "db").obj()}},
			wantAdd: map[string]string{"n1": pass, "n2": pass, "n3": pass, "n4": aff},
		},
		{
			name:    "pod matching the incoming anti-affinity",
			pod:     cachePod,
			node:    "n2",
			before:  map[string][]*framework.Pod{"n1": {pod("db0").labels("app", "db").obj()}},
			wantAdd: map[string]string{"n1": pass, "n2": anti, "n3": aff, "n4": aff},
		},
		{
			name:    "pod whose anti-affinity repels the incoming pod",
			pod:     repeller,
			node:    "n3",
			before:  map[string][]*framework.Pod{"n3": {pod("db0").labels("app", "db").obj()}},
			wantAdd: map[string]string{"n1": aff, "n2": aff, "n3": existing, "n4": aff},
		},
		{
			name:    "repelling pod on a node outside its topology",
			pod:     repeller,
			node:    "n4",
			before:  map[string][]*framework.Pod{"n1": {pod("db0").labels("app", "db").obj()}},
			wantAdd: map[string]string{"n1": pass, "n2": pass, "n3": aff, "n4": aff},
		},
		{
			name: "second repeller in a zone already repelling",
			pod:  repeller,
			node: "n3",
			before: map[string][]*framework.Pod{
				"n1": {pod("db0").labels("app", "db").obj()},
				"n3": {pod("db1").labels("app", "db").obj(), pod("r0").labels("app", "x").requiredAnti(termIn("app", "zone", "web")).obj()},
			},
			wantAdd: map[string]string{"n1": pass, "n2": pass, "n3": existing, "n4": aff},
		},
		{
			name:    "repeller joining a zone",
			pod:     repeller,
			node:    "n2",
			before:  map[string][]*framework.Pod{"n1": {pod("db0").labels("app", "db").obj()}},
			wantAdd: map[string]string{"n1": existing, "n2": existing, "n3": aff, "n4": aff},
		},
	}
	filterAll := func(pl *InterPodAffinity, state *framework.CycleState, nodes []*framework.NodeInfo) map[string]string {
		out := map[string]string{}
		for _, ni := range nodes {
			out[ni.Node().Name] = outcome(pl.Filter(ctx, state, framework.NewPodInfo(incoming), ni))
		}
		return out
	}
	prefilter := func(t *testing.T, nodes []*framework.NodeInfo) (*InterPodAffinity, *framework.CycleState) {
		pl := newPlugin(t, nil, 1, nodes...)
		state := framework.NewCycleState()
		if _, st := pl.PreFilter(ctx, state, framework.NewPodInfo(incoming), nodes); !st.IsSuccess() {
			t.Fatalf("PreFilter = %v", st)
		}
		return pl, state
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := place(tt.before)
			pl, state := prefilter(t, nodes)
			before := filterAll(pl, state, nodes)

			var target *framework.NodeInfo
			for _, ni := range nodes {
				if ni.Node().Name == tt.node {
					target = ni
				}
			}
			added := state.Clone()
			if st := pl.AddPod(ctx, added, framework.NewPodInfo(incoming), framework.NewPodInfo(tt.pod), target); !st.IsSuccess() {
				t.Fatalf("AddPod = %v", st)
			}
			wantAdd := map[string]string{}
			for n, r := range tt.wantAdd {
				wantAdd[n] = want(r)
			}
			if diff := cmp.Diff(wantAdd, filterAll(pl, added, nodes)); diff != "" {
				t.Errorf("after AddPod (-want,+got):\n%s", diff)
			}
			// The same pod really placed gives the same answer.
			withPod := map[string][]*framework.Pod{}
			for n, ps := range tt.before {
				withPod[n] = append(withPod[n], ps...)
			}
			withPod[tt.node] = append(withPod[tt.node], tt.pod)
			fresh := place(withPod)
			plFresh, stateFresh := prefilter(t, fresh)
			if diff := cmp.Diff(wantAdd, filterAll(plFresh, stateFresh, fresh)); diff != "" {
				t.Errorf("fresh PreFilter with the pod (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(before, filterAll(pl, state, nodes)); diff != "" {
				t.Errorf("AddPod on a clone changed the original (-before,+after):\n%s", diff)
			}
			if st := pl.RemovePod(ctx, added, framework.NewPodInfo(incoming), framework.NewPodInfo(tt.pod), target); !st.IsSuccess() {
				t.Fatalf("RemovePod = %v", st)
			}
			if diff := cmp.Diff(before, filterAll(pl, added, nodes)); diff != "" {
				t.Errorf("after RemovePod (-before,+got):\n%s", diff)
			}
		})
	}
}

// Removing the only pod that matches a self-affine pod's terms brings the
// first-pod exception back; removing the only repeller empties the counts.
func TestRemovePodRestoresExceptions(t *testing.T) {
	incoming := pod("p").labels("app", "web").requiredAffinity(termIn("app", "zone", "web")).obj()
	member := pod("web-0").labels("app", "web").requiredAnti(termIn("app", "host", "web")).obj()
	nodes := place(map[string][]*framework.Pod{"n3": {member}})
	pl := newPlugin(t, nil, 1, nodes...)
	state := framework.NewCycleState()
	if _, st := pl.PreFilter(ctx, state, framework.NewPodInfo(incoming), nodes); !st.IsSuccess() {
		t.Fatalf("PreFilter = %v", st)
	}
	filterAll := func() map[string]string {
		out := map[string]string{}
		for _, ni := range nodes {
			out[ni.Node().Name] = outcome(pl.Filter(ctx, state, framework.NewPodInfo(incoming), ni))
		}
		return out
	}
	wantBefore := map[string]string{"n1": want(aff), "n2": want(aff), "n3": want(existing), "n4": want(aff)}
	if diff := cmp.Diff(wantBefore, filterAll()); diff != "" {
		t.Errorf("before (-want,+got):\n%s", diff)
	}
	if st := pl.RemovePod(ctx, state, framework.NewPodInfo(incoming), framework.NewPodInfo(member), nodes[2]); !st.IsSuccess() {
		t.Fatalf("RemovePod = %v", st)
	}
	wantAfter := map[string]string{"n1": pass, "n2": pass, "n3": pass, "n4": want(aff)}
	if diff := cmp.Diff(wantAfter, filterAll()); diff != "" {
		t.Errorf("after RemovePod (-want,+got):\n%s", diff)
	}
	s, err := framework.ReadState[*preFilterState](state, preFilterStateKey)
	if err != nil {
		t.Fatal(err)
	}
	if !s.affinityCounts.empty() || !s.existingAntiAffinityCounts.empty() {
		t.Errorf("counts not emptied: affinity %v, existing %v", s.affinityCounts.totals(), s.existingAntiAffinityCounts.totals())
	}
}

// The chunked parallel PreFilter must count exactly what the inline one
// does.
func TestPreFilterParallelMatchesSerial(t *testing.T) {
	var nodes []*framework.NodeInfo
	for i := range 50 {
		n := node(string(rune('a'+i%26))+string(rune('a'+i/26)), "zone", []string{"z1", "z2", "z3"}[i%3], "host", string(rune('A'+i)))
		var ps []*framework.Pod
		if i%2 == 0 {
			ps = append(ps, pod("db").labels("app", "db").obj())
		}
		if i%5 == 0 {
			ps = append(ps, pod("r").requiredAnti(termIn("app", "host", "web")).obj())
		}
		nodes = append(nodes, nodeInfo(n, ps...))
	}
	incoming := framework.NewPodInfo(pod("p").labels("app", "web").
		requiredAffinity(termIn("app", "zone", "db")).requiredAnti(termIn("app", "host", "db")).obj())
	var states []*preFilterState
	for _, par := range []int{1, 4} {
		pl := newPlugin(t, nil, par, nodes...)
		state := framework.NewCycleState()
		if _, st := pl.PreFilter(ctx, state, incoming, nodes); !st.IsSuccess() {
			t.Fatalf("PreFilter = %v", st)
		}
		s, err := framework.ReadState[*preFilterState](state, preFilterStateKey)
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, s)
	}
	opts := cmp.Options{cmp.AllowUnexported(preFilterState{}, topologyPair{}), cmpopts.EquateComparable(framework.LabelKey{}),
		cmp.Comparer(func(a, b layeredCounts) bool { return maps.Equal(a.totals(), b.totals()) })}
	if diff := cmp.Diff(states[0], states[1], opts); diff != "" {
		t.Errorf("serial vs parallel (-serial,+parallel):\n%s", diff)
	}
	if got := states[0].affinityCounts.get("zone", "z1"); got != 9 {
		t.Errorf("pods matching affinity in z1 = %d, want 9", got)
	}
	if got := len(states[0].existingAntiAffinityCounts.totals()); got != 10 {
		t.Errorf("repelling hosts = %d, want 10", got)
	}
}

// TestPreFilterJudgesEachClassOnce: PreFilter's counts, made judging each
// affinity class of existing pods once, equal counting every pod on its
// own as AddPod does, on random clusters.
func TestPreFilterJudgesEachClassOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for round := range 30 {
		nodes, incoming := randomAffinityCluster(rng)
		if round%3 == 0 {
			incoming.Affinity = nil // only existing pods' anti-affinity counts
		}
		pl := newPlugin(t, nil, 4, nodes...)
		state := framework.NewCycleState()
		if _, st := pl.PreFilter(ctx, state, framework.NewPodInfo(incoming), nodes); st.IsSkip() {
			continue
		} else if !st.IsSuccess() {
			t.Fatal(st)
		}
		got, err := framework.ReadState[*preFilterState](state, preFilterStateKey)
		if err != nil {
			t.Fatal(err)
		}
		want := &preFilterState{pod: incoming, affinityTerms: requiredAffinityTerms(incoming), antiAffinityTerms: requiredAntiAffinityTerms(incoming)}
		for _, ni := range nodes {
			for _, existing := range ni.Pods {
				want.updateWithPod(existing.Pod, ni.Node(), 1)
			}
		}
		for _, c := range []struct {
			name      string
			want, got layeredCounts
		}{
			{"existing anti-affinity", want.existingAntiAffinityCounts, got.existingAntiAffinityCounts},
			{"affinity", want.affinityCounts, got.affinityCounts},
			{"anti-affinity", want.antiAffinityCounts, got.antiAffinityCounts},
		} {
			if diff := cmp.Diff(c.want.totals(), c.got.totals(), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("round %d: %s counts (-each pod on its own +by class):\n%s", round, c.name, diff)
			}
		}
	}
}
