package runtime_test

import (
	"context"

	"testing"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/framework/runtime"
	"github.com/berth-io/berth/scheduler/plugins"
)

// countedNominator is a nominator that numbers its changes.
type countedNominator struct {
	version uint64
	pods    []*framework.PodInfo
}

func (n *countedNominator) NominatedPodsForNode(string) []*framework.PodInfo { return n.pods }
func (n *countedNominator) NominationsVersion() (uint64, bool)               { return n.version, len(n.pods) == 0 }

// plainNominator cannot say whether anything is nominated.
type plainNominator struct{}

func (plainNominator) NominatedPodsForNode(string) []*framework.PodInfo { return nil }

func defaultFramework(t *testing.T, lister framework.SharedLister, opts ...runtime.Option) *runtime.Framework {
	t.Helper()
	opts = append(opts, runtime.WithSnapshotSharedLister(lister))
	return mustFramework(t, plugins.NewInTreeRegistry(), runtime.DefaultProfile(), opts...)
}

func TestPodSignature(t *testing.T) {
	f := defaultFramework(t, fwtest.NewLister())
	base := func(name string) *framework.Pod { return fwtest.Pod(name, fwtest.Resources(100, 1<<30)) }
	sig := func(p *framework.Pod) (string, bool) { return f.PodSignature(framework.NewPodInfo(p)) }

	want, ok := sig(base("a"))
	if !ok {
		t.Fatal("a plain pod has no signature")
	}
	if got, ok := sig(base("b")); !ok || got != want {
		t.Errorf("another pod of the same shape signs %q, %v; want %q", got, ok, want)
	}
	differ := map[string]func(p *framework.Pod){
		"requests": func(p *framework.Pod) { p.Containers[0].Requests[framework.ResourceCPU] = 200 },
		"tolerations": func(p *framework.Pod) {
			p.Tolerations = []framework.Toleration{{Key: "k", Operator: framework.TolerationOpExists}}
		},
		"node selector": func(p *framework.Pod) { p.NodeSelector = map[string]string{"zone": "a"} },
		"node name":     func(p *framework.Pod) { p.NodeName = "n1" },
		"host port":     func(p *framework.Pod) { p.Containers[0].Ports = []framework.ContainerPort{{HostPort: 80}} },
		"image":         func(p *framework.Pod) { p.Containers[0].Image = "nginx" },
		"node affinity": func(p *framework.Pod) {
			p.Affinity = &framework.Affinity{NodeAffinity: &framework.NodeAffinity{Preferred: []framework.PreferredSchedulingTerm{{Weight: 1}}}}
		},
	}
	for name, change := range differ {
		p := base("c")
		change(p)
		if got, ok := sig(p); !ok || got == want {
			t.Errorf("%s: signs %q, %v; want a signature other than the plain pod's", name, got, ok)
		}
	}
	// Spreading and inter-pod affinity count pods over whole domains;
	// their plugins stamp each node's result (framework.SignatureStamper),
	// so such pods are signed and a memo checks the stamps.
	stamped := map[string]func(p *framework.Pod){
		"spread constraint": func(p *framework.Pod) {
			p.TopologySpreadConstraints = []framework.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: framework.DoNotSchedule}}
		},
		"pod anti-affinity": func(p *framework.Pod) {
			p.Affinity = &framework.Affinity{PodAntiAffinity: &framework.PodAntiAffinity{Required: []framework.PodAffinityTerm{{TopologyKey: "zone"}}}}
		},
	}
	for name, change := range stamped {
		p := base("e")
		change(p)
		if _, ok := sig(p); !ok {
			t.Errorf("%s: no signature; want one, with stamps", name)
		}
	}
	unsigned := map[string]func(p *framework.Pod){
		"rejected by a node": func(p *framework.Pod) { p.EditExtras().Rejections = map[string]int64{"n1": 3} },
	}
	for name, change := range unsigned {
		p := base("d")
		change(p)
		if got, ok := sig(p); ok {
			t.Errorf("%s: signs %q; want no signature", name, got)
		}
	}
}

func TestPodSignatureIsCachedPerFramework(t *testing.T) {
	f1, f2 := defaultFramework(t, fwtest.NewLister()), defaultFramework(t, fwtest.NewLister())
	pi := framework.NewPodInfo(fwtest.Pod("a", fwtest.Resources(100, 0)))
	s1, _ := f1.PodSignature(pi)
	if _, _, cached := pi.CachedSignature(f1); !cached {
		t.Fatal("signature not cached")
	}
	s2, _ := f2.PodSignature(pi)
	if _, _, cached := pi.CachedSignature(f1); cached {
		t.Error("f1's signature still cached after f2 computed its own")
	}
	if s1 != s2 {
		t.Errorf("frameworks of one profile sign differently: %q, %q", s1, s2)
	}

	// The queue copies a PodInfo for a new version of a pod whose spec is
	// unchanged; a rejection is such a change, and must not keep the old
	// signature.
	rejected := *pi.Pod
	rejected.EditExtras().Rejections = map[string]int64{"n1": 1}
	copied := pi.WithPod(&rejected)
	if sig, ok := f2.PodSignature(copied); ok {
		t.Errorf("a rejected pod's copied PodInfo signs %q", sig)
	}
}

func TestPluginWithoutSignatureDisablesReuse(t *testing.T) {
	reg := plugins.NewInTreeRegistry()
	reg["Unsigned"] = func(_ context.Context, _ any, _ framework.Handle) (framework.Plugin, error) {
		return &filterPlugin{name: "Unsigned"}, nil
	}
	prof := runtime.DefaultProfile()
	prof.Plugins.Filter.Enabled = append(prof.Plugins.Filter.Enabled, runtime.PluginRef{Name: "Unsigned"})
	f := mustFramework(t, reg, prof, runtime.WithSnapshotSharedLister(fwtest.NewLister()))
	if sig, ok := f.PodSignature(podInfo("a")); ok {
		t.Errorf("signed %q with a Filter plugin that cannot sign", sig)
	}
	if _, usable := f.SignaturesUsable(); usable {
		t.Error("signatures usable with a Filter plugin that cannot sign")
	}
}

func TestSignaturesUsable(t *testing.T) {
	plain := fwtest.NodeInfo(fwtest.Node("n1", 1000, 1<<30, 10))
	withAffinity := fwtest.NodeInfo(fwtest.Node("n2", 1000, 1<<30, 10), &framework.Pod{Name: "x", Namespace: "ns", NodeName: "n2",
		Affinity: &framework.Affinity{PodAffinity: &framework.PodAffinity{Required: []framework.PodAffinityTerm{{TopologyKey: "zone"}}}}})
	nominee := podInfo("nominee")
	tests := []struct {
		name  string
		nodes []*framework.NodeInfo
		opts  []runtime.Option
		guard *guardPlugin
		want  bool
	}{
		{name: "no nominator", nodes: []*framework.NodeInfo{plain}, want: true},
		{name: "versioned nominator, nothing nominated", nodes: []*framework.NodeInfo{plain}, opts: []runtime.Option{runtime.WithPodNominator(&countedNominator{version: 4})}, want: true},
		{name: "a change in progress", nodes: []*framework.NodeInfo{plain}, opts: []runtime.Option{runtime.WithPodNominator(&countedNominator{version: 5})}},
		{name: "a pod nominated", nodes: []*framework.NodeInfo{plain}, opts: []runtime.Option{runtime.WithPodNominator(&countedNominator{version: 6, pods: []*framework.PodInfo{nominee}})}},
		{name: "a nominator that cannot say", nodes: []*framework.NodeInfo{plain}, opts: []runtime.Option{runtime.WithPodNominator(plainNominator{})}},
		// Inter-pod affinity stamps its results instead of vetoing reuse.
		{name: "an existing pod with affinity", nodes: []*framework.NodeInfo{plain, withAffinity}, want: true},
		{name: "a guard that vetoes", nodes: []*framework.NodeInfo{plain}, guard: &guardPlugin{}},
		{name: "a guard that agrees", nodes: []*framework.NodeInfo{plain}, guard: &guardPlugin{valid: true}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := defaultFramework(t, fwtest.NewLister(tt.nodes...), tt.opts...)
			if tt.guard != nil {
				reg := plugins.NewInTreeRegistry()
				reg["Guard"] = func(context.Context, any, framework.Handle) (framework.Plugin, error) { return tt.guard, nil }
				prof := runtime.DefaultProfile()
				prof.Plugins.Filter.Enabled = append(prof.Plugins.Filter.Enabled, runtime.PluginRef{Name: "Guard"})
				f = mustFramework(t, reg, prof, append(tt.opts, runtime.WithSnapshotSharedLister(fwtest.NewLister(tt.nodes...)))...)
			}
			if _, got := f.SignaturesUsable(); got != tt.want {
				t.Errorf("SignaturesUsable = %v, want %v", got, tt.want)
			}
		})
	}
}

// guardPlugin is a signing Filter plugin that agrees to reuse or not.
type guardPlugin struct{ valid bool }

func (*guardPlugin) Name() string { return "Guard" }
func (*guardPlugin) Filter(context.Context, *framework.CycleState, *framework.PodInfo, *framework.NodeInfo) *framework.Status {
	return nil
}
func (*guardPlugin) AppendSignature(sig []byte, _ *framework.PodInfo) ([]byte, bool) {
	return sig, true
}
func (g *guardPlugin) SignaturesValid() bool { return g.valid }

// TestStampsFollowSkips checks that only stamping plugins whose Filter or
// Score runs in a cycle give stamps: a plain pod skips both spreading and
// inter-pod affinity, a spread pod runs spreading's Filter.
func TestStampsFollowSkips(t *testing.T) {
	node := fwtest.Node("n1", 1000, 1<<30, 10)
	node.Labels = map[string]string{"zone": "a"}
	ni := fwtest.NodeInfo(node)
	f := defaultFramework(t, fwtest.NewLister(ni))
	plain := podInfo("plain")
	state := framework.NewCycleState()
	if _, st, _ := f.RunPreFilterPlugins(ctx, state, plain); !st.IsSuccess() {
		t.Fatal(st)
	}
	if f.FilterStamped(state) {
		t.Error("a plain pod's cycle has stamping filters")
	}
	if st := f.RunPreScorePlugins(ctx, state, plain, []*framework.NodeInfo{ni}); !st.IsSuccess() {
		t.Fatal(st)
	}
	if f.ScoreStamped(state) {
		t.Error("a plain pod's cycle has stamping scores")
	}

	spread := podInfo("spread")
	spread.Pod.Labels = map[string]string{"app": "a"}
	spread.Pod.TopologySpreadConstraints = []framework.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: framework.DoNotSchedule,
		LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}}
	state = framework.NewCycleState()
	if _, st, _ := f.RunPreFilterPlugins(ctx, state, spread); !st.IsSuccess() {
		t.Fatal(st)
	}
	if !f.FilterStamped(state) {
		t.Fatal("a spread pod's cycle has no stamping filter")
	}
	missing := fwtest.NodeInfo(fwtest.Node("n2", 1000, 1<<30, 10))
	if a, b := f.FilterStamps(ctx, state, spread, ni), f.FilterStamps(ctx, state, spread, missing); a == b {
		t.Errorf("a node with the zone and one without have the same stamps %v", a)
	}
}
