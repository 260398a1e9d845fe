package podtopologyspread

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/framework/runtime"
)

func TestNewArgs(t *testing.T) {
	zoneSoft := framework.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: soft}
	tests := []struct {
		name         string
		args         any
		wantErr      string
		wantDefaults []framework.TopologySpreadConstraint
		wantSystem   bool
	}{
		{name: "nil: Berth's default is List with no constraints", args: nil},
		{name: "empty args: List with no constraints", args: Args{}},
		{name: "System asked for", args: &Args{DefaultingType: SystemDefaulting}, wantDefaults: systemDefaultConstraints, wantSystem: true},
		{name: "List constraints without a type", args: &Args{DefaultConstraints: []framework.TopologySpreadConstraint{zoneSoft}},
			wantDefaults: []framework.TopologySpreadConstraint{zoneSoft}},
		{name: "List without constraints", args: &Args{DefaultingType: ListDefaulting}},
		{name: "List with constraints", args: Args{DefaultingType: ListDefaulting, DefaultConstraints: []framework.TopologySpreadConstraint{zoneSoft}},
			wantDefaults: []framework.TopologySpreadConstraint{zoneSoft}},
		{name: "System with constraints", args: &Args{DefaultingType: SystemDefaulting, DefaultConstraints: []framework.TopologySpreadConstraint{zoneSoft}}, wantErr: "when defaultConstraints are not empty"},
		{name: "unknown defaulting type", args: &Args{DefaultingType: "Zone"}, wantErr: `unsupported value "Zone"`},
		{name: "wrong args type", args: 42, wantErr: "want args of type *Args, got int"},
		{name: "maxSkew 0", args: &Args{DefaultingType: ListDefaulting, DefaultConstraints: []framework.TopologySpreadConstraint{{TopologyKey: "zone", WhenUnsatisfiable: soft}}},
			wantErr: "maxSkew: 0 not in valid range"},
		{name: "empty topology key", args: &Args{DefaultingType: ListDefaulting, DefaultConstraints: []framework.TopologySpreadConstraint{{MaxSkew: 1, WhenUnsatisfiable: soft}}},
			wantErr: "topologyKey: can not be empty"},
		{name: "empty action", args: &Args{DefaultingType: ListDefaulting, DefaultConstraints: []framework.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone"}}},
			wantErr: "whenUnsatisfiable: can not be empty"},
		{name: "unknown action", args: &Args{DefaultingType: ListDefaulting, DefaultConstraints: []framework.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: "Maybe"}}},
			wantErr: `whenUnsatisfiable: unsupported value "Maybe"`},
		{name: "selector set", args: &Args{DefaultingType: ListDefaulting, DefaultConstraints: []framework.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: soft, LabelSelector: exists("a")}}},
			wantErr: "must not define a selector"},
		{name: "duplicate key and action", args: &Args{DefaultingType: ListDefaulting, DefaultConstraints: []framework.TopologySpreadConstraint{zoneSoft, zoneSoft}},
			wantErr: "defaultConstraints[1]: duplicate {zone, ScheduleAnyway}"},
		{name: "same key, other action is fine", args: &Args{DefaultingType: ListDefaulting, DefaultConstraints: []framework.TopologySpreadConstraint{
			zoneSoft, {MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: hard}}},
			wantDefaults: []framework.TopologySpreadConstraint{zoneSoft, {MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: hard}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := framework.Registry{Name: New}
			prof := &runtime.Profile{Plugins: runtime.Plugins{MultiPoint: runtime.PluginSet{Enabled: []runtime.PluginRef{{Name: Name}}}},
				PluginArgs: map[string]any{Name: tt.args}}
			fwk, err := runtime.NewFramework(ctx, reg, prof, runtime.WithSnapshotSharedLister(fwtest.NewLister()))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p, err := New(ctx, tt.args, fwk)
			if err != nil {
				t.Fatal(err)
			}
			pl := p.(*PodTopologySpread)
			if diff := cmp.Diff(tt.wantDefaults, pl.defaults); diff != "" {
				t.Errorf("defaults (-want,+got):\n%s", diff)
			}
			if pl.systemDefaulted != tt.wantSystem {
				t.Errorf("systemDefaulted = %v, want %v", pl.systemDefaulted, tt.wantSystem)
			}
		})
	}
}

func TestNewNeedsASnapshot(t *testing.T) {
	reg := framework.Registry{Name: New}
	prof := &runtime.Profile{Plugins: runtime.Plugins{MultiPoint: runtime.PluginSet{Enabled: []runtime.PluginRef{{Name: Name}}}}}
	if _, err := runtime.NewFramework(ctx, reg, prof); err == nil || !strings.Contains(err.Error(), "no snapshot lister") {
		t.Errorf("err = %v, want a missing-lister error", err)
	}
}

func TestEventsToRegister(t *testing.T) {
	pl, fwk := newPlugin(t, listArgs)
	got, err := pl.EventsToRegister(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var events []framework.ClusterEvent
	for _, e := range got {
		if e.QueueingHintFn == nil {
			t.Errorf("event %+v has no hint", e.Event)
		}
		events = append(events, e.Event)
	}
	want := []framework.ClusterEvent{
		{Resource: framework.EventResourceAssigned, ActionType: framework.ActionAdd | framework.ActionUpdatePodLabel | framework.ActionDelete},
		{Resource: framework.EventResourceNode, ActionType: framework.ActionAdd | framework.ActionDelete | framework.ActionUpdateNodeLabel | framework.ActionUpdateNodeTaint},
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
	if _, ok := fwk.EventsToRegister()[Name]; !ok {
		t.Error("the framework did not record the plugin's events")
	}
}

func TestPodChangeHint(t *testing.T) {
	target := mkPod("p").label("foo", "").spread(1, "zone", hard, exists("foo")).obj()
	honoring := mkPod("p").label("foo", "").spread(1, "zone", hard, exists("foo"), taintsPolicy(framework.NodeInclusionPolicyHonor)).obj()
	assigned := func(labels ...string) *framework.Pod {
		b := mkPod("q").node("a")
		for i := 0; i+1 < len(labels); i += 2 {
			b = b.label(labels[i], labels[i+1])
		}
		return b.obj()
	}
	tolerating := mkPod("p").label("foo", "").toleration("t").obj()
	bad := mkPod("p").spread(1, "zone", hard, &framework.LabelSelector{MatchExpressions: []framework.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}).obj()
	tests := []struct {
		name     string
		pod      *framework.Pod
		old, new any
		want     framework.QueueingHint
		wantErr  bool
	}{
		{name: "matching pod added", pod: target, new: assigned("foo", "1"), want: framework.Queue},
		{name: "unrelated pod added", pod: target, new: assigned("bar", "1"), want: framework.QueueSkip},
		{name: "pod of another namespace", pod: target, new: mkPod("q").ns("other").node("a").label("foo", "").obj(), want: framework.QueueSkip},
		{name: "unassigned pod", pod: target, new: mkPod("q").label("foo", "").obj(), want: framework.QueueSkip},
		{name: "matching pod deleted", pod: target, old: assigned("foo", "1"), want: framework.Queue},
		{name: "unrelated pod deleted", pod: target, old: assigned("bar", "1"), want: framework.QueueSkip},
		{name: "label update starts matching", pod: target, old: assigned("bar", "1"), new: assigned("foo", "1"), want: framework.Queue},
		{name: "label update stops matching", pod: target, old: assigned("foo", "1"), new: assigned("bar", "1"), want: framework.Queue},
		{name: "label update keeps matching", pod: target, old: assigned("foo", "1"), new: assigned("foo", "2"), want: framework.QueueSkip},
		{name: "no label change", pod: target, old: assigned("foo", "1"), new: assigned("foo", "1"), want: framework.QueueSkip},
		{name: "pod itself gains a toleration, Honor", pod: honoring, old: mkPod("p").label("foo", "").obj(), new: tolerating, want: framework.Queue},
		{name: "pod itself gains a toleration, Ignore", pod: target, old: mkPod("p").label("foo", "").obj(), new: tolerating, want: framework.QueueSkip},
		{name: "typed nil on both sides", pod: target, old: (*framework.Pod)(nil), new: (*framework.Pod)(nil), want: framework.Queue, wantErr: true},
		{name: "bad selector", pod: bad, new: assigned("foo", "1"), want: framework.Queue, wantErr: true},
		{name: "pod without hard constraints", pod: mkPod("p").label("foo", "").obj(), new: assigned("foo", "1"), want: framework.QueueSkip},
	}
	pl, _ := newPlugin(t, listArgs)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pl.isSchedulableAfterPodChange(tt.pod, tt.old, tt.new)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("hint = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestNodeChangeHint(t *testing.T) {
	target := mkPod("p").label("foo", "").spread(1, "zone", hard, exists("foo")).spread(1, "node", hard, exists("foo")).obj()
	full := func() nodeBuilder { return mkNode("n").label("zone", "z1").label("node", "n") }
	tests := []struct {
		name     string
		pod      *framework.Pod
		old, new any
		want     framework.QueueingHint
		wantErr  bool
	}{
		{name: "node with every key added", pod: target, new: full().obj(), want: framework.Queue},
		{name: "node missing a key added", pod: target, new: mkNode("n").label("zone", "z1").obj(), want: framework.QueueSkip},
		{name: "node with every key deleted", pod: target, old: full().obj(), want: framework.Queue},
		{name: "node missing a key deleted", pod: target, old: mkNode("n").obj(), want: framework.QueueSkip},
		{name: "deleted node unknown (typed nil)", pod: target, old: (*framework.Node)(nil), want: framework.Queue, wantErr: true},
		{name: "gains the last key", pod: target, old: mkNode("n").label("zone", "z1").obj(), new: full().obj(), want: framework.Queue},
		{name: "loses a key", pod: target, old: full().obj(), new: mkNode("n").label("zone", "z1").obj(), want: framework.Queue},
		{name: "key value changes", pod: target, old: full().obj(), new: full().label("zone", "z2").obj(), want: framework.Queue},
		{name: "unrelated label changes", pod: target, old: full().obj(), new: full().label("other", "x").obj(), want: framework.QueueSkip},
		{name: "taints change on a node with every key", pod: target, old: full().obj(), new: full().taint("t", framework.TaintEffectNoSchedule).obj(), want: framework.Queue},
		{name: "taints change on a node missing a key", pod: target, old: mkNode("n").obj(), new: mkNode("n").taint("t", framework.TaintEffectNoSchedule).obj(), want: framework.QueueSkip},
		{name: "pod without hard constraints: any node has every key", pod: mkPod("p").obj(), new: mkNode("n").obj(), want: framework.Queue},
	}
	pl, _ := newPlugin(t, listArgs)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pl.isSchedulableAfterNodeChange(tt.pod, tt.old, tt.new)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("hint = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSelectorCompileAgreesWithLabelSelector(t *testing.T) {
	selectors := []*framework.LabelSelector{
		nil,
		{},
		{MatchLabels: map[string]string{"app": "web", "tier": "front"}},
		{MatchExpressions: []framework.LabelSelectorRequirement{{Key: "app", Operator: framework.LabelSelectorOpIn, Values: []string{"web", "db"}}}},
		{MatchExpressions: []framework.LabelSelectorRequirement{{Key: "app", Operator: framework.LabelSelectorOpNotIn, Values: []string{"web"}}}},
		{MatchExpressions: []framework.LabelSelectorRequirement{{Key: "tier", Operator: framework.LabelSelectorOpExists}}},
		{MatchLabels: map[string]string{"app": "web"}, MatchExpressions: []framework.LabelSelectorRequirement{{Key: "tier", Operator: framework.LabelSelectorOpDoesNotExist}}},
	}
	labelSets := []map[string]string{nil, {"app": "web"}, {"app": "db"}, {"app": "web", "tier": "front"}, {"tier": "back"}}
	for i, ls := range selectors {
		s, err := compileSelector(ls)
		if err != nil {
			t.Fatalf("selector %d: %v", i, err)
		}
		for _, labels := range labelSets {
			if got, want := s.matches(labels), ls.Matches(labels); got != want {
				t.Errorf("selector %d on %v: compiled %v, LabelSelector %v", i, labels, got, want)
			}
		}
	}
	if _, err := compileSelector(&framework.LabelSelector{MatchExpressions: []framework.LabelSelectorRequirement{{Key: "a", Operator: framework.LabelSelectorOpIn}}}); err == nil {
		t.Error("compileSelector accepted In without values")
	}
	if got := selectorFromSet(map[string]string{"b": "2", "a": "1"}); got.reqs[0].key != "a" || got.empty() {
		t.Errorf("selectorFromSet = %+v, want sorted equality requirements", got)
	}
}
