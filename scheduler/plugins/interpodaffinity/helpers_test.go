package interpodaffinity

import (
	"context"
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/framework/runtime"
)

var ctx = context.Background()

// newPlugin builds the plugin inside a real framework (its Handle) over a
// snapshot of nodes.
func newPlugin(tb testing.TB, args any, parallelism int, nodes ...*framework.NodeInfo) *InterPodAffinity {
	tb.Helper()
	return newPluginOver(tb, args, parallelism, fwtest.NewLister(nodes...))
}

// newPluginOver builds the plugin over any snapshot lister.
func newPluginOver(tb testing.TB, args any, parallelism int, lister framework.SharedLister) *InterPodAffinity {
	tb.Helper()
	var pl *InterPodAffinity
	reg := framework.Registry{Name: func(ctx context.Context, a any, h framework.Handle) (framework.Plugin, error) {
		p, err := New(ctx, a, h)
		if err == nil {
			pl = p.(*InterPodAffinity)
		}
		return p, err
	}}
	profile := &runtime.Profile{
		Plugins:    runtime.Plugins{MultiPoint: runtime.PluginSet{Enabled: []runtime.PluginRef{{Name: Name}}}},
		PluginArgs: map[string]any{Name: args},
	}
	if _, err := runtime.NewFramework(ctx, reg, profile,
		runtime.WithSnapshotSharedLister(lister), runtime.WithParallelism(parallelism)); err != nil {
		tb.Fatal(err)
	}
	return pl
}

// node returns a node with labels given as key, value pairs.
func node(name string, kv ...string) *framework.Node {
	n := fwtest.Node(name, 100000, 1<<40, 1000)
	n.Labels = labels(kv...)
	return n
}

func labels(kv ...string) map[string]string {
	if len(kv) == 0 {
		return nil
	}
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// podBuilder builds pods fluently.
type podBuilder struct{ p *framework.Pod }

func pod(name string) *podBuilder {
	return &podBuilder{p: &framework.Pod{Namespace: "default", Name: name, UID: "uid-" + name}}
}

func (b *podBuilder) ns(ns string) *podBuilder { b.p.Namespace = ns; return b }

func (b *podBuilder) on(nodeName string) *podBuilder { b.p.NodeName = nodeName; return b }

func (b *podBuilder) labels(kv ...string) *podBuilder { b.p.Labels = labels(kv...); return b }

func (b *podBuilder) affinity() *framework.Affinity {
	if b.p.Affinity == nil {
		b.p.Affinity = &framework.Affinity{}
	}
	return b.p.Affinity
}

func (b *podBuilder) podAffinity() *framework.PodAffinity {
	a := b.affinity()
	if a.PodAffinity == nil {
		a.PodAffinity = &framework.PodAffinity{}
	}
	return a.PodAffinity
}

func (b *podBuilder) podAntiAffinity() *framework.PodAntiAffinity {
	a := b.affinity()
	if a.PodAntiAffinity == nil {
		a.PodAntiAffinity = &framework.PodAntiAffinity{}
	}
	return a.PodAntiAffinity
}

func (b *podBuilder) requiredAffinity(ts ...framework.PodAffinityTerm) *podBuilder {
	a := b.podAffinity()
	a.Required = append(a.Required, ts...)
	return b
}

func (b *podBuilder) requiredAnti(ts ...framework.PodAffinityTerm) *podBuilder {
	a := b.podAntiAffinity()
	a.Required = append(a.Required, ts...)
	return b
}

func (b *podBuilder) preferredAffinity(weight int32, t framework.PodAffinityTerm) *podBuilder {
	a := b.podAffinity()
	a.Preferred = append(a.Preferred, framework.WeightedPodAffinityTerm{Weight: weight, Term: t})
	return b
}

func (b *podBuilder) preferredAnti(weight int32, t framework.PodAffinityTerm) *podBuilder {
	a := b.podAntiAffinity()
	a.Preferred = append(a.Preferred, framework.WeightedPodAffinityTerm{Weight: weight, Term: t})
	return b
}

func (b *podBuilder) obj() *framework.Pod { return b.p }

// termIn selects pods whose label key is one of values, in topology.
func termIn(key, topology string, values ...string) framework.PodAffinityTerm {
	return framework.PodAffinityTerm{
		LabelSelector: &framework.LabelSelector{MatchExpressions: []framework.LabelSelectorRequirement{
			{Key: key, Operator: framework.LabelSelectorOpIn, Values: values},
		}},
		TopologyKey: topology,
	}
}

// termExists selects pods carrying label key, in topology.
func termExists(key, topology string) framework.PodAffinityTerm {
	return framework.PodAffinityTerm{
		LabelSelector: &framework.LabelSelector{MatchExpressions: []framework.LabelSelectorRequirement{
			{Key: key, Operator: framework.LabelSelectorOpExists},
		}},
		TopologyKey: topology,
	}
}

// nodeInfo places pods (their NodeName set) on n.
func nodeInfo(n *framework.Node, pods ...*framework.Pod) *framework.NodeInfo {
	for _, p := range pods {
		p.NodeName = n.Name
	}
	return fwtest.NodeInfo(n, pods...)
}
