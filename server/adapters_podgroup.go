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
	_ scheduler.GroupBinder = committer{}
	_ store.PodGroupHandler = (*syncer)(nil)
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
		return fmt.Errorf("%w: %v", scheduler.ErrConflict, err)
	}
	return err
}

func assumptionsOf(pods []*framework.Pod) []store.Assumption {
	out := make([]store.Assumption, len(pods))
	for i, p := range pods {
		out[i] = store.Assumption{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Node: p.NodeName}
	}
	return out
}

// Assume records waiting gang members under this replica's lease.
func (c committer) Assume(ctx context.Context, pods []*framework.Pod) error {
	return c.store.PutAssumptions(ctx, assumptionsOf(pods))
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
