// Package noderesources checks that a node has room for a pod and scores
// nodes by how their resources would be used.
package noderesources

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/helper"
	"github.com/berth-io/berth/scheduler/plugins/names"
)

// Name is the plugin's name.
const Name = names.NodeResourcesFit

const (
	preFilterStateKey framework.StateKey = "PreFilter" + Name
	preScoreStateKey  framework.StateKey = "PreScore" + Name
)

// Fit rejects nodes without room for the pod's requests and scores the
// rest with the configured strategy. Kube:
// pkg/scheduler/framework/plugins/noderesources/fit.go.
type Fit struct {
	ignoredResources map[string]struct{}
	ignoredGroups    map[string]struct{}
	resources        []ResourceSpec
	scorer           scorer
}

var (
	_ framework.PreFilterPlugin   = (*Fit)(nil)
	_ framework.FilterPlugin      = (*Fit)(nil)
	_ framework.PreScorePlugin    = (*Fit)(nil)
	_ framework.ScorePlugin       = (*Fit)(nil)
	_ framework.EnqueueExtensions = (*Fit)(nil)
)

// New builds the plugin from *FitArgs, FitArgs or nil (defaults).
func New(_ context.Context, args any, _ framework.Handle) (framework.Plugin, error) {
	a, err := framework.DecodeArgs[FitArgs](Name, args)
	if err != nil {
		return nil, err
	}
	d := defaulted(&a)
	if err := validate(&d); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	f := &Fit{
		ignoredResources: toSet(d.IgnoredResources),
		ignoredGroups:    toSet(d.IgnoredResourceGroups),
		resources:        d.ScoringStrategy.Resources,
		scorer:           newScorer(d.ScoringStrategy),
	}
	return f, nil
}

func toSet(s []string) map[string]struct{} {
	out := make(map[string]struct{}, len(s))
	for _, v := range s {
		out[v] = struct{}{}
	}
	return out
}

// Name implements framework.Plugin.
func (*Fit) Name() string { return Name }

// scalarRequest is one extended resource the pod requests.
type scalarRequest struct {
	name     string
	quantity int64
}

// preFilterState is the pod's request, with its extended resources as a
// sorted list (minus ignored ones and zeros) so every node checks them in
// the same order without touching a map.
type preFilterState struct {
	req     *framework.Resource
	scalars []scalarRequest
}

func (s *preFilterState) Clone() framework.StateData { return s }

// PreFilter implements framework.PreFilterPlugin.
func (f *Fit) PreFilter(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	state.Write(preFilterStateKey, f.computeRequest(pod))
	return nil, nil
}

func (f *Fit) computeRequest(pod *framework.PodInfo) *preFilterState {
	s := &preFilterState{req: &pod.Requests}
	for name, q := range pod.Requests.Scalar {
		if q == 0 || f.ignored(name) {
			continue
		}
		s.scalars = append(s.scalars, scalarRequest{name: name, quantity: q})
	}
	sort.Slice(s.scalars, func(i, j int) bool { return s.scalars[i].name < s.scalars[j].name })
	return s
}

// ignored reports whether an extended resource is left unchecked, by name
// or by its group (the prefix before "/").
func (f *Fit) ignored(name string) bool {
	if _, ok := f.ignoredResources[name]; ok {
		return true
	}
	if len(f.ignoredGroups) == 0 {
		return false
	}
	group, _, _ := strings.Cut(name, "/")
	_, ok := f.ignoredGroups[group]
	return ok
}

// PreFilterExtensions implements framework.PreFilterPlugin: the state does
// not depend on other pods.
func (*Fit) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter implements framework.FilterPlugin and keeps every reason, like
// kube: "Too many pods", "Insufficient cpu", ... The status is
// UnschedulableAndUnresolvable when any one resource asked for exceeds the
// node's total, else Unschedulable.
func (f *Fit) Filter(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	s, err := framework.ReadState[*preFilterState](state, preFilterStateKey)
	if err != nil {
		return framework.AsStatus(err)
	}
	var buf [4]InsufficientResource
	insufficient := appendInsufficient(buf[:0], s, nodeInfo)
	if len(insufficient) == 0 {
		return nil
	}
	if len(insufficient) == 1 {
		// A full cluster rejects every node for the same one reason: share
		// the status rather than allocate one per node.
		if st, ok := singleReason[singleKey{insufficient[0].ResourceName, insufficient[0].Unresolvable}]; ok {
			return st
		}
	}
	code := framework.Unschedulable
	reasons := make([]string, len(insufficient))
	for i := range insufficient {
		reasons[i] = insufficient[i].Reason
		if insufficient[i].Unresolvable {
			code = framework.UnschedulableAndUnresolvable
		}
	}
	return framework.NewStatus(code, reasons...)
}

var _ framework.FreedFitter = (*Fit)(nil)

// CouldFitWithFreed implements framework.FreedFitter: it is Filter's test
// of pods, cpu, memory and ephemeral storage on the node's totals less
// freed. Scalar resources are not totalled per priority, so they never
// rule a node out here.
func (f *Fit) CouldFitWithFreed(state *framework.CycleState, _ *framework.PodInfo, nodeInfo *framework.NodeInfo, freed framework.Freed) bool {
	s, err := framework.ReadState[*preFilterState](state, preFilterStateKey)
	if err != nil {
		return true // Filter will say what is wrong
	}
	alloc, used := &nodeInfo.Allocatable, &nodeInfo.Requested
	if int64(len(nodeInfo.Pods)-freed.Pods)+1 > alloc.AllowedPodNumber {
		return false
	}
	short := func(req, allocatable, used, freed int64) bool {
		if used == framework.Saturated {
			// What is left after freeing is unknown: the dry run on a
			// real copy, which recounts, decides.
			return false
		}
		return framework.Exceeds(req, max(framework.SubQuantity(used, freed), 0), allocatable)
	}
	req := s.req
	return !short(req.MilliCPU, alloc.MilliCPU, used.MilliCPU, freed.MilliCPU) &&
		!short(req.Memory, alloc.Memory, used.Memory, freed.Memory) &&
		!short(req.EphemeralStorage, alloc.EphemeralStorage, used.EphemeralStorage, freed.EphemeralStorage)
}

// singleKey picks a shared single-reason status: the resource and whether
// the node could never hold the pod.
type singleKey struct {
	resource     string
	unresolvable bool
}

// singleReason holds a status for each built-in resource a node may lack
// alone, resolvable or not: shared rejections (framework.NewRejection).
var singleReason = func() map[singleKey]*framework.Status {
	m := map[singleKey]*framework.Status{}
	for name, reason := range map[string]string{
		framework.ResourcePods: "Too many pods", framework.ResourceCPU: "Insufficient cpu",
		framework.ResourceMemory: "Insufficient memory", framework.ResourceEphemeralStorage: "Insufficient ephemeral-storage",
	} {
		m[singleKey{name, false}] = framework.NewRejection(framework.Unschedulable, Name, reason)
		if name != framework.ResourcePods {
			m[singleKey{name, true}] = framework.NewRejection(framework.UnschedulableAndUnresolvable, Name, reason)
		}
	}
	return m
}()

// InsufficientResource is one resource a node lacks for a pod.
type InsufficientResource struct {
	ResourceName string
	Reason       string
	Requested    int64
	Used         int64
	Capacity     int64
	// Unresolvable: the request exceeds the node's whole allocatable, so
	// evicting pods cannot make room (kube v1.35+ then answers
	// UnschedulableAndUnresolvable and preemption skips the node). The pod
	// count never is: evictions free slots.
	Unresolvable bool
}

// Fits returns what the node lacks for the pod (nothing: it fits), with
// no resource ignored.
func Fits(pod *framework.PodInfo, nodeInfo *framework.NodeInfo) []InsufficientResource {
	f := &Fit{}
	return appendInsufficient(nil, f.computeRequest(pod), nodeInfo)
}

// appendInsufficient is kube's fitsRequest: every pod takes a pod slot
// even if it requests nothing; a resource is short only if the pod
// requests some and more than allocatable minus requested. It appends
// what is short to out, which allocates only past out's capacity.
func appendInsufficient(out []InsufficientResource, s *preFilterState, ni *framework.NodeInfo) []InsufficientResource {
	alloc, used := &ni.Allocatable, &ni.Requested
	if int64(len(ni.Pods))+1 > alloc.AllowedPodNumber {
		out = append(out, InsufficientResource{framework.ResourcePods, "Too many pods", 1, int64(len(ni.Pods)), alloc.AllowedPodNumber, false})
	}
	req := s.req
	if req.MilliCPU == 0 && req.Memory == 0 && req.EphemeralStorage == 0 && len(s.scalars) == 0 {
		return out
	}
	if framework.Exceeds(req.MilliCPU, used.MilliCPU, alloc.MilliCPU) {
		out = append(out, InsufficientResource{framework.ResourceCPU, "Insufficient cpu", req.MilliCPU, used.MilliCPU, alloc.MilliCPU,
			req.MilliCPU > alloc.MilliCPU})
	}
	if framework.Exceeds(req.Memory, used.Memory, alloc.Memory) {
		out = append(out, InsufficientResource{framework.ResourceMemory, "Insufficient memory", req.Memory, used.Memory, alloc.Memory,
			req.Memory > alloc.Memory})
	}
	if framework.Exceeds(req.EphemeralStorage, used.EphemeralStorage, alloc.EphemeralStorage) {
		out = append(out, InsufficientResource{framework.ResourceEphemeralStorage, "Insufficient ephemeral-storage",
			req.EphemeralStorage, used.EphemeralStorage, alloc.EphemeralStorage, req.EphemeralStorage > alloc.EphemeralStorage})
	}
	for _, sr := range s.scalars {
		a, u := alloc.Scalar[sr.name], used.Scalar[sr.name]
		if framework.Exceeds(sr.quantity, u, a) {
			out = append(out, InsufficientResource{sr.name, "Insufficient " + sr.name, sr.quantity, u, a, sr.quantity > a})
		}
	}
	return out
}

// preScoreState is the pod's request of each scored resource, kube's
// non-zero defaults applied to cpu and memory.
type preScoreState struct {
	podRequests []int64
}

func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore implements framework.PreScorePlugin.
func (f *Fit) PreScore(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, _ []*framework.NodeInfo) *framework.Status {
	state.Write(preScoreStateKey, &preScoreState{podRequests: helper.PodRequests(pod, f.resources, false, nil)})
	return nil
}

// maxInlineResources is how many scored resources Score handles without
// allocating.
const maxInlineResources = 8

// Score implements framework.ScorePlugin.
func (f *Fit) Score(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadState[*preScoreState](state, preScoreStateKey)
	var podRequests []int64
	if err == nil {
		podRequests = s.podRequests
	} else {
		// As kube: score even if PreScore did not run.
		podRequests = helper.PodRequests(pod, f.resources, false, nil)
	}
	var reqBuf, allocBuf [maxInlineResources]int64
	requested, allocatable := reqBuf[:], allocBuf[:]
	if n := len(f.resources); n > maxInlineResources {
		requested, allocatable = make([]int64, n), make([]int64, n)
	}
	requested, allocatable = requested[:len(f.resources)], allocatable[:len(f.resources)]
	for i, r := range f.resources {
		a, q := helper.AllocatableRequested(nodeInfo, r.Name, podRequests[i], false)
		if a == 0 {
			continue
		}
		allocatable[i], requested[i] = a, q
	}
	return f.scorer.score(requested, allocatable), nil
}

// ScoreExtensions implements framework.ScorePlugin: scores are final.
func (*Fit) ScoreExtensions() framework.ScoreExtensions { return nil }

// PreScoreUsesNodes implements framework.PreScoreNodesUser.
func (*Fit) PreScoreUsesNodes(*framework.PodInfo) bool { return false }

// EventsToRegister implements framework.EnqueueExtensions: room appears
// when an assigned pod goes away or a node is added or grows.
func (f *Fit) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{
		{Event: framework.ClusterEvent{Resource: framework.EventResourceAssigned, ActionType: framework.ActionDelete}, QueueingHintFn: isSchedulableAfterPodDelete},
		{Event: framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionAdd | framework.ActionUpdateNodeAllocatable}, QueueingHintFn: isSchedulableAfterNodeChange},
	}, nil
}

// isSchedulableAfterPodDelete: only a deleted pod that held a node frees
// anything.
func isSchedulableAfterPodDelete(_ *framework.Pod, oldObj, _ any) (framework.QueueingHint, error) {
	if deleted, ok := oldObj.(*framework.Pod); ok && deleted != nil && deleted.NodeName == "" {
		return framework.QueueSkip, nil
	}
	return framework.Queue, nil
}

// isSchedulableAfterNodeChange: the node must fit the pod when empty, and,
// for an update, have grown in something the pod requests (or in pods).
func isSchedulableAfterNodeChange(pod *framework.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	newNode, ok := newObj.(*framework.Node)
	if !ok || newNode == nil {
		return framework.Queue, nil
	}
	pi := framework.NewPodInfo(pod)
	empty := framework.NewNodeInfo()
	empty.SetNode(newNode)
	if len(Fits(pi, empty)) != 0 {
		return framework.QueueSkip, nil
	}
	oldNode, ok := oldObj.(*framework.Node)
	if !ok || oldNode == nil {
		return framework.Queue, nil
	}
	if anyRequestedResourceIncreased(&pi.Requests, oldNode, newNode) {
		return framework.Queue, nil
	}
	return framework.QueueSkip, nil
}

func anyRequestedResourceIncreased(req *framework.Resource, oldNode, newNode *framework.Node) bool {
	o, n := framework.NewResource(oldNode.Allocatable), framework.NewResource(newNode.Allocatable)
	if n.AllowedPodNumber > o.AllowedPodNumber {
		return true
	}
	if (req.MilliCPU > 0 && n.MilliCPU > o.MilliCPU) || (req.Memory > 0 && n.Memory > o.Memory) ||
		(req.EphemeralStorage > 0 && n.EphemeralStorage > o.EphemeralStorage) {
		return true
	}
	for name, q := range req.Scalar {
		if q != 0 && n.Scalar[name] > o.Scalar[name] {
			return true
		}
	}
	return false
}

var _ framework.SignPlugin = (*Fit)(nil)

// AppendSignature implements framework.SignPlugin: Filter reads the pod's
// requests, Score its requests with kube's non-zero defaults.
func (*Fit) AppendSignature(sig []byte, pod *framework.PodInfo) ([]byte, bool) {
	sig = framework.AppendSigResource(sig, &pod.Requests)
	return framework.AppendSigResource(sig, &pod.NonZeroRequests), true
}

var (
	_ framework.PreScoreNodesUser = (*Fit)(nil)
)
