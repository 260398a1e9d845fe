// Package nodeaffinity keeps pods on nodes that match their NodeSelector
// and required node affinity, and prefers nodes that match their weighted
// preferences.
package nodeaffinity

import (
	"context"
	"fmt"
	"slices"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/helper"
	"github.com/berth-io/berth/scheduler/plugins/names"
)

// Name is the plugin's name.
const Name = names.NodeAffinity

// Rejection reasons, Kubernetes' wording.
const (
	// ErrReasonPod: the node fails the pod's NodeSelector or required
	// node affinity.
	ErrReasonPod = "node(s) didn't match Pod's node affinity/selector"
	// ErrReasonEnforced: the node fails Args.AddedAffinity.
	ErrReasonEnforced = "node(s) didn't match scheduler-enforced node affinity"
	// ErrReasonConflict: every required term pins the pod to node names
	// and together they name none.
	ErrReasonConflict = "pod affinity terms conflict"
)

const (
	preFilterStateKey framework.StateKey = "PreFilter" + Name
	preScoreStateKey  framework.StateKey = "PreScore" + Name
)

// Args configures NodeAffinity. The zero value adds nothing.
type Args struct {
	// AddedAffinity applies to every pod on top of its own: Required must
	// match as well as the pod's constraints, and matching Preferred terms
	// add their weights to the pod's. Unlike a pod's terms, it must parse.
	AddedAffinity *framework.NodeAffinity
}

// NodeAffinity filters and scores nodes by node selectors and node
// affinity. Kube: pkg/scheduler/framework/plugins/nodeaffinity.
type NodeAffinity struct {
	// addedSelector is nil when Args add no required affinity.
	addedSelector *nodeSelector
	// addedPreferred holds the added preferences; hasAddedPreferred is set
	// when Args list any, even if every one has weight 0.
	addedPreferred    []preferredTerm
	hasAddedPreferred bool
}

var (
	_ framework.PreFilterPlugin   = (*NodeAffinity)(nil)
	_ framework.FilterPlugin      = (*NodeAffinity)(nil)
	_ framework.PreScorePlugin    = (*NodeAffinity)(nil)
	_ framework.ScorePlugin       = (*NodeAffinity)(nil)
	_ framework.ScoreExtensions   = (*NodeAffinity)(nil)
	_ framework.EnqueueExtensions = (*NodeAffinity)(nil)
)

// New builds the plugin from *Args, Args or nil (nothing added). It fails
// if the added affinity does not parse.
func New(_ context.Context, args any, _ framework.Handle) (framework.Plugin, error) {
	a, err := framework.DecodeArgs[Args](Name, args)
	if err != nil {
		return nil, err
	}
	pl := &NodeAffinity{}
	if added := a.AddedAffinity; added != nil {
		if added.Required != nil {
			pl.addedSelector = parseNodeSelector(added.Required, "addedAffinity.required")
			if err := pl.addedSelector.err(); err != nil {
				return nil, fmt.Errorf("%s: %w", Name, err)
			}
		}
		if len(added.Preferred) > 0 {
			terms, err := parsePreferredTerms(added.Preferred, "addedAffinity.preferred")
			if err != nil {
				return nil, fmt.Errorf("%s: %w", Name, err)
			}
			pl.addedPreferred, pl.hasAddedPreferred = terms, true
		}
	}
	return pl, nil
}

// Name implements framework.Plugin.
func (*NodeAffinity) Name() string { return Name }

// preFilterState is the pod's parsed hard constraints; it does not depend
// on other pods.
type preFilterState struct {
	required RequiredNodeAffinity
}

func (s *preFilterState) Clone() framework.StateData { return s }

// PreFilter implements framework.PreFilterPlugin. It skips pods with
// nothing to check, parses the constraints once, and, when every required
// term pins metadata.name with In, narrows the nodes to those names.
func (pl *NodeAffinity) PreFilter(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, _ []*framework.NodeInfo) (*framework.PreFilterResult, *framework.Status) {
	p := pod.Pod
	required := requiredOf(p)
	if required == nil && pl.addedSelector == nil && len(p.NodeSelector) == 0 {
		return nil, framework.SkipStatus()
	}
	state.Write(preFilterStateKey, &preFilterState{required: GetRequiredNodeAffinity(p)})
	if required == nil || len(required.NodeSelectorTerms) == 0 {
		return nil, nil
	}
	nodeNames := pinnedNodeNames(required.NodeSelectorTerms)
	if nodeNames == nil {
		return nil, nil
	}
	if len(nodeNames) == 0 {
		return nil, framework.NewStatus(framework.UnschedulableAndUnresolvable, ErrReasonConflict)
	}
	return &framework.PreFilterResult{NodeNames: nodeNames}, nil
}

// pinnedNodeNames returns the union over terms of the node names each term
// allows through its "metadata.name In" fields (intersected within the
// term), or nil if some term names no node this way: terms are ORed, so
// that term leaves every node possible.
func pinnedNodeNames(terms []framework.NodeSelectorTerm) map[string]struct{} {
	var union map[string]struct{}
	for i := range terms {
		var names map[string]struct{}
		for _, r := range terms[i].MatchFields {
			if r.Key != nodeNameField || r.Operator != framework.NodeSelectorOpIn {
				continue
			}
			if names == nil {
				names = make(map[string]struct{}, len(r.Values))
				for _, v := range r.Values {
					names[v] = struct{}{}
				}
				continue
			}
			for n := range names {
				if !slices.Contains(r.Values, n) {
					delete(names, n)
				}
			}
		}
		if names == nil {
			return nil
		}
		if union == nil {
			union = make(map[string]struct{}, len(names))
		}
		for n := range names {
			union[n] = struct{}{}
		}
	}
	return union
}

// PreFilterExtensions implements framework.PreFilterPlugin: the state does
// not depend on other pods.
func (*NodeAffinity) PreFilterExtensions() framework.PreFilterExtensions { return nil }

// Filter implements framework.FilterPlugin. Terms of the pod that fail to
// parse simply do not match, as in Kubernetes.
func (pl *NodeAffinity) Filter(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, nodeInfo *framework.NodeInfo) *framework.Status {
	node := nodeInfo.Node()
	if pl.addedSelector != nil {
		if ok, _ := pl.addedSelector.match(node); !ok {
			return enforcedAffinityUnmet
		}
	}
	s, err := framework.ReadState[*preFilterState](state, preFilterStateKey)
	if err != nil {
		// PreFilter is disabled in this profile: parse here.
		s = &preFilterState{required: GetRequiredNodeAffinity(pod.Pod)}
	}
	if ok, _ := s.required.Match(node); !ok {
		return podAffinityUnmet
	}
	return nil
}

// Filter's rejections (framework.NewRejection): a pod bound to a few zones
// rejects every node of the others.
var (
	enforcedAffinityUnmet = framework.NewRejection(framework.UnschedulableAndUnresolvable, Name, ErrReasonEnforced)
	podAffinityUnmet      = framework.NewRejection(framework.UnschedulableAndUnresolvable, Name, ErrReasonPod)
)

// preScoreState is the pod's parsed preferences.
type preScoreState struct {
	preferred []preferredTerm
}

func (s *preScoreState) Clone() framework.StateData { return s }

// PreScore implements framework.PreScorePlugin: it skips pods with no
// preference when Args add none, and fails the cycle on a preference that
// does not parse, as Kubernetes does.
func (pl *NodeAffinity) PreScore(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, _ []*framework.NodeInfo) *framework.Status {
	preferred := preferredOf(pod.Pod)
	if preferred == nil && !pl.hasAddedPreferred {
		return framework.SkipStatus()
	}
	s, err := newPreScoreState(preferred)
	if err != nil {
		return framework.AsStatus(err)
	}
	state.Write(preScoreStateKey, s)
	return nil
}

func newPreScoreState(preferred []framework.PreferredSchedulingTerm) (*preScoreState, error) {
	if preferred == nil {
		return &preScoreState{}, nil
	}
	terms, err := parsePreferredTerms(preferred, "spec.affinity.nodeAffinity.preferred")
	if err != nil {
		return nil, err
	}
	return &preScoreState{preferred: terms}, nil
}

// Score implements framework.ScorePlugin: the sum of the weights of the
// added and the pod's preferred terms that match the node.
func (pl *NodeAffinity) Score(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	node := nodeInfo.Node()
	count := scorePreferred(pl.addedPreferred, node)
	s, err := framework.ReadState[*preScoreState](state, preScoreStateKey)
	if err != nil {
		// PreScore is disabled in this profile: parse here.
		if s, err = newPreScoreState(preferredOf(pod.Pod)); err != nil {
			return 0, framework.AsStatus(err)
		}
	}
	return count + scorePreferred(s.preferred, node), nil
}

// ScoreExtensions implements framework.ScorePlugin.
func (pl *NodeAffinity) ScoreExtensions() framework.ScoreExtensions { return pl }

// NormalizeScore implements framework.ScoreExtensions: the best node gets
// MaxNodeScore, the others proportionally (truncated).
func (*NodeAffinity) NormalizeScore(_ context.Context, _ *framework.CycleState, _ *framework.PodInfo, scores framework.NodeScoreList) *framework.Status {
	return helper.DefaultNormalizeScore(framework.MaxNodeScore, false, scores)
}

// NormalizeScoreOf implements framework.MaxNormalizer.
func (*NodeAffinity) NormalizeScoreOf(raw, highest int64) int64 {
	return helper.NormalizedScore(framework.MaxNodeScore, false, raw, highest)
}

// PreScoreUsesNodes implements framework.PreScoreNodesUser.
func (*NodeAffinity) PreScoreUsesNodes(*framework.PodInfo) bool { return false }

// EventsToRegister implements framework.EnqueueExtensions: only a node
// added or relabelled can start matching.
func (pl *NodeAffinity) EventsToRegister(context.Context) ([]framework.ClusterEventWithHint, error) {
	return []framework.ClusterEventWithHint{{
		Event:          framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionAdd | framework.ActionUpdateNodeLabel},
		QueueingHintFn: pl.isSchedulableAfterNodeChange,
	}}, nil
}

// isSchedulableAfterNodeChange queues the pod when the node, new or
// updated, now matches the added and the pod's required affinity and, for
// an update, did not before.
func (pl *NodeAffinity) isSchedulableAfterNodeChange(pod *framework.Pod, oldObj, newObj any) (framework.QueueingHint, error) {
	newNode, ok := newObj.(*framework.Node)
	if !ok || newNode == nil {
		return framework.Queue, nil
	}
	if pl.addedSelector != nil {
		if ok, _ := pl.addedSelector.match(newNode); !ok {
			return framework.QueueSkip, nil
		}
	}
	required := GetRequiredNodeAffinity(pod)
	matches, err := required.Match(newNode)
	if err != nil {
		return framework.Queue, err
	}
	if !matches {
		return framework.QueueSkip, nil
	}
	oldNode, ok := oldObj.(*framework.Node)
	if !ok || oldNode == nil {
		return framework.Queue, nil
	}
	matched, err := required.Match(oldNode)
	if err != nil {
		return framework.Queue, err
	}
	if matched {
		return framework.QueueSkip, nil
	}
	return framework.Queue, nil
}

var _ framework.SignPlugin = (*NodeAffinity)(nil)

// AppendSignature implements framework.SignPlugin: the pod's node selector
// and node affinity; the added affinity is the plugin's, the same for
// every pod.
func (*NodeAffinity) AppendSignature(sig []byte, pod *framework.PodInfo) ([]byte, bool) {
	p := pod.Pod
	sig = framework.AppendSigStringMap(sig, p.NodeSelector)
	var na *framework.NodeAffinity
	if p.Affinity != nil {
		na = p.Affinity.NodeAffinity
	}
	if na == nil {
		return append(sig, '-'), true
	}
	sig = append(sig, '+')
	if na.Required != nil {
		sig = append(sig, 'r')
		sig = appendSigTerms(sig, na.Required.NodeSelectorTerms)
	}
	sig = framework.AppendSigInt(sig, int64(len(na.Preferred)))
	for i := range na.Preferred {
		sig = framework.AppendSigInt(sig, int64(na.Preferred[i].Weight))
		sig = appendSigTerms(sig, []framework.NodeSelectorTerm{na.Preferred[i].Preference})
	}
	return sig, true
}

func appendSigTerms(sig []byte, terms []framework.NodeSelectorTerm) []byte {
	sig = framework.AppendSigInt(sig, int64(len(terms)))
	for i := range terms {
		sig = appendSigRequirements(sig, terms[i].MatchExpressions)
		sig = appendSigRequirements(sig, terms[i].MatchFields)
	}
	return sig
}

func appendSigRequirements(sig []byte, reqs []framework.NodeSelectorRequirement) []byte {
	sig = framework.AppendSigInt(sig, int64(len(reqs)))
	for i := range reqs {
		r := &reqs[i]
		sig = framework.AppendSigString(sig, r.Key)
		sig = framework.AppendSigString(sig, string(r.Operator))
		sig = framework.AppendSigInt(sig, int64(len(r.Values)))
		for _, v := range r.Values {
			sig = framework.AppendSigString(sig, v)
		}
	}
	return sig
}

var (
	_ framework.PreScoreNodesUser = (*NodeAffinity)(nil)
	_ framework.MaxNormalizer     = (*NodeAffinity)(nil)
)
