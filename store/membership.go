package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// MembershipConfig configures RunMembership.
type MembershipConfig struct {
	// ID names the replica. Keep it stable across restarts of one replica:
	// a restarted replica revokes the lease of its previous incarnation, so
	// its shards move at once instead of after a TTL.
	ID string
	// Address is where the replica serves gRPC, for ListReplicas.
	Address string
	// TTL of the replica's lease; default 10s. A replica that stops
	// renewing loses its shards after this long.
	TTL time.Duration
	// Shards is the number of logical shards; every replica must agree.
	Shards int
}

// ShardOwner is told which logical shards this replica owns. Calls come
// from one goroutine. ReleaseShard must stop scheduling the shard at once:
// commits for it fail their fence from then on anyway.
type ShardOwner interface {
	AcquireShard(shard int, epoch int64)
	ReleaseShard(shard int)
}

// ShardsSettledHandler is an optional part of a ShardOwner: ShardsSettled
// comes after each session's first pass over the shards, once the owner
// has been told every shard this replica holds (owned of them) and before
// any later change: from then on, its ownership is known.
type ShardsSettledHandler interface {
	ShardsSettled(owned int)
}

type sessionInfo struct {
	id    string
	lease clientv3.LeaseID
}

// SessionLease is this replica's etcd lease: keys that must vanish with
// the replica (shard claims, assumptions) are put with it. 0 before a
// session is opened.
func (s *Store) SessionLease() clientv3.LeaseID {
	if sess := s.session.Load(); sess != nil {
		return sess.lease
	}
	return 0
}

// ReplicaID names this replica in the keys it writes; "" before a session
// is opened.
func (s *Store) ReplicaID() string {
	if sess := s.session.Load(); sess != nil {
		return sess.id
	}
	return ""
}

// shardClaim is a shard key as last seen.
type shardClaim struct {
	owner     string
	createRev int64
}

// RunMembership keeps this replica registered and its fair share of shards
// claimed, until ctx ends: it opens a session (one lease), registers under
// replicas/{id}, and claims shards/{i} with that lease for every shard
// whose rendezvous-hash winner among the live replicas is this one. It
// follows replicas and claims through a watch, so shards move when a
// replica joins, leaves or dies. When the session is lost (etcd cut off
// for a TTL) every shard is released and a new session is opened once etcd
// answers. On return every shard has been released and the lease revoked.
func (s *Store) RunMembership(ctx context.Context, cfg MembershipConfig, owner ShardOwner) error {
	if cfg.ID == "" || strings.ContainsRune(cfg.ID, '/') {
		return fmt.Errorf("%w: replica id %q", ErrInvalidArgument, cfg.ID)
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 10 * time.Second
	}
	if cfg.Shards <= 0 {
		return fmt.Errorf("%w: %d shards", ErrInvalidArgument, cfg.Shards)
	}
	m := &member{s: s, cfg: cfg, owner: owner, log: s.log.With(zap.String("replica", cfg.ID))}
	bo := newBackoff()
	for {
		err := m.runSession(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if s.isClosed() {
			return ErrClosed
		}
		m.log.Warn("replica session ended; opening a new one", zap.Error(err))
		if err := bo.wait(ctx); err != nil {
			return err
		}
	}
}

type member struct {
	s     *Store
	cfg   MembershipConfig
	owner ShardOwner
	log   *zap.Logger

	// Per session:
	lease  clientv3.LeaseID
	live   map[string]bool
	claims map[int]shardClaim
	mine   map[int]int64 // shard -> epoch (create revision of our claim)
}

func (m *member) runSession(ctx context.Context) (err error) {
	s := m.s
	ttl := int64(max(1, m.cfg.TTL.Round(time.Second)/time.Second))
	gctx, cancel := s.bound(ctx)
	grant, err := s.client.Grant(gctx, ttl)
	cancel()
	if err != nil {
		return s.callError(ctx, "grant replica lease", err)
	}
	m.lease = grant.ID
	sess, err := concurrency.NewSession(s.client, concurrency.WithLease(grant.ID), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("store: session: %w", err)
	}
	s.metrics.sessionStarted()
	m.live, m.claims, m.mine = map[string]bool{}, map[int]shardClaim{}, map[int]int64{}
	defer func() {
		m.releaseAll("lost", ctx.Err() != nil)
		s.session.Store(nil)
		// Revoke so the shards move now rather than after a TTL; bounded,
		// since etcd may be what failed.
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = s.client.Revoke(rctx, grant.ID)
		cancel()
		sess.Orphan()
	}()

	if err := m.register(ctx); err != nil {
		return err
	}
	s.session.Store(&sessionInfo{id: m.cfg.ID, lease: grant.ID})
	m.log.Info("replica registered", zap.String("address", m.cfg.Address), zap.Int64("lease", int64(grant.ID)), zap.Int64("ttl_seconds", ttl))

	start, end := s.keys.replica, clientv3.GetPrefixRangeEnd(s.keys.shards)
	rev, err := s.rangeAt(ctx, "list replicas and shards", start, end, 0, m.apply)
	if err != nil {
		return err
	}
	if err := m.reconcile(ctx); err != nil {
		return err
	}
	if sh, ok := m.owner.(ShardsSettledHandler); ok {
		sh.ShardsSettled(len(m.mine))
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	// A stream of its own, as the sync's: shard ownership must not stall
	// behind per-call watches.
	wctx = metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(wctx), watchStreamKey, "membership")
	wch := s.client.Watch(wctx, start, clientv3.WithRange(end), clientv3.WithRev(rev+1))
	for {
		select {
		case <-sess.Done():
			return errors.New("store: replica lease expired or revoked")
		case resp, ok := <-wch:
			if !ok {
				return errWatchClosed
			}
			if err := resp.Err(); err != nil {
				return fmt.Errorf("store: membership watch: %w", err)
			}
			for _, ev := range resp.Events {
				kv := ev.Kv
				if ev.Type == clientv3.EventTypeDelete {
					kv = &mvccpb.KeyValue{Key: ev.Kv.Key}
				}
				m.apply(kv)
			}
			if err := m.reconcile(ctx); err != nil {
				return err
			}
		}
	}
}

// register puts replicas/{id} with the session's lease, after revoking the
// lease of an earlier incarnation with the same id.
func (m *member) register(ctx context.Context) error {
	s := m.s
	key := s.keys.replicaKey(m.cfg.ID)
	kv, err := s.getKV(ctx, "read replica", key)
	if err != nil {
		return err
	}
	if kv != nil && kv.Lease != 0 && clientv3.LeaseID(kv.Lease) != m.lease {
		rctx, cancel := s.bound(ctx)
		_, rerr := s.client.Revoke(rctx, clientv3.LeaseID(kv.Lease))
		cancel()
		// Registering over a lease that may still hold claims would break
		// what the solo fence relies on: no claim outlives the
		// registration it was made under (solo.go). A lease already gone
		// took its claims with it.
		if rerr != nil && !errors.Is(rerr, rpctypes.ErrLeaseNotFound) {
			return s.callError(ctx, "revoke the previous incarnation's lease", rerr)
		}
		if rerr != nil {
			m.log.Info("the lease of this replica's previous incarnation had already expired", zap.Int64("lease", kv.Lease))
		} else {
			m.log.Info("revoked the lease of this replica's previous incarnation", zap.Int64("lease", kv.Lease))
		}
	}
	val, err := marshalOpts.Marshal(&berthv1.Replica{Id: m.cfg.ID, Address: m.cfg.Address, StartTime: timestamppb.Now()})
	if err != nil {
		return err
	}
	pctx, cancel := s.bound(ctx)
	defer cancel()
	if _, err := s.client.Put(pctx, key, string(val), clientv3.WithLease(m.lease)); err != nil {
		return s.callError(ctx, "register replica", err)
	}
	return nil
}

// apply folds one replica or shard key (a deletion has no value and no
// revisions) into what the member knows.
func (m *member) apply(kv *mvccpb.KeyValue) {
	key := string(kv.Key)
	switch {
	case strings.HasPrefix(key, m.s.keys.replica):
		id := strings.TrimPrefix(key, m.s.keys.replica)
		if kv.CreateRevision == 0 {
			delete(m.live, id)
		} else {
			m.live[id] = true
		}
	case strings.HasPrefix(key, m.s.keys.shards):
		i, err := strconv.Atoi(strings.TrimPrefix(key, m.s.keys.shards))
		if err != nil {
			return
		}
		if kv.CreateRevision == 0 {
			delete(m.claims, i)
		} else {
			m.claims[i] = shardClaim{owner: string(kv.Value), createRev: kv.CreateRevision}
		}
	}
}

// reconcile gives up shards that are no longer ours and claims the free
// ones we should own.
func (m *member) reconcile(ctx context.Context) error {
	s := m.s
	ids := make([]string, 0, len(m.live))
	for id := range m.live {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	s.metrics.liveReplicas(len(ids))
	var released, lost, free []int
	for i := 0; i < m.cfg.Shards; i++ {
		want := rendezvous(ids, i)
		claim, held := m.claims[i]
		epoch, mine := m.mine[i]
		switch {
		case mine && (!held || claim.createRev != epoch):
			// Our claim is gone: the fence already fails, stop now.
			m.s.groupCommit.solo.set(0, false)
			delete(m.mine, i)
			m.owner.ReleaseShard(i)
			lost = append(lost, i)
			s.metrics.shardMoved("lost", len(m.mine))
		case mine && want != m.cfg.ID:
			// Stop first, then free the key: nothing of ours can commit
			// once the new owner holds it.
			m.s.groupCommit.solo.set(0, false)
			delete(m.mine, i)
			m.owner.ReleaseShard(i)
			released = append(released, i)
			s.metrics.shardMoved("released", len(m.mine))
			dctx, cancel := s.bound(ctx)
			_, err := s.client.Txn(dctx).
				If(clientv3.Compare(clientv3.CreateRevision(s.keys.shard(i)), "=", epoch)).
				Then(clientv3.OpDelete(s.keys.shard(i))).Commit()
			cancel()
			if err != nil {
				return s.callError(ctx, "release shard", err)
			}
		case !mine && !held && want == m.cfg.ID:
			free = append(free, i)
		}
	}
	acquired, err := m.claim(ctx, free)
	if err != nil {
		return err
	}
	// Holding every claim, this replica may commit solo (solo.go); the
	// fence in each solo Txn is what makes that safe, this only says when
	// to try.
	m.s.groupCommit.solo.set(int64(m.lease), len(m.mine) == m.cfg.Shards)
	if len(acquired)+len(released)+len(lost) > 0 {
		m.log.Info("shard ownership changed", zap.Ints("acquired", acquired), zap.Ints("released", released),
			zap.Ints("lost", lost), zap.Int("owned", len(m.mine)), zap.Strings("live_replicas", ids))
	}
	return nil
}

// claimBatch is how many shards one claim Txn takes: well under the
// smallest max-txn-ops an etcd is likely to run with (its default is 128).
const claimBatch = 64

// claim claims the free shards we should own and returns those taken. A
// starting replica claims all its shards at once, so they go in one Txn
// per claimBatch (one fsync, not one each); a batch that finds any key
// taken is retried one shard at a time, and a shard someone else got is
// left to the watch to report.
func (m *member) claim(ctx context.Context, free []int) (acquired []int, err error) {
	for len(free) > 0 {
		batch := free[:min(claimBatch, len(free))]
		free = free[len(batch):]
		ok, err := m.claimTxn(ctx, batch)
		if err != nil {
			return acquired, err
		}
		if ok {
			acquired = append(acquired, batch...)
			continue
		}
		for _, i := range batch {
			ok, err := m.claimTxn(ctx, []int{i})
			if err != nil {
				return acquired, err
			}
			if ok {
				acquired = append(acquired, i)
			}
		}
	}
	return acquired, nil
}

// claimTxn claims every shard of batch in one Txn, or none if any is
// taken. The claims' create revision, their epoch, is the Txn's.
func (m *member) claimTxn(ctx context.Context, batch []int) (bool, error) {
	s := m.s
	cmps := make([]clientv3.Cmp, len(batch))
	puts := make([]clientv3.Op, len(batch))
	for j, i := range batch {
		key := s.keys.shard(i)
		cmps[j] = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		puts[j] = clientv3.OpPut(key, m.cfg.ID, clientv3.WithLease(m.lease))
	}
	cctx, cancel := s.bound(ctx)
	resp, err := s.client.Txn(cctx).If(cmps...).Then(puts...).Commit()
	cancel()
	if err != nil {
		return false, s.callError(ctx, "claim shard", err)
	}
	if !resp.Succeeded {
		return false, nil
	}
	epoch := resp.Header.Revision
	for _, i := range batch {
		m.mine[i] = epoch
		m.claims[i] = shardClaim{owner: m.cfg.ID, createRev: epoch}
		m.owner.AcquireShard(i, epoch)
		s.metrics.shardMoved("acquired", len(m.mine))
	}
	return true, nil
}

// releaseAll gives up every shard; leaving says the replica is stopping on
// purpose, which is no cause for a warning.
func (m *member) releaseAll(move string, leaving bool) {
	m.s.groupCommit.solo.set(0, false)
	var gone []int
	for i := range m.mine {
		m.owner.ReleaseShard(i)
		delete(m.mine, i)
		m.s.metrics.shardMoved(move, len(m.mine))
		gone = append(gone, i)
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		log := m.log.Warn
		if leaving {
			log = m.log.Info
		}
		log("released every shard", zap.Ints("shards", gone))
	}
}

// PreferredOwner is the replica among ids that shard i settles on once
// membership is stable (ListReplicas shows when it has).
func PreferredOwner(ids []string, i int) string { return rendezvous(ids, i) }

// rendezvous picks the owner of shard i among ids: the highest hash of
// (id, i). Adding or removing a replica moves only the shards it wins or
// held.
func rendezvous(ids []string, i int) string {
	var best string
	var bestScore uint64
	for _, id := range ids {
		h := fnv.New64a()
		h.Write([]byte(id))
		h.Write([]byte{0})
		h.Write([]byte(strconv.Itoa(i)))
		// fnv mixes the last bytes weakly; one multiply-xorshift spreads
		// them over the whole word.
		score := h.Sum64() * 0x9e3779b97f4a7c15
		score ^= score >> 29
		if best == "" || score > bestScore {
			best, bestScore = id, score
		}
	}
	return best
}

// ListReplicas returns the live replicas with the shards each owns.
func (s *Store) ListReplicas(ctx context.Context) ([]*berthv1.Replica, error) {
	byID := map[string]*berthv1.Replica{}
	var out []*berthv1.Replica
	start, end := s.keys.replica, clientv3.GetPrefixRangeEnd(s.keys.shards)
	_, err := s.rangeAt(ctx, "list replicas", start, end, 0, func(kv *mvccpb.KeyValue) {
		key := string(kv.Key)
		switch {
		case strings.HasPrefix(key, s.keys.replica):
			r := &berthv1.Replica{}
			if err := proto.Unmarshal(kv.Value, r); err != nil {
				return
			}
			byID[r.Id] = r
			out = append(out, r)
		case strings.HasPrefix(key, s.keys.shards):
			i, err := strconv.Atoi(strings.TrimPrefix(key, s.keys.shards))
			if r := byID[string(kv.Value)]; err == nil && r != nil {
				r.Shards = append(r.Shards, int32(i))
			}
		}
	})
	return out, err
}
