// Package runtime builds a framework from a profile and runs its plugins at
// every extension point, with kube-scheduler's semantics.
package runtime

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

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
}

var _ framework.Handle = (*Framework)(nil)

// Option configures NewFramework.
type Option func(*Framework)

// WithSnapshotSharedLister sets the snapshot plugins read; the shard
// updates it before every cycle.
func WithSnapshotSharedLister(l framework.SharedLister) Option {
	return func(f *Framework) { f.snapshot = l }
}

// WithBinder sets what DefaultBinder binds through.
func WithBinder(b framework.Binder) Option { return func(f *Framework) { f.binder = b } }

// WithParallelism sets how many goroutines Filter and Score use within
// one cycle; default 1 (shards already use every core).
func WithParallelism(n int) Option {
	return func(f *Framework) { f.parallelizer = framework.NewParallelizer(n) }
}

// WithPodNominator lets filters account for pods nominated to nodes.
func WithPodNominator(n framework.PodNominator) Option {
	return func(f *Framework) {
		f.nominator = n
		f.counting, _ = n.(CountingPodNominator)
	}
}

// WithClock sets the clock of Permit timeouts; default the wall clock.
func WithClock(c framework.Clock) Option { return func(f *Framework) { f.clock = c } }

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
				return nil, fmt.Errorf("runtime: plugin %q is not in the registry", ref.Name)
			}
			p, err := factory(ctx, profile.PluginArgs[ref.Name], f)
			if err != nil {
				return nil, fmt.Errorf("runtime: initializing plugin %q: %w", ref.Name, err)
			}
			index[ref.Name] = len(instances)
			instances[ref.Name] = p
		}
	}
	if len(instances) > maxPlugins {
		return nil, fmt.Errorf("runtime: profile %q enables %d plugins, at most %d are supported", profile.SchedulerName, len(instances), maxPlugins)
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
			return nil, fmt.Errorf("runtime: score plugin %q has weight %d, want 1..%d", p.Name(), w, framework.MaxNodeScore)
		}
		f.scoreWeight = append(f.scoreWeight, w)
	}

	if err := f.registerEvents(ctx, instances); err != nil {
		return nil, err
	}
	return f, nil
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

// SnapshotSharedLister implements framework.Handle.
func (f *Framework) SnapshotSharedLister() framework.SharedLister { return f.snapshot }

// Binder implements framework.Handle.
func (f *Framework) Binder() framework.Binder { return f.binder }

// Parallelizer implements framework.Handle.
func (f *Framework) Parallelizer() framework.Parallelizer { return f.parallelizer }

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

// QueueSortFunc returns the QueueSort plugin's Less; without one, pods
// keep arrival order.
func (f *Framework) QueueSortFunc() framework.LessFunc {
	if f.queueSort == nil {
		return func(a, b *framework.QueuedPodInfo) bool { return a.Timestamp.Before(b.Timestamp) }
	}
	return f.queueSort.Less
}

// PreEnqueuePlugins returns the PreEnqueue plugins.
func (f *Framework) PreEnqueuePlugins() []framework.PreEnqueuePlugin { return f.preEnqueue }

// PreEnqueueCheck runs the PreEnqueue plugins; nil means the pod may enter
// the active queue, otherwise the status names the gating plugin.
func (f *Framework) PreEnqueueCheck(pod *framework.Pod) *framework.Status {
	for _, pl := range f.preEnqueue {
		st := pl.PreEnqueue(f.ctx, pod)
		if st.IsSuccess() {
			continue
		}
		if !st.IsRejected() {
			st = framework.AsStatus(fmt.Errorf("running PreEnqueue plugin %q: %w", pl.Name(), st.AsError()))
		}
		return st.WithPlugin(pl.Name())
	}
	return nil
}

// EventsToRegister returns, per plugin that can reject a pod, the events
// that may make it schedulable again (with optional hints). The queue
// requeues a rejected pod only on events of its UnschedulablePlugins.
func (f *Framework) EventsToRegister() map[string][]framework.ClusterEventWithHint { return f.events }

// RunPreFilterPlugins runs every PreFilter plugin. Skip skips the plugin's
// Filter (and PreFilterExtensions) this cycle. UnschedulableAndUnresolvable
// stops at once; Unschedulable is kept while the rest run, so preemption
// sees all their state; any other failure is an Error. The returned set
// names the plugins that narrowed the nodes.
func (f *Framework) RunPreFilterPlugins(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo) (_ *framework.PreFilterResult, _ *framework.Status, withNodes map[string]struct{}) {
	var skip uint64
	defer func() { state.SetSkipFilterPlugins(skip) }()
	var nodes []*framework.NodeInfo
	if f.snapshot != nil {
		nodes = f.snapshot.NodeInfos().List()
	}
	var result *framework.PreFilterResult
	var rejected *framework.Status
	for i, pl := range f.preFilter {
		r, s := pl.PreFilter(ctx, state, pod, nodes)
		if s.IsSkip() {
			skip |= f.preFilterBit[i]
			continue
		}
		if !s.IsSuccess() {
			switch s.Code() {
			case framework.UnschedulableAndUnresolvable:
				return nil, s.WithPlugin(pl.Name()), nil
			case framework.Unschedulable:
				rejected = s.WithPlugin(pl.Name())
				continue
			default:
				return nil, framework.AsStatus(fmt.Errorf("running PreFilter plugin %q: %w", pl.Name(), s.AsError())).WithPlugin(pl.Name()), nil
			}
		}
		if !r.AllNodes() {
			if withNodes == nil {
				withNodes = map[string]struct{}{}
			}
			withNodes[pl.Name()] = struct{}{}
		}
		result = result.Merge(r)
		if !result.AllNodes() && len(result.NodeNames) == 0 {
			// The framework treats nodes excluded by PreFilter as
			// UnschedulableAndUnresolvable.
			list := SortedNames(withNodes)
			msg := fmt.Sprintf("node(s) didn't satisfy plugin(s) %v simultaneously", list)
			if len(list) == 1 {
				msg = fmt.Sprintf("node(s) didn't satisfy plugin %v", list[0])
			}
			return result, framework.NewStatus(framework.UnschedulableAndUnresolvable, msg), withNodes
		}
	}
	return result, rejected, withNodes
}

// SortedNames returns a set's members in order.
func SortedNames(s map[string]struct{}) []string {
	out := make([]string, 0, len(s))
	for n := range s {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// RunPreFilterExtensionAddPod tells PreFilter plugins that podToAdd is
// (hypothetically) on nodeInfo.
func (f *Framework) RunPreFilterExtensionAddPod(ctx context.Context, state *framework.CycleState, podToSchedule, podToAdd *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	skip := state.SkipFilterPlugins()
	for i, pl := range f.preFilter {
		ext := pl.PreFilterExtensions()
		if ext == nil || skip&f.preFilterBit[i] != 0 {
			continue
		}
		if st := ext.AddPod(ctx, state, podToSchedule, podToAdd, nodeInfo); !st.IsSuccess() {
			return framework.AsStatus(fmt.Errorf("running AddPod on PreFilter plugin %q: %w", pl.Name(), st.AsError()))
		}
	}
	return nil
}

// RunPreFilterExtensionRemovePod tells PreFilter plugins that podToRemove
// is (hypothetically) gone from nodeInfo.
func (f *Framework) RunPreFilterExtensionRemovePod(ctx context.Context, state *framework.CycleState, podToSchedule, podToRemove *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	skip := state.SkipFilterPlugins()
	for i, pl := range f.preFilter {
		ext := pl.PreFilterExtensions()
		if ext == nil || skip&f.preFilterBit[i] != 0 {
			continue
		}
		if st := ext.RemovePod(ctx, state, podToSchedule, podToRemove, nodeInfo); !st.IsSuccess() {
			return framework.AsStatus(fmt.Errorf("running RemovePod on PreFilter plugin %q: %w", pl.Name(), st.AsError()))
		}
	}
	return nil
}

// RunFilterPlugins runs the Filter plugins on one node and stops at the
// first that does not succeed, like kube: the node's status names only
// that plugin. A status other than a rejection becomes an Error.
func (f *Framework) RunFilterPlugins(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	skip := state.SkipFilterPlugins()
	for i, pl := range f.filter {
		if skip&f.filterBit[i] != 0 {
			continue
		}
		st := pl.Filter(ctx, state, pod, nodeInfo)
		if st.IsSuccess() {
			continue
		}
		if !st.IsRejected() {
			st = framework.AsStatus(fmt.Errorf("running %q filter plugin: %w", pl.Name(), st.AsError()))
		}
		// A plugin may return one shared status, already named, for a
		// common rejection: setting it again would be a write to shared
		// memory from every core.
		if st.Plugin() != pl.Name() {
			st.SetPlugin(pl.Name())
		}
		return st
	}
	return nil
}

// RunPostFilterPlugins runs PostFilter plugins until one succeeds, errs or
// returns UnschedulableAndUnresolvable; otherwise it gathers every
// plugin's reasons into one Unschedulable status.
func (f *Framework) RunPostFilterPlugins(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, m framework.NodeToStatusReader) (*framework.PostFilterResult, *framework.Status) {
	var result *framework.PostFilterResult
	var reasons []string
	var rejector string
	for _, pl := range f.postFilter {
		r, s := pl.PostFilter(ctx, state, pod, m)
		switch {
		case s.IsSuccess():
			return r, s
		case s.Code() == framework.UnschedulableAndUnresolvable:
			return r, s.WithPlugin(pl.Name())
		case !s.IsRejected():
			return nil, framework.AsStatus(s.AsError()).WithPlugin(pl.Name())
		case r != nil && r.Mode() != framework.ModeNoop:
			result = r
		}
		reasons = append(reasons, s.Reasons()...)
		if rejector == "" {
			rejector = pl.Name()
		}
	}
	return result, framework.NewStatus(framework.Unschedulable, reasons...).WithPlugin(rejector)
}

// RunPreScorePlugins runs every PreScore plugin; Skip skips the plugin's
// Score this cycle, any other failure is an Error.
func (f *Framework) RunPreScorePlugins(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, nodes []*framework.NodeInfo) *framework.Status {
	var skip uint64
	defer func() { state.SetSkipScorePlugins(skip) }()
	for i, pl := range f.preScore {
		st := pl.PreScore(ctx, state, pod, nodes)
		if st.IsSkip() {
			skip |= f.preScoreBit[i]
			continue
		}
		if !st.IsSuccess() {
			return framework.AsStatus(fmt.Errorf("running PreScore plugin %q: %w", pl.Name(), st.AsError()))
		}
	}
	return nil
}

// RunScorePlugins scores every node with every Score plugin not skipped,
// normalizes each plugin's scores, checks they are in [0, 100] and sums
// them with the plugins' weights into out (reused; see NodeScores).
func (f *Framework) RunScorePlugins(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, nodes []*framework.NodeInfo, out *framework.NodeScores) *framework.Status {
	skip := state.SkipScorePlugins()
	active := make([]int, 0, len(f.score))
	for i := range f.score {
		if skip&f.scoreBit[i] == 0 {
			active = append(active, i)
		}
	}
	out.Reset(len(active), nodes)
	for _, i := range active {
		out.Plugins = append(out.Plugins, f.score[i].Name())
		out.Weights = append(out.Weights, f.scoreWeight[i])
	}
	if len(active) == 0 || len(nodes) == 0 {
		return nil
	}

	var errOnce firstError
	f.parallelizer.Until(ctx, len(nodes), func(n int) {
		if errOnce.failed() {
			return
		}
		ni := nodes[n]
		name := ni.Node().Name
		for p, i := range active {
			pl := f.score[i]
			s, st := pl.Score(ctx, state, pod, ni)
			if !st.IsSuccess() {
				errOnce.set(fmt.Errorf("plugin %q failed with: %w", pl.Name(), st.AsError()))
				return
			}
			out.PluginScores(p)[n] = framework.NodeScore{Name: name, Score: s}
		}
	})
	if err := errOnce.get(); err != nil {
		return framework.AsStatus(fmt.Errorf("running Score plugins: %w", err))
	}

	for p, i := range active {
		ext := f.score[i].ScoreExtensions()
		if ext == nil {
			continue
		}
		if st := ext.NormalizeScore(ctx, state, pod, out.PluginScores(p)); !st.IsSuccess() {
			return framework.AsStatus(fmt.Errorf("running Normalize on Score plugins: %w",
				fmt.Errorf("plugin %q failed with: %w", f.score[i].Name(), st.AsError())))
		}
	}

	for p := range active {
		list := out.PluginScores(p)
		w := out.Weights[p]
		for n := range list {
			s := list[n].Score
			if s > framework.MaxNodeScore || s < framework.MinNodeScore {
				return framework.AsStatus(fmt.Errorf("applying score defaultWeights on Score plugins: plugin %q returns an invalid score %v, it should in the range of [%v, %v] after normalizing",
					out.Plugins[p], s, framework.MinNodeScore, framework.MaxNodeScore))
			}
			out.Totals[n] += s * w
		}
	}
	return nil
}

// firstError keeps the first error of parallel work; failed is a cheap
// check for the per-node loop.
type firstError struct {
	bad atomic.Bool
	mu  sync.Mutex
	err error
}

func (e *firstError) set(err error) {
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
	e.bad.Store(true)
}

func (e *firstError) failed() bool { return e.bad.Load() }

func (e *firstError) get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// RunReservePluginsReserve runs Reserve plugins and stops at the first
// failure; the caller must then run RunReservePluginsUnreserve.
func (f *Framework) RunReservePluginsReserve(ctx context.Context, state *framework.CycleState, pod *framework.Pod, nodeName string) *framework.Status {
	for _, pl := range f.reserve {
		st := pl.Reserve(ctx, state, pod, nodeName)
		if st.IsSuccess() {
			continue
		}
		if st.IsRejected() {
			return st.WithPlugin(pl.Name())
		}
		return framework.AsStatus(fmt.Errorf("running Reserve plugin %q: %w", pl.Name(), st.AsError()))
	}
	return nil
}

// RunReservePluginsUnreserve runs every Unreserve in reverse order.
func (f *Framework) RunReservePluginsUnreserve(ctx context.Context, state *framework.CycleState, pod *framework.Pod, nodeName string) {
	for i := len(f.reserve) - 1; i >= 0; i-- {
		f.reserve[i].Unreserve(ctx, state, pod, nodeName)
	}
}

// RunPermitPlugins runs Permit plugins. A rejection or error stops them.
// If any asked to wait (and none rejected), the pod becomes a waiting pod
// with each plugin's timeout (capped at 15 minutes) and Wait is returned;
// WaitOnPermit then blocks for the outcome.
func (f *Framework) RunPermitPlugins(ctx context.Context, state *framework.CycleState, pod *framework.Pod, nodeName string) *framework.Status {
	var waits map[string]time.Duration
	for _, pl := range f.permit {
		st, timeout := pl.Permit(ctx, state, pod, nodeName)
		if st.IsSuccess() {
			continue
		}
		if st.IsRejected() {
			return st.WithPlugin(pl.Name())
		}
		if !st.IsWait() {
			return framework.AsStatus(fmt.Errorf("running Permit plugin %q: %w", pl.Name(), st.AsError())).WithPlugin(pl.Name())
		}
		if waits == nil {
			waits = map[string]time.Duration{}
		}
		waits[pl.Name()] = min(timeout, maxPermitTimeout)
	}
	if waits == nil {
		return nil
	}
	f.waitingPods.add(newWaitingPod(pod, waits, f.clock))
	return framework.NewStatus(framework.Wait, fmt.Sprintf("one or more plugins asked to wait and no plugin rejected pod %q", pod.Name))
}

// WillWaitOnPermit reports whether the pod is held at Permit.
func (f *Framework) WillWaitOnPermit(pod *framework.Pod) bool {
	return f.waitingPods.get(framework.WaitingPodKey(pod)) != nil
}

// WaitOnPermit blocks until a waiting pod is allowed (nil), rejected or
// timed out (Unschedulable, naming the plugin), or ctx ends (Error; the
// pod is rejected so later Allow calls are ignored). It returns nil at
// once for a pod that is not waiting.
func (f *Framework) WaitOnPermit(ctx context.Context, pod *framework.Pod) *framework.Status {
	key := framework.WaitingPodKey(pod)
	wp := f.waitingPods.get(key)
	if wp == nil {
		return nil
	}
	defer f.waitingPods.remove(key)
	var s *framework.Status
	select {
	case s = <-wp.s:
	case <-ctx.Done():
		wp.Reject("", "waiting on permit cancelled")
		return framework.AsStatus(fmt.Errorf("waiting on permit for pod: %w", context.Cause(ctx)))
	}
	if s.IsSuccess() || s.IsRejected() {
		return s
	}
	return framework.AsStatus(fmt.Errorf("waiting on permit for pod: %w", s.AsError())).WithPlugin(s.Plugin())
}

// IterateOverWaitingPods implements framework.Handle.
func (f *Framework) IterateOverWaitingPods(fn func(framework.WaitingPod)) { f.waitingPods.iterate(fn) }

// GetWaitingPod implements framework.Handle.
func (f *Framework) GetWaitingPod(key string) framework.WaitingPod {
	if wp := f.waitingPods.get(key); wp != nil {
		return wp
	}
	return nil
}

// RejectWaitingPod implements framework.Handle.
func (f *Framework) RejectWaitingPod(key string) bool {
	if wp := f.waitingPods.get(key); wp != nil {
		wp.Reject("", "removed")
		return true
	}
	return false
}

// RunPreBindPlugins runs PreBind plugins and stops at the first failure.
func (f *Framework) RunPreBindPlugins(ctx context.Context, state *framework.CycleState, pod *framework.Pod, nodeName string) *framework.Status {
	for _, pl := range f.preBind {
		st := pl.PreBind(ctx, state, pod, nodeName)
		if st.IsSuccess() {
			continue
		}
		if st.IsRejected() {
			return st.WithPlugin(pl.Name())
		}
		return framework.AsStatus(fmt.Errorf("running PreBind plugin %q: %w", pl.Name(), st.AsError()))
	}
	return nil
}

// RunBindPlugins runs Bind plugins until one does not Skip; with none (or
// all skipping) it returns Skip.
func (f *Framework) RunBindPlugins(ctx context.Context, state *framework.CycleState, pod *framework.Pod, nodeName string) *framework.Status {
	st := framework.NewStatus(framework.Skip)
	for _, pl := range f.bind {
		st = pl.Bind(ctx, state, pod, nodeName)
		if st.IsSkip() {
			continue
		}
		if st.IsSuccess() {
			return nil
		}
		if st.IsRejected() {
			return st.WithPlugin(pl.Name())
		}
		return framework.AsStatus(fmt.Errorf("running Bind plugin %q: %w", pl.Name(), st.AsError()))
	}
	return st
}

// RunPostBindPlugins tells PostBind plugins about a binding.
func (f *Framework) RunPostBindPlugins(ctx context.Context, state *framework.CycleState, pod *framework.Pod, nodeName string) {
	for _, pl := range f.postBind {
		pl.PostBind(ctx, state, pod, nodeName)
	}
}
