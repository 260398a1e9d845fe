package framework

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// ErrNoNodesAvailable is returned when the snapshot holds no node at all.
var ErrNoNodesAvailable = errors.New("no nodes available to schedule pods")

// NodeToStatus records why nodes were rejected in one cycle: explicitly
// for nodes that were filtered, and one shared status for the nodes that
// were never looked at (narrowed away by PreFilter, or all of them when
// PreFilter rejected the pod).
//
// Every failed cycle records every node, so records are appended to a
// slice and indexed by name only when a lookup needs it: a map insertion
// per node was a third of a failed cycle at 5,000 nodes.
type NodeToStatus struct {
	entries []nodeStatus
	index   map[string]int // name -> position in entries; nil until needed
	absent  *Status
}

type nodeStatus struct {
	name   string    // set when recorded by name only
	node   *NodeInfo // set when recorded by Record
	status *Status
}

// nodeName is read only when asked: at record time it would cost a cache
// miss per node on the serial end of a filter pass.
func (e *nodeStatus) nodeName() string {
	if e.node != nil {
		return e.node.Node().Name
	}
	return e.name
}

// NewNodeToStatus returns an empty record whose absent nodes are
// UnschedulableAndUnresolvable with no reason, as in Kubernetes.
func NewNodeToStatus() *NodeToStatus {
	return &NodeToStatus{absent: NewStatus(UnschedulableAndUnresolvable)}
}

// Reset empties m for reuse, keeping the room its records took: a failed
// cycle at thousands of nodes records every one of them.
func (m *NodeToStatus) Reset() {
	clear(m.entries)
	m.entries = m.entries[:0]
	m.index = nil
	m.absent = NewStatus(UnschedulableAndUnresolvable)
}

// Get returns a node's status, or the absent nodes' status.
func (m *NodeToStatus) Get(nodeName string) *Status {
	if i, ok := m.lookup(nodeName); ok {
		return m.entries[i].status
	}
	return m.AbsentNodesStatus()
}

// Set records a node's status, replacing any recorded before.
func (m *NodeToStatus) Set(nodeName string, s *Status) {
	if i, ok := m.lookup(nodeName); ok {
		m.entries[i].status = s
		return
	}
	m.append(nodeStatus{name: nodeName, status: s})
}

// Record records the status of a node not recorded yet, without the
// lookup Set makes; NodesForStatusCode then returns ni itself.
func (m *NodeToStatus) Record(ni *NodeInfo, s *Status) {
	m.append(nodeStatus{node: ni, status: s})
}

// Grow makes room for n more records.
func (m *NodeToStatus) Grow(n int) { m.entries = slices.Grow(m.entries, n) }

func (m *NodeToStatus) append(e nodeStatus) {
	if m.index != nil {
		m.index[e.nodeName()] = len(m.entries)
	}
	m.entries = append(m.entries, e)
}

func (m *NodeToStatus) lookup(nodeName string) (int, bool) {
	if m == nil || len(m.entries) == 0 {
		return 0, false
	}
	if m.index == nil {
		m.index = make(map[string]int, len(m.entries))
		for i := range m.entries {
			m.index[m.entries[i].nodeName()] = i
		}
	}
	i, ok := m.index[nodeName]
	return i, ok
}

// Len returns the number of explicitly recorded nodes.
func (m *NodeToStatus) Len() int {
	if m == nil {
		return 0
	}
	return len(m.entries)
}

// AbsentNodesStatus returns the status of nodes not recorded.
func (m *NodeToStatus) AbsentNodesStatus() *Status {
	if m == nil || m.absent == nil {
		return NewStatus(UnschedulableAndUnresolvable)
	}
	return m.absent
}

// SetAbsentNodesStatus sets the status of nodes not recorded.
func (m *NodeToStatus) SetAbsentNodesStatus(s *Status) { m.absent = s }

// ForEachExplicitNode calls fn for every recorded node, in name order.
func (m *NodeToStatus) ForEachExplicitNode(fn func(nodeName string, s *Status)) {
	if m == nil {
		return
	}
	sorted := make([]nodeStatus, len(m.entries))
	for i := range m.entries {
		sorted[i] = nodeStatus{name: m.entries[i].nodeName(), status: m.entries[i].status}
	}
	slices.SortFunc(sorted, func(a, b nodeStatus) int { return strings.Compare(a.name, b.name) })
	for _, e := range sorted {
		fn(e.name, e.status)
	}
}

// NodesForStatusCode returns the nodes whose status has code: when the
// absent nodes' status has another code, the recorded ones in the order
// they were recorded; otherwise every listed node that matches, in the
// lister's order.
func (m *NodeToStatus) NodesForStatusCode(lister NodeInfoLister, code Code) ([]*NodeInfo, error) {
	var out []*NodeInfo
	if m.AbsentNodesStatus().Code() != code {
		if m == nil {
			return nil, nil
		}
		out = make([]*NodeInfo, 0, len(m.entries))
		for _, e := range m.entries {
			if e.status.Code() != code {
				continue
			}
			ni := e.node
			if ni == nil {
				var err error
				if ni, err = lister.Get(e.name); err != nil {
					continue // recorded, but not a node of this snapshot
				}
			}
			out = append(out, ni)
		}
		return out, nil
	}
	for _, ni := range lister.List() {
		if i, ok := m.lookup(ni.Node().Name); !ok || m.entries[i].status.Code() == code {
			out = append(out, ni)
		}
	}
	return out, nil
}

var _ NodeToStatusReader = (*NodeToStatus)(nil)

// Diagnosis explains a failed cycle.
type Diagnosis struct {
	// NodeToStatus holds the rejection of every node that was considered.
	NodeToStatus *NodeToStatus
	// UnschedulablePlugins rejected the pod (Unschedulable or
	// UnschedulableAndUnresolvable); their events requeue it.
	UnschedulablePlugins map[string]struct{}
	// PendingPlugins returned Pending.
	PendingPlugins map[string]struct{}
	// PreFilterMsg is the message of a PreFilter rejection.
	PreFilterMsg string
	// PostFilterMsg is the message of the PostFilter plugins.
	PostFilterMsg string
}

// AddPluginStatus notes the plugin behind a rejection or Pending.
func (d *Diagnosis) AddPluginStatus(s *Status) {
	p := s.Plugin()
	if p == "" {
		return
	}
	if s.IsRejected() {
		if d.UnschedulablePlugins == nil {
			d.UnschedulablePlugins = map[string]struct{}{}
		}
		d.UnschedulablePlugins[p] = struct{}{}
	}
	if s.Code() == Pending {
		if d.PendingPlugins == nil {
			d.PendingPlugins = map[string]struct{}{}
		}
		d.PendingPlugins[p] = struct{}{}
	}
}

// FitError is returned when no node fits a pod.
type FitError struct {
	Pod         *Pod
	NumAllNodes int
	Diagnosis   Diagnosis
}

// NoNodeAvailableMsg starts every FitError message.
const NoNodeAvailableMsg = "0/%v nodes are available"

// Error renders Kubernetes' message: "0/N nodes are available:
// <PreFilterMsg>. <count reason, ...>. <PostFilterMsg>", the reasons
// counted per node and sorted as strings.
func (f *FitError) Error() string {
	msg := fmt.Sprintf(NoNodeAvailableMsg+":", f.NumAllNodes)
	if pre := f.Diagnosis.PreFilterMsg; pre != "" {
		// PreFilter rejected every node with the same status: listing it per
		// node would repeat it.
		msg += " " + pre + "."
	} else {
		counts := map[string]int{}
		f.forEachReason(func(_, reason string, n int) { counts[reason] += n })
		if len(counts) > 0 {
			parts := make([]string, 0, len(counts))
			for reason, n := range counts {
				parts = append(parts, fmt.Sprintf("%v %v", n, reason))
			}
			sort.Strings(parts)
			msg += " " + strings.Join(parts, ", ") + "."
		}
	}
	if post := f.Diagnosis.PostFilterMsg; post != "" {
		msg += " " + post
	}
	return msg
}

// forEachReason reports every (plugin, reason) with the number of nodes it
// applied to: recorded nodes one by one, absent nodes all at once.
func (f *FitError) forEachReason(fn func(plugin, reason string, nodes int)) {
	m := f.Diagnosis.NodeToStatus
	if m == nil {
		return
	}
	// Plugins return one shared status for their common reasons, and
	// neighbouring nodes most often fail alike: count runs of one status
	// and report each run once.
	var run *Status
	n := 0
	flush := func() {
		for _, r := range run.Reasons() {
			fn(run.Plugin(), r, n)
		}
	}
	for _, e := range m.entries {
		if e.status == run {
			n++
			continue
		}
		if n > 0 {
			flush()
		}
		run, n = e.status, 1
	}
	if n > 0 {
		flush()
	}
	if absent := f.NumAllNodes - m.Len(); absent > 0 {
		s := m.AbsentNodesStatus()
		for _, r := range s.Reasons() {
			fn(s.Plugin(), r, absent)
		}
	}
}

// ReasonCount is one line of a structured diagnosis: how many nodes a
// plugin rejected for one reason.
type ReasonCount struct {
	Plugin string
	Reason string
	// Count is the number of nodes.
	Count int
}

// ReasonCounts returns the diagnosis as (plugin, reason, count) sorted by
// reason then plugin. A PreFilter rejection counts for every node.
func (f *FitError) ReasonCounts() []ReasonCount {
	type key struct{ plugin, reason string }
	counts := map[key]int{}
	if f.Diagnosis.PreFilterMsg != "" {
		s := f.Diagnosis.NodeToStatus.AbsentNodesStatus()
		if f.Diagnosis.NodeToStatus == nil || len(s.Reasons()) == 0 {
			counts[key{"", f.Diagnosis.PreFilterMsg}] = f.NumAllNodes
		}
		for _, r := range s.Reasons() {
			counts[key{s.Plugin(), r}] = f.NumAllNodes
		}
	} else {
		f.forEachReason(func(plugin, reason string, n int) { counts[key{plugin, reason}] += n })
	}
	out := make([]ReasonCount, 0, len(counts))
	for k, n := range counts {
		out = append(out, ReasonCount{Plugin: k.plugin, Reason: k.reason, Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Reason != out[j].Reason {
			return out[i].Reason < out[j].Reason
		}
		return out[i].Plugin < out[j].Plugin
	})
	return out
}
