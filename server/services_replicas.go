package server

import (
	"context"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// ListReplicas reads the membership from etcd, so every replica gives the
// same answer.
func (ss *schedulerService) ListReplicas(ctx context.Context, _ *berthv1.ListReplicasRequest) (*berthv1.ListReplicasResponse, error) {
	replicas, err := ss.srv.store.ListReplicas(ctx)
	if err != nil {
		return nil, toStatus(err, "replicas")
	}
	return &berthv1.ListReplicasResponse{Replicas: replicas, ShardCount: int32(ss.srv.sched.LogicalShards())}, nil
}
