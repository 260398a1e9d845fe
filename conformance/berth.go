package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/berth-io/berth/scheduler/algorithm"
	"github.com/berth-io/berth/scheduler/cache"
	"github.com/berth-io/berth/scheduler/config"
	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/runtime"
	"github.com/berth-io/berth/scheduler/plugins"
	"github.com/berth-io/berth/scheduler/plugins/defaultpreemption"
)

// berthLister lets one framework serve every scenario: plugins ask the
// handle for the lister each cycle, and each scenario swaps the snapshot.
type berthLister struct{ framework.SharedLister }

// BerthRunner runs scenarios through Berth's default profile and the
// dry-run (Explain) path of its scheduling algorithm.
type BerthRunner struct {
	lister *berthLister
	fwk    *runtime.Framework
}

// NewBerthRunner builds the first profile of a configuration file, read
// by Berth's own config package, over an empty snapshot.
func NewBerthRunner(ctx context.Context, profile string) (*BerthRunner, error) {
	cfg, err := config.Parse([]byte(profile))
	if err != nil {
		return nil, fmt.Errorf("berth config: %w", err)
	}
	l := &berthLister{cache.NewSnapshot(nil, nil)}
	f, err := runtime.NewFramework(ctx, plugins.NewInTreeRegistry(), cfg.Profiles[0],
		runtime.WithSnapshotSharedLister(l), runtime.WithParallelism(1))
	if err != nil {
		return nil, err
	}
	return &BerthRunner{lister: l, fwk: f}, nil
}

// Run dry-runs the scenario's pod; it is not safe for concurrent use.
func (r *BerthRunner) Run(ctx context.Context, sc *Scenario) (*Outcome, error) {
	var nodes []*framework.Node
	for _, n := range sc.Nodes {
		nodes = append(nodes, toBerthNode(n))
	}
	var pods []*framework.Pod
	for _, p := range sc.Pods {
		pods = append(pods, toBerthPod(p))
	}
	r.lister.SharedLister = cache.NewSnapshot(pods, nodes)
	// Every node is filtered (fewer than 100), so Explain sees what a
	// real cycle sees.
	state, pod := framework.NewCycleState(), framework.NewPodInfo(toBerthPod(sc.Pod))
	ex, err := algorithm.New(100).Explain(ctx, r.fwk, state, pod)
	if err != nil {
		return nil, fmt.Errorf("berth: %w", err)
	}
	out := newOutcome()
	var feasible []string
	totals := map[string]int64{}
	for _, n := range ex.Nodes {
		o := &NodeOutcome{Feasible: n.Feasible}
		if n.Feasible {
			feasible = append(feasible, n.Node)
			for _, s := range n.Scores {
				if o.Scores == nil {
					o.Scores = map[string]int64{}
				}
				o.Scores[s.Plugin] = s.Score
			}
			totals[n.Node] = n.Total
		} else {
			o.Plugin, o.Code, o.Reasons = n.Plugin, n.Code.String(), append([]string(nil), n.Reasons...)
		}
		out.Nodes[n.Node] = o
	}
	if len(feasible) == 1 {
		out.Best = feasible
	} else {
		out.Best = bestOf(totals)
	}
	if ex.FitError != nil {
		if err := r.preempt(ctx, state, pod, ex.FitError.Diagnosis.NodeToStatus, out); err != nil {
			return nil, err
		}
	}
	out.normalize()
	return out, nil
}

// preempt records every node where DefaultPreemption's dry run finds
// victims, before one is chosen; nothing for a pod that may not preempt.
func (r *BerthRunner) preempt(ctx context.Context, state *framework.CycleState, pod *framework.PodInfo, statuses framework.NodeToStatusReader, out *Outcome) error {
	if pod.Pod.PreemptionPolicy == framework.PreemptNever {
		return nil
	}
	for _, pl := range r.fwk.PostFilterPlugins() {
		dp, ok := pl.(*defaultpreemption.DefaultPreemption)
		if !ok {
			continue
		}
		candidates, _, err := dp.FindCandidates(ctx, state, pod, statuses)
		if err != nil {
			return fmt.Errorf("berth preemption dry run: %w", err)
		}
		out.Candidates = map[string][]string{}
		for _, c := range candidates {
			var victims []string
			for _, v := range c.Victims {
				victims = append(victims, v.Key())
			}
			out.Candidates[c.Name] = victims
		}
		recordSelection(candidates, time.Now(), out)
	}
	return nil
}

// recordSelection records the candidate Berth nominates, as its
// preemption does, and every candidate tied with it. SelectCandidate
// keeps the first of the tied in the order it is given, so starting the
// list at each candidate in turn brings out each one tied for best.
func recordSelection(candidates []defaultpreemption.Candidate, now time.Time, out *Outcome) {
	nominee := defaultpreemption.SelectCandidate(candidates, now)
	if nominee == nil {
		return
	}
	out.Nominated = nominee.Name
	for _, v := range nominee.Victims {
		out.NominatedVictims = append(out.NominatedVictims, v.Key())
	}
	best := map[string]bool{}
	rotated := make([]defaultpreemption.Candidate, 0, len(candidates))
	for i := range candidates {
		rotated = append(append(rotated[:0], candidates[i:]...), candidates[:i]...)
		best[defaultpreemption.SelectCandidate(rotated, now).Name] = true
	}
	for n := range best {
		out.PreemptionBest = append(out.PreemptionBest, n)
	}
}
