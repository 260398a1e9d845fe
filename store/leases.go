package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// Node leases.
//
// A node stored with lease_ttl_seconds > 0 has a second key,
// {prefix}/v1/nodeleases/{name}, attached to an etcd lease of that TTL and
// holding the lease id in decimal. RenewNodeLease keeps the lease alive; when
// it expires etcd deletes the key, and the node is unreachable until renewed.
//
// The key is only ever written in the Txn that writes the node's record
// (PutNodeWithLease, DeleteNodeWithLease in nodes.go), except by expiry and
// by a renewal that restores it. Within that Txn it is put before the
// record (a lease granted) or deleted after it (lease dropped, node
// deleted), and etcd reports a Txn's events in the order of its ops. So a
// reader that applies events one by one never sees a leased node without
// its key, nor a dropped lease as an expired one; and a lease key deleted
// at a revision that does not also write the node's record was deleted by
// expiry.

// MaxNodeLeaseTTL bounds lease_ttl_seconds: a longer lease is no heartbeat.
const MaxNodeLeaseTTL = 3600

// ErrNoLease is returned by RenewNodeLease for a node stored without a
// lease TTL.
var ErrNoLease = errors.New("store: node has no lease")

func (k *keyspace) nodeLease(name string) string { return k.nodeLeases + name }

func (k *keyspace) isNodeLease(key string) bool { return strings.HasPrefix(key, k.nodeLeases) }

func (k *keyspace) nodeLeaseName(key string) string { return strings.TrimPrefix(key, k.nodeLeases) }

// RenewNodeLease keeps a node's lease alive for another TTL and returns the
// TTL in seconds. If the lease had expired it starts a new one, and restored
// is true. ErrNotFound: no such node; ErrNoLease: the node has no lease TTL.
func (s *Store) RenewNodeLease(ctx context.Context, name string) (ttl int64, restored bool, err error) {
	if err := validName("node name", name); err != nil {
		return 0, false, err
	}
	nodeKey, leaseKey := s.keys.node(name), s.keys.nodeLease(name)
	const attempts = 5
	for range attempts {
		cctx, cancel := s.bound(ctx)
		resp, err := s.client.Txn(cctx).Then(clientv3.OpGet(nodeKey), clientv3.OpGet(leaseKey)).Commit()
		cancel()
		if err != nil {
			return 0, false, s.callError(ctx, "renew node lease", err)
		}
		nodeKVs, leaseKVs := resp.Responses[0].GetResponseRange().GetKvs(), resp.Responses[1].GetResponseRange().GetKvs()
		if len(nodeKVs) == 0 {
			return 0, false, fmt.Errorf("%w: node %q", ErrNotFound, name)
		}
		n, err := decodeNode(nodeKVs[0].Value)
		if err != nil {
			return 0, false, err
		}
		if n.GetLeaseTtlSeconds() <= 0 {
			return 0, false, fmt.Errorf("%w: node %q has lease_ttl_seconds 0", ErrNoLease, name)
		}
		if len(leaseKVs) > 0 {
			cctx, cancel := s.bound(ctx)
			ka, err := s.client.KeepAliveOnce(cctx, clientv3.LeaseID(leaseKVs[0].Lease))
			cancel()
			if err == nil {
				return ka.TTL, false, nil
			}
			if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return 0, false, s.callError(ctx, "renew node lease", err)
			}
			continue // expired just now: its key is gone too
		}
		// Expired: restore the key with a new lease, unless the node was
		// rewritten (which set or dropped its own lease) or another renewal
		// restored it first.
		id, granted, err := s.grant(ctx, n.GetLeaseTtlSeconds())
		if err != nil {
			return 0, false, err
		}
		u := &commitUnit{
			cmps: []clientv3.Cmp{
				clientv3.Compare(clientv3.ModRevision(nodeKey), "=", nodeKVs[0].ModRevision),
				clientv3.Compare(clientv3.CreateRevision(leaseKey), "=", 0),
			},
			ops: []*pb.RequestOp{leasedPutOp(leaseKey, []byte(strconv.FormatInt(int64(id), 10)), id)},
		}
		res, err := s.commitOne(ctx, "renew node lease", u)
		if err != nil {
			return 0, false, err
		}
		if res.err == nil {
			return granted, true, nil
		}
		s.revokeQuietly(ctx, id)
	}
	return 0, false, fmt.Errorf("%w: node %q keeps changing", ErrConflict, name)
}

// FillUnreachable sets the output-only unreachable field of each node: true
// when it has a lease TTL and its lease key is gone. The nodes must be in
// name order (as listed).
func (s *Store) FillUnreachable(ctx context.Context, nodes ...*berthv1.Node) error {
	var first, last string
	for _, n := range nodes {
		n.Unreachable = false
		if n.GetLeaseTtlSeconds() > 0 {
			if first == "" {
				first = n.GetName()
			}
			last = n.GetName()
		}
	}
	if first == "" {
		return nil
	}
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.Get(cctx, s.keys.nodeLease(first),
		clientv3.WithRange(s.keys.nodeLease(last)+"\x00"), clientv3.WithKeysOnly())
	if err != nil {
		return s.callError(ctx, "read node leases", err)
	}
	leased := make(map[string]bool, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		leased[s.keys.nodeLeaseName(string(kv.Key))] = true
	}
	for _, n := range nodes {
		n.Unreachable = n.GetLeaseTtlSeconds() > 0 && !leased[n.GetName()]
	}
	return nil
}

// leaseOf returns the lease a node's lease key is attached to, 0 if none.
func (s *Store) leaseOf(ctx context.Context, name string) (clientv3.LeaseID, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	// Not keys-only: etcd answers that from its index, without the lease.
	resp, err := s.client.Get(cctx, s.keys.nodeLease(name))
	if err != nil {
		return 0, s.callError(ctx, "read node lease", err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease), nil
}

// grant starts a lease of ttl seconds and returns it with the TTL etcd
// granted (it rounds very short TTLs up).
func (s *Store) grant(ctx context.Context, ttl int32) (clientv3.LeaseID, int64, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	resp, err := s.client.Grant(cctx, int64(ttl))
	if err != nil {
		return 0, 0, s.callError(ctx, "grant node lease", err)
	}
	return resp.ID, resp.TTL, nil
}

// revokeQuietly revokes a lease that holds no key any more. Failure only
// leaves it to expire, so it is logged, not returned.
func (s *Store) revokeQuietly(ctx context.Context, id clientv3.LeaseID) {
	cctx, cancel := s.bound(context.WithoutCancel(ctx))
	defer cancel()
	if _, err := s.client.Revoke(cctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		s.log.Debug("revoke unused node lease", zap.Int64("lease", int64(id)), zap.Error(err))
	}
}
