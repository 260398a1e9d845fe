package framework

import (
	"context"
	"time"
)

// Score bounds every Score plugin must respect after NormalizeScore.
const (
	MaxNodeScore int64 = 100
	MinNodeScore int64 = 0
)

// NodeScore is one node's score from one plugin.
type NodeScore struct {
	Name  string
	Score int64
}

// NodeScoreList holds one plugin's scores for every scored node, in the
// order of the nodes handed to Score.
type NodeScoreList []NodeScore

// PreFilterResult narrows the nodes a pod is filtered against.
type PreFilterResult struct {
	// NodeNames are the only nodes worth filtering; nil means all nodes.
	NodeNames map[string]struct{}
}

// AllNodes reports whether the result leaves every node eligible.
func (p *PreFilterResult) AllNodes() bool { return p == nil || p.NodeNames == nil }

// Merge intersects two results; nil (all nodes) is the identity.
func (p *PreFilterResult) Merge(in *PreFilterResult) *PreFilterResult {
	if p.AllNodes() && in.AllNodes() {
		return nil
	}
	if p.AllNodes() {
		return &PreFilterResult{NodeNames: cloneSet(in.NodeNames)}
	}
	if in.AllNodes() {
		return &PreFilterResult{NodeNames: cloneSet(p.NodeNames)}
	}
	out := make(map[string]struct{})
	for n := range p.NodeNames {
		if _, ok := in.NodeNames[n]; ok {
			out[n] = struct{}{}
		}
	}
	return &PreFilterResult{NodeNames: out}
}

func cloneSet(s map[string]struct{}) map[string]struct{} {
	out := make(map[string]struct{}, len(s))
	for k := range s {
		out[k] = struct{}{}
	}
	return out
}

// NominatingMode says whether a PostFilter result changes the pod's
// nominated node.
type NominatingMode int

// Nominating modes.
const (
	ModeNoop NominatingMode = iota
	ModeOverride
)

// NominatingInfo is the node a pod is nominated to after preemption.
type NominatingInfo struct {
	NominatedNodeName string
	NominatingMode    NominatingMode
}

// Mode returns the mode; ModeNoop for nil.
func (n *NominatingInfo) Mode() NominatingMode {
	if n == nil {
		return ModeNoop
	}
	return n.NominatingMode
}

// PostFilterResult is what a PostFilter plugin (preemption) decided.
type PostFilterResult struct {
	*NominatingInfo
}

// Plugin is the parent of every plugin interface.
type Plugin interface {
	Name() string
}

// QueueSortPlugin orders the active queue. One per profile.
type QueueSortPlugin interface {
	Plugin
	Less(a, b *QueuedPodInfo) bool
}

// PreEnqueuePlugin gates a pod before it enters the active queue. It runs
// on every add, so it must be cheap.
type PreEnqueuePlugin interface {
	Plugin
	PreEnqueue(ctx context.Context, pod *Pod) *Status
}

// EnqueueExtensions lists the cluster events that may make a pod this
// plugin rejected schedulable, so the queue retries it only then.
type EnqueueExtensions interface {
	Plugin
	EventsToRegister(ctx context.Context) ([]ClusterEventWithHint, error)
}

// PreFilterExtensions keep PreFilter state right when the framework
// evaluates "what if this pod were (not) on the node" (nominated pods,
// preemption victims).
type PreFilterExtensions interface {
	AddPod(ctx context.Context, state *CycleState, podToSchedule *PodInfo, podInfoToAdd *PodInfo, nodeInfo *NodeInfo) *Status
	RemovePod(ctx context.Context, state *CycleState, podToSchedule *PodInfo, podInfoToRemove *PodInfo, nodeInfo *NodeInfo) *Status
}

// PreFilterPlugin computes per-pod state once per cycle and may narrow the
// nodes to filter. Returning Skip skips the plugin's Filter this cycle.
type PreFilterPlugin interface {
	Plugin
	PreFilter(ctx context.Context, state *CycleState, pod *PodInfo, nodes []*NodeInfo) (*PreFilterResult, *Status)
	// PreFilterExtensions returns nil if the state does not depend on the
	// pods of a node.
	PreFilterExtensions() PreFilterExtensions
}

// FilterPlugin decides whether the pod fits one node. It runs concurrently
// for different nodes, must not change nodeInfo, and returns Success,
// Unschedulable, UnschedulableAndUnresolvable or Error.
type FilterPlugin interface {
	Plugin
	Filter(ctx context.Context, state *CycleState, pod *PodInfo, nodeInfo *NodeInfo) *Status
}

// FreedFitter is a FilterPlugin that can rule a node out from its totals
// alone: when CouldFitWithFreed is false, Filter rejects the pod on that
// node once pods freeing freed are removed, whatever pods are added to it.
// Preemption asks before it copies a node to try evictions on it.
type FreedFitter interface {
	CouldFitWithFreed(state *CycleState, pod *PodInfo, nodeInfo *NodeInfo, freed Freed) bool
}

// NodeToStatusReader is the read view of per-node filter results that
// PostFilter plugins get.
type NodeToStatusReader interface {
	// Get returns a node's status; nodes not recorded get the absent
	// nodes' status.
	Get(nodeName string) *Status
	// NodesForStatusCode returns the nodes whose status has code.
	NodesForStatusCode(lister NodeInfoLister, code Code) ([]*NodeInfo, error)
}

// PostFilterPlugin runs when no node fits (preemption).
type PostFilterPlugin interface {
	Plugin
	PostFilter(ctx context.Context, state *CycleState, pod *PodInfo, filteredNodeStatusMap NodeToStatusReader) (*PostFilterResult, *Status)
}

// PreScorePlugin computes per-pod scoring state once; Skip skips the
// plugin's Score this cycle.
type PreScorePlugin interface {
	Plugin
	PreScore(ctx context.Context, state *CycleState, pod *PodInfo, nodes []*NodeInfo) *Status
}

// ScoreExtensions rescale one plugin's raw scores into [MinNodeScore,
// MaxNodeScore] once every node is scored.
type ScoreExtensions interface {
	NormalizeScore(ctx context.Context, state *CycleState, pod *PodInfo, scores NodeScoreList) *Status
}

// PreScoreNodesUser is a PreScorePlugin that says whether its PreScore
// reads the feasible nodes it is given for pod. A placer that can rank
// nodes without listing the feasible ones (see MaxNormalizer) lists them
// for a plugin that does, or that does not say.
type PreScoreNodesUser interface {
	PreScoreUsesNodes(pod *PodInfo) bool
}

// MaxNormalizer is a ScoreExtensions whose NormalizeScore gives every node
// a score that depends only on its raw score and on the highest raw score
// in the list, as DefaultNormalizeScore does. A placer may then normalize
// one node at a time, knowing only the highest raw score of its window.
type MaxNormalizer interface {
	NormalizeScoreOf(raw, highest int64) int64
}

// ScorePlugin ranks feasible nodes. It runs concurrently for different
// nodes.
type ScorePlugin interface {
	Plugin
	Score(ctx context.Context, state *CycleState, pod *PodInfo, nodeInfo *NodeInfo) (int64, *Status)
	// ScoreExtensions returns nil if scores need no normalizing.
	ScoreExtensions() ScoreExtensions
}

// ReservePlugin holds resources for a pod between the scheduling and the
// binding cycle. Unreserve must undo Reserve and be idempotent: it runs,
// in reverse order, whenever a later step fails.
type ReservePlugin interface {
	Plugin
	Reserve(ctx context.Context, state *CycleState, pod *Pod, nodeName string) *Status
	Unreserve(ctx context.Context, state *CycleState, pod *Pod, nodeName string)
}

// PermitPlugin approves, rejects or delays (Wait, with a timeout) the
// binding of a pod to its chosen node.
type PermitPlugin interface {
	Plugin
	Permit(ctx context.Context, state *CycleState, pod *Pod, nodeName string) (*Status, time.Duration)
}

// PreBindPlugin prepares a binding (attach, provision).
type PreBindPlugin interface {
	Plugin
	PreBind(ctx context.Context, state *CycleState, pod *Pod, nodeName string) *Status
}

// BindPlugin makes the binding durable; Skip hands it to the next one.
type BindPlugin interface {
	Plugin
	Bind(ctx context.Context, state *CycleState, pod *Pod, nodeName string) *Status
}

// PostBindPlugin is told about a successful binding.
type PostBindPlugin interface {
	Plugin
	PostBind(ctx context.Context, state *CycleState, pod *Pod, nodeName string)
}

// Binder stores a binding pod -> node; the DefaultBinder plugin calls it.
// The server's implementation commits to the store.
type Binder interface {
	Bind(ctx context.Context, pod *Pod, nodeName string) error
}

// WaitingPod is a pod held at Permit.
type WaitingPod interface {
	GetPod() *Pod
	// GetPendingPlugins lists the Permit plugins that have not allowed it;
	// none once it is rejected.
	GetPendingPlugins() []string
	// Allow records pluginName's approval; the last one releases the pod.
	Allow(pluginName string)
	// Reject turns the pod away; false if it was already released or
	// rejected.
	Reject(pluginName, msg string) bool
}

// PodNominator lists pods nominated (by preemption) to run on a node, so
// filters can account for them. Implemented by the scheduling queue.
type PodNominator interface {
	NominatedPodsForNode(nodeName string) []*PodInfo
}

// Handle is what plugins get from the framework at construction.
type Handle interface {
	// SnapshotSharedLister reads the snapshot of the current cycle. It does
	// not change between the start of a cycle and Reserve.
	SnapshotSharedLister() SharedLister
	// Binder stores bindings.
	Binder() Binder
	// Parallelizer runs work over nodes with the configured parallelism.
	Parallelizer() Parallelizer
	// IterateOverWaitingPods calls fn for every pod held at Permit.
	IterateOverWaitingPods(fn func(WaitingPod))
	// GetWaitingPod returns the waiting pod with the given key (UID, or
	// namespace/name for pods without one), or nil.
	GetWaitingPod(key string) WaitingPod
	// RejectWaitingPod rejects a waiting pod; false if there is none.
	RejectWaitingPod(key string) bool

	// The services below belong to the scheduler running the framework,
	// not to any profile: they are set once when the framework is built,
	// so a plugin's args stay what was configured.

	// Clock is the framework's clock: Permit timeouts, and the "now" of
	// plugins that need one.
	Clock() Clock
	// Evictor carries out preemption decisions; nil means victims are
	// chosen and the preemptor nominated, but nobody is evicted.
	Evictor() Evictor
	// DisruptionBudgets lists the budgets preemption tries to keep; nil
	// means none.
	DisruptionBudgets() BudgetLister
	// PodGroups lists pod groups and counts their members; nil means no
	// group is known.
	PodGroups() PodGroupLister
	// GangCommitter gathers a gang's released members for their joint
	// commit; nil means nothing is gathered.
	GangCommitter() GangCommitter
}

// WaitingPodKey is the key waiting pods are tracked by: the UID, or
// namespace/name for pods without one.
func WaitingPodKey(p *Pod) string {
	if p.UID != "" {
		return p.UID
	}
	return p.Key()
}
