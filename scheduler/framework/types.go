// Package framework holds the scheduling core's own types (pods, nodes,
// resources, the per-node aggregate NodeInfo) and the extension points that
// plugins implement. It imports neither gRPC nor etcd: the server converts
// wire types into these in one place.
package framework

import (
	"fmt"
	"time"
)

// Well-known resource names. Any other name is an extended (scalar) resource.
const (
	ResourceCPU              = "cpu"               // millicores
	ResourceMemory           = "memory"            // bytes
	ResourceEphemeralStorage = "ephemeral-storage" // bytes
	ResourcePods             = "pods"              // count
)

// ResourceList maps resource names to quantities, in the units above.
type ResourceList map[string]int64

// PodPhase is a step of the pod lifecycle. A byte, so it packs beside
// Pod.Priority: see Pod.
type PodPhase uint8

// Pod phases, in lifecycle order.
const (
	PodPending PodPhase = iota + 1
	PodBound
	PodUnschedulable
	PodRunning
	PodSucceeded
	PodFailed
)

// Terminal reports whether a pod in this phase no longer holds resources.
func (p PodPhase) Terminal() bool { return p == PodSucceeded || p == PodFailed }

// TaintEffect uses Kubernetes' spelling so messages read the same.
type TaintEffect string

// Taint effects.
const (
	TaintEffectNoSchedule       TaintEffect = "NoSchedule"
	TaintEffectPreferNoSchedule TaintEffect = "PreferNoSchedule"
	TaintEffectNoExecute        TaintEffect = "NoExecute"
)

// Taint repels pods that do not tolerate it.
type Taint struct {
	Key    string
	Value  string
	Effect TaintEffect
}

// TolerationOperator compares a toleration with a taint.
type TolerationOperator string

// Toleration operators.
const (
	TolerationOpEqual  TolerationOperator = "Equal"
	TolerationOpExists TolerationOperator = "Exists"
)

// Toleration lets a pod land on nodes with matching taints. An empty Effect
// matches every effect.
type Toleration struct {
	Key               string
	Operator          TolerationOperator
	Value             string
	Effect            TaintEffect
	TolerationSeconds *int64
}

// ContainerImage is an image stored on a node.
type ContainerImage struct {
	Names     []string
	SizeBytes int64
}

// Node is a machine pods are placed on.
type Node struct {
	// Every filter pass reads these three for every node: kept together.
	Name          string
	Taints        []Taint
	Unschedulable bool
	Allocatable   ResourceList
	Labels        map[string]string
	Images        []ContainerImage
	// Revision is the store revision that last wrote the node's record.
	// A rejection by the node holds until the record changes.
	Revision int64
}

// Protocol of a container port, Kubernetes spelling ("TCP", "UDP", "SCTP").
type Protocol string

// Port protocols.
const (
	ProtocolTCP  Protocol = "TCP"
	ProtocolUDP  Protocol = "UDP"
	ProtocolSCTP Protocol = "SCTP"
)

// ContainerPort is a port a container listens on; HostPort 0 claims nothing
// on the node.
type ContainerPort struct {
	ContainerPort int32
	HostPort      int32
	Protocol      Protocol
	HostIP        string
}

// Container is one process image in a pod.
type Container struct {
	Name     string
	Image    string
	Requests ResourceList
	Ports    []ContainerPort
}

// LabelSelectorOperator is a comparison in a label selector.
type LabelSelectorOperator string

// Label selector operators.
const (
	LabelSelectorOpIn           LabelSelectorOperator = "In"
	LabelSelectorOpNotIn        LabelSelectorOperator = "NotIn"
	LabelSelectorOpExists       LabelSelectorOperator = "Exists"
	LabelSelectorOpDoesNotExist LabelSelectorOperator = "DoesNotExist"
)

// LabelSelectorRequirement compares one label with values.
type LabelSelectorRequirement struct {
	Key      string
	Operator LabelSelectorOperator
	Values   []string
}

// LabelSelector matches labels; all parts are ANDed. A nil selector matches
// nothing, an empty one everything (Kubernetes semantics).
type LabelSelector struct {
	MatchLabels      map[string]string
	MatchExpressions []LabelSelectorRequirement
}

// NodeSelectorOperator is a comparison in a node selector.
type NodeSelectorOperator string

// Node selector operators.
const (
	NodeSelectorOpIn           NodeSelectorOperator = "In"
	NodeSelectorOpNotIn        NodeSelectorOperator = "NotIn"
	NodeSelectorOpExists       NodeSelectorOperator = "Exists"
	NodeSelectorOpDoesNotExist NodeSelectorOperator = "DoesNotExist"
	NodeSelectorOpGt           NodeSelectorOperator = "Gt"
	NodeSelectorOpLt           NodeSelectorOperator = "Lt"
)

// NodeSelectorRequirement compares one node label or field with values.
type NodeSelectorRequirement struct {
	Key      string
	Operator NodeSelectorOperator
	Values   []string
}

// NodeSelectorTerm ANDs its requirements.
type NodeSelectorTerm struct {
	MatchExpressions []NodeSelectorRequirement
	MatchFields      []NodeSelectorRequirement
}

// NodeSelector ORs its terms.
type NodeSelector struct {
	NodeSelectorTerms []NodeSelectorTerm
}

// PreferredSchedulingTerm is a weighted node preference.
type PreferredSchedulingTerm struct {
	Weight     int32
	Preference NodeSelectorTerm
}

// NodeAffinity constrains and ranks nodes by labels and fields.
type NodeAffinity struct {
	Required  *NodeSelector
	Preferred []PreferredSchedulingTerm
}

// PodAffinityTerm selects pods and the topology in which they count.
type PodAffinityTerm struct {
	LabelSelector     *LabelSelector
	Namespaces        []string
	AllNamespaces     bool
	TopologyKey       string
	MatchLabelKeys    []string
	MismatchLabelKeys []string
}

// WeightedPodAffinityTerm is a pod affinity term with a weight.
type WeightedPodAffinityTerm struct {
	Weight int32
	Term   PodAffinityTerm
}

// PodAffinity attracts a pod to domains with matching pods.
type PodAffinity struct {
	Required  []PodAffinityTerm
	Preferred []WeightedPodAffinityTerm
}

// PodAntiAffinity repels a pod from domains with matching pods.
type PodAntiAffinity struct {
	Required  []PodAffinityTerm
	Preferred []WeightedPodAffinityTerm
}

// Affinity groups node and pod affinity.
type Affinity struct {
	NodeAffinity    *NodeAffinity
	PodAffinity     *PodAffinity
	PodAntiAffinity *PodAntiAffinity
}

// UnsatisfiableConstraintAction says how a spread constraint is enforced.
type UnsatisfiableConstraintAction string

// Spread constraint actions.
const (
	DoNotSchedule  UnsatisfiableConstraintAction = "DoNotSchedule"
	ScheduleAnyway UnsatisfiableConstraintAction = "ScheduleAnyway"
)

// NodeInclusionPolicy says whether a node property limits spreading domains.
type NodeInclusionPolicy string

// Node inclusion policies. Empty means the Kubernetes default for the field.
const (
	NodeInclusionPolicyHonor  NodeInclusionPolicy = "Honor"
	NodeInclusionPolicyIgnore NodeInclusionPolicy = "Ignore"
)

// TopologySpreadConstraint limits how unevenly matching pods spread.
type TopologySpreadConstraint struct {
	MaxSkew            int32
	TopologyKey        string
	WhenUnsatisfiable  UnsatisfiableConstraintAction
	LabelSelector      *LabelSelector
	MinDomains         *int32
	NodeAffinityPolicy NodeInclusionPolicy
	NodeTaintsPolicy   NodeInclusionPolicy
	MatchLabelKeys     []string
}

// PreemptionPolicy says whether a pod may evict lower priority pods. A
// byte, so it packs beside Pod.Priority: see Pod.
type PreemptionPolicy uint8

// Preemption policies; the zero value is Kubernetes' default.
const (
	PreemptLowerPriority PreemptionPolicy = iota
	PreemptNever
)

// String is Kubernetes' spelling of the policy.
func (p PreemptionPolicy) String() string {
	switch p {
	case PreemptLowerPriority:
		return "PreemptLowerPriority"
	case PreemptNever:
		return "Never"
	}
	return fmt.Sprintf("PreemptionPolicy(%d)", uint8(p))
}

// Pod is the unit of placement. Pods are immutable once handed to the core:
// a change arrives as a new *Pod.
//
// The core holds one Pod per pod it knows (a million at the largest scale
// we aim at), so its size counts: it fits the allocator's 256-byte class
// because Phase and PreemptionPolicy are bytes packed beside Priority,
// Source is a string, and what most pods never set is behind Extras.
// TestPodSize keeps it there.
type Pod struct {
	Namespace        string
	Name             string
	UID              string
	Labels           map[string]string
	Priority         int32
	Phase            PodPhase
	PreemptionPolicy PreemptionPolicy

	Containers                []Container
	NodeName                  string
	SchedulerName             string
	StartTime                 time.Time
	NodeSelector              map[string]string
	Tolerations               []Toleration
	Affinity                  *Affinity
	TopologySpreadConstraints []TopologySpreadConstraint
	PodGroup                  string

	// Revision is the store revision of the record this pod was read from.
	// Commits compare it, so a decision about a stale pod never lands.
	Revision int64
	// Source is the pod's record as the store holds it (encoded), handed
	// back with decisions so they are written without a read. It is kept
	// encoded because it is a fraction of the decoded size. Only pods the
	// core may still place carry it: a pod on a node has none (convert
	// drops it; a decision about it reads the record). The core never looks
	// inside, and never changes it.
	Source string

	// Extras holds the fields few pods set; nil when none is. Copies of a
	// Pod share it, so a field of it is changed only through EditExtras.
	Extras *PodExtras
}

// Key is the pod's namespace/name, its identity in the queue and cache.
func (p *Pod) Key() string { return p.Namespace + "/" + p.Name }
