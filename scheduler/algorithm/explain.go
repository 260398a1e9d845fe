package algorithm

import (
	"context"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/runtime"
)

// NodeExplanation is what one node did in a dry run.
type NodeExplanation struct {
	Node string
	// Feasible is true when every filter passed.
	Feasible bool
	// Code, Plugin and Reasons describe the rejection of an infeasible
	// node: the first Filter plugin that failed (filters stop there, as in
	// kube), or the PreFilter status for nodes PreFilter ruled out.
	Code    framework.Code
	Plugin  string
	Reasons []string
	// Scores is the per-plugin breakdown of a feasible node; empty when
	// scoring did not run (a single feasible node, or a nominated node
	// chosen directly).
	Scores []framework.PluginScore
	// Total is the weighted sum of Scores.
	Total int64
}

// Explanation is a dry run of one cycle over every node.
type Explanation struct {
	// Nodes in the order the real cycle would filter them: the window
	// starting where the next Schedule will start, then nodes PreFilter
	// ruled out, in snapshot order.
	Nodes []NodeExplanation
	// Chosen is the node picked, "" if none fits.
	Chosen string
	// Tied lists the nodes sharing the best total (more than one means the
	// choice was a tie-break).
	Tied []string
	// FitError is set when no node fits, as Schedule would return it.
	FitError *framework.FitError
}

// Explain filters every node and scores every feasible one without
// changing anything: not the window start, not the random source, not the
// snapshot. It picks the node as Schedule would: the nominated node if it
// passes, the only feasible node, the first feasible node in window order
// when the profile has no Score plugins, or else the highest total, ties
// broken with a copy of the random source's current state, so it draws
// exactly what the next Schedule would. Hence, when Schedule's window
// covers every node (fewer than 100 nodes, or percentageOfNodesToScore
// 100), the next Schedule on the same snapshot with a fresh CycleState
// chooses the same node. With a smaller window Schedule sees a subset and
// may choose a node Explain ranks lower. Like Schedule, call it from the
// shard's loop.
func (s *Placer) Explain(ctx context.Context, fwk *runtime.Framework, state *framework.CycleState, pod *framework.PodInfo) (Explanation, error) {
	var ex Explanation
	all := fwk.SnapshotSharedLister().NodeInfos().List()
	if len(all) == 0 {
		return ex, framework.ErrNoNodesAvailable
	}
	diag := framework.Diagnosis{NodeToStatus: framework.NewNodeToStatus()}
	preRes, st, withNodes := fwk.RunPreFilterPlugins(ctx, state, pod)
	diag.UnschedulablePlugins = withNodes
	if !st.IsSuccess() {
		if !st.IsRejected() {
			return ex, st.AsError()
		}
		diag.NodeToStatus.SetAbsentNodesStatus(st)
		diag.PreFilterMsg = st.Message()
		diag.AddPluginStatus(st)
		for _, ni := range all {
			ex.Nodes = append(ex.Nodes, rejection(ni, st))
		}
		ex.FitError = &framework.FitError{Pod: pod.Pod, NumAllNodes: len(all), Diagnosis: diag}
		return ex, nil
	}

	candidates := narrow(fwk, all, preRes, withNodes, &diag)
	feasibleNodes, err := s.explainFilters(ctx, fwk, state, pod, all, candidates, preRes, &diag, &ex)
	if err != nil {
		return ex, err
	}

	if nominated := pod.Pod.NominatedNodeName(); nominated != "" && s.nominatedFits(ctx, fwk, state, pod, nominated, feasibleNodes, candidates) {
		ex.Chosen, ex.Tied = nominated, []string{nominated}
		return ex, nil
	}
	if len(feasibleNodes) == 0 {
		ex.FitError = &framework.FitError{Pod: pod.Pod, NumAllNodes: len(all), Diagnosis: diag}
		return ex, nil
	}
	if len(feasibleNodes) == 1 || !fwk.HasScorePlugins() {
		// Without Score plugins Schedule stops at the first feasible node
		// of its window.
		ex.Chosen = feasibleNodes[0].Node().Name
		ex.Tied = []string{ex.Chosen}
		return ex, nil
	}

	err = s.explainScores(ctx, fwk, state, pod, feasibleNodes, &ex)
	return ex, err
}

// explainFilters runs the filters over candidates in window order, and
// adds every node's outcome to ex: the candidates', then those PreFilter
// ruled out. It returns the feasible nodes.
func (s *Placer) explainFilters(ctx context.Context, fwk *runtime.Framework, state *framework.CycleState, pod *framework.PodInfo,
	all, candidates []*framework.NodeInfo, preRes *framework.PreFilterResult, diag *framework.Diagnosis, ex *Explanation) ([]*framework.NodeInfo, error) {
	n := len(candidates)
	start := s.nextStartNodeIndex
	statuses := make([]*framework.Status, n)
	var firstErr *framework.Status
	fwk.Parallelizer().Until(ctx, n, func(i int) {
		statuses[i] = fwk.RunFilterPluginsWithNominatedPods(ctx, state, pod, candidates[(start+i)%n])
	})
	var feasibleNodes []*framework.NodeInfo
	for i, st := range statuses {
		ni := candidates[(start+i)%n]
		switch {
		case st.IsSuccess():
			feasibleNodes = append(feasibleNodes, ni)
			ex.Nodes = append(ex.Nodes, NodeExplanation{Node: ni.Node().Name, Feasible: true})
		case st.Code() == framework.Error:
			if firstErr == nil {
				firstErr = st
			}
		default:
			diag.NodeToStatus.Set(ni.Node().Name, st)
			diag.AddPluginStatus(st)
			ex.Nodes = append(ex.Nodes, rejection(ni, st))
		}
	}
	if firstErr != nil {
		return nil, firstErr.AsError()
	}
	if !preRes.AllNodes() {
		absent := diag.NodeToStatus.AbsentNodesStatus()
		in := make(map[string]bool, n)
		for _, ni := range candidates {
			in[ni.Node().Name] = true
		}
		for _, ni := range all {
			if !in[ni.Node().Name] {
				ex.Nodes = append(ex.Nodes, rejection(ni, absent))
			}
		}
	}
	return feasibleNodes, nil
}

// explainScores scores the feasible nodes into ex, and picks the node
// with a copy of the random source, so the next Schedule draws the same.
func (s *Placer) explainScores(ctx context.Context, fwk *runtime.Framework, state *framework.CycleState, pod *framework.PodInfo,
	feasibleNodes []*framework.NodeInfo, ex *Explanation) error {
	var scores framework.NodeScores
	totals, err := s.prioritize(ctx, fwk, state, pod, feasibleNodes, &scores, nil, false)
	if err != nil {
		return err
	}
	byName := make(map[string]int, len(feasibleNodes))
	for i, ni := range feasibleNodes {
		byName[ni.Node().Name] = i
	}
	for k := range ex.Nodes {
		if i, ok := byName[ex.Nodes[k].Node]; ok && ex.Nodes[k].Feasible {
			ex.Nodes[k].Scores = scores.NodePluginScores(i)
			ex.Nodes[k].Total = totals[i]
		}
	}
	pcg := *s.pcg
	best := selectHost(totals, tieBreaker{&pcg})
	ex.Chosen = feasibleNodes[best].Node().Name
	for i, t := range totals {
		if t == totals[best] {
			ex.Tied = append(ex.Tied, feasibleNodes[i].Node().Name)
		}
	}
	return nil
}

func rejection(ni *framework.NodeInfo, st *framework.Status) NodeExplanation {
	return NodeExplanation{Node: ni.Node().Name, Code: st.Code(), Plugin: st.Plugin(), Reasons: st.Reasons()}
}

// nominatedFits reports whether Schedule would take the nominated node
// directly: it is tried before, and regardless of, PreFilter narrowing.
func (s *Placer) nominatedFits(ctx context.Context, fwk *runtime.Framework, state *framework.CycleState, pod *framework.PodInfo, name string, feasibleNodes, candidates []*framework.NodeInfo) bool {
	if nodeIn(feasibleNodes, name) {
		return true
	}
	if nodeIn(candidates, name) {
		return false
	}
	ni, err := fwk.SnapshotSharedLister().NodeInfos().Get(name)
	return err == nil && fwk.RunFilterPluginsWithNominatedPods(ctx, state, pod, ni).IsSuccess()
}

func nodeIn(nodes []*framework.NodeInfo, name string) bool {
	for _, ni := range nodes {
		if ni.Node().Name == name {
			return true
		}
	}
	return false
}
