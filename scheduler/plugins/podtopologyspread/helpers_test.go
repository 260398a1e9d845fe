package podtopologyspread

import (
	"context"
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/framework/runtime"
)

var ctx = context.Background()

// testParallelism exercises the parallel counting path (and, under -race,
// its synchronization).
const testParallelism = 4

// newPlugin builds the plugin inside a real framework over a snapshot of
// nodes, so it reads the same lister Score phases use in production.
func newPlugin(t testing.TB, args any, nodes ...*framework.NodeInfo) (*PodTopologySpread, *runtime.Framework) {
	t.Helper()
	return newPluginOn(t, args, fwtest.NewLister(nodes...))
}

// newPluginOn is newPlugin over a lister the caller keeps changing.
func newPluginOn(t testing.TB, args any, lister framework.SharedLister) (*PodTopologySpread, *runtime.Framework) {
	t.Helper()
	var pl *PodTopologySpread
	reg := framework.Registry{Name: func(ctx context.Context, a any, h framework.Handle) (framework.Plugin, error) {
		p, err := New(ctx, a, h)
		if err == nil {
			pl = p.(*PodTopologySpread)
		}
		return p, err
	}}
	prof := &runtime.Profile{
		Plugins:    runtime.Plugins{MultiPoint: runtime.PluginSet{Enabled: []runtime.PluginRef{{Name: Name, Weight: 2}}}},
		PluginArgs: map[string]any{Name: args},
	}
	fwk, err := runtime.NewFramework(ctx, reg, prof, runtime.WithSnapshotSharedLister(lister), runtime.WithParallelism(testParallelism))
	if err != nil {
		t.Fatal(err)
	}
	return pl, fwk
}

// listArgs disables the system defaults, so only a pod's own constraints
// count.
var listArgs = &Args{DefaultingType: ListDefaulting}

// nodeBuilder builds a node with labels and taints.
type nodeBuilder struct{ n *framework.Node }

func mkNode(name string) nodeBuilder {
	return nodeBuilder{n: &framework.Node{Name: name, Labels: map[string]string{}}}
}

func (b nodeBuilder) label(k, v string) nodeBuilder { b.n.Labels[k] = v; return b }

func (b nodeBuilder) taint(key string, effect framework.TaintEffect) nodeBuilder {
	b.n.Taints = append(b.n.Taints, framework.Taint{Key: key, Effect: effect})
	return b
}

func (b nodeBuilder) obj() *framework.Node { return b.n }

// podBuilder builds a pod in namespace "default".
type podBuilder struct{ p *framework.Pod }

func mkPod(name string) podBuilder {
	return podBuilder{p: &framework.Pod{Namespace: "default", Name: name, UID: "uid-" + name, Labels: map[string]string{}}}
}

func (b podBuilder) label(k, v string) podBuilder { b.p.Labels[k] = v; return b }
func (b podBuilder) ns(ns string) podBuilder      { b.p.Namespace = ns; return b }
func (b podBuilder) node(n string) podBuilder     { b.p.NodeName = n; return b }

func (b podBuilder) nodeSelector(k, v string) podBuilder {
	if b.p.NodeSelector == nil {
		b.p.NodeSelector = map[string]string{}
	}
	b.p.NodeSelector[k] = v
	return b
}

func (b podBuilder) requiredAffinity(key string, op framework.NodeSelectorOperator, values ...string) podBuilder {
	b.p.Affinity = &framework.Affinity{NodeAffinity: &framework.NodeAffinity{Required: &framework.NodeSelector{
		NodeSelectorTerms: []framework.NodeSelectorTerm{{MatchExpressions: []framework.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}},
	}}}
	return b
}

func (b podBuilder) toleration(key string) podBuilder {
	b.p.Tolerations = append(b.p.Tolerations, framework.Toleration{Key: key, Operator: framework.TolerationOpExists})
	return b
}

// spread adds a constraint; sel nil means a nil LabelSelector.
func (b podBuilder) spread(maxSkew int32, key string, action framework.UnsatisfiableConstraintAction, sel *framework.LabelSelector, opts ...func(*framework.TopologySpreadConstraint)) podBuilder {
	c := framework.TopologySpreadConstraint{MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: action, LabelSelector: sel}
	for _, o := range opts {
		o(&c)
	}
	b.p.TopologySpreadConstraints = append(b.p.TopologySpreadConstraints, c)
	return b
}

func (b podBuilder) obj() *framework.Pod { return b.p }

func (b podBuilder) info() *framework.PodInfo { return framework.NewPodInfo(b.p) }

func minDomains(n int32) func(*framework.TopologySpreadConstraint) {
	return func(c *framework.TopologySpreadConstraint) { c.MinDomains = &n }
}

func affinityPolicy(p framework.NodeInclusionPolicy) func(*framework.TopologySpreadConstraint) {
	return func(c *framework.TopologySpreadConstraint) { c.NodeAffinityPolicy = p }
}

func taintsPolicy(p framework.NodeInclusionPolicy) func(*framework.TopologySpreadConstraint) {
	return func(c *framework.TopologySpreadConstraint) { c.NodeTaintsPolicy = p }
}

func matchLabelKeys(keys ...string) func(*framework.TopologySpreadConstraint) {
	return func(c *framework.TopologySpreadConstraint) { c.MatchLabelKeys = keys }
}

// exists selects pods carrying key.
func exists(key string) *framework.LabelSelector {
	return &framework.LabelSelector{MatchExpressions: []framework.LabelSelectorRequirement{{Key: key, Operator: framework.LabelSelectorOpExists}}}
}

// place builds NodeInfos from nodes and puts every pod on the node its
// NodeName names.
func place(nodes []*framework.Node, pods []*framework.Pod) []*framework.NodeInfo {
	byName := map[string]*framework.NodeInfo{}
	out := make([]*framework.NodeInfo, len(nodes))
	for i, n := range nodes {
		out[i] = fwtest.NodeInfo(n)
		byName[n.Name] = out[i]
	}
	for _, p := range pods {
		byName[p.NodeName].AddPodInfo(framework.NewPodInfo(p))
	}
	return out
}

// podsOn returns n pods labelled foo on node, named after it.
func podsOn(node string, n int, labels ...string) []*framework.Pod {
	out := make([]*framework.Pod, n)
	for i := range out {
		b := mkPod(node+"-p"+string(rune('0'+i))).node(node).label("foo", "")
		for j := 0; j+1 < len(labels); j += 2 {
			b = b.label(labels[j], labels[j+1])
		}
		out[i] = b.obj()
	}
	return out
}

func concat(groups ...[]*framework.Pod) []*framework.Pod {
	var out []*framework.Pod
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// stateSummary is the part of preFilterState with a unique right answer:
// the counts per domain and the global minimum (which domain ties for it
// is arbitrary).
type stateSummary struct {
	Counts map[string]int
	Min    int
}

func summarize(s *preFilterState) []stateSummary {
	out := make([]stateSummary, len(s.constraints))
	for i := range s.constraints {
		out[i] = stateSummary{Counts: s.matches[i].all(), Min: s.matches[i].minimum()}
	}
	return out
}
