package store

import (
	"context"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// maxBudgets bounds ListBudgets: budgets are few (one per protected
// workload), and every replica holds them all in memory anyway.
const maxBudgets = 100000

// PutBudget creates or replaces a disruption budget.
func (s *Store) PutBudget(ctx context.Context, b *berthv1.DisruptionBudget) (int64, error) {
	if b == nil {
		return 0, fmt.Errorf("%w: nil budget", ErrInvalidArgument)
	}
	val, err := marshalOpts.Marshal(b)
	if err != nil {
		return 0, fmt.Errorf("store: encode budget: %w", err)
	}
	u := &commitUnit{ops: []*pb.RequestOp{putOp(s.keys.budget(b.Namespace, b.Name), val)}}
	res, err := s.commitOne(ctx, "put budget", u)
	if err != nil {
		return 0, err
	}
	return res.rev, nil
}

// DeleteBudget removes a disruption budget; ErrNotFound if absent.
func (s *Store) DeleteBudget(ctx context.Context, namespace, name string) (int64, error) {
	key := s.keys.budget(namespace, name)
	u := &commitUnit{
		cmps: []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), ">", 0)},
		ops:  []*pb.RequestOp{deleteOp(key)},
	}
	res, err := s.commitOne(ctx, "delete budget", u)
	if err != nil {
		return 0, err
	}
	if res.err == errCompareFailed {
		return 0, fmt.Errorf("%w: budget %s/%s", ErrNotFound, namespace, name)
	}
	return res.rev, nil
}

// ListBudgets returns every budget, or those of one namespace.
func (s *Store) ListBudgets(ctx context.Context, namespace string) ([]*berthv1.DisruptionBudget, error) {
	prefix := s.keys.budgets
	if namespace != "" {
		prefix += namespace + "/"
	}
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.Get(cctx, prefix, clientv3.WithPrefix(), clientv3.WithLimit(maxBudgets))
	if err != nil {
		return nil, s.callError(ctx, "list budgets", err)
	}
	out := make([]*berthv1.DisruptionBudget, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		b, err := decodeBudget(kv.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func decodeBudget(b []byte) (*berthv1.DisruptionBudget, error) {
	db := &berthv1.DisruptionBudget{}
	if err := proto.Unmarshal(b, db); err != nil {
		return nil, fmt.Errorf("store: decode budget: %w", err)
	}
	return db, nil
}
