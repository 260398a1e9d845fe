package framework

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// ErrNoNodesAvailable is returned when the snapshot holds no node at all.
var ErrNoNodesAvailable = errors.New("no nodes available to schedule pods")

// NodeToStatus records why nodes were rejected in one cycle: explicitly
// for nodes that were filtered, and one shared status for the nodes that
// were never looked at (narrowed away by PreFilter, or all of them when
// PreFilter rejected the pod).
type NodeToStatus struct {
	statuses map[string]*Status
	absent   *Status
}

// NewNodeToStatus returns an empty record whose absent nodes are
// UnschedulableAndUnresolvable with no reason, as in Kubernetes.
func NewNodeToStatus() *NodeToStatus {
	return &NodeToStatus{absent: NewStatus(UnschedulableAndUnresolvable)}
}

// Get returns a node's status, or the absent nodes' status.
func (m *NodeToStatus) Get(nodeName string) *Status {
	if s, ok := m.statuses[nodeName]; ok {
		return s
	}
	return m.AbsentNodesStatus()
}

// Set records a node's status.
func (m *NodeToStatus) Set(nodeName string, s *Status) {
	if m.statuses == nil {
		m.statuses = make(map[string]*Status)
	}
	m.statuses[nodeName] = s
}

// Len returns the number of explicitly recorded nodes.
func (m *NodeToStatus) Len() int {
	if m == nil {
		return 0
	}
	return len(m.statuses)
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
	names := make([]string, 0, len(m.statuses))
	for n := range m.statuses {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fn(n, m.statuses[n])
	}
}

// NodesForStatusCode returns the nodes of lister whose status has code,
// counting absent nodes through the absent status.
func (m *NodeToStatus) NodesForStatusCode(lister NodeInfoLister, code Code) ([]*NodeInfo, error) {
	all := lister.List()
	var out []*NodeInfo
	absentMatches := m.AbsentNodesStatus().Code() == code
	for _, ni := range all {
		s, ok := m.statuses[ni.Node().Name]
		if (ok && s.Code() == code) || (!ok && absentMatches) {
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
	// Counting needs no node order, and sorting thousands of node names on
	// every failed attempt showed up in profiles.
	if m != nil {
		for _, s := range m.statuses {
			for _, r := range s.Reasons() {
				fn(s.Plugin(), r, 1)
			}
		}
	}
	if absent := f.NumAllNodes - m.Len(); absent > 0 && m != nil {
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
