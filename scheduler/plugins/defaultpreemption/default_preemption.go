// Package defaultpreemption is kube-scheduler's DefaultPreemption
// PostFilter plugin: when no node fits a pod, it looks for a node where
// evicting lower-priority pods makes room, nominates the pod to it and
// hands the victims to an Evictor.
//
// What it expects of the rest of the scheduler:
//   - The framework runs filters with the pods nominated to each node
//     (runtime.WithPodNominator backed by the queue), so the room freed for
//     a nominated preemptor is not taken by others, and a preemptor's own
//     next cycle sees the other nominated pods.
//   - Whoever applies the PostFilterResult records the nomination, and
//     clears the nomination of lower-priority pods nominated to the same
//     node (kube does this after evicting; framework.LowerPriorityNominatedPods lists
//     them), so they look elsewhere at once. Berth's scheduler does both.
//   - The Handle's Evictor makes the victims go; until they are gone they
//     still occupy the node, and an Evictor that is also a
//     framework.EvictionTracker keeps the preemptor from preempting again
//     meanwhile.
package defaultpreemption

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/names"
)

// Name is the plugin's name.
const Name = names.DefaultPreemption

// Messages, kube's wording.
const (
	msgPreemptNever         = "not eligible due to preemptionPolicy=Never."
	msgTerminatingOnNode    = "not eligible due to a terminating pod on the nominated node."
	msgNoVictims            = "No preemption victims found for incoming pod"
	msgPreemptionNotHelpful = "Preemption is not helpful for scheduling"
	msgPrefix               = "preemption: "
)

var errNoNodes = errors.New("no nodes available")

// Framework is what preemption needs of the framework running it beyond
// the Handle: the hypothetical filter runs kube gives preemption through
// its handle. runtime.Framework provides it.
type Framework interface {
	framework.Handle
	RunPreFilterExtensionAddPod(ctx context.Context, state *framework.CycleState, podToSchedule, podToAdd *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status
	RunPreFilterExtensionRemovePod(ctx context.Context, state *framework.CycleState, podToSchedule, podToRemove *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status
	RunFilterPluginsWithNominatedPods(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status
	// PreemptionParallelizer runs the dry run when Args.Parallelism is 0.
	PreemptionParallelizer() framework.Parallelizer
	// HasActivePreFilterExtensions reports whether the extensions above
	// change state this cycle; if not, the dry run shares it.
	HasActivePreFilterExtensions(state *framework.CycleState) bool
	// CouldFitWithFreed is false when the filters would reject the pod on
	// the node even with pods freeing freed gone: the dry run skips it.
	CouldFitWithFreed(state *framework.CycleState, pod *framework.PodInfo, nodeInfo *framework.NodeInfo, freed framework.Freed) bool
}

// DefaultPreemption is the PostFilter plugin. One instance serves one
// framework; PostFilter and Preempt may be called concurrently.
type DefaultPreemption struct {
	fh            Framework
	minPercentage int32
	minAbsolute   int32
	budgets       framework.BudgetLister
	evictor       framework.Evictor
	terminating   func(*framework.Pod) bool
	clock         framework.Clock
	parallelism   int

	mu  sync.Mutex // guards rng
	rng *rand.Rand
}

var _ framework.PostFilterPlugin = (*DefaultPreemption)(nil)

// New builds the plugin from *Args, Args or nil (defaults). The handle
// must also implement Framework.
func New(_ context.Context, args any, h framework.Handle) (framework.Plugin, error) {
	a, err := framework.DecodeArgs[Args](Name, args)
	if err != nil {
		return nil, err
	}
	d := defaulted(a)
	if err := validate(&d); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	fh, ok := h.(Framework)
	if !ok {
		return nil, fmt.Errorf("%s: handle %T cannot run filters for preemption", Name, h)
	}
	seed := d.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	pl := &DefaultPreemption{
		fh:            fh,
		minPercentage: *d.MinCandidateNodesPercentage,
		minAbsolute:   *d.MinCandidateNodesAbsolute,
		budgets:       h.DisruptionBudgets(),
		evictor:       h.Evictor(),
		clock:         h.Clock(),
		parallelism:   d.Parallelism,
		rng:           rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
	if pl.clock == nil {
		pl.clock = framework.RealClock{}
	}
	if t, ok := pl.evictor.(framework.EvictionTracker); ok {
		pl.terminating = t.Terminating
	}
	return pl, nil
}

// Name implements framework.Plugin.
func (*DefaultPreemption) Name() string { return Name }

// PostFilter implements framework.PostFilterPlugin with kube's results:
//   - (nominate node, Success): victims were handed to the Evictor;
//   - (nominate "", Unschedulable): no node can be made to fit, so any
//     earlier nomination is cleared;
//   - (nil, Unschedulable): the pod may not preempt now; its nomination
//     stays;
//   - (nil, Error): something failed; retried with backoff.
func (pl *DefaultPreemption) PostFilter(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, m framework.NodeToStatusReader) (*framework.PostFilterResult, *framework.Status) {
	res, _, st := pl.preempt(ctx, state, pod, m, false)
	return res, st
}

// Preempt runs preemption as PostFilter does and returns the chosen node
// and its victims (most important first). With dryRun it only decides:
// nothing is evicted and no waiting pod is rejected, so Explain can show
// what preemption would do. The status is PostFilter's; node is "" unless
// it is Success.
func (pl *DefaultPreemption) Preempt(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, m framework.NodeToStatusReader, dryRun bool) (node string, victims []*framework.Pod, _ *framework.Status) {
	_, c, st := pl.preempt(ctx, state, pod, m, dryRun)
	if c == nil {
		return "", nil, st
	}
	return c.Name, c.Victims, st
}

func (pl *DefaultPreemption) preempt(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, m framework.NodeToStatusReader, dryRun bool) (*framework.PostFilterResult, *Candidate, *framework.Status) {
	res, c, st := pl.evaluate(ctx, state, pod, m, dryRun)
	switch {
	case st.IsSuccess():
	case st.IsError():
		st = framework.AsStatus(fmt.Errorf(msgPrefix+"%w", st.AsError()))
	case st.Message() != "":
		st = framework.NewStatus(st.Code(), msgPrefix+st.Message())
	}
	return res, c, st
}

// evaluate is kube's Evaluator.Preempt without the extenders.
func (pl *DefaultPreemption) evaluate(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, m framework.NodeToStatusReader, dryRun bool) (*framework.PostFilterResult, *Candidate, *framework.Status) {
	var nominatedStatus *framework.Status
	if n := pod.Pod.NominatedNodeName(); n != "" {
		nominatedStatus = m.Get(n) // a lookup by name may index every node
	}
	if ok, msg := pl.PodEligibleToPreemptOthers(pod.Pod, nominatedStatus); !ok {
		return nil, nil, framework.NewStatus(framework.Unschedulable, msg)
	}
	lister := pl.fh.SnapshotSharedLister()
	if lister == nil {
		return nil, nil, framework.AsStatus(errNoNodes)
	}
	nodes := lister.NodeInfos()
	now := pl.clock.Now()
	candidates, failed, err := pl.findCandidates(ctx, state, pod, m, nodes, now)
	defer failed.release()
	if err != nil && len(candidates) == 0 {
		return nil, nil, framework.AsStatus(err)
	}
	if len(candidates) == 0 {
		statuses := failed.nodeToStatus()
		statuses.SetAbsentNodesStatus(framework.NewStatus(framework.UnschedulableAndUnresolvable, msgPreemptionNotHelpful))
		fitErr := &framework.FitError{Pod: pod.Pod, NumAllNodes: len(nodes.List()), Diagnosis: framework.Diagnosis{NodeToStatus: statuses}}
		return nominate(""), nil, framework.NewStatus(framework.Unschedulable, fitErr.Error())
	}
	best := SelectCandidate(candidates, now)
	if !dryRun {
		if st := pl.prepareCandidate(ctx, best, pod.Pod); !st.IsSuccess() {
			return nil, nil, st
		}
	}
	return nominate(best.Name), best, nil
}

func nominate(node string) *framework.PostFilterResult {
	return &framework.PostFilterResult{NominatingInfo: &framework.NominatingInfo{
		NominatedNodeName: node, NominatingMode: framework.ModeOverride}}
}

// PodEligibleToPreemptOthers reports whether pod may preempt at all, and
// why not. A pod with PreemptionPolicy Never never does. A pod already
// nominated to a node where lower-priority pods are still terminating
// waits for them instead of preempting again, unless the filters now
// rule that node out entirely; unless the Evictor is an EvictionTracker
// that check is skipped, as Berth pods have no terminating state.
func (pl *DefaultPreemption) PodEligibleToPreemptOthers(pod *framework.Pod, nominatedNodeStatus *framework.Status) (bool, string) {
	if pod.PreemptionPolicy == framework.PreemptNever {
		return false, msgPreemptNever
	}
	nominated := pod.NominatedNodeName()
	if nominated == "" || pl.terminating == nil || nominatedNodeStatus.Code() == framework.UnschedulableAndUnresolvable {
		return true, ""
	}
	lister := pl.fh.SnapshotSharedLister()
	if lister == nil {
		return true, ""
	}
	ni, err := lister.NodeInfos().Get(nominated)
	if err != nil || ni == nil {
		return true, ""
	}
	for _, pi := range ni.Pods {
		if pi.Pod.Priority < pod.Priority && pl.terminating(pi.Pod) {
			return false, msgTerminatingOnNode
		}
	}
	return true, ""
}

// prepareCandidate carries out the decision: waiting pods among the
// victims are rejected at Permit (they hold only a reservation), the rest
// go to the Evictor, except those already on their way out.
func (pl *DefaultPreemption) prepareCandidate(ctx context.Context, c *Candidate, preemptor *framework.Pod) *framework.Status {
	toEvict := make([]*framework.Pod, 0, len(c.Victims))
	for _, v := range c.Victims {
		if pl.terminating != nil && pl.terminating(v) {
			continue
		}
		if wp := pl.fh.GetWaitingPod(framework.WaitingPodKey(v)); wp != nil {
			wp.Reject(Name, "preempted")
			continue
		}
		toEvict = append(toEvict, v)
	}
	if pl.evictor == nil || len(toEvict) == 0 {
		return nil
	}
	if err := pl.evictor.Evict(ctx, preemptor, c.Name, toEvict); err != nil {
		return framework.AsStatus(fmt.Errorf("evicting victims on node %q: %w", c.Name, err))
	}
	return nil
}

// parallelizer runs the dry run: with Args.Parallelism, its own workers;
// otherwise the framework's preemption parallelizer.
func (pl *DefaultPreemption) parallelizer() framework.Parallelizer {
	if pl.parallelism > 0 {
		return framework.NewParallelizer(pl.parallelism)
	}
	return pl.fh.PreemptionParallelizer()
}

// offsetAndNumCandidates picks where the dry run starts among n potential
// nodes and how many candidates it looks for.
func (pl *DefaultPreemption) offsetAndNumCandidates(n int) (offset, num int) {
	pl.mu.Lock()
	offset = pl.rng.IntN(n)
	pl.mu.Unlock()
	return offset, numCandidates(n, pl.minPercentage, pl.minAbsolute)
}

// numCandidates is kube's calculateNumCandidates.
func numCandidates(numNodes int, percentage, absolute int32) int {
	n := numNodes * int(percentage) / 100
	n = max(n, int(absolute))
	return min(n, numNodes)
}
