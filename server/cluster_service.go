package server

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/berth-io/berth/convert"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/store"
)

// clusterStore is what the cluster service reads and writes.
type clusterStore interface {
	PutNodeWithLease(ctx context.Context, n *berthv1.Node) (int64, error)
	DeleteNodeWithLease(ctx context.Context, name string) (int64, error)
	GetNode(ctx context.Context, name string) (*berthv1.Node, error)
	ListNodes(ctx context.Context, limit int, pageToken string) ([]*berthv1.Node, string, error)
	FillUnreachable(ctx context.Context, nodes ...*berthv1.Node) error
	RenewNodeLease(ctx context.Context, name string) (ttl int64, restored bool, err error)

	PutBudget(ctx context.Context, b *berthv1.DisruptionBudget) (int64, error)
	DeleteBudget(ctx context.Context, namespace, name string) (int64, error)
	ListBudgets(ctx context.Context, namespace string) ([]*berthv1.DisruptionBudget, error)
}

// clusterService holds the cluster's shape: nodes, their leases, and
// disruption budgets.
type clusterService struct {
	berthv1.UnimplementedClusterServiceServer
	store clusterStore
	sched Scheduler
}

func (c *clusterService) UpsertNode(ctx context.Context, req *berthv1.UpsertNodeRequest) (*berthv1.UpsertNodeResponse, error) {
	rev, err := c.store.PutNodeWithLease(ctx, req.GetNode())
	if err != nil {
		return nil, toStatus(err, "node "+req.GetNode().GetName())
	}
	n := req.GetNode()
	if n.GetUnreachable() { // output only; a lease, if any, just started
		n = proto.CloneOf(n)
		n.Unreachable = false
	}
	return &berthv1.UpsertNodeResponse{Node: n, Revision: rev}, nil
}

func (c *clusterService) DeleteNode(ctx context.Context, req *berthv1.DeleteNodeRequest) (*berthv1.DeleteNodeResponse, error) {
	rev, err := c.store.DeleteNodeWithLease(ctx, req.GetName())
	if err != nil {
		return nil, toStatus(err, "node "+req.GetName())
	}
	return &berthv1.DeleteNodeResponse{Revision: rev}, nil
}

func (c *clusterService) GetNode(ctx context.Context, req *berthv1.GetNodeRequest) (*berthv1.GetNodeResponse, error) {
	n, err := c.store.GetNode(ctx, req.GetName())
	if err == nil {
		err = c.store.FillUnreachable(ctx, n)
	}
	if err != nil {
		return nil, toStatus(err, "node "+req.GetName())
	}
	resp := &berthv1.GetNodeResponse{Node: n, Usage: &berthv1.NodeUsage{}}
	if ni, ok := c.sched.NodeInfo(req.GetName()); ok {
		resp.Usage = convert.UsageToWire(ni)
	}
	return resp, nil
}

func (c *clusterService) ListNodes(ctx context.Context, req *berthv1.ListNodesRequest) (*berthv1.ListNodesResponse, error) {
	nodes, next, err := c.store.ListNodes(ctx, pageSize(req.GetPageSize()), req.GetPageToken())
	if err != nil {
		return nil, pageError(err, "list nodes")
	}
	if err := c.store.FillUnreachable(ctx, nodes...); err != nil {
		return nil, toStatus(err, "list nodes")
	}
	return &berthv1.ListNodesResponse{Nodes: nodes, NextPageToken: next}, nil
}

// RenewNodeLease keeps a leased node reachable, or brings it back.
func (c *clusterService) RenewNodeLease(ctx context.Context, req *berthv1.RenewNodeLeaseRequest) (*berthv1.RenewNodeLeaseResponse, error) {
	ttl, restored, err := c.store.RenewNodeLease(ctx, req.GetName())
	if errors.Is(err, store.ErrNoLease) {
		return nil, status.Errorf(codes.FailedPrecondition, "node %s has no lease: upsert it with lease_ttl_seconds above 0", req.GetName())
	}
	if err != nil {
		return nil, toStatus(err, "node "+req.GetName())
	}
	return &berthv1.RenewNodeLeaseResponse{TtlSeconds: ttl, Restored: restored}, nil
}

func (c *clusterService) UpsertDisruptionBudget(ctx context.Context, req *berthv1.UpsertDisruptionBudgetRequest) (*berthv1.UpsertDisruptionBudgetResponse, error) {
	b := req.GetBudget()
	rev, err := c.store.PutBudget(ctx, b)
	if err != nil {
		return nil, toStatus(err, fmt.Sprintf("budget %s/%s", b.GetNamespace(), b.GetName()))
	}
	return &berthv1.UpsertDisruptionBudgetResponse{Budget: b, Revision: rev}, nil
}

func (c *clusterService) DeleteDisruptionBudget(ctx context.Context, req *berthv1.DeleteDisruptionBudgetRequest) (*berthv1.DeleteDisruptionBudgetResponse, error) {
	rev, err := c.store.DeleteBudget(ctx, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, toStatus(err, fmt.Sprintf("budget %s/%s", req.GetNamespace(), req.GetName()))
	}
	return &berthv1.DeleteDisruptionBudgetResponse{Revision: rev}, nil
}

func (c *clusterService) ListDisruptionBudgets(ctx context.Context, req *berthv1.ListDisruptionBudgetsRequest) (*berthv1.ListDisruptionBudgetsResponse, error) {
	bs, err := c.store.ListBudgets(ctx, req.GetNamespace())
	if err != nil {
		return nil, toStatus(err, "list budgets")
	}
	return &berthv1.ListDisruptionBudgetsResponse{Budgets: bs}, nil
}
