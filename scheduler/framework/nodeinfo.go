package framework

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"maps"
	"slices"
	"sync/atomic"
	"time"
	"unique"
)

// PodInfo is a pod with what every cycle needs of it computed once.
type PodInfo struct {
	Pod *Pod
	// Requests is PodRequests(Pod, false): what fit checks.
	Requests Resource
	// NonZeroRequests is PodRequests(Pod, true): what spreading scores use.
	NonZeroRequests Resource

	// What charging a pod to a node and preemption's dry runs ask of every
	// pod they touch, read from Pod once: a Pod's fields sit on cache lines
	// of their own, and a dry run at thousands of nodes missed on each.
	priority                                  int32
	hostPorts, affinity, requiredAntiAffinity bool
	// startSec and startNsec are the start time as Unix seconds and
	// nanoseconds: a time.Time is 24 bytes, and these 12 keep PodInfo in
	// the 128-byte size class (TestPodSize).
	startNsec int32
	startSec  int64

	// class caches AffinityClass (0: not yet). It is held here, not behind
	// a pointer, because a walk over every pod reads it: one cache miss a
	// pod instead of two. WithPod carries it to a copy.
	class atomic.Uint64
	// sig caches the pod's signature (see SignPlugin); one pointer, as
	// most PodInfos (the bound pods') never have one.
	sig *podSignature
}

// NewPodInfo precomputes a pod's requests and what NodeInfo asks of it.
// A pod whose spec changes needs a new PodInfo.
func NewPodInfo(p *Pod) *PodInfo {
	return &PodInfo{Pod: p, Requests: PodRequests(p, false), NonZeroRequests: PodRequests(p, true),
		priority: p.Priority, hostPorts: usesHostPorts(p), affinity: HasAffinity(p), requiredAntiAffinity: HasRequiredAntiAffinity(p),
		startSec: p.StartTime.Unix(), startNsec: int32(p.StartTime.Nanosecond())}
}

// WithPod returns a copy of pi for p, a version of the same pod whose spec
// is unchanged (its node, status or revision differ): what pi computed
// from the spec, and the start time, are kept.
func (pi *PodInfo) WithPod(p *Pod) *PodInfo {
	c := &PodInfo{Pod: p, Requests: pi.Requests, NonZeroRequests: pi.NonZeroRequests,
		priority: pi.priority, hostPorts: pi.hostPorts, affinity: pi.affinity, requiredAntiAffinity: pi.requiredAntiAffinity,
		startNsec: pi.startNsec, startSec: pi.startSec, sig: pi.sig}
	c.class.Store(pi.class.Load())
	return c
}

// StartTime is the pod's start time as of NewPodInfo (zero: not started).
// The cache makes a new PodInfo for every version of a bound pod, so for
// the pods on a snapshot's nodes it is current.
// It is the same instant (the zero time stays zero), in the local zone.
func (pi *PodInfo) StartTime() time.Time { return time.Unix(pi.startSec, int64(pi.startNsec)) }

// Priority is the pod's priority.
func (pi *PodInfo) Priority() int32 { return pi.priority }

// UsesHostPorts reports whether any of the pod's containers asks for a
// host port.
func (pi *PodInfo) UsesHostPorts() bool { return pi.hostPorts }

func usesHostPorts(p *Pod) bool {
	for _, c := range p.Containers {
		for _, port := range c.Ports {
			if port.HostPort > 0 {
				return true
			}
		}
	}
	return false
}

// ImageStateSummary is one image on a node, with how many nodes have it.
type ImageStateSummary struct {
	Size     int64
	NumNodes int
}

// generation is a process-wide counter so any NodeInfo change gets a number
// larger than every snapshot taken before it.
var generation atomic.Int64

// NextGeneration returns a fresh, strictly increasing generation number.
func NextGeneration() int64 { return generation.Add(1) }

// CurrentGeneration is the latest generation handed out: a snapshot whose
// Generation is lower may miss a change.
func CurrentGeneration() int64 { return generation.Load() }

// NodeInfo aggregates a node and the pods on it. Snapshots hold clones; only
// the cache mutates the originals.
type NodeInfo struct {
	// The fields every filter pass reads for every node come first, within
	// two cache lines: a pass at thousands of nodes is bound by misses.
	node *Node
	// nameHash is NodeNameHash of the node's name: lookups keyed by node
	// can rule a node out without reading its name, a cache miss each.
	nameHash uint64
	// unschedulable and tainted copy the node's flag and whether it has
	// taints, so the filters that most nodes pass never read the Node.
	unschedulable, tainted bool
	Pods                   []*PodInfo
	// Requested is the sum of the pods' Requests; NonZeroRequested of their
	// NonZeroRequests.
	Requested   Resource
	Allocatable Resource

	NonZeroRequested Resource
	// name is the node's, copied beside what scoring reads: it labels
	// every score, and reading it through node was a cache miss per node
	// and cycle.
	name string
	// PodsWithAffinity and PodsWithRequiredAntiAffinity are the subsets
	// inter-pod affinity needs, kept so it need not scan every pod.
	PodsWithAffinity             []*PodInfo
	PodsWithRequiredAntiAffinity []*PodInfo

	UsedPorts HostPortInfo
	// ImageStates maps each image name on the node to its size and spread.
	// A clone's is nil when empty, so clones must not write to it.
	ImageStates map[string]*ImageStateSummary

	// Generation moves on every change, so snapshots copy only what moved.
	Generation int64

	// topology copies the node's values of the well-known topology labels
	// (wellKnownTopology order); bit i of hasTopology says label i is set.
	topology    [len(wellKnownTopology)]string
	hasTopology uint8
	// canonical holds the handles of the zone and region values in
	// topology. unique keeps a canonical copy only while a handle to it is
	// reachable: holding just the string, nodes set after a collection got
	// a new copy, and spreading's lookups by address missed.
	canonical [len(wellKnownTopology) - 1]unique.Handle[string]

	// byPriority totals the pods' requests per priority, lowest first, so
	// preemption can tell what evicting every pod below a priority would
	// free without reading the pods. Copies of a NodeInfo share it, so it
	// is replaced on every change, never changed in place.
	byPriority []priorityTotal
}

var nodeNameSeed = maphash.MakeSeed()

// NodeNameHash is the hash NodeInfo.NameHash keeps, for this process.
func NodeNameHash(name string) uint64 { return maphash.String(nodeNameSeed, name) }

// NameHash is NodeNameHash of the node's name; 0 before SetNode.
func (n *NodeInfo) NameHash() uint64 { return n.nameHash }

// Unschedulable is the node's Unschedulable, read without the Node.
func (n *NodeInfo) Unschedulable() bool { return n.unschedulable }

// Well-known topology labels, Kubernetes' spelling.
const (
	LabelHostname       = "kubernetes.io/hostname"
	LabelTopologyZone   = "topology.kubernetes.io/zone"
	LabelTopologyRegion = "topology.kubernetes.io/region"
)

var wellKnownTopology = [...]string{LabelHostname, LabelTopologyZone, LabelTopologyRegion}

// This file runs past 600 lines on purpose: Resource parses requests,
// PodInfo computes them once per pod, and NodeInfo charges them to a node.
// Whoever checks that a node is never overcommitted reads all three at
// once, so they stay side by side; labels, taints and the generation
// counter are here only because NodeInfo caches them.

// LabelKey is a node label key resolved once, so that Label can answer
// for the well-known topology labels from NodeInfo's copies. Spreading and
// affinity read one label of every node in every cycle; hashing the key
// into each node's label map was a tenth of a spreading workload's CPU.
type LabelKey struct {
	Name      string
	wellKnown int8 // 1 + index into wellKnownTopology; 0 for any other key
}

// NewLabelKey resolves name.
func NewLabelKey(name string) LabelKey {
	for i, known := range wellKnownTopology {
		if name == known {
			return LabelKey{Name: name, wellKnown: int8(i + 1)}
		}
	}
	return LabelKey{Name: name}
}

// Canonical reports whether Label's values of k are canonical (unique.Make),
// so that nodes with equal values share their bytes, at one address while
// any node has the value: zone and region.
func (k LabelKey) Canonical() bool { return k.wellKnown > 1 }

// Label returns the node's value of the label k, as Node().Labels does.
func (n *NodeInfo) Label(k LabelKey) (string, bool) {
	if i := k.wellKnown - 1; i >= 0 {
		return n.topology[i], n.hasTopology&(1<<i) != 0
	}
	v, ok := n.node.Labels[k.Name]
	return v, ok
}

// Tainted reports whether the node has any taint, without the Node.
func (n *NodeInfo) Tainted() bool { return n.tainted }

type priorityTotal struct {
	priority int32
	freed    Freed
}

// Freed is what removing some of a node's pods would free: the pods and
// the sums of their cpu, memory and ephemeral-storage requests.
type Freed struct {
	Pods             int
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
}

// FreedBelow returns what removing every pod of priority below prio would
// free, read from totals kept per priority. Its sums saturate like
// Resource's.
func (n *NodeInfo) FreedBelow(prio int32) Freed {
	var f Freed
	for _, t := range n.byPriority {
		if t.priority >= prio {
			break
		}
		f.add(&t.freed)
	}
	return f
}

// KeepAtOrAbove drops the per-priority totals below prio: for a copy from
// which every such pod was taken without RemovePod.
func (n *NodeInfo) KeepAtOrAbove(prio int32) {
	i := 0
	for i < len(n.byPriority) && n.byPriority[i].priority < prio {
		i++
	}
	n.byPriority = n.byPriority[i:len(n.byPriority):len(n.byPriority)]
}

// withPriorityTotal returns a copy of totals with pi added (sign 1) or
// removed (sign -1). A removal from a saturated total recounts it from
// pods, the node's pods after the removal, as NodeInfo does its sums.
func withPriorityTotal(totals []priorityTotal, pi *PodInfo, sign int, pods []*PodInfo) []priorityTotal {
	prio := pi.priority
	i, found := slices.BinarySearchFunc(totals, prio, func(t priorityTotal, p int32) int { return cmp.Compare(t.priority, p) })
	out := make([]priorityTotal, len(totals), len(totals)+1)
	copy(out, totals)
	if !found {
		if sign < 0 {
			return out // not charged: nothing to take back
		}
		out = slices.Insert(out, i, priorityTotal{priority: prio})
	}
	t := &out[i]
	switch by := freedBy(pi); {
	case sign > 0:
		t.freed.add(&by)
	case t.freed.saturated():
		t.freed = Freed{}
		for _, other := range pods {
			if other.priority == prio {
				by := freedBy(other)
				t.freed.add(&by)
			}
		}
	default:
		t.freed.Pods--
		t.freed.MilliCPU = max(t.freed.MilliCPU-by.MilliCPU, 0)
		t.freed.Memory = max(t.freed.Memory-by.Memory, 0)
		t.freed.EphemeralStorage = max(t.freed.EphemeralStorage-by.EphemeralStorage, 0)
	}
	if t.freed.Pods <= 0 {
		out = slices.Delete(out, i, i+1)
	}
	return out
}

// NewNodeInfo returns a NodeInfo holding the given pods and no node yet.
func NewNodeInfo(pods ...*PodInfo) *NodeInfo {
	ni := &NodeInfo{UsedPorts: HostPortInfo{}, ImageStates: map[string]*ImageStateSummary{}, Generation: NextGeneration()}
	for _, p := range pods {
		ni.AddPodInfo(p)
	}
	return ni
}

// Node returns the node, or nil while only its pods are known.
func (n *NodeInfo) Node() *Node {
	if n == nil {
		return nil
	}
	return n.node
}

// Name is the node's name without reading the Node; "" while only its
// pods are known.
func (n *NodeInfo) Name() string { return n.name }

// SetNode sets the node and its allocatable.
func (n *NodeInfo) SetNode(node *Node) {
	// What is read from node here is kept: a changed Node is set again.
	n.node, n.name = node, node.Name
	n.nameHash = NodeNameHash(node.Name)
	n.unschedulable, n.tainted = node.Unschedulable, len(node.Taints) > 0
	n.topology, n.hasTopology = [len(wellKnownTopology)]string{}, 0
	n.canonical = [len(n.canonical)]unique.Handle[string]{}
	for i, key := range wellKnownTopology {
		if v, ok := node.Labels[key]; ok {
			if i > 0 {
				// The nodes of a zone share one canonical copy, which stays
				// in cache through a walk that reads it per node (spreading
				// finds its domain's count so). Hostnames are one a node.
				n.canonical[i-1] = unique.Make(v)
				v = n.canonical[i-1].Value()
			}
			n.topology[i], n.hasTopology = v, n.hasTopology|1<<i
		}
	}
	n.Allocatable = NewResource(node.Allocatable)
	n.Generation = NextGeneration()
}

// RemoveNode forgets the node but keeps its pods, which may still be
// deleted later.
func (n *NodeInfo) RemoveNode() {
	n.node, n.name = nil, ""
	n.Generation = NextGeneration()
}

// HasAffinity reports whether the pod carries any inter-pod affinity term.
func HasAffinity(p *Pod) bool {
	a := p.Affinity
	return a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil)
}

// HasRequiredAntiAffinity reports whether the pod has hard anti-affinity.
func HasRequiredAntiAffinity(p *Pod) bool {
	a := p.Affinity
	return a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.Required) > 0
}

// AddPodInfo charges a pod to the node.
func (n *NodeInfo) AddPodInfo(pi *PodInfo) {
	n.Pods = append(n.Pods, pi)
	if pi.affinity {
		n.PodsWithAffinity = append(n.PodsWithAffinity, pi)
	}
	if pi.requiredAntiAffinity {
		n.PodsWithRequiredAntiAffinity = append(n.PodsWithRequiredAntiAffinity, pi)
	}
	n.update(pi, 1)
}

// RemovePod releases a pod (matched by namespace/name) from the node.
func (n *NodeInfo) RemovePod(p *Pod) error {
	// Newest first: the pod removed is most often one just confirmed.
	for i := len(n.Pods) - 1; i >= 0; i-- {
		pi := n.Pods[i]
		if !samePod(pi.Pod, p) {
			continue
		}
		n.Pods = removeAt(n.Pods, i)
		n.PodsWithAffinity = removeSame(n.PodsWithAffinity, p)
		n.PodsWithRequiredAntiAffinity = removeSame(n.PodsWithRequiredAntiAffinity, p)
		n.update(pi, -1)
		return nil
	}
	name := "<none>"
	if n.node != nil {
		name = n.node.Name
	}
	return fmt.Errorf("framework: pod %s not found on node %s", p.Key(), name)
}

// ReplacePodInfo puts pi in the place of the pod of the same namespace and
// name, if the node holds it and pi charges the node exactly as it did:
// then no sum, per-priority total or port changes, only the pointers and
// the generation. It reports false, changing nothing, otherwise. Every
// binding's confirmation replaces its assumption so, under the cache's
// write lock.
func (n *NodeInfo) ReplacePodInfo(pi *PodInfo) bool {
	for i := len(n.Pods) - 1; i >= 0; i-- {
		old := n.Pods[i]
		if !samePod(old.Pod, pi.Pod) {
			continue
		}
		if !sameCharge(old, pi) {
			return false
		}
		n.Pods[i] = pi
		if pi.affinity {
			replaceSame(n.PodsWithAffinity, pi)
		}
		if pi.requiredAntiAffinity {
			replaceSame(n.PodsWithRequiredAntiAffinity, pi)
		}
		n.Generation = NextGeneration()
		return true
	}
	return false
}

// sameCharge reports whether a and b add the same to a NodeInfo: sums,
// per-priority totals and affinity lists (host ports are not compared: a
// pod with any is never the same charge).
func sameCharge(a, b *PodInfo) bool {
	return !a.hostPorts && !b.hostPorts && a.priority == b.priority &&
		a.affinity == b.affinity && a.requiredAntiAffinity == b.requiredAntiAffinity &&
		sameResource(&a.Requests, &b.Requests) && sameResource(&a.NonZeroRequests, &b.NonZeroRequests)
}

func sameResource(a, b *Resource) bool {
	return a.MilliCPU == b.MilliCPU && a.Memory == b.Memory && a.EphemeralStorage == b.EphemeralStorage &&
		a.AllowedPodNumber == b.AllowedPodNumber && maps.Equal(a.Scalar, b.Scalar)
}

func replaceSame(s []*PodInfo, pi *PodInfo) {
	for i, q := range s {
		if samePod(q.Pod, pi.Pod) {
			s[i] = pi
			return
		}
	}
}

func (n *NodeInfo) update(pi *PodInfo, sign int) {
	switch {
	case sign > 0:
		n.Requested.AddResource(&pi.Requests)
		n.NonZeroRequested.AddResource(&pi.NonZeroRequests)
	case n.Requested.Saturated() || n.NonZeroRequested.Saturated():
		// Only the pods left know what a saturated sum stood for.
		n.RecountRequests()
	default:
		n.Requested.SubResource(&pi.Requests)
		n.NonZeroRequested.SubResource(&pi.NonZeroRequests)
	}
	n.byPriority = withPriorityTotal(n.byPriority, pi, sign, n.Pods)
	if !pi.hostPorts {
		n.Generation = NextGeneration()
		return
	}
	for _, c := range pi.Pod.Containers {
		for _, port := range c.Ports {
			if port.HostPort <= 0 {
				continue
			}
			if sign > 0 {
				if n.UsedPorts == nil { // a CloneInto copy of a node without ports
					n.UsedPorts = HostPortInfo{}
				}
				n.UsedPorts.Add(port.HostIP, port.Protocol, port.HostPort)
			} else {
				n.UsedPorts.Remove(port.HostIP, port.Protocol, port.HostPort)
			}
		}
	}
	n.Generation = NextGeneration()
}

func removeAt(s []*PodInfo, i int) []*PodInfo {
	last := len(s) - 1
	s[i] = s[last]
	s[last] = nil
	return s[:last]
}

// samePod compares identities without building key strings: this runs
// once per pod on the node for every removal.
func samePod(a, b *Pod) bool { return a.Name == b.Name && a.Namespace == b.Namespace }

func removeSame(s []*PodInfo, p *Pod) []*PodInfo {
	for i, pi := range s {
		if samePod(pi.Pod, p) {
			return removeAt(s, i)
		}
	}
	return s
}

// Clone returns a copy that shares the immutable pods but none of the
// mutable aggregates.
func (n *NodeInfo) Clone() *NodeInfo {
	c := &NodeInfo{}
	n.CloneInto(c)
	if c.UsedPorts == nil {
		c.UsedPorts = HostPortInfo{}
	}
	return c
}

// CloneInto overwrites dst with a deep copy of n, as Clone but without
// allocating dst: a snapshot refreshes its NodeInfos in place, once per
// changed node per shard for every pod placed. dst's UsedPorts is nil
// when n uses no port (an empty map was an allocation per copy).
//
// dst's pod list is refilled in place when it has room: a fresh copy of
// it was the largest allocation of a scheduling cycle, twice per pod
// placed (assumed, then confirmed) for every shard's snapshot. So a
// caller must not keep dst.Pods past the next CloneInto into dst; the
// snapshot's users keep NodeInfos, which change in place anyway.
func (n *NodeInfo) CloneInto(dst *NodeInfo) {
	var ports HostPortInfo
	if len(n.UsedPorts) > 0 {
		ports = n.UsedPorts.Clone()
	}
	pods := dst.Pods
	if len(n.Pods) < len(pods) {
		clear(pods[len(n.Pods):]) // drop the references the copy leaves behind
	}
	*dst = NodeInfo{
		node:             n.node,
		name:             n.name,
		Pods:             append(pods[:0], n.Pods...),
		UsedPorts:        ports,
		Requested:        n.Requested.Clone(),
		NonZeroRequested: n.NonZeroRequested.Clone(),
		Allocatable:      n.Allocatable.Clone(),
		Generation:       n.Generation,
		byPriority:       n.byPriority, // replaced, never changed: shared
		nameHash:         n.nameHash,
		unschedulable:    n.unschedulable,
		tainted:          n.tainted,
		topology:         n.topology,
		canonical:        n.canonical,
		hasTopology:      n.hasTopology,
	}
	c := dst
	if len(n.PodsWithAffinity) > 0 {
		c.PodsWithAffinity = append([]*PodInfo(nil), n.PodsWithAffinity...)
	}
	if len(n.PodsWithRequiredAntiAffinity) > 0 {
		c.PodsWithRequiredAntiAffinity = append([]*PodInfo(nil), n.PodsWithRequiredAntiAffinity...)
	}
	// Left nil for a node without images: ImageLocality's Score looks the
	// pod's images up on every node, and reading an empty map's header was
	// a cache miss per node, where a nil map is never read.
	if len(n.ImageStates) > 0 {
		c.ImageStates = make(map[string]*ImageStateSummary, len(n.ImageStates))
		for k, v := range n.ImageStates {
			s := *v
			c.ImageStates[k] = &s
		}
	}
}
