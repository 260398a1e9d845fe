package runtime

import "github.com/berth-io/berth/scheduler/framework"

var _ framework.Handle = (*Framework)(nil)

// Option configures NewFramework.
type Option func(*Framework)

// WithSnapshotSharedLister sets the snapshot plugins read; the shard
// updates it before every cycle.
func WithSnapshotSharedLister(l framework.SharedLister) Option {
	return func(f *Framework) { f.snapshot = l }
}

// WithBinder sets what DefaultBinder binds through.
func WithBinder(b framework.Binder) Option { return func(f *Framework) { f.binder = b } }

// WithParallelism sets how many goroutines Filter and Score use within
// one cycle; default 1 (shards already use every core).
func WithParallelism(n int) Option {
	return func(f *Framework) { f.parallelizer = framework.NewParallelizer(n) }
}

// WithPodNominator lets filters account for pods nominated to nodes.
func WithPodNominator(n framework.PodNominator) Option {
	return func(f *Framework) {
		f.nominator = n
		f.counting, _ = n.(CountingPodNominator)
	}
}

// WithClock sets the clock of Permit timeouts; default the wall clock.
func WithClock(c framework.Clock) Option { return func(f *Framework) { f.clock = c } }

// SnapshotSharedLister implements framework.Handle.
func (f *Framework) SnapshotSharedLister() framework.SharedLister { return f.snapshot }

// Binder implements framework.Handle.
func (f *Framework) Binder() framework.Binder { return f.binder }

// Parallelizer implements framework.Handle.
func (f *Framework) Parallelizer() framework.Parallelizer { return f.parallelizer }

// WithEvictor sets what carries out preemption decisions; see
// framework.Handle.Evictor.
func WithEvictor(e framework.Evictor) Option { return func(f *Framework) { f.evictor = e } }

// WithDisruptionBudgets sets the budgets preemption tries to keep.
func WithDisruptionBudgets(b framework.BudgetLister) Option {
	return func(f *Framework) { f.budgets = b }
}

// WithPodGroups sets the pod groups gang scheduling reads.
func WithPodGroups(g framework.PodGroupLister) Option { return func(f *Framework) { f.podGroups = g } }

// WithGangCommitter sets what gathers a gang's members for one commit.
func WithGangCommitter(g framework.GangCommitter) Option { return func(f *Framework) { f.gangs = g } }

// WithPreemptionParallelism sets how many goroutines a preemption dry run
// may use; default that of Filter and Score (WithParallelism). A scheduler
// whose preemptions wait for one another has idle cores to give them.
func WithPreemptionParallelism(n int) Option {
	return func(f *Framework) {
		p := framework.NewParallelizer(n)
		f.preemptionParallelizer = &p
	}
}

// Clock implements framework.Handle.
func (f *Framework) Clock() framework.Clock { return f.clock }

// Evictor implements framework.Handle.
func (f *Framework) Evictor() framework.Evictor { return f.evictor }

// DisruptionBudgets implements framework.Handle.
func (f *Framework) DisruptionBudgets() framework.BudgetLister { return f.budgets }

// PodGroups implements framework.Handle.
func (f *Framework) PodGroups() framework.PodGroupLister { return f.podGroups }

// GangCommitter implements framework.Handle.
func (f *Framework) GangCommitter() framework.GangCommitter { return f.gangs }

// PreemptionParallelizer runs preemption dry runs; see
// WithPreemptionParallelism.
func (f *Framework) PreemptionParallelizer() framework.Parallelizer {
	if f.preemptionParallelizer != nil {
		return *f.preemptionParallelizer
	}
	return f.parallelizer
}
