package server

import (
	"context"
	"errors"
	"fmt"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/scheduler"
	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/store"
)

var (
	_ scheduler.GroupBinder   = committer{}
	_ store.PodGroupHandler   = (*syncer)(nil)
	_ store.AssumptionHandler = (*syncer)(nil)
)

// BindGroup binds a gang's members in one Txn, all or none; the same Txn
// drops their assumptions.
func (c committer) BindGroup(ctx context.Context, pods []*framework.Pod) error {
	bs := make([]store.Binding, 0, len(pods))
	for _, p := range pods {
		b, err := c.binding(p, p.NodeName)
		if err != nil {
			return err
		}
		bs = append(bs, b)
	}
	_, err := c.store.BindGang(ctx, bs)
	if errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("%w: %v", scheduler.ErrCommitConflict, err)
	}
	return err
}

func assumptionsOf(pods []*framework.Pod) []store.Assumption {
	out := make([]store.Assumption, len(pods))
	for i, p := range pods {
		out[i] = store.Assumption{
			Namespace: p.Namespace, Name: p.Name, UID: p.UID, Node: p.NodeName,
			ViewRevision: p.ViewRevision, Shard: p.Shard, ShardEpoch: p.ShardEpoch,
		}
	}
	return out
}

// Assume records waiting gang members under this replica's lease, charged
// to their nodes and fenced like bindings.
func (c committer) Assume(ctx context.Context, pods []*framework.Pod) error {
	return coreConflict(c.store.PutAssumptions(ctx, assumptionsOf(pods)))
}

// Unassume drops this replica's assumptions of pods.
func (c committer) Unassume(ctx context.Context, pods []*framework.Pod) error {
	return c.store.DeleteAssumptions(ctx, assumptionsOf(pods))
}

func podGroupToCore(g *berthv1.PodGroup) *framework.PodGroup {
	timeout := store.DefaultScheduleTimeout
	if g.GetScheduleTimeout() != nil {
		timeout = g.GetScheduleTimeout().AsDuration()
	}
	return &framework.PodGroup{Namespace: g.GetNamespace(), Name: g.GetName(), MinMember: g.GetMinMember(), ScheduleTimeout: timeout}
}

func (s *syncer) PodGroupsReset(groups []*berthv1.PodGroup) {
	cg := make([]*framework.PodGroup, len(groups))
	for i, g := range groups {
		cg[i] = podGroupToCore(g)
	}
	s.sched.ResetPodGroups(cg)
}

func (s *syncer) PodGroupPut(g *berthv1.PodGroup, rev int64) {
	s.sched.UpsertPodGroup(podGroupToCore(g))
	s.revision(rev)
}

func (s *syncer) PodGroupDeleted(namespace, name string, rev int64) {
	s.sched.DeletePodGroup(namespace, name)
	s.revision(rev)
}

// replicaID is this replica's id as its assumptions carry it.
func (s *syncer) replicaID() string {
	if s.store == nil {
		return ""
	}
	return s.store.ReplicaID()
}

// AssumptionsReset charges the room every other replica's assumptions
// hold; our own are in the cache already, as assumed pods.
func (s *syncer) AssumptionsReset(as []store.Assumption) {
	me := s.replicaID()
	live := make(map[string]scheduler.AssumedPod, len(as))
	for _, a := range as {
		if a.Replica != me {
			live[a.Namespace+"/"+a.Name] = scheduler.AssumedPod{Namespace: a.Namespace, Name: a.Name, UID: a.UID, Node: a.Node}
		}
	}
	s.sched.ResetAssumptions(live)
}

func (s *syncer) AssumptionPut(a store.Assumption, rev int64) {
	if a.Replica == s.replicaID() {
		// Ours; or, if the shard came back to us, one we will replace.
		s.sched.AssumptionGone(a.Namespace, a.Name)
	} else {
		s.sched.AssumedElsewhere(a.Namespace, a.Name, a.UID, a.Node)
	}
	s.revision(rev)
}

func (s *syncer) AssumptionDeleted(namespace, name string, rev int64) {
	s.sched.AssumptionGone(namespace, name)
	s.revision(rev)
}
