package berth

import (
	"context"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// The orchestrator's reports. Each names the pod incarnation by uid, so a
// late report cannot touch a newer pod of the same name
// (FailedPrecondition), and each is idempotent: retrying a report that
// already took effect returns the stored pod.

// ConfirmBinding reports that a bound pod started: it becomes RUNNING.
// node, if not empty, must be the pod's node.
func (c *Client) ConfirmBinding(ctx context.Context, namespace, name, uid, node string) (*berthv1.Pod, int64, error) {
	resp, err := c.pods.ConfirmBinding(ctx, &berthv1.ConfirmBindingRequest{Namespace: namespace, Name: name, Uid: uid, NodeName: node})
	if err != nil {
		return nil, 0, err
	}
	return resp.GetPod(), resp.GetRevision(), nil
}

// RejectBinding reports that node could not start a bound pod, and why.
// The pod goes back to pending and is scheduled again after a backoff,
// never onto the same node until that node changes. node, if not empty,
// must be the pod's node.
func (c *Client) RejectBinding(ctx context.Context, namespace, name, uid, node, reason string) (*berthv1.Pod, int64, error) {
	resp, err := c.pods.RejectBinding(ctx, &berthv1.RejectBindingRequest{Namespace: namespace, Name: name, Uid: uid, NodeName: node, Reason: reason})
	if err != nil {
		return nil, 0, err
	}
	return resp.GetPod(), resp.GetRevision(), nil
}

// CompletePod reports that a pod finished with phase POD_PHASE_SUCCEEDED
// or POD_PHASE_FAILED; what it held is freed. message is kept in its status.
func (c *Client) CompletePod(ctx context.Context, namespace, name, uid string, phase berthv1.PodPhase, message string) (*berthv1.Pod, int64, error) {
	resp, err := c.pods.CompletePod(ctx, &berthv1.CompletePodRequest{Namespace: namespace, Name: name, Uid: uid, Phase: phase, Message: message})
	if err != nil {
		return nil, 0, err
	}
	return resp.GetPod(), resp.GetRevision(), nil
}

// RenewNodeLease keeps a node upserted with lease_ttl_seconds reachable for
// another TTL, returned in seconds; restored says the lease had expired
// and the node is back. Call it well within the TTL (say every third of
// it): a lease that runs out marks the node unreachable and its pods lost.
func (c *Client) RenewNodeLease(ctx context.Context, name string) (ttlSeconds int64, restored bool, err error) {
	resp, err := c.cluster.RenewNodeLease(ctx, &berthv1.RenewNodeLeaseRequest{Name: name})
	if err != nil {
		return 0, false, err
	}
	return resp.GetTtlSeconds(), resp.GetRestored(), nil
}
