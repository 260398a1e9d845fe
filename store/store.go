// Package store is Berth's etcd layer: the keyspace, group-committed writes,
// paged lists, and the watches that feed replicas' caches and binding
// subscribers.
//
// Every write goes through one group committer (commit.go), so many
// concurrent callers share one etcd Txn and one fsync; a write returns only
// after etcd acknowledged it. Values are deterministic protobuf encodings of
// the berth.v1 messages.
package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// Config configures Open. Zero fields take the defaults given on each.
type Config struct {
	// Endpoints of the etcd cluster, e.g. "http://127.0.0.1:2379".
	Endpoints []string
	// Client, if set, is used instead of dialling Endpoints: an embedded
	// etcd's in-process client (Embedded.Client). Close closes it.
	Client *clientv3.Client
	// KVClient, if set, is the etcd's KV service in-process
	// (Embedded.KVClient): group commits call it directly, skipping the
	// conversions clientv3 makes of every compare and op (commit_ops.go).
	KVClient pb.KVClient
	// Prefix roots every key; default "/berth".
	Prefix string
	// DialTimeout bounds connecting; default 5s.
	DialTimeout time.Duration
	// RequestTimeout bounds every etcd call (and each group-committed Txn);
	// default 5s. A caller's deadline, less a small margin, shortens it.
	RequestTimeout time.Duration
	// TLS for the etcd connection; nil for plain TCP.
	TLS *tls.Config
	// Username and Password for etcd authentication; empty for none.
	Username, Password string
	// MaxTxnOps caps the compares, the ops and the keys of one Txn. It must
	// not exceed the server's --max-txn-ops: default 128, etcd's default; the
	// embedded server is started with 1024.
	MaxTxnOps int
	// MaxTxnBytes caps the approximate size of one Txn; default 1 MiB, under
	// etcd's default --max-request-bytes of 1.5 MiB.
	MaxTxnBytes int
	// CommitWorkers is how many Txns may be in flight at once; default 4.
	CommitWorkers int
	// WatchBuffer is how many recent binding events the replica's watch
	// fan-out keeps; a subscriber further behind is cut off and resumes.
	// Default 65536 (a few MiB).
	WatchBuffer int
	// WatchMaxLag is how far behind in time a subscriber may fall, or how
	// long one send to it may block, before it is cut off; default 30s.
	WatchMaxLag time.Duration
	// Logger for the store and the etcd client; default none.
	Logger *zap.Logger
	// Metrics, optional.
	Metrics *Metrics
	// Tracer, optional, traces each group-committed Txn, linked to the
	// spans of the writers it carries (found in their contexts). Nil
	// traces nothing.
	Tracer trace.Tracer
}

// Defaults.
const (
	defaultTimeout     = 5 * time.Second
	defaultMaxTxnOps   = 128
	defaultMaxTxnBytes = 1 << 20
	defaultWorkers     = 4
	// deadlineMargin is kept free before a caller's deadline so that the
	// caller can still answer (Unavailable) in time.
	deadlineMargin = 100 * time.Millisecond
)

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = defaultTimeout
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = defaultTimeout
	}
	if c.MaxTxnOps <= 0 {
		c.MaxTxnOps = defaultMaxTxnOps
	}
	if c.MaxTxnBytes <= 0 {
		c.MaxTxnBytes = defaultMaxTxnBytes
	}
	if c.CommitWorkers <= 0 {
		c.CommitWorkers = defaultWorkers
	}
	if c.WatchBuffer <= 0 {
		c.WatchBuffer = defaultWatchBuffer
	}
	if c.WatchMaxLag <= 0 {
		c.WatchMaxLag = defaultWatchMaxLag
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Store reads and writes Berth's objects in etcd. It is safe for concurrent
// use.
type Store struct {
	cfg         Config
	keys        keyspace
	client      *clientv3.Client
	groupCommit *groupCommitter
	log         *zap.Logger
	metrics     *Metrics
	closed      atomic.Bool
	// session is the replica's current etcd session, nil until one opens.
	session atomic.Pointer[sessionInfo]
	// chunk is how many keys one range request of a scan reads, where
	// ranges are read in pages; a field so tests can force multi-chunk
	// scans.
	chunk int
	// noRangeStream: the etcd has no RangeStream, so ranges are read in
	// pages (rangestream.go).
	noRangeStream atomic.Bool
	// held maps an assume key to the heldAssumption this replica last
	// wrote there, so a gang's binding can rely on the charge it made.
	held sync.Map
	// views lets a writer ask the sync for a view past its last change.
	views *viewWants
	// closing is closed by Close, ending the binding fan-out.
	closing    chan struct{}
	fanoutMu   sync.Mutex
	fanout     *bindingHub
	fanoutDone sync.WaitGroup
	// changes, if set, records what the sync receives (changelog.go).
	changes *ChangeLog
}

// RecordChanges makes the sync append every change it receives to c,
// from the next Sync or SyncFrom on; call it before them.
func (s *Store) RecordChanges(c *ChangeLog) { s.changes = c }

var marshalOpts = proto.MarshalOptions{Deterministic: true}

// Open connects to etcd and checks that it answers (bounded like every call:
// by ctx and RequestTimeout), failing with ErrUnavailable if it does not. The
// etcd client reconnects by itself later, so a Store outlives etcd restarts.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	client := cfg.Client
	if client == nil {
		var err error
		if client, err = dial(cfg); err != nil {
			return nil, err
		}
	}
	s := &Store{
		cfg:     cfg,
		keys:    newKeyspace(cfg.Prefix),
		client:  client,
		log:     cfg.Logger,
		metrics: cfg.Metrics,
		chunk:   scanChunk,
		views:   newViewWants(),
		closing: make(chan struct{}),
	}
	if _, err := s.CurrentRevision(ctx); err != nil {
		client.Close()
		return nil, err
	}
	s.groupCommit = newGroupCommitter(client.KV, cfg.CommitWorkers, cfg.MaxTxnOps, cfg.MaxTxnBytes, cfg.RequestTimeout, cfg.Metrics)
	s.groupCommit.direct = cfg.KVClient
	s.groupCommit.writer = s.ReplicaID
	s.groupCommit.solo = newSoloFence(s.keys, cfg.Metrics)
	s.groupCommit.tracer = cfg.Tracer
	return s, nil
}

func dial(cfg Config) (*clientv3.Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("%w: no etcd endpoints", ErrInvalidArgument)
	}
	clientLog := cfg.Logger.Named("etcd-client").WithOptions(zap.IncreaseLevel(zap.WarnLevel))
	sendLimit := 2 << 20 // clientv3's default
	if cfg.MaxTxnBytes+(512<<10) > sendLimit {
		sendLimit = cfg.MaxTxnBytes + 512<<10
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Endpoints,
		DialTimeout:          cfg.DialTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		TLS:                  cfg.TLS,
		Username:             cfg.Username,
		Password:             cfg.Password,
		Logger:               clientLog,
		MaxCallSendMsgSize:   sendLimit,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: connect: %w", ErrUnavailable, err)
	}
	return client, nil
}

// Close stops accepting writes, waits until every queued and in-flight write
// has been committed or failed, then closes the etcd client, which ends any
// Sync or WatchBindings with ErrClosed.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.groupCommit.close()
	s.fanoutMu.Lock()
	close(s.closing)
	s.fanoutMu.Unlock()
	s.fanoutDone.Wait()
	// An in-process client has no connection to close and reports its
	// own cancellation instead.
	if err := s.client.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func (s *Store) isClosed() bool { return s.closed.Load() }

// Client is the underlying etcd client, for the few callers that need etcd
// itself (sessions, leases, tests).
func (s *Store) Client() *clientv3.Client { return s.client }

// bound derives the context for one etcd call: the caller's deadline less a
// margin (so the caller can still report Unavailable in time), and never more
// than RequestTimeout.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	timeout := s.cfg.RequestTimeout
	if left, ok := callerTime(ctx); ok && left < timeout {
		timeout = left
	}
	return context.WithTimeout(ctx, timeout)
}

// callerTime is how long until ctx's deadline less the margin, if it has
// one.
func callerTime(ctx context.Context) (time.Duration, bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	left := time.Until(dl)
	margin := deadlineMargin
	if left < 2*margin {
		margin = left / 2
	}
	return left - margin, true
}

// waitSent follows up a wait that ended with the bound context's deadline:
// a unit already sent is waited for while the caller still has time (its
// Txn is bounded by the committer's own timeout). Giving up on it would
// leave its outcome unknown: the writer would send again what may have
// landed, which then fails its compares and costs a re-read of its whole
// batch. Under load, units wait in the queue long enough for this to be
// common.
func (s *Store) waitSent(ctx context.Context, u *commitUnit, res commitResult) commitResult {
	if res.err != context.DeadlineExceeded || ctx.Err() != nil {
		return res
	}
	var wctx context.Context
	var cancel context.CancelFunc
	if left, ok := callerTime(ctx); ok {
		wctx, cancel = context.WithTimeout(ctx, left)
	} else {
		wctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	if wctx.Err() != nil {
		return res
	}
	return s.groupCommit.wait(wctx, u)
}

// commitOne submits one unit and waits for it.
func (s *Store) commitOne(ctx context.Context, op string, u *commitUnit) (commitResult, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	u.ctx = cctx
	if err := s.groupCommit.submit(u); err != nil {
		return commitResult{}, fmt.Errorf("%w: %s", ErrClosed, op)
	}
	res := s.waitSent(ctx, u, s.groupCommit.wait(cctx, u))
	if res.err != nil && res.err != errCompareFailed {
		return res, s.commitError(ctx, op, res.err)
	}
	return res, nil
}

// commitMany submits units together and waits for all of them.
func (s *Store) commitMany(ctx context.Context, units []*commitUnit) ([]commitResult, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	for _, u := range units {
		u.ctx = cctx
	}
	if err := s.groupCommit.submit(units...); err != nil {
		return nil, err
	}
	out := make([]commitResult, len(units))
	for i, u := range units {
		out[i] = s.waitSent(ctx, u, s.groupCommit.wait(cctx, u))
	}
	return out, nil
}

// commitEach is what every batch writer shares after building its units:
// they are group committed together, then settled(j, u, res) hands each
// unit's outcome back in order, res.err being nil, errCompareFailed (the
// writer says why from the unit's current values), or the store's error
// for op. If the batch cannot be submitted at all (the store is closing),
// nothing is settled and that error is returned.
func (s *Store) commitEach(ctx context.Context, op string, units []*commitUnit, settled func(j int, u *commitUnit, res commitResult)) error {
	results, err := s.commitMany(ctx, units)
	if err != nil {
		return fmt.Errorf("%w: %s", err, op)
	}
	for j, res := range results {
		if res.err != nil && res.err != errCompareFailed {
			res.err = s.commitError(ctx, op, res.err)
		}
		settled(j, units[j], res)
	}
	return nil
}

// commitBatch is commitEach for writers whose items fail one by one: unit(i)
// validates item i of n and builds its unit (an error fails that item
// alone, unsent), and settled(i, u, res) receives each item's outcome by
// its own index: a build or submit failure arrives as res.err with u nil.
func (s *Store) commitBatch(ctx context.Context, op string, n int, unit func(i int) (*commitUnit, error), settled func(i int, u *commitUnit, res commitResult)) {
	units := make([]*commitUnit, 0, n)
	index := make([]int, 0, n) // units[j] carries item index[j]
	for i := range n {
		u, err := unit(i)
		if err != nil {
			settled(i, nil, commitResult{err: err})
			continue
		}
		index = append(index, i)
		units = append(units, u)
	}
	if len(units) == 0 {
		return
	}
	err := s.commitEach(ctx, op, units, func(j int, u *commitUnit, res commitResult) { settled(index[j], u, res) })
	if err != nil {
		for _, i := range index {
			settled(i, nil, commitResult{err: err})
		}
	}
}

// commitError maps a unit's failure (other than errCompareFailed) for op.
func (s *Store) commitError(parent context.Context, op string, err error) error {
	if err == ErrClosed {
		return fmt.Errorf("%w: %s", ErrClosed, op)
	}
	if err == errNotSent {
		if perr := parent.Err(); perr == context.Canceled {
			return fmt.Errorf("store: %s: %w", op, perr)
		}
		return fmt.Errorf("%w: %s: etcd too busy to take it in time; not written", ErrUnavailable, op)
	}
	if err == context.DeadlineExceeded || err == context.Canceled {
		if perr := parent.Err(); perr == context.Canceled {
			return fmt.Errorf("store: %s: %w", op, perr)
		}
		return fmt.Errorf("%w: %s: no answer from etcd in time, outcome unknown", ErrUnavailable, op)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// CurrentRevision returns etcd's current revision.
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	cctx, cancel := s.bound(ctx)
	defer cancel()
	// A read of one key that never exists is the cheapest way to a header.
	resp, err := s.client.Get(cctx, s.keys.nodes)
	if err != nil {
		return 0, s.callError(ctx, "current revision", err)
	}
	return resp.Header.Revision, nil
}
