package berth

import (
	"context"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// Schedule submits pod (as SubmitPod) and has the server wait, up to ctx's
// deadline, for its decision: the pod comes back BOUND with its node, or
// UNSCHEDULABLE with a diagnosis, with the revision of that decision. A pod
// already decided (say, an identical resubmit of a bound pod) is returned
// at once. Without a decision by the deadline the call fails with
// DeadlineExceeded and the pod stays queued; SubmitAndWait does the same
// wait on the client side, for callers that want no server-held call.
func (c *Client) Schedule(ctx context.Context, pod *berthv1.Pod) (*berthv1.Pod, int64, error) {
	resp, err := c.sched.Schedule(ctx, &berthv1.ScheduleRequest{Pod: pod})
	if err != nil {
		return nil, 0, err
	}
	return resp.GetPod(), resp.GetRevision(), nil
}

// Explain dry-runs pod, given inline and not stored, against the live
// cluster: every node's filter verdict and scores, the node a real cycle
// would choose, and what preemption would do if none fits. It changes
// nothing.
func (c *Client) Explain(ctx context.Context, pod *berthv1.Pod) (*berthv1.ExplainResponse, error) {
	return c.sched.Explain(ctx, &berthv1.ExplainRequest{Target: &berthv1.ExplainRequest_Pod{Pod: pod}})
}

// ExplainStored is Explain for a stored pod, named by namespace and name.
// A pod already bound fails with FailedPrecondition: there is nothing left
// to decide.
func (c *Client) ExplainStored(ctx context.Context, namespace, name string) (*berthv1.ExplainResponse, error) {
	return c.sched.Explain(ctx, &berthv1.ExplainRequest{Target: &berthv1.ExplainRequest_Existing{
		Existing: &berthv1.PodReference{Namespace: namespace, Name: name},
	}})
}

// ListReplicas returns the live replicas ordered by id, each with the
// shards it owns, and the total number of logical shards.
func (c *Client) ListReplicas(ctx context.Context) ([]*berthv1.Replica, int32, error) {
	resp, err := c.sched.ListReplicas(ctx, &berthv1.ListReplicasRequest{})
	if err != nil {
		return nil, 0, err
	}
	return resp.GetReplicas(), resp.GetShardCount(), nil
}
