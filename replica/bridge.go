package replica

import (
	"context"
	"runtime"

	"go.uber.org/zap"

	"github.com/berth-io/berth/convert"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/scheduler"
	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/store"
)

// bridge feeds the store's watch into the scheduling core, converting as it
// goes. Only the store's sync goroutine calls it.
type bridge struct {
	sched *scheduler.Scheduler
	ready chan struct{}
	// applied records that the cache holds rev, after that many changes
	// (a Reset counts every node and pod it loads).
	applied func(rev int64, changes int)
	// startup, if set, is told when the first listing is read and loaded.
	startup *startupClock
	// beforeLoad, if set, runs when a listing has been read (tests).
	beforeLoad func()
	// beforePodPut, if set, runs as each pod is delivered (tests).
	beforePodPut func()
	// fromSnapshot marks the next Reset as a start-up snapshot's: the
	// cache is not whole until the sync says it caught up (CaughtUp).
	fromSnapshot bool
	// giveBack, if set, lets the snapshot's files go (store.LendingHandler):
	// the next Reset calls it once its pods are converted.
	giveBack func()
	// snapshotRejected, if set, is told that the snapshot did not verify.
	snapshotRejected func()
	// bridgeLeaseState: the node book and lease marking (nodebook.go).
	bridgeLeaseState
}

var (
	_ store.SyncHandler       = (*bridge)(nil)
	_ store.BudgetHandler     = (*bridge)(nil)
	_ store.AppliedHandler    = (*bridge)(nil)
	_ store.PodGroupHandler   = (*bridge)(nil)
	_ store.AssumptionHandler = (*bridge)(nil)
	_ store.NodeLeaseHandler  = (*bridge)(nil)
	_ store.LendingHandler    = (*bridge)(nil)
	_ store.ListedHandler     = (*bridge)(nil)
	_ store.StoredPodHandler  = (*bridge)(nil)
)

func (s *bridge) Listed(rev int64, nodes, pods int) {
	if s.startup != nil {
		s.startup.mark(phaseList, zap.Int64("revision", rev), zap.Int("nodes", nodes), zap.Int("pods", pods))
	}
	if s.beforeLoad != nil {
		s.beforeLoad()
	}
}

// Applied tells the core how far its view reaches, for the commits' node
// fences.
func (s *bridge) Applied(rev int64) { s.sched.SetViewRevision(rev) }

func (s *bridge) BudgetsReset(budgets []*berthv1.DisruptionBudget) {
	m := make(map[string]framework.DisruptionBudget, len(budgets))
	for _, b := range budgets {
		m[b.GetNamespace()+"/"+b.GetName()] = convert.BudgetToCore(b)
	}
	s.sched.ResetBudgets(m)
}

func (s *bridge) BudgetPut(b *berthv1.DisruptionBudget, rev int64) {
	s.sched.UpsertBudget(b.GetNamespace()+"/"+b.GetName(), convert.BudgetToCore(b))
	s.revision(rev)
}

func (s *bridge) BudgetDeleted(namespace, name string, rev int64) {
	s.sched.DeleteBudget(namespace + "/" + name)
	s.revision(rev)
}

func (s *bridge) Reset(nodes []*berthv1.Node, pods []store.PodRecord, rev int64) {
	cn := make([]*framework.Node, len(nodes))
	for i, n := range nodes {
		cn[i] = s.nodes.put(n, s.nodes.listed[n.GetName()])
	}
	workers := runtime.GOMAXPROCS(0)
	if s.fromSnapshot {
		workers = max(1, workers-1) // one core is the etcd open's
	}
	// A snapshot's values are lent for this call (store.StoredPodHandler),
	// and given back once converted: the cache is built without the files.
	cp := s.podsToCore(pods, workers, s.fromSnapshot)
	if s.giveBack != nil {
		s.giveBack()
		s.giveBack = nil
	}
	s.sched.Reset(cn, cp)
	s.checkLost(cp...)
	s.applied(rev, len(nodes)+len(pods))
	if s.fromSnapshot {
		s.fromSnapshot = false
		return
	}
	if s.startup != nil {
		s.startup.mark(phaseCache)
	}
	s.markReady()
}

// revision records that the cache holds rev, after one change.
func (s *bridge) revision(rev int64) { s.applied(rev, 1) }

// markReady says the cache holds the cluster: scheduling may start.
func (s *bridge) markReady() {
	select {
	case <-s.ready:
	default:
		close(s.ready)
	}
}

// podsToCore converts a listing's pods from their stored values on that
// many workers (at a restart it is a good part of the time to the first
// binding), leaving out those that do not convert.
func (s *bridge) podsToCore(pods []store.PodRecord, workers int, borrowed bool) []*framework.Pod {
	cp := make([]*framework.Pod, len(pods))
	errs := make([]error, len(pods))
	framework.NewParallelizer(workers).Until(context.Background(), len(pods), func(i int) {
		cp[i], errs[i] = convert.StoredValueToCore(pods[i].Value, pods[i].ModRevision, borrowed)
	})
	kept := cp[:0]
	for i, p := range cp {
		if errs[i] != nil {
			s.logger().Warn("skipping undecodable pod", zap.Int64("mod_revision", pods[i].ModRevision), zap.Error(errs[i]))
			continue
		}
		kept = append(kept, p)
	}
	return kept
}

func (s *bridge) NodePut(n *berthv1.Node, rev int64) {
	s.sched.UpsertNodeRecord(s.nodes.put(n, rev))
	s.revision(rev)
}

func (s *bridge) NodeDeleted(name string, rev int64) {
	s.nodes.forget(name)
	s.sched.DeleteNode(name)
	s.revision(rev)
}

// ConvertsStoredPods implements store.StoredPodHandler: pods are read
// from their stored values straight into the core's form.
func (s *bridge) ConvertsStoredPods() {}

// Lend implements store.LendingHandler.
func (s *bridge) Lend(giveBack func()) { s.giveBack = giveBack }

func (s *bridge) PodPut(p store.PodRecord, _ store.PrevPod) {
	if s.beforePodPut != nil {
		s.beforePodPut()
	}
	cp, err := convert.StoredValueToCore(p.Value, p.ModRevision, false)
	if err != nil {
		s.logger().Warn("skipping undecodable pod", zap.Int64("mod_revision", p.ModRevision), zap.Error(err))
		return
	}
	s.sched.UpsertPod(cp)
	s.checkLost(cp)
	s.revision(p.ModRevision)
}

// IgnoresPrev implements store.NoPrevHandler: the scheduler finds what a
// deleted pod held by its key, so the name is all a delete needs, and
// etcd is spared reading back every change's previous value for the
// watch.
func (s *bridge) IgnoresPrev() {}

// PodDeleted gets the pod's namespace and name only (IgnoresPrev).
func (s *bridge) PodDeleted(prev *berthv1.Pod, rev int64) {
	if prev != nil {
		s.sched.DeletePod(convert.PodToCore(prev, rev))
	}
	s.revision(rev)
}

func (s *bridge) PodGroupsReset(groups []*berthv1.PodGroup) {
	cg := make([]*framework.PodGroup, len(groups))
	for i, g := range groups {
		cg[i] = convert.PodGroupToCore(g, store.DefaultScheduleTimeout)
	}
	s.sched.ResetPodGroups(cg)
}

func (s *bridge) PodGroupPut(g *berthv1.PodGroup, rev int64) {
	s.sched.UpsertPodGroup(convert.PodGroupToCore(g, store.DefaultScheduleTimeout))
	s.revision(rev)
}

func (s *bridge) PodGroupDeleted(namespace, name string, rev int64) {
	s.sched.DeletePodGroup(namespace, name)
	s.revision(rev)
}

// replicaID is this replica's id as its assumptions carry it.
func (s *bridge) replicaID() string {
	if s.store == nil {
		return ""
	}
	return s.store.ReplicaID()
}

// AssumptionsReset charges the room every other replica's assumptions
// hold; our own are in the cache already, as assumed pods.
func (s *bridge) AssumptionsReset(as []store.Assumption) {
	me := s.replicaID()
	live := make(map[string]scheduler.AssumedPod, len(as))
	for _, a := range as {
		if a.Replica != me {
			live[a.Namespace+"/"+a.Name] = scheduler.AssumedPod{Namespace: a.Namespace, Name: a.Name, UID: a.UID, Node: a.Node}
		}
	}
	s.sched.ResetAssumptions(live)
}

func (s *bridge) AssumptionPut(a store.Assumption, rev int64) {
	if a.Replica == s.replicaID() {
		// Ours; or, if the shard came back to us, one we will replace.
		s.sched.AssumptionGone(a.Namespace, a.Name)
	} else {
		s.sched.AssumedElsewhere(a.Namespace, a.Name, a.UID, a.Node)
	}
	s.revision(rev)
}

func (s *bridge) AssumptionDeleted(namespace, name string, rev int64) {
	s.sched.AssumptionGone(namespace, name)
	s.revision(rev)
}
