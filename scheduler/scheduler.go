// Package scheduler runs Berth's scheduling core: one shared cache, and S
// shards, each with its own queue, snapshot and loop. It knows nothing of
// gRPC or etcd; events come in through the methods below and decisions go
// out through a Committer.
package scheduler

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/berth-io/berth/scheduler/cache"
	"github.com/berth-io/berth/scheduler/framework"
	fwruntime "github.com/berth-io/berth/scheduler/framework/runtime"
	"github.com/berth-io/berth/scheduler/plugins"
)

// Config configures a Scheduler. Zero fields take the defaults noted.
type Config struct {
	// Shards is the number of shard loops; default GOMAXPROCS.
	Shards int
	// LogicalShards is how many logical shards pods hash to; default
	// DefaultLogicalShards. Every replica sharing a store must agree.
	LogicalShards int
	// OwnNone starts the scheduler owning no logical shard; a shard
	// manager then hands them out with AcquireShard. By default it owns all
	// of them at epoch 0: one replica, nothing to fence.
	OwnNone bool
	// PercentageOfNodesToScore: 0 means kube-scheduler's adaptive default.
	PercentageOfNodesToScore int32
	// Profiles by scheduler name; default one kube-scheduler default
	// profile named DefaultProfileName.
	Profiles []*fwruntime.Profile
	// Registry of plugins; default plugins.NewInTreeRegistry().
	Registry framework.Registry
	// Parallelism of Filter and Score within one cycle; default 1, since
	// the shards already keep every core busy.
	Parallelism int
	// BindTimeout bounds one binding cycle (and a write of why a pod is
	// unschedulable), to within a 64th more: cycles starting close
	// together share a deadline. Default 30s.
	BindTimeout time.Duration
	// MaxBindingCycles bounds the binding cycles waiting for their commit
	// at once, across shards; default DefaultMaxBindingCycles. While that
	// many wait, a shard loop waits for one to end before its next cycle.
	MaxBindingCycles int
	Logger           *zap.Logger
	Metrics          *Metrics
	// Tracer, if set, is told of every scheduling cycle; see Tracer.
	Tracer Tracer
}

// DefaultProfileName is the profile pods with no scheduler_name use.
const DefaultProfileName = "default-scheduler"

// Scheduler is one replica's scheduling core.
type Scheduler struct {
	cfg       Config
	logger    *zap.Logger
	metrics   *Metrics
	committer Committer
	cache     *cache.Cache
	shards    []*shard

	// mu guards nodes, the latest node objects (old values for events).
	mu    sync.Mutex
	nodes map[string]*framework.Node

	// binding counts binding cycles and status writes in flight, so Stop
	// can wait for them.
	binding sync.WaitGroup
	// bindSlots bounds the binding cycles that go straight to their commit
	// (bind_slots.go).
	bindSlots *bindSlots

	nominator *nominator
	// preemptMu serialises preemption across shards: each dry run must see
	// the nominations of the others, or two shards pick the same room and
	// all but one preemptor must preempt again.
	preemptMu sync.Mutex
	budgets   budgetSet
	groups    *groupSet // pod groups and their members: gang.go
	// foreign is the room other replicas' assumptions hold: foreign.go.
	foreign foreignSet

	// placeMu serialises the assumptions of pods whose placement depends
	// on other pods with every other assumption, so they can be re-checked
	// against the very latest state before they are assumed; the others
	// share it. See shard.assume.
	placeMu sync.RWMutex

	// view is the latest store revision whose changes the cache holds.
	view atomic.Int64
	// viewMu guards viewWaiters: retries held until the view reaches a
	// revision.
	viewMu      sync.Mutex
	viewWaiters []viewWaiter
	// owned maps each logical shard this replica owns to the epoch it was
	// acquired at. Every pod event and attempt asks it, from every loop,
	// binding and watch goroutine, and shards move rarely: so it is
	// replaced whole (under ownMu) and read with one atomic load, where
	// the readers of an RWMutex shared one contended counter.
	ownMu sync.Mutex
	owned atomic.Pointer[map[int]int64]
	// deadlines bounds binding cycles and status writes (deadline.go).
	deadlines *sharedDeadline
}

// New builds a Scheduler; Run starts it.
func New(ctx context.Context, cfg Config, committer Committer) (*Scheduler, error) {
	if cfg.Shards <= 0 {
		cfg.Shards = runtime.GOMAXPROCS(0)
	}
	if cfg.LogicalShards <= 0 {
		cfg.LogicalShards = DefaultLogicalShards
	}
	if cfg.Parallelism <= 0 {
		cfg.Parallelism = 1
	}
	if cfg.BindTimeout <= 0 {
		cfg.BindTimeout = 30 * time.Second
	}
	if cfg.MaxBindingCycles <= 0 {
		cfg.MaxBindingCycles = DefaultMaxBindingCycles
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.Registry == nil {
		cfg.Registry = plugins.NewInTreeRegistry()
	}
	if len(cfg.Profiles) == 0 {
		p := fwruntime.DefaultProfile()
		p.SchedulerName = DefaultProfileName
		cfg.Profiles = []*fwruntime.Profile{p}
	}
	s := &Scheduler{
		cfg:       cfg,
		logger:    cfg.Logger,
		metrics:   cfg.Metrics,
		committer: committer,
		cache:     cache.New(),
		nodes:     map[string]*framework.Node{},
		nominator: newNominator(),
		deadlines: newSharedDeadline(cfg.BindTimeout),
	}
	s.bindSlots = newBindSlots(cfg.MaxBindingCycles, cfg.Metrics.bindSlotWait)
	owned := map[int]int64{}
	if !cfg.OwnNone {
		for i := 0; i < cfg.LogicalShards; i++ {
			owned[i] = 0
		}
	}
	s.owned.Store(&owned)
	s.groups = newGroupSet(s)
	for i := 0; i < cfg.Shards; i++ {
		sh, err := newShard(ctx, s, i)
		if err != nil {
			return nil, fmt.Errorf("scheduler: shard %d: %w", i, err)
		}
		s.shards = append(s.shards, sh)
	}
	return s, nil
}

// Run runs every shard loop until ctx ends, then waits for binding cycles
// already started to finish, so no commit is abandoned halfway.
func (s *Scheduler) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, sh := range s.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sh.run(ctx)
		}()
	}
	wg.Wait()
	s.releaseWaiting("scheduler stopping", func(*framework.Pod) bool { return true })
	s.binding.Wait()
}

// shardFor maps a pod to the loop that serves its logical shard.
func (s *Scheduler) shardFor(p *framework.Pod) *shard {
	return s.shards[s.ShardOf(p)%len(s.shards)]
}

func (s *Scheduler) epochOf(shard int) (int64, bool) {
	e, ok := (*s.owned.Load())[shard]
	return e, ok
}

// NodeInfo returns a copy of what the cache knows of a node.
func (s *Scheduler) NodeInfo(name string) (*framework.NodeInfo, bool) {
	return s.cache.NodeInfo(name)
}
