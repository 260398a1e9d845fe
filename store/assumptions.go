package store

import (
	"context"
	"fmt"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func (k *keyspace) assume(namespace, name string) string { return k.assumes + namespace + "/" + name }

func (k *keyspace) isAssume(key string) bool { return strings.HasPrefix(key, k.assumes) }

// assumeName splits an assumption key into namespace and name.
func (k *keyspace) assumeName(key string) (namespace, name string) {
	namespace, name, _ = strings.Cut(strings.TrimPrefix(key, k.assumes), "/")
	return namespace, name
}

// Assumption is a reservation that outlives one scheduling cycle: a gang
// member placed on Node and waiting for the rest of its gang. It is stored
// under {prefix}/v1/assume/{namespace}/{name} with the session lease of the
// replica that made it, so it vanishes when that replica dies; the pod
// itself is still PENDING, and the shard's next owner schedules it.
type Assumption struct {
	Namespace, Name, UID string
	Node                 string
	// Replica is the replica that holds it; filled in by PutAssumptions.
	Replica string
	// ViewRevision, Shard and ShardEpoch are the placement's, as in a
	// Binding: an assumption holds room like a binding, so it is charged
	// to the node and fenced the same way. Not stored.
	ViewRevision int64
	Shard        int
	ShardEpoch   int64
}

// heldAssumption is an assumption this replica wrote, and the revision of
// the write.
type heldAssumption struct {
	uid, node string
	rev       int64
}

// PutAssumptions records assumptions with this replica's session lease (no
// lease when there is no session), group committed. Each is charged to its
// node and fenced like a binding (see addBinding), so replicas together
// never assume or bind more than a node holds: one whose node another
// writer added to after its view, or whose shard moved, is not written and
// fails with ErrConflict. The error is the first failure.
func (s *Store) PutAssumptions(ctx context.Context, as []Assumption) error {
	if len(as) == 0 {
		return nil
	}
	lease, replica := s.SessionLease(), s.ReplicaID()
	units := make([]*commitUnit, 0, len(as))
	for _, a := range as {
		if err := validatePodKey(&berthv1.Pod{Namespace: a.Namespace, Name: a.Name}); err != nil {
			return err
		}
		if a.Node == "" {
			return fmt.Errorf("%w: assumption of %s/%s names no node", ErrInvalidArgument, a.Namespace, a.Name)
		}
		val, err := encodeAssumption(a, replica)
		if err != nil {
			return err
		}
		u := &commitUnit{ops: []*pb.RequestOp{leasedPutOp(s.keys.assume(a.Namespace, a.Name), keyBytes(val), lease)}}
		if err := s.charge(u, a.Node, a.ViewRevision, a.Shard, a.ShardEpoch); err != nil {
			return fmt.Errorf("assumption of %s/%s on %s: %w", a.Namespace, a.Name, a.Node, err)
		}
		units = append(units, u)
	}
	var first error
	err := s.commitEach(ctx, "put assumption", units, func(i int, _ *commitUnit, res commitResult) {
		a := as[i]
		key := s.keys.assume(a.Namespace, a.Name)
		var err error
		switch {
		case res.err == nil:
			s.held.Store(key, heldAssumption{uid: a.UID, node: a.Node, rev: res.rev})
			return
		case res.err == errCompareFailed && res.chargedAt > 0:
			err = fmt.Errorf("assumption of %s/%s on %s: %w", a.Namespace, a.Name, a.Node, &StaleViewError{Revision: res.chargedAt})
		case res.err == errCompareFailed:
			err = fmt.Errorf("%w: assumption of %s/%s on %s: the shard moved", ErrConflict, a.Namespace, a.Name, a.Node)
		default:
			err = res.err
		}
		// Whatever stood there before is not known to be ours any more.
		s.held.Delete(key)
		if first == nil {
			first = err
		}
	})
	if err != nil {
		return err
	}
	return first
}

// DeleteAssumptions removes the named pods' assumptions, each only if it
// is held under this replica's lease: an assumption another replica made
// since (the shard moved) is not ours to drop. Absent ones are fine.
func (s *Store) DeleteAssumptions(ctx context.Context, as []Assumption) error {
	if len(as) == 0 {
		return nil
	}
	lease := s.SessionLease()
	units := make([]*commitUnit, 0, len(as))
	for _, a := range as {
		if err := validatePodKey(&berthv1.Pod{Namespace: a.Namespace, Name: a.Name}); err != nil {
			return err
		}
		key := s.keys.assume(a.Namespace, a.Name)
		s.held.Delete(key)
		units = append(units, &commitUnit{
			cmps: []clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(key), "=", lease)},
			ops:  []*pb.RequestOp{deleteOp(key)},
			// etcd's keys-only read leaves out the lease, which the
			// committer needs to judge this compare after a failed Txn.
			readValues: true,
		})
	}
	// A failed compare is no error: the assumption is gone or not ours.
	var first error
	err := s.commitEach(ctx, "delete assumption", units, func(_ int, _ *commitUnit, res commitResult) {
		if first == nil && res.err != nil && res.err != errCompareFailed {
			first = res.err
		}
	})
	if err != nil {
		return err
	}
	return first
}

// ListAssumptions returns the stored assumptions, of one namespace or all.
func (s *Store) ListAssumptions(ctx context.Context, namespace string) ([]Assumption, error) {
	prefix := s.keys.assumes
	if namespace != "" {
		prefix += namespace + "/"
	}
	var out []Assumption
	var bad error
	_, err := s.rangeAt(ctx, "list assumptions", prefix, clientv3.GetPrefixRangeEnd(prefix), 0, func(kv *mvccpb.KeyValue) {
		a, err := decodeAssumption(kv.Value)
		if err != nil {
			bad = err
			return
		}
		out = append(out, a)
	})
	if err != nil {
		return nil, err
	}
	return out, bad
}

// BindGang commits a gang's bindings all or none (BindAll), deleting the
// members' assumptions in the same Txn: once bound, nothing about them is
// assumed any more. A member whose assumption this replica wrote on the
// same node is checked against that assumption rather than its view: the
// room was charged when the assumption was written, and every writer since
// counted it.
func (s *Store) BindGang(ctx context.Context, bindings []Binding) (int64, error) {
	extra := make([]*pb.RequestOp, 0, len(bindings))
	held := make([]int64, len(bindings))
	var keys []string
	for i, b := range bindings {
		if b.Pod == nil {
			continue
		}
		key := s.keys.assume(b.Pod.Namespace, b.Pod.Name)
		extra = append(extra, deleteOp(key))
		keys = append(keys, key)
		if v, ok := s.held.Load(key); ok {
			if h := v.(heldAssumption); h.uid == b.Pod.Uid && h.node == b.Pod.NodeName {
				held[i] = h.rev
			}
		}
	}
	rev, err := s.bindAll(ctx, bindings, held, extra)
	if err == nil {
		for _, k := range keys {
			s.held.Delete(k)
		}
	}
	return rev, err
}

// Assumption values are a protobuf Struct: etcd values are protobuf, and
// the API has no message for this internal record.
func encodeAssumption(a Assumption, replica string) (string, error) {
	st, err := structpb.NewStruct(map[string]any{
		"namespace": a.Namespace, "name": a.Name, "uid": a.UID, "node": a.Node, "replica": replica,
	})
	if err != nil {
		return "", fmt.Errorf("store: encode assumption: %w", err)
	}
	b, err := marshalOpts.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("store: encode assumption: %w", err)
	}
	return string(b), nil
}

func decodeAssumption(b []byte) (Assumption, error) {
	st := &structpb.Struct{}
	if err := proto.Unmarshal(b, st); err != nil {
		return Assumption{}, fmt.Errorf("store: decode assumption: %w", err)
	}
	f := st.GetFields()
	return Assumption{
		Namespace: f["namespace"].GetStringValue(), Name: f["name"].GetStringValue(),
		UID: f["uid"].GetStringValue(), Node: f["node"].GetStringValue(), Replica: f["replica"].GetStringValue(),
	}, nil
}
