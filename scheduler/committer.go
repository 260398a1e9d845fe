package scheduler

import (
	"context"
	"errors"
	"fmt"

	"github.com/berth-io/berth/scheduler/framework"
)

// This file is the core's way out: what a Committer must do with the
// decisions, and the errors it answers with.

// ErrCommitConflict is what a Committer returns (wrapped) when what the
// decision was based on changed before it was stored: the pod changed or
// vanished since the revision it was read at, another writer charged the
// node, or the shard moved to another replica. The watch will bring the
// new state, so the pod is not retried from the stale copy.
var ErrCommitConflict = errors.New("scheduler: commit conflicts with a newer stored state")

// NodeChargedError is the ErrCommitConflict of a binding whose node
// another writer charged after the view the placement was checked
// against. The pod is retried once the cache has caught up to Revision,
// not before: an earlier retry would only pick the same node again.
type NodeChargedError struct {
	Revision int64
}

func (e *NodeChargedError) Error() string {
	return fmt.Sprintf("scheduler: node charged by another writer at revision %d, after the placement's view", e.Revision)
}

// Is makes errors.Is(err, ErrCommitConflict) true.
func (e *NodeChargedError) Is(target error) bool { return target == ErrCommitConflict }

// Committer makes decisions durable. Bind must return only once the
// binding is stored; it is called from many goroutines at once, which lets
// an implementation share one storage write among many bindings.
type Committer interface {
	framework.Binder
	// Evict marks victims chosen by preemption, durably, so subscribers
	// learn to stop them; their room is freed when they are deleted.
	framework.Evictor
	// RecordUnschedulable stores why the pod found no node. Best effort: a
	// lost write only delays the message a user sees.
	RecordUnschedulable(ctx context.Context, pod *framework.Pod, why Unschedulable) error
}

// Unschedulable is what is recorded about an attempt that found no node.
// The core builds it once: both parts walk every node's status.
type Unschedulable struct {
	// Message is kube's summary, e.g. "0/3 nodes are available: ...".
	Message string
	// NumNodes is how many nodes the attempt considered.
	NumNodes int
	// Reasons are the rejection reasons with their node counts.
	Reasons []framework.ReasonCount
}
