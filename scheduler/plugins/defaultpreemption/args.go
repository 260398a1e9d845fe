package defaultpreemption

import (
	"errors"
	"fmt"

	"github.com/berth-io/berth/scheduler/framework"
)

// Kube's defaults for how many candidate nodes a dry run looks for.
const (
	DefaultMinCandidateNodesPercentage int32 = 10
	DefaultMinCandidateNodesAbsolute   int32 = 100
)

// Args configures DefaultPreemption. The zero value is kube's default
// with no disruption budgets and no evictions.
type Args struct {
	// MinCandidateNodesPercentage and MinCandidateNodesAbsolute bound the
	// number of candidate nodes a dry run collects before it stops: the
	// larger of percentage*potentialNodes/100 and the absolute value,
	// capped at the number of potential nodes. Nil means kube's default
	// (10 and 100); pointers so an explicit 0 stays expressible. Both 0 is
	// invalid.
	MinCandidateNodesPercentage *int32
	MinCandidateNodesAbsolute   *int32

	// Budgets lists the disruption budgets; nil means none.
	Budgets framework.BudgetLister
	// Evictor evicts the victims of a successful preemption; nil means the
	// plugin nominates the node but evicts nothing.
	Evictor framework.Evictor

	// Terminating reports whether a pod is already on its way out (evicted
	// but not yet gone). Berth pods have no terminating state of their own;
	// whoever evicts may track it. When set, a pod whose nominated node
	// still holds such a lower-priority pod does not preempt again, and
	// such victims are not evicted twice (kube's graceful-termination
	// checks). Nil skips both checks.
	Terminating func(*framework.Pod) bool

	// Clock stands in for the start time of pods that have none (kube uses
	// "now"); default the wall clock.
	Clock framework.Clock
	// Parallelism is how many goroutines a dry run uses to select victims
	// on candidate nodes; 0 means the framework's Parallelizer. Kube uses
	// the same workers as Filter; a scheduler whose preemptions wait for
	// one another may want more here than it gives each Filter.
	Parallelism int
	// Seed seeds the random start of the dry run over candidate nodes, for
	// reproducible tests; 0 seeds from the time.
	Seed uint64
}

// defaulted returns a copy of args with defaults filled in.
func defaulted(args *Args) Args {
	var out Args
	if args != nil {
		out = *args
	}
	if out.MinCandidateNodesPercentage == nil {
		v := DefaultMinCandidateNodesPercentage
		out.MinCandidateNodesPercentage = &v
	}
	if out.MinCandidateNodesAbsolute == nil {
		v := DefaultMinCandidateNodesAbsolute
		out.MinCandidateNodesAbsolute = &v
	}
	if out.Clock == nil {
		out.Clock = framework.RealClock{}
	}
	return out
}

// validate applies kube's rules for the candidate bounds.
func validate(a *Args) error {
	p, n := *a.MinCandidateNodesPercentage, *a.MinCandidateNodesAbsolute
	if p < 0 || p > 100 {
		return fmt.Errorf("minCandidateNodesPercentage is %d, not in [0, 100]", p)
	}
	if n < 0 {
		return fmt.Errorf("minCandidateNodesAbsolute is %d, not in [0, inf)", n)
	}
	if a.Parallelism < 0 {
		return fmt.Errorf("parallelism is %d, not in [0, inf)", a.Parallelism)
	}
	if p == 0 && n == 0 {
		return errors.New("minCandidateNodesPercentage and minCandidateNodesAbsolute cannot both be zero")
	}
	return nil
}
