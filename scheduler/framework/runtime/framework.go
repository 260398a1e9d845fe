// Package runtime builds a framework from a profile and runs its plugins at
// every extension point, with kube-scheduler's semantics.
package runtime

import (
	"context"
	"fmt"
	"sync"

	"github.com/berth-io/berth/scheduler/framework"
)

// maxPlugins bounds the distinct plugins of one profile: skip sets are
// 64-bit masks, so checking them per node costs nothing.
const maxPlugins = 64

// Framework runs one profile's plugins. Build one per (profile, shard):
// each shard owns its snapshot, and a Framework's scheduling-cycle methods
// are meant for one cycle at a time (binding-cycle methods may run
// concurrently with it and with each other).
type Framework struct {
	ctx         context.Context
	profileName string
	percentage  *int32

	snapshot     framework.SharedLister
	binder       framework.Binder
	parallelizer framework.Parallelizer
	nominator    framework.PodNominator
	counting     CountingPodNominator // nominator, if it is one
	clock        framework.Clock
	waitingPods  *waitingPods

	// The scheduler's services plugins reach through the Handle; see
	// framework.Handle. Set by options, never changed after NewFramework.
	evictor                framework.Evictor
	budgets                framework.BudgetLister
	podGroups              framework.PodGroupLister
	gangs                  framework.GangCommitter
	preemptionParallelizer *framework.Parallelizer // nil: parallelizer

	queueSort  framework.QueueSortPlugin
	preEnqueue []framework.PreEnqueuePlugin
	preFilter  []framework.PreFilterPlugin
	filter     []framework.FilterPlugin
	postFilter []framework.PostFilterPlugin
	preScore   []framework.PreScorePlugin
	score      []framework.ScorePlugin
	reserve    []framework.ReservePlugin
	permit     []framework.PermitPlugin
	preBind    []framework.PreBindPlugin
	bind       []framework.BindPlugin
	postBind   []framework.PostBindPlugin

	// bit[i] is the skip-mask bit of the plugin at position i of the list
	// with the same prefix: one bit per plugin name, so a PreFilter Skip
	// also skips the Filter of that plugin.
	preFilterBit, filterBit, preScoreBit, scoreBit []uint64
	scoreWeight                                    []int64

	// freedFitters are the Filter plugins that can judge from totals, with
	// their skip bits.
	freedFitters   []framework.FreedFitter
	freedFitterBit []uint64

	events map[string][]framework.ClusterEventWithHint

	// signers are the plugins whose parts make a pod's signature, guards
	// those of them that can veto reuse per cycle; allSign is false if a
	// plugin that would need to sign cannot. See signature.go.
	signers []framework.SignPlugin
	guards  []framework.SignatureGuard
	allSign bool
	// stampers are the signers whose results a memo must check per node
	// (framework.SignatureStamper).
	stampers []stamper
	// sigMu guards sigBuf, the scratch space of computeSignature: the
	// plugins' append calls make a stack buffer escape, and a signature
	// is computed for every pod the loop pops.
	sigMu  sync.Mutex
	sigBuf []byte
}

// NewFramework instantiates the profile's plugins from the registry and
// arranges them per extension point. ctx is handed to plugin factories
// and to EventsToRegister.
func NewFramework(ctx context.Context, registry framework.Registry, profile *Profile, opts ...Option) (*Framework, error) {
	if profile == nil {
		profile = &Profile{}
	}
	f := &Framework{
		ctx:          ctx,
		profileName:  profile.SchedulerName,
		percentage:   profile.PercentageOfNodesToScore,
		parallelizer: framework.NewParallelizer(1),
		clock:        framework.RealClock{},
		waitingPods:  newWaitingPods(),
		events:       map[string][]framework.ClusterEventWithHint{},
	}
	for _, o := range opts {
		o(f)
	}

	ps := &profile.Plugins
	instances, index, err := f.instantiate(ctx, registry, profile)
	if err != nil {
		return nil, err
	}
	bitOf := func(name string) uint64 { return 1 << uint(index[name]) }

	b := &builder{instances: instances, multi: ps.MultiPoint}
	var queueSort []framework.QueueSortPlugin
	collect(b, "QueueSort", ps.QueueSort, &queueSort)
	collect(b, "PreEnqueue", ps.PreEnqueue, &f.preEnqueue)
	collect(b, "PreFilter", ps.PreFilter, &f.preFilter)
	collect(b, "Filter", ps.Filter, &f.filter)
	collect(b, "PostFilter", ps.PostFilter, &f.postFilter)
	collect(b, "PreScore", ps.PreScore, &f.preScore)
	scoreRefs := collect(b, "Score", ps.Score, &f.score)
	collect(b, "Reserve", ps.Reserve, &f.reserve)
	collect(b, "Permit", ps.Permit, &f.permit)
	collect(b, "PreBind", ps.PreBind, &f.preBind)
	collect(b, "Bind", ps.Bind, &f.bind)
	collect(b, "PostBind", ps.PostBind, &f.postBind)
	if b.err != nil {
		return nil, b.err
	}
	switch len(queueSort) {
	case 0:
	case 1:
		f.queueSort = queueSort[0]
	default:
		return nil, fmt.Errorf("runtime: profile %q enables %d QueueSort plugins, at most one is allowed", profile.SchedulerName, len(queueSort))
	}

	if err := f.assignBits(bitOf, scoreRefs); err != nil {
		return nil, err
	}
	if err := f.registerEvents(ctx, instances); err != nil {
		return nil, err
	}
	f.collectSigners()
	return f, nil
}

// instantiate builds each plugin the profile enables, once however many
// extension points name it, and numbers them for the skip masks.
func (f *Framework) instantiate(ctx context.Context, registry framework.Registry, profile *Profile) (map[string]framework.Plugin, map[string]int, error) {
	ps := &profile.Plugins
	instances := map[string]framework.Plugin{}
	index := map[string]int{}
	for _, set := range []*PluginSet{&ps.MultiPoint, &ps.QueueSort, &ps.PreEnqueue, &ps.PreFilter, &ps.Filter,
		&ps.PostFilter, &ps.PreScore, &ps.Score, &ps.Reserve, &ps.Permit, &ps.PreBind, &ps.Bind, &ps.PostBind} {
		for _, ref := range set.Enabled {
			if _, ok := instances[ref.Name]; ok {
				continue
			}
			factory, ok := registry[ref.Name]
			if !ok {
				return nil, nil, fmt.Errorf("runtime: plugin %q is not in the registry", ref.Name)
			}
			p, err := factory(ctx, profile.PluginArgs[ref.Name], f)
			if err != nil {
				return nil, nil, fmt.Errorf("runtime: initializing plugin %q: %w", ref.Name, err)
			}
			index[ref.Name] = len(instances)
			instances[ref.Name] = p
		}
	}
	if len(instances) > maxPlugins {
		return nil, nil, fmt.Errorf("runtime: profile %q enables %d plugins, at most %d are supported", profile.SchedulerName, len(instances), maxPlugins)
	}
	return instances, index, nil
}

// assignBits gives every plugin at the per-node extension points its skip
// bit, and every Score plugin its weight.
func (f *Framework) assignBits(bitOf func(string) uint64, scoreRefs []PluginRef) error {
	for _, p := range f.preFilter {
		f.preFilterBit = append(f.preFilterBit, bitOf(p.Name()))
	}
	for _, p := range f.filter {
		f.filterBit = append(f.filterBit, bitOf(p.Name()))
		if ff, ok := p.(framework.FreedFitter); ok {
			f.freedFitters = append(f.freedFitters, ff)
			f.freedFitterBit = append(f.freedFitterBit, bitOf(p.Name()))
		}
	}
	for _, p := range f.preScore {
		f.preScoreBit = append(f.preScoreBit, bitOf(p.Name()))
	}
	for i, p := range f.score {
		f.scoreBit = append(f.scoreBit, bitOf(p.Name()))
		w := int64(scoreRefs[i].Weight)
		if w == 0 {
			w = 1
		}
		if w < 0 || w > framework.MaxNodeScore {
			return fmt.Errorf("runtime: score plugin %q has weight %d, want 1..%d", p.Name(), w, framework.MaxNodeScore)
		}
		f.scoreWeight = append(f.scoreWeight, w)
	}

	return nil
}

// builder expands MultiPoint into each extension point.
type builder struct {
	instances map[string]framework.Plugin
	multi     PluginSet
	err       error
}

// collect fills *out with the plugins enabled at one extension point (of
// interface type T) and returns their refs, for weights.
func collect[T framework.Plugin](b *builder, point string, set PluginSet, out *[]T) []PluginRef {
	if b.err != nil {
		return nil
	}
	explicit := map[string]bool{}
	for _, ref := range set.Enabled {
		if _, ok := b.instances[ref.Name].(T); !ok {
			b.err = fmt.Errorf("runtime: plugin %q does not extend %s", ref.Name, point)
			return nil
		}
		if explicit[ref.Name] {
			b.err = fmt.Errorf("runtime: plugin %q enabled twice at %s", ref.Name, point)
			return nil
		}
		explicit[ref.Name] = true
	}
	disabled := map[string]bool{}
	for _, n := range set.Disabled {
		disabled[n] = true
	}
	var overridden, fromMulti []PluginRef
	if !disabled["*"] {
		seen := map[string]bool{}
		for _, ref := range b.multi.Enabled {
			if _, ok := b.instances[ref.Name].(T); !ok || disabled[ref.Name] {
				continue
			}
			if explicit[ref.Name] {
				overridden = append(overridden, ref)
				continue
			}
			if seen[ref.Name] {
				b.err = fmt.Errorf("runtime: plugin %q enabled twice in MultiPoint", ref.Name)
				return nil
			}
			seen[ref.Name] = true
			fromMulti = append(fromMulti, ref)
		}
	}
	isOverride := map[string]bool{}
	for _, ref := range overridden {
		isOverride[ref.Name] = true
	}
	var refs []PluginRef
	for _, ref := range set.Enabled {
		if isOverride[ref.Name] {
			refs = append(refs, ref)
		}
	}
	refs = append(refs, fromMulti...)
	for _, ref := range set.Enabled {
		if !isOverride[ref.Name] {
			refs = append(refs, ref)
		}
	}
	for _, ref := range refs {
		*out = append(*out, b.instances[ref.Name].(T))
	}
	return refs
}

// registerEvents asks every plugin that can reject a pod which events may
// undo that; plugins that do not say get every event.
func (f *Framework) registerEvents(ctx context.Context, instances map[string]framework.Plugin) error {
	for name, p := range instances {
		switch p.(type) {
		case framework.PreEnqueuePlugin, framework.PreFilterPlugin, framework.FilterPlugin,
			framework.ReservePlugin, framework.PermitPlugin:
		default:
			continue
		}
		ext, ok := p.(framework.EnqueueExtensions)
		if !ok {
			f.events[name] = []framework.ClusterEventWithHint{{Event: framework.ClusterEvent{
				Resource: framework.EventResourceWildcard, ActionType: framework.ActionAll, Label: "WildCardEvent"}}}
			continue
		}
		evs, err := ext.EventsToRegister(ctx)
		if err != nil {
			return fmt.Errorf("runtime: events of plugin %q: %w", name, err)
		}
		f.events[name] = evs
	}
	return nil
}

// ProfileName returns the profile's scheduler name.
func (f *Framework) ProfileName() string { return f.profileName }

// PercentageOfNodesToScore returns the profile's override, or nil.
func (f *Framework) PercentageOfNodesToScore() *int32 { return f.percentage }

// HasFilterPlugins reports whether any Filter plugin is enabled.
func (f *Framework) HasFilterPlugins() bool { return len(f.filter) > 0 }

// HasPostFilterPlugins reports whether any PostFilter plugin is enabled.
func (f *Framework) HasPostFilterPlugins() bool { return len(f.postFilter) > 0 }

// HasScorePlugins reports whether any Score plugin is enabled.
func (f *Framework) HasScorePlugins() bool { return len(f.score) > 0 }

// PostFilterPlugins returns the PostFilter plugins, in run order, for
// callers that dry-run them (Explain).
func (f *Framework) PostFilterPlugins() []framework.PostFilterPlugin { return f.postFilter }

// ListPlugins returns the plugin names per extension point, in run order.
func (f *Framework) ListPlugins() map[string][]string {
	out := map[string][]string{}
	add := func(point string, ps []framework.Plugin) {
		for _, p := range ps {
			out[point] = append(out[point], p.Name())
		}
	}
	if f.queueSort != nil {
		add("QueueSort", []framework.Plugin{f.queueSort})
	}
	add("PreEnqueue", asPlugins(f.preEnqueue))
	add("PreFilter", asPlugins(f.preFilter))
	add("Filter", asPlugins(f.filter))
	add("PostFilter", asPlugins(f.postFilter))
	add("PreScore", asPlugins(f.preScore))
	add("Score", asPlugins(f.score))
	add("Reserve", asPlugins(f.reserve))
	add("Permit", asPlugins(f.permit))
	add("PreBind", asPlugins(f.preBind))
	add("Bind", asPlugins(f.bind))
	add("PostBind", asPlugins(f.postBind))
	return out
}

func asPlugins[T framework.Plugin](ps []T) []framework.Plugin {
	out := make([]framework.Plugin, len(ps))
	for i, p := range ps {
		out[i] = p
	}
	return out
}
