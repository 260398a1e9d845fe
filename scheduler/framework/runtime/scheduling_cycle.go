package runtime

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/berth-io/berth/scheduler/framework"
)

// QueueSortFunc returns the QueueSort plugin's Less; without one, pods
// keep arrival order.
func (f *Framework) QueueSortFunc() framework.LessFunc {
	if f.queueSort == nil {
		return func(a, b *framework.QueuedPodInfo) bool { return a.Timestamp.Before(b.Timestamp) }
	}
	return f.queueSort.Less
}

// QueueSortPlugin returns the QueueSort plugin, or nil.
func (f *Framework) QueueSortPlugin() framework.QueueSortPlugin { return f.queueSort }

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
	return f.RunScorePluginsWithMemo(ctx, state, pod, nodes, out, nil)
}

// RawScoreMemo holds Score plugins' raw scores (before NormalizeScore) per
// node, for pods that share them (see framework.SignPlugin). Its storage
// for a node has one slot per Score plugin this cycle runs, in order.
type RawScoreMemo interface {
	// RawScores returns the storage of the i-th node and whether it holds
	// that node's scores already.
	RawScores(i int) (raw []int64, known bool)
	// Known marks the i-th node's storage as filled.
	Known(i int)
}

// RunScorePluginsWithMemo is RunScorePlugins taking the raw scores of the
// nodes memo knows from it, and leaving the others in it once computed;
// normalizing and weighting run as always. A nil memo computes every
// score.
func (f *Framework) RunScorePluginsWithMemo(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, nodes []*framework.NodeInfo, out *framework.NodeScores,
	memo RawScoreMemo) *framework.Status {
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
	if memo != nil {
		f.scoreWithMemo(ctx, state, pod, nodes, out, active, memo, &errOnce)
	} else {
		f.parallelizer.Until(ctx, len(nodes), func(n int) {
			if !errOnce.failed() {
				f.scoreNode(ctx, state, pod, nodes[n], n, out, active, &errOnce)
			}
		})
	}
	if err := errOnce.get(); err != nil {
		return framework.AsStatus(fmt.Errorf("running Score plugins: %w", err))
	}
	return f.normalizeAndWeigh(ctx, state, pod, out, active)
}

// scoreNode scores the n-th node with every active plugin into out.
func (f *Framework) scoreNode(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, ni *framework.NodeInfo, n int, out *framework.NodeScores,
	active []int, errOnce *firstError) {
	name := ni.Name()
	for p, i := range active {
		pl := f.score[i]
		s, st := pl.Score(ctx, state, pod, ni)
		if !st.IsSuccess() {
			errOnce.set(fmt.Errorf("plugin %q failed with: %w", pl.Name(), st.AsError()))
			return
		}
		out.PluginScores(p)[n] = framework.NodeScore{Name: name, Score: s}
	}
}

// scoreWithMemo takes the scores memo knows in one pass on this goroutine
// (a copy each: workers would cost more), then scores the others, in
// parallel if there are many (a new signature), and leaves them in memo.
func (f *Framework) scoreWithMemo(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, nodes []*framework.NodeInfo, out *framework.NodeScores,
	active []int, memo RawScoreMemo, errOnce *firstError) {
	var missed []int
	var listBuf [8]framework.NodeScoreList
	lists := listBuf[:0]
	for p := range active {
		lists = append(lists, out.PluginScores(p))
	}
	for n, ni := range nodes {
		raw, known := memo.RawScores(n)
		if !known {
			missed = append(missed, n)
			continue
		}
		name := ni.Name()
		for p, list := range lists {
			list[n] = framework.NodeScore{Name: name, Score: raw[p]}
		}
	}
	score := func(k int) {
		if errOnce.failed() {
			return
		}
		n := missed[k]
		f.scoreNode(ctx, state, pod, nodes[n], n, out, active, errOnce)
		if errOnce.failed() {
			return
		}
		raw, _ := memo.RawScores(n)
		for p := range active {
			raw[p] = out.PluginScores(p)[n].Score
		}
		memo.Known(n)
	}
	if len(missed) <= minParallelMisses {
		for k := range missed {
			score(k)
		}
		return
	}
	f.parallelizer.Until(ctx, len(missed), score)
}

// minParallelMisses is how many unknown nodes scoreWithMemo scores on its
// own goroutine before it is worth starting workers.
const minParallelMisses = 16

// normalizeAndWeigh runs NormalizeScore, checks the range and sums the
// weighted scores into out.Totals.
func (f *Framework) normalizeAndWeigh(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, out *framework.NodeScores, active []int) *framework.Status {
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
