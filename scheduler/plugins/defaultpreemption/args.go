package defaultpreemption

import (
	"errors"
	"fmt"
)

// Kube's defaults for how many candidate nodes a dry run looks for.
const (
	DefaultMinCandidateNodesPercentage int32 = 10
	DefaultMinCandidateNodesAbsolute   int32 = 100
)

// Args configures DefaultPreemption. The zero value is kube's default.
// What preemption works with at run time (the evictor, the disruption
// budgets, the clock) comes from the framework.Handle instead.
type Args struct {
	// MinCandidateNodesPercentage and MinCandidateNodesAbsolute bound the
	// number of candidate nodes a dry run collects before it stops: the
	// larger of percentage*potentialNodes/100 and the absolute value,
	// capped at the number of potential nodes. Nil means kube's default
	// (10 and 100); pointers so an explicit 0 stays expressible. Both 0 is
	// invalid.
	MinCandidateNodesPercentage *int32
	MinCandidateNodesAbsolute   *int32

	// Parallelism is how many goroutines a dry run uses to select victims
	// on candidate nodes; 0 means the framework's preemption parallelizer
	// (runtime.WithPreemptionParallelism), by default the one of Filter.
	Parallelism int
	// Seed seeds the random start of the dry run over candidate nodes, for
	// reproducible tests; 0 seeds from the time.
	Seed uint64
}

// defaulted returns a copy of args with defaults filled in.
func defaulted(out Args) Args {
	if out.MinCandidateNodesPercentage == nil {
		v := DefaultMinCandidateNodesPercentage
		out.MinCandidateNodesPercentage = &v
	}
	if out.MinCandidateNodesAbsolute == nil {
		v := DefaultMinCandidateNodesAbsolute
		out.MinCandidateNodesAbsolute = &v
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
