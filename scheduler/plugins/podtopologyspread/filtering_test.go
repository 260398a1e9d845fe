package podtopologyspread

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/framework/runtime"
)

const (
	hard = framework.DoNotSchedule
	soft = framework.ScheduleAnyway
)

// fourNodes: a and b in zone1, x and y in zone2; "node" is per node.
func fourNodes() []*framework.Node {
	return []*framework.Node{
		mkNode("a").label("zone", "zone1").label("node", "a").obj(),
		mkNode("b").label("zone", "zone1").label("node", "b").obj(),
		mkNode("x").label("zone", "zone2").label("node", "x").obj(),
		mkNode("y").label("zone", "zone2").label("node", "y").obj(),
	}
}

// Long for its table: one case per behaviour, kept together so they
// read side by side.
func TestPreFilterState(t *testing.T) {
	nodes := append(fourNodes(),
		mkNode("nozone").label("node", "nozone").obj(),
		mkNode("z").label("zone", "zone3").label("node", "z").taint("t", framework.TaintEffectNoSchedule).obj())
	pods := concat(podsOn("a", 2), podsOn("b", 1), podsOn("x", 1), podsOn("nozone", 4), podsOn("z", 3),
		[]*framework.Pod{
			mkPod("other-ns").ns("other").node("y").label("foo", "").obj(),
			mkPod("no-foo").node("y").label("bar", "").obj(),
		})
	tests := []struct {
		name string
		pod  *framework.Pod
		want []stateSummary
	}{
		{
			name: "zone: counts matching pods of the namespace per domain; nodes missing a key are no domain",
			pod:  mkPod("p").label("foo", "").spread(1, "zone", hard, exists("foo")).obj(),
			want: []stateSummary{{Counts: map[string]int{"zone1": 3, "zone2": 1, "zone3": 3}, Min: 1}},
		},
		{
			name: "two constraints: a node must carry both keys to count for either",
			pod: mkPod("p").label("foo", "").
				spread(1, "zone", hard, exists("foo")).
				spread(1, "node", hard, exists("foo")).obj(),
			want: []stateSummary{
				{Counts: map[string]int{"zone1": 3, "zone2": 1, "zone3": 3}, Min: 1},
				{Counts: map[string]int{"a": 2, "b": 1, "x": 1, "y": 0, "z": 3}, Min: 0},
			},
		},
		{
			name: "soft constraints are not PreFilter's business",
			pod: mkPod("p").label("foo", "").
				spread(1, "zone", soft, exists("foo")).
				spread(1, "node", hard, exists("foo")).obj(),
			want: []stateSummary{{Counts: map[string]int{"a": 2, "b": 1, "x": 1, "y": 0, "z": 3, "nozone": 4}, Min: 0}},
		},
		{
			name: "nodeTaintsPolicy Honor drops the tainted zone",
			pod:  mkPod("p").label("foo", "").spread(1, "zone", hard, exists("foo"), taintsPolicy(framework.NodeInclusionPolicyHonor)).obj(),
			want: []stateSummary{{Counts: map[string]int{"zone1": 3, "zone2": 1}, Min: 1}},
		},
		{
			name: "nodeTaintsPolicy Honor keeps a tolerated taint",
			pod:  mkPod("p").label("foo", "").toleration("t").spread(1, "zone", hard, exists("foo"), taintsPolicy(framework.NodeInclusionPolicyHonor)).obj(),
			want: []stateSummary{{Counts: map[string]int{"zone1": 3, "zone2": 1, "zone3": 3}, Min: 1}},
		},
		{
			name: "nodeAffinityPolicy Honor (default) counts only nodes the pod may land on",
			pod:  mkPod("p").label("foo", "").requiredAffinity("zone", framework.NodeSelectorOpIn, "zone1", "zone3").spread(1, "zone", hard, exists("foo")).obj(),
			want: []stateSummary{{Counts: map[string]int{"zone1": 3, "zone3": 3}, Min: 3}},
		},
		{
			name: "nodeAffinityPolicy Ignore counts every node",
			pod: mkPod("p").label("foo", "").requiredAffinity("zone", framework.NodeSelectorOpIn, "zone1", "zone3").
				spread(1, "zone", hard, exists("foo"), affinityPolicy(framework.NodeInclusionPolicyIgnore)).obj(),
			want: []stateSummary{{Counts: map[string]int{"zone1": 3, "zone2": 1, "zone3": 3}, Min: 1}},
		},
		{
			name: "node selector is honoured like required affinity",
			pod:  mkPod("p").label("foo", "").nodeSelector("zone", "zone2").spread(1, "node", hard, exists("foo")).obj(),
			want: []stateSummary{{Counts: map[string]int{"x": 1, "y": 0}, Min: 0}},
		},
		{
			name: "matchLabelKeys narrows the selector to the pod's value",
			pod:  mkPod("p").label("foo", "").label("rev", "2").spread(1, "zone", hard, exists("foo"), matchLabelKeys("rev", "absent")).obj(),
			want: []stateSummary{{Counts: map[string]int{"zone1": 0, "zone2": 0, "zone3": 0}, Min: 0}},
		},
		{
			name: "empty selector counts nothing (kube)",
			pod:  mkPod("p").spread(1, "zone", hard, &framework.LabelSelector{}).obj(),
			want: []stateSummary{{Counts: map[string]int{"zone1": 0, "zone2": 0, "zone3": 0}, Min: 0}},
		},
		{
			name: "nil selector selects nothing",
			pod:  mkPod("p").label("foo", "").spread(1, "zone", hard, nil).obj(),
			want: []stateSummary{{Counts: map[string]int{"zone1": 0, "zone2": 0, "zone3": 0}, Min: 0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			infos := place(nodes, pods)
			pl, _ := newPlugin(t, listArgs, infos...)
			state := framework.NewCycleState()
			if _, st := pl.PreFilter(ctx, state, framework.NewPodInfo(tt.pod), infos); !st.IsSuccess() {
				t.Fatalf("PreFilter: %v", st)
			}
			s, err := framework.ReadState[*preFilterState](state, preFilterStateKey)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, summarize(s)); diff != "" {
				t.Errorf("state (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestMatchLabelKeysCountsOnlyTheSameRevision(t *testing.T) {
	pods := concat(podsOn("a", 2, "rev", "1"), podsOn("b", 1, "rev", "2"), podsOn("x", 1))
	infos := place(fourNodes(), pods)
	pl, _ := newPlugin(t, listArgs, infos...)
	pod := mkPod("p").label("foo", "").label("rev", "2").spread(1, "zone", hard, exists("foo"), matchLabelKeys("rev")).obj()
	state := framework.NewCycleState()
	if _, st := pl.PreFilter(ctx, state, framework.NewPodInfo(pod), infos); !st.IsSuccess() {
		t.Fatal(st)
	}
	s, _ := framework.ReadState[*preFilterState](state, preFilterStateKey)
	want := []stateSummary{{Counts: map[string]int{"zone1": 1, "zone2": 0}, Min: 0}}
	if diff := cmp.Diff(want, summarize(s)); diff != "" {
		t.Errorf("state (-want,+got):\n%s", diff)
	}
}

func TestPreFilterSkipAndErrors(t *testing.T) {
	infos := place(fourNodes(), nil)
	bad := &framework.LabelSelector{MatchExpressions: []framework.LabelSelectorRequirement{{Key: "foo", Operator: framework.LabelSelectorOpIn}}}
	tests := []struct {
		name string
		args any
		pod  *framework.Pod
		want framework.Code
	}{
		{name: "no constraints, no defaults", args: listArgs, pod: mkPod("p").label("foo", "").obj(), want: framework.Skip},
		{name: "only soft constraints", args: listArgs, pod: mkPod("p").spread(1, "zone", soft, exists("foo")).obj(), want: framework.Skip},
		{name: "system defaults are soft", args: nil, pod: mkPod("p").label("foo", "").obj(), want: framework.Skip},
		{name: "invalid selector", args: listArgs, pod: mkPod("p").spread(1, "zone", hard, bad).obj(), want: framework.Error},
		{name: "hard constraint", args: listArgs, pod: mkPod("p").spread(1, "zone", hard, exists("foo")).obj(), want: framework.Success},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pl, _ := newPlugin(t, tt.args, infos...)
			_, st := pl.PreFilter(ctx, framework.NewCycleState(), framework.NewPodInfo(tt.pod), infos)
			if st.Code() != tt.want {
				t.Errorf("PreFilter = %v (%v), want %v", st.Code(), st, tt.want)
			}
		})
	}
}

// Long for its table: one case per behaviour, kept together so they
// read side by side.
func TestFilter(t *testing.T) {
	// Filter names itself in its rejections (they are shared), as the
	// framework would.
	unsched := framework.NewStatus(framework.Unschedulable, ErrReasonConstraintsNotMatch).WithPlugin(Name)
	missing := framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonNodeLabelNotMatch).WithPlugin(Name)
	withZ := func(taint bool) []*framework.Node {
		z := mkNode("z").label("zone", "zone3").label("node", "z")
		if taint {
			z = z.taint("t", framework.TaintEffectNoSchedule)
		}
		return append(fourNodes(), z.obj())
	}
	tests := []struct {
		name  string
		args  any
		nodes []*framework.Node
		pods  []*framework.Pod
		pod   *framework.Pod
		// want maps node -> status; nodes not listed must pass.
		want map[string]*framework.Status
	}{
		{
			name:  "no matching pods: every node fits",
			nodes: fourNodes(),
			pod:   mkPod("p").label("foo", "").spread(1, "zone", hard, exists("foo")).obj(),
		},
		{
			name:  "2/0 zones, maxSkew 1: only the empty zone (skew 1)",
			nodes: fourNodes(),
			pods:  concat(podsOn("a", 1), podsOn("b", 1)),
			pod:   mkPod("p").label("foo", "").spread(1, "zone", hard, exists("foo")).obj(),
			want:  map[string]*framework.Status{"a": unsched, "b": unsched},
		},
		{
			name:  "2/1 zones, maxSkew 2: both zones (skew 2 and 1)",
			nodes: fourNodes(),
			pods:  concat(podsOn("a", 1), podsOn("b", 1), podsOn("y", 1)),
			pod:   mkPod("p").label("foo", "").spread(2, "zone", hard, exists("foo")).obj(),
		},
		{
			name:  "3/1 zones, maxSkew 2: the full zone is 3 ahead",
			nodes: fourNodes(),
			pods:  concat(podsOn("a", 2), podsOn("b", 1), podsOn("y", 1)),
			pod:   mkPod("p").label("foo", "").spread(2, "zone", hard, exists("foo")).obj(),
			want:  map[string]*framework.Status{"a": unsched, "b": unsched},
		},
		{
			name:  "pod not selected by its own selector adds nothing: 2/1 passes with maxSkew 1",
			nodes: fourNodes(),
			pods:  concat(podsOn("a", 1), podsOn("b", 1), podsOn("x", 1)),
			pod:   mkPod("p").label("bar", "").spread(1, "zone", hard, exists("foo")).obj(),
		},
		{
			name:  "same counts but the pod matches itself: zone1 fails",
			nodes: fourNodes(),
			pods:  concat(podsOn("a", 1), podsOn("b", 1), podsOn("x", 1)),
			pod:   mkPod("p").label("foo", "").spread(1, "zone", hard, exists("foo")).obj(),
			want:  map[string]*framework.Status{"a": unsched, "b": unsched},
		},
		{
			name:  "node without the topology key is unresolvable",
			nodes: append(fourNodes(), mkNode("nozone").label("node", "nozone").obj()),
			pod:   mkPod("p").label("foo", "").spread(1, "zone", hard, exists("foo")).obj(),
			want:  map[string]*framework.Status{"nozone": missing},
		},
		{
			name:  "per-node key with several domains: only the emptiest nodes",
			nodes: fourNodes(),
			pods:  concat(podsOn("a", 2), podsOn("b", 1), podsOn("x", 1)),
			pod:   mkPod("p").label("foo", "").spread(1, "node", hard, exists("foo")).obj(),
			want:  map[string]*framework.Status{"a": unsched, "b": unsched, "x": unsched},
		},
		{
			name:  "two constraints: both must hold",
			nodes: fourNodes(),
			// zone1=1 zone2=2; a=1 b=0 x=1 y=1.
			pods: concat(podsOn("a", 1), podsOn("x", 1), podsOn("y", 1)),
			pod: mkPod("p").label("foo", "").
				spread(1, "zone", hard, exists("foo")).
				spread(1, "node", hard, exists("foo")).obj(),
			// zone2 fails zone (2+1-1); a fails node (1+1-0).
			want: map[string]*framework.Status{"a": unsched, "x": unsched, "y": unsched},
		},
		{
			name:  "minDomains above the domain count makes the minimum 0",
			nodes: fourNodes(),
			pods:  concat(podsOn("a", 1), podsOn("x", 1)),
			pod:   mkPod("p").label("foo", "").spread(1, "zone", hard, exists("foo"), minDomains(3)).obj(),
			want:  map[string]*framework.Status{"a": unsched, "b": unsched, "x": unsched, "y": unsched},
		},
		{
			name:  "minDomains met: the real minimum",
			nodes: fourNodes(),
			pods:  concat(podsOn("a", 1), podsOn("x", 1)),
			pod:   mkPod("p").label("foo", "").spread(1, "zone", hard, exists("foo"), minDomains(2)).obj(),
		},
		{
			name:  "nodeAffinityPolicy Honor: an excluded empty zone does not lower the minimum",
			nodes: withZ(false),
			pods:  concat(podsOn("a", 2), podsOn("x", 1)),
			pod:   mkPod("p").label("foo", "").requiredAffinity("zone", framework.NodeSelectorOpIn, "zone1", "zone2").spread(1, "zone", hard, exists("foo")).obj(),
			// min 1: zone1 2+1-1=2 fails; zone2 1; z is no domain, 0+1-1.
			want: map[string]*framework.Status{"a": unsched, "b": unsched},
		},
		{
			name:  "nodeAffinityPolicy Ignore: the empty zone counts, minimum 0",
			nodes: withZ(false),
			pods:  concat(podsOn("a", 2), podsOn("x", 1)),
			pod: mkPod("p").label("foo", "").requiredAffinity("zone", framework.NodeSelectorOpIn, "zone1", "zone2").
				spread(1, "zone", hard, exists("foo"), affinityPolicy(framework.NodeInclusionPolicyIgnore)).obj(),
			want: map[string]*framework.Status{"a": unsched, "b": unsched, "x": unsched, "y": unsched},
		},
		{
			name:  "nodeTaintsPolicy Ignore (default): the tainted empty zone counts",
			nodes: withZ(true),
			pods:  concat(podsOn("a", 1), podsOn("x", 1)),
			pod:   mkPod("p").label("foo", "").spread(1, "zone", hard, exists("foo")).obj(),
			want:  map[string]*framework.Status{"a": unsched, "b": unsched, "x": unsched, "y": unsched},
		},
		{
			name:  "nodeTaintsPolicy Honor: the untolerated zone is no domain",
			nodes: withZ(true),
			pods:  concat(podsOn("a", 1), podsOn("x", 1)),
			pod:   mkPod("p").label("foo", "").spread(1, "zone", hard, exists("foo"), taintsPolicy(framework.NodeInclusionPolicyHonor)).obj(),
		},
		{
			name:  "pods of other namespaces do not count",
			nodes: fourNodes(),
			pods:  []*framework.Pod{mkPod("o1").ns("other").node("a").label("foo", "").obj(), mkPod("o2").ns("other").node("b").label("foo", "").obj()},
			pod:   mkPod("p").label("foo", "").spread(1, "zone", hard, exists("foo")).obj(),
		},
		{
			name:  "matchLabelKeys: other revisions do not count",
			nodes: fourNodes(),
			pods:  concat(podsOn("a", 2, "rev", "1"), podsOn("x", 1, "rev", "2")),
			pod:   mkPod("p").label("foo", "").label("rev", "2").spread(1, "zone", hard, exists("foo"), matchLabelKeys("rev")).obj(),
			// zone1=0 zone2=1: zone2 is 2 ahead with the pod.
			want: map[string]*framework.Status{"x": unsched, "y": unsched},
		},
		{
			name:  "nil selector: never selects, never fails",
			nodes: fourNodes(),
			pods:  concat(podsOn("a", 3)),
			pod:   mkPod("p").label("foo", "").spread(1, "zone", hard, nil, matchLabelKeys("foo")).obj(),
		},
		{
			name:  "List defaults apply to a pod without constraints, selecting its labels",
			args:  &Args{DefaultingType: ListDefaulting, DefaultConstraints: []framework.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: hard}}},
			nodes: fourNodes(),
			pods:  concat(podsOn("a", 1, "app", "web"), podsOn("b", 1, "app", "web"), podsOn("x", 1)),
			pod:   mkPod("p").label("app", "web").obj(),
			want:  map[string]*framework.Status{"a": unsched, "b": unsched},
		},
		{
			name:  "List defaults are ignored when the pod has its own constraints",
			args:  &Args{DefaultingType: ListDefaulting, DefaultConstraints: []framework.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: hard}}},
			nodes: fourNodes(),
			pods:  concat(podsOn("a", 1, "app", "web"), podsOn("b", 1, "app", "web")),
			pod:   mkPod("p").label("app", "web").spread(1, "node", hard, exists("app")).obj(),
			want:  map[string]*framework.Status{"a": unsched, "b": unsched},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := tt.args
			if args == nil {
				args = listArgs
			}
			infos := place(tt.nodes, tt.pods)
			pl, _ := newPlugin(t, args, infos...)
			state := framework.NewCycleState()
			pod := framework.NewPodInfo(tt.pod)
			if _, st := pl.PreFilter(ctx, state, pod, infos); !st.IsSuccess() {
				t.Fatalf("PreFilter: %v", st)
			}
			got := map[string]*framework.Status{}
			for _, ni := range infos {
				if st := pl.Filter(ctx, state, pod, ni); !st.IsSuccess() {
					got[ni.Node().Name] = st
				}
			}
			want := tt.want
			if want == nil {
				want = map[string]*framework.Status{}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("rejections (-want,+got):\n%s", diff)
			}
		})
	}
}

// A rejection costs no allocation: a tight spread rejects most of the
// nodes a cycle asks about.
func TestFilterRejectsWithoutAllocating(t *testing.T) {
	infos := place(fourNodes(), concat(podsOn("a", 1), podsOn("b", 1)))
	pl, _ := newPlugin(t, listArgs, infos...)
	state := framework.NewCycleState()
	pod := mkPod("p").label("foo", "").spread(1, "zone", hard, exists("foo")).info()
	if _, st := pl.PreFilter(ctx, state, pod, infos); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st)
	}
	var a *framework.NodeInfo
	for _, ni := range infos {
		if ni.Node().Name == "a" {
			a = ni
		}
	}
	if st := pl.Filter(ctx, state, pod, a); st.Code() != framework.Unschedulable {
		t.Fatalf("Filter(a) = %v, want Unschedulable", st)
	}
	if allocs := testing.AllocsPerRun(20, func() { pl.Filter(ctx, state, pod, a) }); allocs != 0 {
		t.Errorf("a rejection allocated %v times", allocs)
	}
}

func TestFilterWithoutPreFilterState(t *testing.T) {
	infos := place(fourNodes(), nil)
	pl, _ := newPlugin(t, listArgs, infos...)
	st := pl.Filter(ctx, framework.NewCycleState(), mkPod("p").info(), infos[0])
	if st.Code() != framework.Error {
		t.Errorf("Filter = %v, want Error", st)
	}
}

func TestAddRemovePod(t *testing.T) {
	nodes := append(fourNodes(),
		mkNode("nozone").label("node", "nozone").obj(),
		mkNode("z").label("zone", "zone3").label("node", "z").taint("t", framework.TaintEffectNoSchedule).obj())
	base := concat(podsOn("a", 1), podsOn("x", 2), podsOn("z", 2))
	pod := mkPod("p").label("foo", "").spread(1, "zone", hard, exists("foo"), taintsPolicy(framework.NodeInclusionPolicyHonor)).obj()
	baseline := stateSummary{Counts: map[string]int{"zone1": 1, "zone2": 2}, Min: 1}
	tests := []struct {
		name   string
		remove bool
		pod    *framework.Pod
		node   string
		want   stateSummary
	}{
		{name: "add a matching pod", pod: mkPod("n").label("foo", "").obj(), node: "b",
			want: stateSummary{Counts: map[string]int{"zone1": 2, "zone2": 2}, Min: 2}},
		{name: "remove a matching pod moves the minimum", remove: true, pod: mkPod("x-p0").label("foo", "").obj(), node: "x",
			want: stateSummary{Counts: map[string]int{"zone1": 1, "zone2": 1}, Min: 1}},
		{name: "remove from the minimum domain", remove: true, pod: mkPod("a-p0").label("foo", "").obj(), node: "a",
			want: stateSummary{Counts: map[string]int{"zone1": 0, "zone2": 2}, Min: 0}},
		{name: "not selected", pod: mkPod("n").label("bar", "").obj(), node: "b", want: baseline},
		{name: "other namespace", pod: mkPod("n").ns("other").label("foo", "").obj(), node: "b", want: baseline},
		{name: "node missing the key", pod: mkPod("n").label("foo", "").obj(), node: "nozone", want: baseline},
		{name: "node excluded by the taints policy", pod: mkPod("n").label("foo", "").obj(), node: "z", want: baseline},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			infos := place(nodes, base)
			pl, _ := newPlugin(t, listArgs, infos...)
			state := framework.NewCycleState()
			pi := framework.NewPodInfo(pod)
			if _, st := pl.PreFilter(ctx, state, pi, infos); !st.IsSuccess() {
				t.Fatal(st)
			}
			var ni *framework.NodeInfo
			for _, n := range infos {
				if n.Node().Name == tt.node {
					ni = n
				}
			}
			clone := state.Clone()
			var st *framework.Status
			if tt.remove {
				st = pl.RemovePod(ctx, clone, pi, framework.NewPodInfo(tt.pod), ni)
			} else {
				st = pl.AddPod(ctx, clone, pi, framework.NewPodInfo(tt.pod), ni)
			}
			if !st.IsSuccess() {
				t.Fatal(st)
			}
			got, _ := framework.ReadState[*preFilterState](clone, preFilterStateKey)
			if diff := cmp.Diff([]stateSummary{tt.want}, summarize(got)); diff != "" {
				t.Errorf("clone (-want,+got):\n%s", diff)
			}
			orig, _ := framework.ReadState[*preFilterState](state, preFilterStateKey)
			if diff := cmp.Diff([]stateSummary{baseline}, summarize(orig)); diff != "" {
				t.Errorf("original changed (-want,+got):\n%s", diff)
			}
		})
	}
	t.Run("without state", func(t *testing.T) {
		infos := place(nodes, nil)
		pl, _ := newPlugin(t, listArgs, infos...)
		if st := pl.AddPod(ctx, framework.NewCycleState(), mkPod("p").info(), mkPod("q").info(), infos[0]); st.Code() != framework.Error {
			t.Errorf("AddPod = %v, want Error", st)
		}
		if st := pl.RemovePod(ctx, framework.NewCycleState(), mkPod("p").info(), mkPod("q").info(), infos[0]); st.Code() != framework.Error {
			t.Errorf("RemovePod = %v, want Error", st)
		}
	})
}

type nominator map[string][]*framework.PodInfo

func (n nominator) NominatedPodsForNode(node string) []*framework.PodInfo { return n[node] }

// TestNominatedPodsThroughFramework runs the real framework: pods
// nominated to x count there through AddPod when their priority is at
// least the pod's. zone1 has 1 matching pod, zone2 none.
func TestNominatedPodsThroughFramework(t *testing.T) {
	infos := place(fourNodes(), podsOn("a", 1))
	pod := mkPod("p").label("foo", "").spread(1, "zone", hard, exists("foo")).info()
	nominate := func(name string, priority int32) *framework.PodInfo {
		p := mkPod(name).label("foo", "").obj()
		p.Priority = priority
		return framework.NewPodInfo(p)
	}
	tests := []struct {
		name      string
		nominated []*framework.PodInfo
		want      map[string]string
	}{
		{
			name: "no nominated pods: only zone2 fits",
			want: map[string]string{"a": ErrReasonConstraintsNotMatch, "b": ErrReasonConstraintsNotMatch, "x": "", "y": ""},
		},
		{
			name:      "two nominated pods make x's zone the full one",
			nominated: []*framework.PodInfo{nominate("n1", 10), nominate("n2", 0)},
			want:      map[string]string{"a": ErrReasonConstraintsNotMatch, "b": ErrReasonConstraintsNotMatch, "x": ErrReasonConstraintsNotMatch, "y": ""},
		},
		{
			name:      "lower-priority nominated pods are ignored",
			nominated: []*framework.PodInfo{nominate("n1", -1), nominate("n2", -1)},
			want:      map[string]string{"a": ErrReasonConstraintsNotMatch, "b": ErrReasonConstraintsNotMatch, "x": "", "y": ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := framework.Registry{Name: New}
			prof := &runtime.Profile{Plugins: runtime.Plugins{MultiPoint: runtime.PluginSet{Enabled: []runtime.PluginRef{{Name: Name}}}},
				PluginArgs: map[string]any{Name: listArgs}}
			fwk, err := runtime.NewFramework(ctx, reg, prof, runtime.WithSnapshotSharedLister(fwtest.NewLister(infos...)),
				runtime.WithPodNominator(nominator{"x": tt.nominated}))
			if err != nil {
				t.Fatal(err)
			}
			state := framework.NewCycleState()
			if _, st, _ := fwk.RunPreFilterPlugins(ctx, state, pod); !st.IsSuccess() {
				t.Fatal(st)
			}
			got := map[string]string{}
			for _, ni := range infos {
				got[ni.Node().Name] = fwk.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni).Message()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// TestAddPodKeepsTheTrueMinimum: the state tracks only the two emptiest
// domains. Adding pods to both used to leave a third, emptier domain
// unseen, so Filter measured skew from too high a minimum and let a pod
// through that breaks maxSkew. Berth folds every pod placed concurrently
// into a cycle's state this way before it assumes, so this happened.
func TestAddPodKeepsTheTrueMinimum(t *testing.T) {
	nodes := []*framework.Node{
		mkNode("a").label("zone", "zone1").obj(),
		mkNode("b").label("zone", "zone2").obj(),
		mkNode("c").label("zone", "zone3").obj(),
	}
	infos := place(nodes, nil)
	pl, _ := newPlugin(t, listArgs, infos...)
	pod := mkPod("p").label("foo", "").spread(1, "zone", hard, exists("foo")).obj()
	pi := framework.NewPodInfo(pod)
	state := framework.NewCycleState()
	if _, st := pl.PreFilter(ctx, state, pi, infos); !st.IsSuccess() {
		t.Fatal(st)
	}
	// Every zone is empty. One pod lands in each of two zones (the two
	// that kube's critical paths would track); the third stays empty.
	s, _ := framework.ReadState[*preFilterState](state, preFilterStateKey)
	byZone := map[string]*framework.NodeInfo{}
	for _, ni := range infos {
		byZone[ni.Node().Labels["zone"]] = ni
	}
	tracked := []string{"zone1", "zone2"}
	for i, zone := range tracked {
		if st := pl.AddPod(ctx, state, pi, mkPod(fmt.Sprint("q", i)).label("foo", "").info(), byZone[zone]); !st.IsSuccess() {
			t.Fatal(st)
		}
	}
	for _, ni := range infos {
		zone := ni.Node().Labels["zone"]
		st := pl.Filter(ctx, state, pi, ni)
		if slices.Contains(tracked, zone) && st.IsSuccess() {
			t.Errorf("node %s passes: another zone is still empty, so a second pod in %s is a skew of 2", ni.Node().Name, zone)
		}
		if !slices.Contains(tracked, zone) && !st.IsSuccess() {
			t.Errorf("node %s, in the empty zone, fails: %v", ni.Node().Name, st)
		}
	}
	if m := s.minMatchNum(0); m != 0 {
		t.Errorf("minimum = %d, want 0", m)
	}
}
