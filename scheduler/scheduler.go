// Package scheduler runs Berth's scheduling core: one shared cache, and S
// shards, each with its own queue, snapshot and loop. It knows nothing of
// gRPC or etcd; events come in through the methods below and decisions go
// out through a Committer.
package scheduler

import (
	"context"
	"errors"
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

// ErrConflict is what a Committer returns (wrapped) when the pod changed or
// vanished since the revision the decision was based on. The watch will
// bring the new state, so the pod is not retried from the stale copy.
var ErrConflict = errors.New("scheduler: pod changed since it was read")

// StaleViewError is the ErrConflict of a binding whose node another writer
// charged after the view the placement was checked against. The pod is
// retried once the cache has caught up to Revision, not before: an earlier
// retry would only pick the same node again.
type StaleViewError struct {
	Revision int64
}

func (e *StaleViewError) Error() string {
	return fmt.Sprintf("scheduler: node charged by another writer at revision %d, after the placement's view", e.Revision)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *StaleViewError) Is(target error) bool { return target == ErrConflict }

// Committer makes decisions durable. Bind must return only once the
// binding is stored; it is called from many goroutines at once, which lets
// an implementation share one storage write among many bindings.
type Committer interface {
	framework.Binder
	// Evict marks victims chosen by preemption, durably, so subscribers
	// learn to stop them; their room is freed when they are deleted.
	framework.Evictor
	// RecordUnschedulable stores why the pod found no node. Best effort: a
	// lost write only delays the message a user sees.
	RecordUnschedulable(ctx context.Context, pod *framework.Pod, why Unschedulable) error
}

// Unschedulable is what is recorded about an attempt that found no node.
// The core builds it once: both parts walk every node's status.
type Unschedulable struct {
	// Message is kube's summary, e.g. "0/3 nodes are available: ...".
	Message string
	// NumNodes is how many nodes the attempt considered.
	NumNodes int
	// Reasons are the rejection reasons with their node counts.
	Reasons []framework.ReasonCount
}

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
	// BindTimeout bounds one binding cycle; default 30s.
	BindTimeout time.Duration
	Logger      *zap.Logger
	Metrics     *Metrics
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

	nominator *nominator
	// preemptMu serialises preemption across shards: each dry run must see
	// the nominations of the others, or two shards pick the same room and
	// all but one preemptor must preempt again.
	preemptMu sync.Mutex
	budgets   budgetSet
	groups    *groupSet // pod groups and their members: gang.go
	// foreign is the room other replicas' assumptions hold: foreign.go.
	foreign foreignSet

	// placeMu serialises assumptions across shards, so a pod whose
	// placement depends on other pods can be re-checked against the very
	// latest state before it is assumed. See shard.assume.
	placeMu sync.Mutex

	// view is the latest store revision whose changes the cache holds.
	view atomic.Int64
	// viewMu guards viewWaiters: retries held until the view reaches a
	// revision.
	viewMu      sync.Mutex
	viewWaiters []viewWaiter
	// ownMu guards owned: logical shard -> the epoch it was acquired at.
	ownMu sync.RWMutex
	owned map[int]int64
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
		owned:     map[int]int64{},
	}
	if !cfg.OwnNone {
		for i := 0; i < cfg.LogicalShards; i++ {
			s.owned[i] = 0
		}
	}
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
	s.ownMu.RLock()
	defer s.ownMu.RUnlock()
	e, ok := s.owned[shard]
	return e, ok
}

// NodeInfo returns a copy of what the cache knows of a node.
func (s *Scheduler) NodeInfo(name string) (*framework.NodeInfo, bool) {
	return s.cache.NodeInfo(name)
}

// UpsertNode adds or replaces a node and wakes the pods it may help.
func (s *Scheduler) UpsertNode(n *framework.Node) {
	s.mu.Lock()
	old := s.nodes[n.Name]
	s.nodes[n.Name] = n
	s.mu.Unlock()
	s.cache.AddNode(n)
	ev := framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionAdd, Label: "NodeAdd"}
	if old != nil {
		ev = framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: nodeChange(old, n), Label: "NodeUpdate"}
		if ev.ActionType == 0 {
			return
		}
	}
	s.metrics.event(ev.Label)
	s.broadcast(ev, old, n)
}

// nodeChange classifies a node update so only the pods whose failing
// plugins care about it are retried.
func nodeChange(old, n *framework.Node) framework.ActionType {
	var a framework.ActionType
	if !equalResources(old.Allocatable, n.Allocatable) {
		a |= framework.ActionUpdateNodeAllocatable
	}
	if !equalStrings(old.Labels, n.Labels) {
		a |= framework.ActionUpdateNodeLabel
	}
	if !equalTaints(old.Taints, n.Taints) || old.Unschedulable != n.Unschedulable {
		a |= framework.ActionUpdateNodeTaint
	}
	if len(old.Images) != len(n.Images) {
		a |= framework.ActionUpdateNodeCondition
	}
	return a
}

// DeleteNode forgets a node. Pods bound to it stay charged until deleted.
func (s *Scheduler) DeleteNode(name string) {
	s.mu.Lock()
	old := s.nodes[name]
	delete(s.nodes, name)
	s.mu.Unlock()
	s.cache.RemoveNode(name)
	ev := framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionDelete, Label: "NodeDelete"}
	s.metrics.event(ev.Label)
	s.broadcast(ev, old, nil)
}

// UpsertPod applies the latest stored state of a pod.
func (s *Scheduler) UpsertPod(p *framework.Pod) {
	defer s.observeMember(p) // last: a finished member is dropped, then kept as finished
	switch {
	case p.Phase.Terminal():
		s.DeletePod(p)
	case p.NodeName != "":
		s.podBound(p)
	default:
		s.podPending(p) // see feedback.go: a pod may come back from its node
	}
}

// podBound records a pod placed on a node: confirms our own assumption or
// charges a pod bound elsewhere (another replica, or declared running).
func (s *Scheduler) podBound(p *framework.Pod) {
	s.forgetForeign(p) // its charge, if any, becomes the binding below
	s.shardFor(p).forgetPending(p)
	s.nominator.forget(p)
	if old, ok := s.cache.GetPod(p.Key()); ok && !s.cache.IsAssumed(p.Key()) {
		if err := s.cache.UpdatePod(old, p); err != nil {
			s.logger.Warn("cache update of bound pod failed", zap.String("pod", p.Key()), zap.Error(err))
		}
		return
	}
	if err := s.cache.AddPod(p); err != nil {
		s.logger.Warn("cache add of bound pod failed", zap.String("pod", p.Key()), zap.Error(err))
	}
	// A pod newly on a node can satisfy affinity or spreading that failed
	// before; only pods rejected by plugins that registered this event are
	// looked at.
	ev := framework.ClusterEvent{Resource: framework.EventResourceAssigned, ActionType: framework.ActionAdd, Label: "AssignedPodAdd"}
	s.metrics.event(ev.Label)
	s.broadcast(ev, nil, p)
}

// DeletePod removes a pod, from the queue or from its node, and wakes the
// pods its room may help.
func (s *Scheduler) DeletePod(p *framework.Pod) {
	s.forgetForeign(p) // its charge, if any, is removed below
	s.groups.forget(p)
	s.shardFor(p).forgetPending(p)
	s.nominator.forget(p)
	cached, ok := s.cache.GetPod(p.Key())
	if !ok || (p.UID != "" && cached.UID != p.UID) {
		return
	}
	if err := s.cache.RemovePod(cached); err != nil {
		s.logger.Warn("cache remove failed", zap.String("pod", p.Key()), zap.Error(err))
		return
	}
	ev := framework.ClusterEvent{Resource: framework.EventResourceAssigned, ActionType: framework.ActionDelete, Label: "AssignedPodDelete"}
	s.metrics.event(ev.Label)
	s.broadcast(ev, cached, nil)
	s.victimGone(cached) // preemption.go
}

// Reset replaces everything the scheduler knows with a fresh listing, as
// after a restart or a watch that fell behind compaction.
func (s *Scheduler) Reset(nodes []*framework.Node, pods []*framework.Pod) {
	s.groups.resetMembers()
	s.mu.Lock()
	stale := s.nodes
	s.nodes = map[string]*framework.Node{}
	s.mu.Unlock()
	live := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		live[n.Name] = true
	}
	for name := range stale {
		if !live[name] {
			s.DeleteNode(name)
		}
	}
	for _, n := range nodes {
		s.UpsertNode(n)
	}
	for _, p := range pods {
		s.UpsertPod(p)
	}
	s.logger.Info("scheduler state loaded", zap.Int("nodes", len(nodes)), zap.Int("pods", len(pods)))
}

func (s *Scheduler) broadcast(ev framework.ClusterEvent, oldObj, newObj any) {
	for _, sh := range s.shards {
		sh.queue.MoveAllToActiveOrBackoffQueue(ev, oldObj, newObj, nil)
	}
}

func equalResources(a, b framework.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func equalStrings(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func equalTaints(a, b []framework.Taint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
