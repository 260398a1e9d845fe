package server

import (
	"context"

	"github.com/berth-io/berth/scheduler"
	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/store"
)

// Store is what the front needs from durable state (*store.Store in a
// replica): the union of what each service asks for, declared beside the
// service.
type Store interface {
	clusterStore
	podStore
	schedulerStore
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
