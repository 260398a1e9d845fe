package framework

import "time"

// NodeInfoLister reads the nodes of one snapshot.
type NodeInfoLister interface {
	// List returns every node that has a Node set, in a stable order.
	List() []*NodeInfo
	// HavePodsWithAffinityList returns the nodes running pods with any
	// inter-pod affinity term.
	HavePodsWithAffinityList() []*NodeInfo
	// HavePodsWithRequiredAntiAffinityList returns the nodes running pods
	// with required anti-affinity.
	HavePodsWithRequiredAntiAffinityList() []*NodeInfo
	// Get returns one node, or an error if it is not in the snapshot.
	Get(name string) (*NodeInfo, error)
}

// SharedLister is what plugins read cluster state through during a cycle.
type SharedLister interface {
	NodeInfos() NodeInfoLister
}

// QueuedPodInfo is a pod in the scheduling queue with its queue bookkeeping.
type QueuedPodInfo struct {
	*PodInfo
	// Timestamp is when the pod last entered the active queue; it orders
	// pods of equal priority.
	Timestamp time.Time
	// Arrival is when the pod first entered the queue; a promoted pod
	// (see PriorityQueue.Promote) takes it back as its Timestamp.
	Arrival time.Time
	// Attempts counts scheduling attempts; it drives backoff.
	Attempts int
	// InitialAttemptTimestamp is when the pod was first popped, or nil.
	InitialAttemptTimestamp *time.Time
	// UnschedulablePlugins are the plugins that rejected the pod in its last
	// attempt; only events those plugins care about move it back.
	UnschedulablePlugins map[string]struct{}
	// PendingPlugins are plugins that returned Pending in the last attempt.
	PendingPlugins map[string]struct{}
	// GatingPlugin is the PreEnqueue plugin holding the pod back, if any.
	GatingPlugin string
}

// LessFunc orders pods in the active queue (QueueSort).
type LessFunc func(a, b *QueuedPodInfo) bool

// EventResource is the kind of object a cluster event is about.
type EventResource string

// Event resources.
const (
	EventResourceNode     EventResource = "Node"
	EventResourcePod      EventResource = "Pod"
	EventResourceAssigned EventResource = "AssignedPod"
	EventResourceWildcard EventResource = "*"
)

// ActionType is a bit set of what happened to the object.
type ActionType uint64

// Actions; Update* refine Update for nodes and pods.
const (
	ActionAdd ActionType = 1 << iota
	ActionDelete
	ActionUpdateNodeAllocatable
	ActionUpdateNodeLabel
	ActionUpdateNodeTaint
	ActionUpdateNodeCondition
	ActionUpdatePodLabel
	ActionUpdatePodScaleDown
	ActionUpdatePodSchedulingGates
	ActionUpdatePodOther

	ActionUpdate ActionType = ActionUpdateNodeAllocatable | ActionUpdateNodeLabel |
		ActionUpdateNodeTaint | ActionUpdateNodeCondition | ActionUpdatePodLabel |
		ActionUpdatePodScaleDown | ActionUpdatePodSchedulingGates | ActionUpdatePodOther
	ActionAll ActionType = ActionAdd | ActionDelete | ActionUpdate
)

// ClusterEvent is something that happened in the cluster that may make
// unschedulable pods schedulable.
type ClusterEvent struct {
	Resource   EventResource
	ActionType ActionType
	// Label names the event in logs and metrics.
	Label string
}

// Match reports whether an event registered as c covers the event e.
func (c ClusterEvent) Match(e ClusterEvent) bool {
	return (c.Resource == EventResourceWildcard || c.Resource == e.Resource) && c.ActionType&e.ActionType != 0
}

// QueueingHint says what a cluster event means for a rejected pod.
type QueueingHint int

// Queueing hints.
const (
	// QueueSkip: the event cannot make the pod schedulable.
	QueueSkip QueueingHint = iota
	// Queue: the event may make the pod schedulable; retry it.
	Queue
)

// QueueingHintFn decides, for one rejected pod, whether an event on oldObj
// -> newObj (each a *Node or *Pod, nil for add or delete) may help it.
type QueueingHintFn func(pod *Pod, oldObj, newObj any) (QueueingHint, error)

// ClusterEventWithHint is an event a plugin registers with an optional hint;
// a nil hint means always Queue.
type ClusterEventWithHint struct {
	Event          ClusterEvent
	QueueingHintFn QueueingHintFn
}
