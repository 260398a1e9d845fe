package defaultpreemption

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/framework/runtime"
	"github.com/berth-io/berth/scheduler/plugins/names"
	"github.com/berth-io/berth/scheduler/plugins/noderesources"
	"github.com/berth-io/berth/scheduler/plugins/nodeunschedulable"
)

var (
	ctx = context.Background()
	// t0 is the fake "now"; pods start at t0 minus some minutes.
	t0 = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
)

// pod builds a pod requesting milliCPU with the given priority.
func pod(name string, priority int32, milliCPU int64) *framework.Pod {
	p := fwtest.Pod(name, fwtest.Resources(milliCPU, 0))
	p.Priority = priority
	return p
}

// started sets the start time to minutes before t0.
func started(p *framework.Pod, minutesAgo int) *framework.Pod {
	p.StartTime = t0.Add(-time.Duration(minutesAgo) * time.Minute)
	return p
}

func labeled(p *framework.Pod, kv ...string) *framework.Pod {
	p.Labels = map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		p.Labels[kv[i]] = kv[i+1]
	}
	return p
}

func node(name string, milliCPU int64, pods ...*framework.Pod) *framework.NodeInfo {
	return fwtest.NodeInfo(fwtest.Node(name, milliCPU, 1<<40, 110), pods...)
}

func podNames(ps []*framework.Pod) []string {
	if len(ps) == 0 {
		return nil
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// budgets is a static BudgetLister.
type budgets []framework.DisruptionBudget

func (b budgets) List() []framework.DisruptionBudget { return b }

// appBudget covers pods labelled app=value in "default".
func appBudget(value string, allowed int32) framework.DisruptionBudget {
	return framework.DisruptionBudget{Namespace: "default", DisruptionsAllowed: allowed,
		Selector: &framework.LabelSelector{MatchLabels: map[string]string{"app": value}}}
}

type evictCall struct {
	Preemptor string
	Node      string
	Victims   []string
}

// recordingEvictor records Evict calls and returns err.
type recordingEvictor struct {
	mu    sync.Mutex
	err   error
	calls []evictCall
}

func (e *recordingEvictor) Evict(_ context.Context, preemptor *framework.Pod, node string, victims []*framework.Pod) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, evictCall{preemptor.Name, node, podNames(victims)})
	return e.err
}

type fakeNominator map[string][]*framework.PodInfo

func (n fakeNominator) NominatedPodsForNode(node string) []*framework.PodInfo { return n[node] }

// env is a real framework (NodeUnschedulable, NodeResourcesFit, any extra
// plugins, DefaultPreemption) over a fixed snapshot.
type env struct {
	f      *runtime.Framework
	pl     *DefaultPreemption
	lister *fwtest.Lister
}

type envConfig struct {
	args  Args
	extra []framework.Plugin
	opts  []runtime.Option
	// evictor and terminating are the framework's Evictor and what it
	// says is on its way out; both nil: no Evictor.
	evictor     framework.Evictor
	terminating func(*framework.Pod) bool
}

// trackingEvictor is an Evictor (evicting through next, if any) that
// tracks terminating pods with a function.
type trackingEvictor struct {
	next        framework.Evictor
	terminating func(*framework.Pod) bool
}

func (e trackingEvictor) Evict(ctx context.Context, preemptor *framework.Pod, node string, victims []*framework.Pod) error {
	if e.next == nil {
		return nil
	}
	return e.next.Evict(ctx, preemptor, node, victims)
}

func (e trackingEvictor) Terminating(p *framework.Pod) bool { return e.terminating(p) }

func newEnv(tb testing.TB, cfg envConfig, nodes ...*framework.NodeInfo) *env {
	tb.Helper()
	e := &env{lister: fwtest.NewLister(nodes...)}
	if cfg.args.Seed == 0 {
		cfg.args.Seed = 1
	}
	reg := framework.Registry{
		nodeunschedulable.Name: nodeunschedulable.New,
		noderesources.Name:     noderesources.New,
		Name: func(ctx context.Context, args any, h framework.Handle) (framework.Plugin, error) {
			p, err := New(ctx, args, h)
			if err == nil {
				e.pl = p.(*DefaultPreemption)
			}
			return p, err
		},
	}
	refs := []runtime.PluginRef{{Name: names.NodeUnschedulable}, {Name: names.NodeResourcesFit}}
	for _, p := range cfg.extra {
		p := p
		reg[p.Name()] = func(context.Context, any, framework.Handle) (framework.Plugin, error) { return p, nil }
		refs = append(refs, runtime.PluginRef{Name: p.Name()})
	}
	refs = append(refs, runtime.PluginRef{Name: Name})
	prof := &runtime.Profile{
		Plugins:    runtime.Plugins{MultiPoint: runtime.PluginSet{Enabled: refs}},
		PluginArgs: map[string]any{Name: &cfg.args},
	}
	// The fake clock stands in for the start time of pods without one;
	// cfg.opts may replace it.
	opts := []runtime.Option{runtime.WithSnapshotSharedLister(e.lister), runtime.WithClock(fwtest.NewFakeClock(t0))}
	switch {
	case cfg.terminating != nil:
		opts = append(opts, runtime.WithEvictor(trackingEvictor{next: cfg.evictor, terminating: cfg.terminating}))
	case cfg.evictor != nil:
		opts = append(opts, runtime.WithEvictor(cfg.evictor))
	}
	opts = append(opts, cfg.opts...)
	f, err := runtime.NewFramework(ctx, reg, prof, opts...)
	if err != nil {
		tb.Fatalf("NewFramework: %v", err)
	}
	e.f = f
	return e
}

// filter runs PreFilter and Filter over every node, as a failed cycle
// would before PostFilter.
func (e *env) filter(tb testing.TB, p *framework.Pod) (*framework.CycleState, *framework.PodInfo, *framework.NodeToStatus) {
	tb.Helper()
	state := framework.NewCycleState()
	pi := framework.NewPodInfo(p)
	if _, st, _ := e.f.RunPreFilterPlugins(ctx, state, pi); !st.IsSuccess() {
		tb.Fatalf("PreFilter: %v", st)
	}
	m := framework.NewNodeToStatus()
	for _, ni := range e.lister.List() {
		if st := e.f.RunFilterPluginsWithNominatedPods(ctx, state, pi, ni); !st.IsSuccess() {
			m.Set(ni.Node().Name, st)
		}
	}
	return state, pi, m
}

var errEvict = errors.New("evictor down")
