package berth

import (
	"context"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// UpsertPodGroup creates or replaces a pod group (gang): its member pods,
// which name it in Pod.pod_group, are bound all together once min_member
// of them fit, or not at all. Returns the group as stored and the
// revision of the write. Retrying is safe.
func (c *Client) UpsertPodGroup(ctx context.Context, group *berthv1.PodGroup) (*berthv1.PodGroup, int64, error) {
	resp, err := c.pods.UpsertPodGroup(ctx, &berthv1.UpsertPodGroupRequest{PodGroup: group})
	if err != nil {
		return nil, 0, err
	}
	return resp.GetPodGroup(), resp.GetRevision(), nil
}

// DeletePodGroup removes a pod group and returns the revision of the
// delete; its pending members wait until the group is created again. When
// a retry follows a delete whose response was lost, the retry reports
// NotFound.
func (c *Client) DeletePodGroup(ctx context.Context, namespace, name string) (int64, error) {
	resp, err := c.pods.DeletePodGroup(ctx, &berthv1.DeletePodGroupRequest{Namespace: namespace, Name: name})
	if err != nil {
		return 0, err
	}
	return resp.GetRevision(), nil
}

// PodGroupStatus is a pod group and how far its members got.
type PodGroupStatus struct {
	Group *berthv1.PodGroup
	// Members is how many member pods are stored, in any phase; Bound how
	// many of them are bound or running.
	Members, Bound int32
}

// GetPodGroup reads one pod group with its member counts.
func (c *Client) GetPodGroup(ctx context.Context, namespace, name string) (PodGroupStatus, error) {
	resp, err := c.pods.GetPodGroup(ctx, &berthv1.GetPodGroupRequest{Namespace: namespace, Name: name})
	if err != nil {
		return PodGroupStatus{}, err
	}
	return PodGroupStatus{Group: resp.GetPodGroup(), Members: resp.GetMembers(), Bound: resp.GetBound()}, nil
}

// ListPodGroups returns the pod groups of namespace ("" for all), ordered
// by namespace and name.
func (c *Client) ListPodGroups(ctx context.Context, namespace string) ([]*berthv1.PodGroup, error) {
	resp, err := c.pods.ListPodGroups(ctx, &berthv1.ListPodGroupsRequest{Namespace: namespace})
	if err != nil {
		return nil, err
	}
	return resp.GetPodGroups(), nil
}
