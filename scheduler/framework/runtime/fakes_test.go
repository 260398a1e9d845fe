package runtime_test

import (
	"context"
	"sync"
	"time"

	"github.com/berth-io/berth/scheduler/framework"
)

// recorder logs plugin calls in order.
type recorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.calls = append(r.calls, s)
	r.mu.Unlock()
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// filterPlugin is a PreFilter + Filter plugin driven by functions.
type filterPlugin struct {
	name      string
	rec       *recorder
	preFilter func(*framework.PodInfo) (*framework.PreFilterResult, *framework.Status)
	filter    func(*framework.NodeInfo) *framework.Status
	ext       framework.PreFilterExtensions
}

func (p *filterPlugin) Name() string { return p.name }

func (p *filterPlugin) PreFilter(_ context.Context, _ *framework.CycleState, pod *framework.PodInfo, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	if p.rec != nil {
		p.rec.add("PreFilter/" + p.name)
	}
	if p.preFilter == nil {
		return nil, nil
	}
	return p.preFilter(pod)
}

func (p *filterPlugin) PreFilterExtensions() framework.PreFilterExtensions { return p.ext }

func (p *filterPlugin) Filter(_ context.Context, _ *framework.CycleState, _ *framework.PodInfo, ni *framework.NodeInfo) *framework.Status {
	if p.rec != nil {
		p.rec.add("Filter/" + p.name + "/" + ni.Node().Name)
	}
	if p.filter == nil {
		return nil
	}
	return p.filter(ni)
}

// filterOnly implements Filter but not PreFilter.
type filterOnly struct{ filterPlugin }

// scorePlugin is a PreScore + Score plugin; normalize is optional.
type scorePlugin struct {
	name      string
	preScore  func() *framework.Status
	score     func(*framework.NodeInfo) (int64, *framework.Status)
	normalize func(framework.NodeScoreList) *framework.Status
}

func (p *scorePlugin) Name() string { return p.name }

func (p *scorePlugin) PreScore(context.Context, *framework.CycleState, *framework.PodInfo, []*framework.NodeInfo) *framework.Status {
	if p.preScore == nil {
		return nil
	}
	return p.preScore()
}

func (p *scorePlugin) Score(_ context.Context, _ *framework.CycleState, _ *framework.PodInfo, ni *framework.NodeInfo) (int64, *framework.Status) {
	return p.score(ni)
}

func (p *scorePlugin) ScoreExtensions() framework.ScoreExtensions {
	if p.normalize == nil {
		return nil
	}
	return p
}

func (p *scorePlugin) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *framework.PodInfo, s framework.NodeScoreList) *framework.Status {
	return p.normalize(s)
}

// bindingPlugin implements Reserve, Permit, PreBind, Bind and PostBind.
type bindingPlugin struct {
	name    string
	rec     *recorder
	reserve *framework.Status
	permit  *framework.Status
	wait    time.Duration
	preBind *framework.Status
	bind    *framework.Status
}

func (p *bindingPlugin) Name() string { return p.name }

func (p *bindingPlugin) Reserve(_ context.Context, _ *framework.CycleState, _ *framework.Pod, _ string) *framework.Status {
	p.rec.add("Reserve/" + p.name)
	return p.reserve
}

func (p *bindingPlugin) Unreserve(_ context.Context, _ *framework.CycleState, _ *framework.Pod, _ string) {
	p.rec.add("Unreserve/" + p.name)
}

func (p *bindingPlugin) Permit(_ context.Context, _ *framework.CycleState, _ *framework.Pod, _ string) (*framework.Status, time.Duration) {
	p.rec.add("Permit/" + p.name)
	return p.permit, p.wait
}

func (p *bindingPlugin) PreBind(_ context.Context, _ *framework.CycleState, _ *framework.Pod, _ string) *framework.Status {
	p.rec.add("PreBind/" + p.name)
	return p.preBind
}

func (p *bindingPlugin) Bind(_ context.Context, _ *framework.CycleState, _ *framework.Pod, _ string) *framework.Status {
	p.rec.add("Bind/" + p.name)
	return p.bind
}

func (p *bindingPlugin) PostBind(_ context.Context, _ *framework.CycleState, _ *framework.Pod, _ string) {
	p.rec.add("PostBind/" + p.name)
}

// postFilterPlugin returns a fixed result.
type postFilterPlugin struct {
	name   string
	result *framework.PostFilterResult
	status *framework.Status
}

func (p *postFilterPlugin) Name() string { return p.name }

func (p *postFilterPlugin) PostFilter(context.Context, *framework.CycleState, *framework.PodInfo, framework.NodeToStatusReader) (*framework.PostFilterResult, *framework.Status) {
	return p.result, p.status
}

// gatePlugin is a PreEnqueue plugin with events.
type gatePlugin struct {
	name   string
	status *framework.Status
	events []framework.ClusterEventWithHint
}

func (p *gatePlugin) Name() string { return p.name }

func (p *gatePlugin) PreEnqueue(context.Context, *framework.Pod) *framework.Status { return p.status }

func (p *gatePlugin) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return p.events, nil
}

// registryOf registers fixed plugin instances.
func registryOf(ps ...framework.Plugin) framework.Registry {
	r := framework.Registry{}
	for _, p := range ps {
		r[p.Name()] = func(context.Context, any, framework.Handle) (framework.Plugin, error) { return p, nil }
	}
	return r
}

func refs(names ...string) []runtimeRef {
	out := make([]runtimeRef, len(names))
	for i, n := range names {
		out[i] = runtimeRef{Name: n}
	}
	return out
}
