package store

import (
	"context"
	"fmt"

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

// PutNode creates or replaces a node and returns the revision that wrote it.
func (s *Store) PutNode(ctx context.Context, n *berthv1.Node) (int64, error) {
	if n == nil {
		return 0, fmt.Errorf("%w: nil node", ErrInvalidArgument)
	}
	if err := validName("node name", n.Name); err != nil {
		return 0, err
	}
	val, err := marshalOpts.Marshal(n)
	if err != nil {
		return 0, fmt.Errorf("store: encode node: %w", err)
	}
	u := &commitUnit{ops: []clientv3.Op{clientv3.OpPut(s.keys.node(n.Name), string(val))}}
	res, err := s.commitOne(ctx, "put node", u)
	if err != nil {
		return 0, err
	}
	return res.rev, nil
}

// DeleteNode removes a node; ErrNotFound if it does not exist.
func (s *Store) DeleteNode(ctx context.Context, name string) (int64, error) {
	if err := validName("node name", name); err != nil {
		return 0, err
	}
	key := s.keys.node(name)
	u := &commitUnit{
		cmps: []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), ">", 0)},
		ops:  []clientv3.Op{clientv3.OpDelete(key)},
	}
	res, err := s.commitOne(ctx, "delete node", u)
	if err != nil {
		return 0, err
	}
	if res.err == errCompareFailed {
		return 0, fmt.Errorf("%w: node %q", ErrNotFound, name)
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

func decodeNode(b []byte) (*berthv1.Node, error) {
	n := &berthv1.Node{}
	if err := proto.Unmarshal(b, n); err != nil {
		return nil, fmt.Errorf("store: decode node: %w", err)
	}
	return n, nil
}

func decodePod(b []byte) (*berthv1.Pod, error) {
	p := &berthv1.Pod{}
	if err := proto.Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("store: decode pod: %w", err)
	}
	return p, nil
}
