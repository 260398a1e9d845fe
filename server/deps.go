package server

import (
	"context"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/scheduler"
	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/store"
)

// Store is what the services need from durable state: *store.Store in a
// replica.
type Store interface {
	PutNodeWithLease(ctx context.Context, n *berthv1.Node) (int64, error)
	DeleteNodeWithLease(ctx context.Context, name string) (int64, error)
	GetNode(ctx context.Context, name string) (*berthv1.Node, error)
	ListNodes(ctx context.Context, limit int, pageToken string) ([]*berthv1.Node, string, error)
	FillUnreachable(ctx context.Context, nodes ...*berthv1.Node) error
	RenewNodeLease(ctx context.Context, name string) (ttl int64, restored bool, err error)
	NodeModRevision(ctx context.Context, name string) (int64, error)

	CreatePods(ctx context.Context, pods []*berthv1.Pod) []store.CreateResult
	GetPod(ctx context.Context, namespace, name string) (*berthv1.Pod, int64, error)
	ListPods(ctx context.Context, filter store.PodFilter, limit int, pageToken string) ([]*berthv1.Pod, string, error)
	DeletePod(ctx context.Context, namespace, name, uid string) (int64, error)
	UpdatePod(ctx context.Context, namespace, name, uid string, mutate func(*berthv1.Pod) error) (*berthv1.Pod, int64, error)
	ModifyPod(ctx context.Context, namespace, name, uid string, mutate func(*berthv1.Pod) (bool, error)) (*berthv1.Pod, int64, error)
	WaitPod(ctx context.Context, namespace, name string, fromRevision int64, done func(*berthv1.Pod) bool) (*berthv1.Pod, int64, error)
	WatchBindings(ctx context.Context, fromRevision int64, send func(*berthv1.BindingEvent) error, opts ...store.WatchOption) error

	PutBudget(ctx context.Context, b *berthv1.DisruptionBudget) (int64, error)
	DeleteBudget(ctx context.Context, namespace, name string) (int64, error)
	ListBudgets(ctx context.Context, namespace string) ([]*berthv1.DisruptionBudget, error)

	PutPodGroup(ctx context.Context, g *berthv1.PodGroup) (*berthv1.PodGroup, int64, error)
	DeletePodGroup(ctx context.Context, namespace, name string) (int64, error)
	GetPodGroup(ctx context.Context, namespace, name string) (*berthv1.PodGroup, error)
	ListPodGroups(ctx context.Context, namespace string) ([]*berthv1.PodGroup, error)

	ListReplicas(ctx context.Context) ([]*berthv1.Replica, error)
}

// Scheduler is what the services read from this replica's scheduling
// core: *scheduler.Scheduler in a replica.
type Scheduler interface {
	// NodeInfo is the cached node with what its pods request.
	NodeInfo(name string) (*framework.NodeInfo, bool)
	// Explain dry-runs a pod in the shard that owns it.
	Explain(ctx context.Context, pod *framework.Pod) (scheduler.Explanation, error)
	// PodGroupMembers counts a group's members, and those bound, in the
	// cache.
	PodGroupMembers(namespace, name string) (members, bound int)
	// LogicalShards is the number of shards the replicas divide.
	LogicalShards() int
}

var (
	_ Store     = (*store.Store)(nil)
	_ Scheduler = (*scheduler.Scheduler)(nil)
)
