package store

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// Binding is a scheduler's decision to put a pod on a node, with what the
// commit must check so that no node is overcommitted across replicas and no
// replica commits for a shard it lost.
type Binding struct {
	// Pod is the new value: the stored pod with node_name and status set.
	// With Value set, only its namespace, name, uid and node_name are read.
	Pod *berthv1.Pod
	// Value, if set, is the new value already encoded (MarkBoundValue):
	// it is written as is.
	Value []byte
	// ExpectedModRevision is the revision of the record the decision read.
	ExpectedModRevision int64
	// ViewRevision is the revision of the cluster view the placement was
	// checked against. The commit fails if another writer added a pod to
	// the node after it.
	ViewRevision int64
	// Shard and ShardEpoch fence the commit: it fails unless the shard key
	// still holds the claim made at ShardEpoch. Epoch 0: no fence.
	Shard      int
	ShardEpoch int64
}

// Bind commits each binding on its own (many share one Txn). A result's Err
// is nil, ErrConflict (the pod changed, another writer added to the node, or
// the fence is lost), or the store's usual errors.
func (s *Store) Bind(ctx context.Context, bindings []Binding) []UpdateResult {
	out := make([]UpdateResult, len(bindings))
	s.commitBatch(ctx, "bind", len(bindings), func(i int) (*commitUnit, error) {
		u := &commitUnit{urgent: true}
		return u, s.addBinding(u, bindings[i], 0)
	}, func(i int, u *commitUnit, res commitResult) {
		p := bindings[i].Pod
		switch {
		case res.err == nil:
			out[i].Revision = res.rev
		case res.err == errCompareFailed && res.chargedAt > 0:
			out[i].Err = fmt.Errorf("binding %s/%s to %s: %w", p.Namespace, p.Name, p.NodeName, &StaleViewError{Revision: res.chargedAt})
		case res.err == errCompareFailed:
			out[i].Err = fmt.Errorf("%w: binding %s/%s to %s: %s", ErrConflict, p.Namespace, p.Name, p.NodeName, s.whyBindFailed(u, bindings[i]))
		default:
			out[i].Err = res.err
		}
	})
	return out
}

// BindAll commits every binding or none, in one Txn: a gang. The keys in
// deletes (such as the gang's assumptions) are deleted in the same Txn;
// none may be a key a binding touches.
func (s *Store) BindAll(ctx context.Context, bindings []Binding, deletes ...string) (rev int64, err error) {
	extra := make([]*pb.RequestOp, len(deletes))
	for i, k := range deletes {
		extra[i] = deleteOp(k)
	}
	return s.bindAll(ctx, bindings, nil, extra)
}

// bindAll is BindAll where held[i] > 0 says binding i's node is already
// charged by the pod's assumption written at that revision.
func (s *Store) bindAll(ctx context.Context, bindings []Binding, held []int64, extra []*pb.RequestOp) (rev int64, err error) {
	if len(bindings) == 0 {
		return 0, fmt.Errorf("%w: no bindings", ErrInvalidArgument)
	}
	u := &commitUnit{ops: extra, urgent: true}
	for i, b := range bindings {
		var at int64
		if i < len(held) {
			at = held[i]
		}
		if err := s.addBinding(u, b, at); err != nil {
			return 0, err
		}
	}
	res, err := s.commitOne(ctx, "bind group", u)
	if err != nil {
		return 0, err
	}
	if res.err == errCompareFailed {
		return 0, fmt.Errorf("%w: group binding: a member changed, a node filled, or the shard moved", ErrConflict)
	}
	return res.rev, nil
}

// addBinding adds one binding's compares and writes to u. heldAt > 0 is
// the revision of the pod's own assumption on the node, which charged it
// then: the binding only turns that charge into the pod's, so it compares
// that the assumption still stands (every writer since saw the charge)
// instead of the node's allocation key, which it leaves alone.
func (s *Store) addBinding(u *commitUnit, b Binding, heldAt int64) error {
	val, err := bindingValue(b)
	if err != nil {
		return err
	}
	key := s.keys.pod(b.Pod.Namespace, b.Pod.Name)
	u.cmps = append(u.cmps, modRevIs(key, b.ExpectedModRevision))
	u.ops = append(u.ops, putOp(key, val))
	if heldAt > 0 {
		s.fence(u, b.Shard, b.ShardEpoch)
		u.cmps = append(u.cmps, modRevIs(s.keys.assume(b.Pod.Namespace, b.Pod.Name), heldAt))
		return nil
	}
	return s.charge(u, b.Pod.NodeName, b.ViewRevision, b.Shard, b.ShardEpoch)
}

// bindingValue checks a binding and returns the value it writes, apart
// from addBinding so that its error paths' locals stay out of that frame,
// which every binding goroutine holds on its way into the commit (see
// appendPut).
func bindingValue(b Binding) ([]byte, error) {
	if err := validatePodKey(b.Pod); err != nil {
		return nil, err
	}
	if b.Pod.NodeName == "" {
		return nil, fmt.Errorf("%w: binding of %s/%s names no node", ErrInvalidArgument, b.Pod.Namespace, b.Pod.Name)
	}
	if b.Value != nil {
		return b.Value, nil
	}
	val, err := marshalPod(b.Pod)
	if err != nil {
		return nil, fmt.Errorf("store: encode pod: %w", err)
	}
	return val, nil
}

// charge adds to u what every write that adds a pod to node must check
// (bindings, assumptions): the shard fence and the node's allocation
// charge at the placement's view. A view older than the shard's claim is
// refused with a StaleViewError at the claim: it may miss pods that a solo
// replica bound without bumping the node's key (solo.go).
func (s *Store) charge(u *commitUnit, node string, view int64, shard int, epoch int64) error {
	if epoch != 0 && view < epoch {
		return &StaleViewError{Revision: epoch}
	}
	s.fence(u, shard, epoch)
	if view <= 0 {
		// No view: accept only a node nobody has ever added to. Callers
		// without a view should not bind.
		view = 1
	}
	u.charges = append(u.charges, allocCharge{key: s.keys.allocation(node), view: view})
	return nil
}

// fence makes u fail unless shard is still held by the claim made at
// epoch; epoch 0: no fence.
func (s *Store) fence(u *commitUnit, shard int, epoch int64) {
	if epoch != 0 {
		u.fences = append(u.fences, createRevIs(s.keys.shard(shard), epoch))
	}
}

// whyBindFailed names what a failed binding's compares found, for logs.
func (s *Store) whyBindFailed(u *commitUnit, b Binding) string {
	if kv := u.currentKV(s.keys.pod(b.Pod.Namespace, b.Pod.Name)); kv == nil || kv.ModRevision != b.ExpectedModRevision {
		return "the pod changed"
	}
	return "the shard moved"
}
