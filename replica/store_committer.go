package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/berth-io/berth/convert"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/scheduler"
	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/store"
)

// storeCommitter adapts the store to the core's Committer (and GroupBinder)
// interfaces: it writes the core's decisions through the store's group
// commit, so concurrent binding cycles share etcd Txns, and translates the
// store's conflicts into the core's.
//
// The pod status each decision writes (bound, unschedulable, preempted) is
// one of the pod lifecycle's transitions, the store's (store/lifecycle.go).
type storeCommitter struct{ store *store.Store }

var (
	_ scheduler.Committer   = storeCommitter{}
	_ scheduler.GroupBinder = storeCommitter{}
)

// sourceOf decodes the record p was read from, for a decision to change
// and write back without a read.
func sourceOf(p *framework.Pod) (*berthv1.Pod, error) {
	return convert.WirePod(p)
}

// Bind records pod -> node if the pod is still the one that was scheduled,
// nobody else added to the node since the placement's view, and this
// replica still owns the pod's shard.
func (c storeCommitter) Bind(ctx context.Context, p *framework.Pod, nodeName string) error {
	b, err := c.binding(p, nodeName)
	if err != nil {
		return err
	}
	res := c.store.Bind(ctx, []store.Binding{b})[0]
	return c.coreConflict(res.Err)
}

// binding builds the store's binding of p to nodeName. The new value is
// the stored record edited as bytes: decoding and re-encoding the whole pod
// was most of a bind's cost outside etcd.
func (c storeCommitter) binding(p *framework.Pod, nodeName string) (store.Binding, error) {
	record, err := convert.StoredRecord(p)
	if err != nil {
		return store.Binding{}, err
	}
	value, err := store.MarkBoundValue(record, nodeName, c.store.ReplicaID(), time.Now())
	if err != nil {
		return store.Binding{}, fmt.Errorf("pod %s: %w", p.Key(), err)
	}
	return store.Binding{
		Pod:                 &berthv1.Pod{Namespace: p.Namespace, Name: p.Name, Uid: p.UID, NodeName: nodeName},
		Value:               value,
		ExpectedModRevision: p.Revision,
		ViewRevision:        p.ViewRevision(),
		Shard:               p.Shard(),
		ShardEpoch:          p.ShardEpoch(),
	}, nil
}

// RecordUnschedulable stores the diagnosis where GetPod shows it. Like a
// binding, it edits the stored record's bytes: decoding the whole pod was
// most of its cost outside etcd.
func (c storeCommitter) RecordUnschedulable(ctx context.Context, p *framework.Pod, why scheduler.Unschedulable) error {
	record, err := convert.StoredRecord(p)
	if err != nil {
		return err
	}
	diag := convert.DiagnosisToWire(why, time.Now())
	value, err := store.MarkUnschedulableValue(record, why.Message, p.NominatedNodeName(), diag)
	if err != nil {
		return fmt.Errorf("pod %s: %w", p.Key(), err)
	}
	named := &berthv1.Pod{Namespace: p.Namespace, Name: p.Name}
	res := c.store.UpdatePods(ctx, []store.PodUpdate{{Pod: named, ExpectedModRevision: p.Revision, Value: value}})[0]
	// An update charges no node, so only the pod's own conflict can come
	// back: coreConflict translates it as for a binding.
	return c.coreConflict(res.Err)
}

// Evict marks each victim with its preemptor. The mark is the durable
// record that WatchBindings turns into an EVICT event; the victim keeps its
// node until the orchestrator deletes it. A victim deleted meanwhile needs
// no mark.
func (c storeCommitter) Evict(ctx context.Context, preemptor *framework.Pod, _ string, victims []*framework.Pod) error {
	by := preemptor.Key()
	mark := func(p *berthv1.Pod) error {
		store.MarkPreempted(p, by)
		return nil
	}
	// Marks go out together; a victim that changed since is read and
	// marked again on its own.
	updates := make([]store.PodUpdate, 0, len(victims))
	var stale []*framework.Pod
	for _, v := range victims {
		next, rev, err := c.victimRecord(ctx, v)
		if err != nil {
			stale = append(stale, v)
			continue
		}
		store.MarkPreempted(next, by)
		updates = append(updates, store.PodUpdate{Pod: next, ExpectedModRevision: rev})
	}
	var errs []error
	for i, res := range c.store.UpdatePods(ctx, updates) {
		switch {
		case res.Err == nil:
		case errors.Is(res.Err, store.ErrConflict):
			stale = append(stale, victimOf(victims, updates[i].Pod))
		default:
			errs = append(errs, fmt.Errorf("evict %s/%s: %w", updates[i].Pod.GetNamespace(), updates[i].Pod.GetName(), res.Err))
		}
	}
	for _, v := range stale {
		if _, _, err := c.store.UpdatePod(ctx, v.Namespace, v.Name, v.UID, mark); err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, fmt.Errorf("evict %s: %w", v.Key(), err))
		}
	}
	return errors.Join(errs...)
}

// victimRecord is the record of a victim to mark and its revision: the one
// the cache holds, or, as the core keeps none for pods on nodes, the one
// read now.
func (c storeCommitter) victimRecord(ctx context.Context, v *framework.Pod) (*berthv1.Pod, int64, error) {
	next, err := sourceOf(v)
	if !errors.Is(err, convert.ErrNoRecord) {
		return next, v.Revision, err
	}
	next, rev, err := c.store.GetPod(ctx, v.Namespace, v.Name)
	if err == nil && next.GetUid() != v.UID {
		err = fmt.Errorf("%w: pod %s has uid %s, not %s", store.ErrConflict, v.Key(), next.GetUid(), v.UID)
	}
	return next, rev, err
}

// victimOf finds the core pod a wire update was made from.
func victimOf(victims []*framework.Pod, p *berthv1.Pod) *framework.Pod {
	for _, v := range victims {
		if v.Namespace == p.GetNamespace() && v.Name == p.GetName() {
			return v
		}
	}
	return &framework.Pod{Namespace: p.GetNamespace(), Name: p.GetName(), UID: p.GetUid()}
}

// coreConflict translates the store's conflicts into the core's.
func (c storeCommitter) coreConflict(err error) error {
	if err == nil {
		// Nearly every binding: spares the heap the target errors.As
		// needs below.
		return nil
	}
	var stale *store.StaleViewError
	switch {
	case errors.As(err, &stale):
		// The core retries once its view reaches the revision; the sync
		// shows it even if nothing it watches changes by then.
		c.store.WantView(stale.Revision)
		return &scheduler.NodeChargedError{Revision: stale.Revision}
	case errors.Is(err, store.ErrConflict):
		return fmt.Errorf("%w: %v", scheduler.ErrCommitConflict, err)
	}
	return err
}

// BindGroup binds a gang's members in one Txn, all or none; the same Txn
// drops their assumptions.
func (c storeCommitter) BindGroup(ctx context.Context, pods []*framework.Pod) error {
	bs := make([]store.Binding, 0, len(pods))
	for _, p := range pods {
		b, err := c.binding(p, p.NodeName)
		if err != nil {
			return err
		}
		bs = append(bs, b)
	}
	_, err := c.store.BindGang(ctx, bs)
	return c.coreConflict(err)
}

func assumptionsOf(pods []*framework.Pod) []store.Assumption {
	out := make([]store.Assumption, len(pods))
	for i, p := range pods {
		out[i] = store.Assumption{
			Namespace: p.Namespace, Name: p.Name, UID: p.UID, Node: p.NodeName,
			ViewRevision: p.ViewRevision(), Shard: p.Shard(), ShardEpoch: p.ShardEpoch(),
		}
	}
	return out
}

// Assume records waiting gang members under this replica's lease, charged
// to their nodes and fenced like bindings.
func (c storeCommitter) Assume(ctx context.Context, pods []*framework.Pod) error {
	return c.coreConflict(c.store.PutAssumptions(ctx, assumptionsOf(pods)))
}

// Unassume drops this replica's assumptions of pods.
func (c storeCommitter) Unassume(ctx context.Context, pods []*framework.Pod) error {
	return c.store.DeleteAssumptions(ctx, assumptionsOf(pods))
}
