package scheduler

import (
	"context"
	"errors"

	"github.com/berth-io/berth/scheduler/algorithm"
	"github.com/berth-io/berth/scheduler/framework"
)

// ErrUnknownProfile is returned when a pod names a scheduler profile this
// replica does not run.
var ErrUnknownProfile = errors.New("scheduler: no profile with that scheduler name")

// Explanation is a dry run's account of one pod.
type Explanation struct {
	algorithm.Explanation
	// NumNodes is how many nodes the snapshot held.
	NumNodes int
	// Preemption is what preemption would do when no node fits; nil when
	// it was not considered.
	Preemption *PreemptionPlan
}

// PreemptionPlan is the node preemption would nominate and its victims.
type PreemptionPlan struct {
	Node    string
	Victims []*framework.Pod
	// Message says why preemption cannot help, when Node is empty.
	Message string
}

// Explain dry-runs pod against the live cluster in the shard that owns it,
// between two of that shard's cycles, so it sees the state the next cycle
// will see and picks the node that cycle would pick (when the cycle's
// window covers every node). Nothing is assumed, written or advanced.
func (s *Scheduler) Explain(ctx context.Context, pod *framework.Pod) (Explanation, error) {
	sh := s.shardFor(pod)
	fwk := sh.frameworkFor(pod)
	if fwk == nil {
		return Explanation{}, ErrUnknownProfile
	}
	sh.cycleMu.Lock()
	defer sh.cycleMu.Unlock()
	if err := s.cache.UpdateSnapshot(sh.snapshot); err != nil {
		return Explanation{}, err
	}
	ex, err := sh.algo.Explain(ctx, fwk, framework.NewCycleState(), framework.NewPodInfo(pod))
	if errors.Is(err, framework.ErrNoNodesAvailable) {
		return Explanation{Explanation: algorithm.Explanation{FitError: &framework.FitError{
			Pod: pod, Diagnosis: framework.Diagnosis{PreFilterMsg: "no nodes registered"},
		}}}, nil
	}
	if err != nil {
		return Explanation{}, err
	}
	out := Explanation{Explanation: ex, NumNodes: sh.snapshot.NumNodes()}
	if ex.FitError != nil && fwk.HasPostFilterPlugins() {
		out.Preemption = explainPreemption(ctx, fwk, framework.NewPodInfo(pod), ex.FitError)
	}
	return out, nil
}
