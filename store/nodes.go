package store

import (
	"context"
	"fmt"
	"strconv"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// Page sizes for lists: a non-positive size asks for the default; larger
// sizes are capped.
const (
	DefaultPageSize = 500
	MaxPageSize     = 10000
)

func pageSizeOrDefault(n int) int {
	switch {
	case n <= 0:
		return DefaultPageSize
	case n > MaxPageSize:
		return MaxPageSize
	}
	return n
}

// PutNodeWithLease creates or replaces a node and in the same Txn starts its
// lease (leases.go) when lease_ttl_seconds > 0 (a new lease even if one is
// live: the TTL may have changed) or drops it when 0. The output-only field
// unreachable is not stored. When a new lease replaces one, the old one is
// revoked afterwards, best effort: it no longer holds a key, and would only
// expire. (A lease dropped with TTL 0 is left to expire, sparing the common
// lease-less upsert a read.)
func (s *Store) PutNodeWithLease(ctx context.Context, n *berthv1.Node) (int64, error) {
	if n == nil {
		return 0, fmt.Errorf("%w: nil node", ErrInvalidArgument)
	}
	if err := validName("node name", n.Name); err != nil {
		return 0, err
	}
	ttl := n.GetLeaseTtlSeconds()
	if ttl < 0 || ttl > MaxNodeLeaseTTL {
		return 0, fmt.Errorf("%w: lease TTL %ds is outside 0-%d", ErrInvalidArgument, ttl, MaxNodeLeaseTTL)
	}
	if n.GetUnreachable() {
		n = proto.CloneOf(n)
		n.Unreachable = false
	}
	val, err := marshalOpts.Marshal(n)
	if err != nil {
		return 0, fmt.Errorf("store: encode node: %w", err)
	}
	nodeKey, leaseKey := s.keys.node(n.Name), s.keys.nodeLease(n.Name)
	u := &commitUnit{}
	var old, granted clientv3.LeaseID
	if ttl > 0 {
		if old, err = s.leaseOf(ctx, n.Name); err != nil {
			return 0, err
		}
		if granted, _, err = s.grant(ctx, ttl); err != nil {
			return 0, err
		}
		u.ops = []*pb.RequestOp{
			leasedPutOp(leaseKey, []byte(strconv.FormatInt(int64(granted), 10)), granted),
			putOp(nodeKey, val),
		}
	} else {
		u.ops = []*pb.RequestOp{putOp(nodeKey, val), deleteOp(leaseKey)}
	}
	// On failure the granted lease is left to expire: the write may have
	// landed even so, and then the node needs it.
	res, err := s.commitOne(ctx, "put node", u)
	if err != nil {
		return 0, err
	}
	if old != 0 && old != granted {
		s.revokeQuietly(ctx, old)
	}
	return res.rev, nil
}

// DeleteNodeWithLease removes a node and its lease key in the same Txn;
// ErrNotFound if the node does not exist.
func (s *Store) DeleteNodeWithLease(ctx context.Context, name string) (int64, error) {
	if err := validName("node name", name); err != nil {
		return 0, err
	}
	old, err := s.leaseOf(ctx, name)
	if err != nil {
		return 0, err
	}
	key := s.keys.node(name)
	u := &commitUnit{
		cmps: []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), ">", 0)},
		ops:  []*pb.RequestOp{deleteOp(key), deleteOp(s.keys.nodeLease(name))},
	}
	res, err := s.commitOne(ctx, "delete node", u)
	if err != nil {
		return 0, err
	}
	if res.err == errCompareFailed {
		return 0, fmt.Errorf("%w: node %q", ErrNotFound, name)
	}
	if old != 0 {
		s.revokeQuietly(ctx, old)
	}
	return res.rev, nil
}

// GetNode reads one node; ErrNotFound if it does not exist.
func (s *Store) GetNode(ctx context.Context, name string) (*berthv1.Node, error) {
	if err := validName("node name", name); err != nil {
		return nil, err
	}
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.Get(cctx, s.keys.node(name))
	if err != nil {
		return nil, s.callError(ctx, "get node", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("%w: node %q", ErrNotFound, name)
	}
	return decodeNode(resp.Kvs[0].Value)
}

// ListNodes returns up to pageSize nodes in name order, starting after
// pageToken (empty for the first page), and the token of the next page
// (empty after the last).
func (s *Store) ListNodes(ctx context.Context, pageSize int, pageToken string) ([]*berthv1.Node, string, error) {
	pageSize = pageSizeOrDefault(pageSize)
	start := s.keys.nodes
	if pageToken != "" {
		var err error
		if start, err = decodePageToken(pageToken, s.keys.nodes); err != nil {
			return nil, "", err
		}
	}
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.Get(cctx, start,
		clientv3.WithRange(clientv3.GetPrefixRangeEnd(s.keys.nodes)), clientv3.WithLimit(int64(pageSize)))
	if err != nil {
		return nil, "", s.callError(ctx, "list nodes", err)
	}
	nodes := make([]*berthv1.Node, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		n, err := decodeNode(kv.Value)
		if err != nil {
			return nil, "", err
		}
		nodes = append(nodes, n)
	}
	next := ""
	if resp.More && len(resp.Kvs) > 0 {
		next = encodePageToken(string(resp.Kvs[len(resp.Kvs)-1].Key))
	}
	return nodes, next, nil
}

// NodeModRevision returns the revision that last wrote a node's record, 0
// if there is no such node.
func (s *Store) NodeModRevision(ctx context.Context, name string) (int64, error) {
	if err := validName("node name", name); err != nil {
		return 0, err
	}
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.Get(cctx, s.keys.node(name), clientv3.WithKeysOnly())
	if err != nil {
		return 0, s.callError(ctx, "read node revision", err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return resp.Kvs[0].ModRevision, nil
}

func decodeNode(b []byte) (*berthv1.Node, error) {
	n := &berthv1.Node{}
	if err := proto.Unmarshal(b, n); err != nil {
		return nil, fmt.Errorf("store: decode node: %w", err)
	}
	return n, nil
}
