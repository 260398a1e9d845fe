package server

import (
	"context"
	"time"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// maxScheduleTimeout is the longest members may wait at Permit; the
// framework caps every wait there.
const maxScheduleTimeout = 15 * time.Minute

func validatePodGroup(v *violations, field string, g *berthv1.PodGroup) {
	if g == nil {
		v.add(field, "is required")
		return
	}
	v.dnsLabel(field+".namespace", g.GetNamespace())
	v.dnsSubdomain(field+".name", g.GetName())
	if g.GetMinMember() < 1 {
		v.add(field+".min_member", "must be at least 1, got %d", g.GetMinMember())
	}
	if t := g.GetScheduleTimeout(); t != nil {
		switch d := t.AsDuration(); {
		case t.CheckValid() != nil || d < 0:
			v.add(field+".schedule_timeout", "must be a non-negative duration")
		case d > maxScheduleTimeout:
			v.add(field+".schedule_timeout", "must be at most %v, got %v", maxScheduleTimeout, d)
		}
	}
}

func groupName(namespace, name string) string { return "pod group " + namespace + "/" + name }

// UpsertPodGroup stores a group; its gated members are released by the
// watch that brings it to the scheduler.
func (ps *podService) UpsertPodGroup(ctx context.Context, req *berthv1.UpsertPodGroupRequest) (*berthv1.UpsertPodGroupResponse, error) {
	g := req.GetPodGroup()
	stored, rev, err := ps.store.PutPodGroup(ctx, g)
	if err != nil {
		return nil, toStatus(err, groupName(g.GetNamespace(), g.GetName()))
	}
	return &berthv1.UpsertPodGroupResponse{PodGroup: stored, Revision: rev}, nil
}

func (ps *podService) DeletePodGroup(ctx context.Context, req *berthv1.DeletePodGroupRequest) (*berthv1.DeletePodGroupResponse, error) {
	rev, err := ps.store.DeletePodGroup(ctx, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, toStatus(err, groupName(req.GetNamespace(), req.GetName()))
	}
	return &berthv1.DeletePodGroupResponse{Revision: rev}, nil
}

// GetPodGroup reads the group from storage and counts its members from
// this replica's cache, which follows every pod through the watch: no scan
// of the namespace per call, at the price of trailing the latest writes by
// the watch's delay.
func (ps *podService) GetPodGroup(ctx context.Context, req *berthv1.GetPodGroupRequest) (*berthv1.GetPodGroupResponse, error) {
	g, err := ps.store.GetPodGroup(ctx, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, toStatus(err, groupName(req.GetNamespace(), req.GetName()))
	}
	members, bound := ps.sched.PodGroupMembers(req.GetNamespace(), req.GetName())
	return &berthv1.GetPodGroupResponse{PodGroup: g, Members: int32(members), Bound: int32(bound)}, nil
}

func (ps *podService) ListPodGroups(ctx context.Context, req *berthv1.ListPodGroupsRequest) (*berthv1.ListPodGroupsResponse, error) {
	gs, err := ps.store.ListPodGroups(ctx, req.GetNamespace())
	if err != nil {
		return nil, toStatus(err, "list pod groups")
	}
	return &berthv1.ListPodGroupsResponse{PodGroups: gs}, nil
}
