package berth

import (
	"context"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// PodUpdate says what UpdatePod changes on a pending pod; nil fields stay
// as they are.
type PodUpdate struct {
	// UID, if set, applies the update only to that incarnation of the pod
	// (FailedPrecondition otherwise).
	UID string
	// SchedulingGates replaces the pod's gates. Gates can only be removed,
	// as in Kubernetes; a non-nil empty slice removes them all and lets the
	// pod be scheduled.
	SchedulingGates []string
	// Priority, if set, is the pod's new priority.
	Priority *int32
}

// UpdatePod changes the fields of a pending pod that may change, its
// scheduling gates and priority, and returns the pod as stored with the
// revision of the write. Retrying is safe: applying the same update twice
// changes nothing more.
func (c *Client) UpdatePod(ctx context.Context, namespace, name string, u PodUpdate) (*berthv1.Pod, int64, error) {
	resp, err := c.pods.UpdatePod(ctx, &berthv1.UpdatePodRequest{
		Namespace:             namespace,
		Name:                  name,
		Uid:                   u.UID,
		SchedulingGates:       u.SchedulingGates,
		UpdateSchedulingGates: u.SchedulingGates != nil,
		Priority:              u.Priority,
	})
	if err != nil {
		return nil, 0, err
	}
	return resp.GetPod(), resp.GetRevision(), nil
}
