package store

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/otel/trace"
)

// errCompareFailed settles a unit whose compares did not hold; the unit's
// result carries the current value of its keys so the writer can say why
// (already exists, identical resubmission, changed since read, absent).
var errCompareFailed = errors.New("store: compare failed")

// commitUnit is one writer's all-or-nothing change: it applies only if all of
// its compares hold. Every compare and op names a single key.
type commitUnit struct {
	cmps []clientv3.Cmp
	ops  []*pb.RequestOp // built by putOp, leasedPutOp and deleteOp
	// ctx is the writer's; a unit whose writer gave up before the unit was
	// sent is dropped rather than written.
	ctx context.Context
	// readValues asks for the keys' values (not only their revisions) when
	// the unit's compares fail, for writers that judge the current value.
	readValues bool
	// fences are compares on keys that many units check and none of them
	// writes (shard claims): unlike cmps they do not make their key
	// exclusive, so units of one shard still share Txns.
	fences []clientv3.Cmp
	// charges are allocation keys ({prefix}/v1/alloc/{node}) of nodes the
	// unit adds a pod to. The committer bumps each once per Txn and, for a
	// charge with a view revision, compares it first: see allocTable.
	charges []allocCharge
	// urgent units (bindings) are taken before any other waiting unit:
	// they finish work the scheduler already did, while the others (new
	// submissions) add work. Behind a deep queue of submissions a binding
	// would wait until its writer gave up, its outcome unknown, and the pod
	// would be scheduled and committed again.
	urgent bool

	// Set by the committer.
	taken    bool     // in a batch, under mu: the unit will be (or was) sent
	keys     []string // distinct keys of cmps and ops
	bytes    int      // rough request size
	queuedAt time.Time
	done     chan struct{}
	res      commitResult
}

// commitResult is how a unit was settled.
type commitResult struct {
	// rev is the revision of the Txn that applied the unit.
	rev int64
	// err is nil, errCompareFailed, or why the unit was not applied (wrapping
	// ErrUnavailable when etcd did not answer: the unit may then have landed).
	err error
	// current holds, after errCompareFailed, each of the unit's keys at the
	// revision the compare failed (nil for an absent key), with its value
	// only if the unit asked for readValues.
	current []*mvccpb.KeyValue
	// chargedAt, after errCompareFailed, is the newest revision at which
	// another writer charged one of the unit's nodes past what its view
	// allowed; 0 if no allocation check failed.
	chargedAt int64
}

// currentKV returns the value of key recorded with errCompareFailed.
func (u *commitUnit) currentKV(key string) *mvccpb.KeyValue {
	for i, k := range u.keys {
		if k == key && i < len(u.res.current) {
			return u.res.current[i]
		}
	}
	return nil
}

// groupCommitter is the group commit engine: many writers' units share one
// etcd Txn so that one fsync serves them all.
//
// Each of `workers` goroutines takes the oldest waiting units (urgent ones,
// bindings, first: see takeLocked) that fit in one Txn (at most maxOps
// compares, ops and keys, about maxBytes) and sends If(all compares)
// Then(all ops). While one Txn is in flight the others' units accumulate,
// so batches grow with load without any linger. A second Txn goes out
// beside one in flight only once about a Txn's worth of units waits
// (spillAt): a Txn sent for every unit or two as it arrives costs etcd a
// raft entry and a WAL fsync each, and those, not the units, were most of
// a replica's CPU at moderate rates. When a Txn's compares
// fail, every key is read at the revision they failed at, which tells
// which units broke them; those are settled and the rest are resent.
// (Reading afterwards rather than in the Txn's Else keeps the reads out of
// the raft log and the WAL of every Txn that succeeds: most of them.)
//
// A key is in at most one in-flight Txn at a time: a unit that touches a key
// already taken waits for the next batch. So two writers racing on one key
// never both succeed, and etcd never sees a duplicate key in one Txn.
type groupCommitter struct {
	kv clientv3.KV
	// direct, if set, is the etcd's KV service, which Txns are sent to
	// instead of kv (Config.KVClient); kv still serves reads.
	direct pb.KVClient
	// allocs is what this replica's own commits did to allocation keys.
	allocs *allocTable
	// writer is the value put in allocation keys: who charged the node last.
	writer func() string
	// solo, while this replica holds every shard, lets its placements
	// compare allocation keys without bumping them (solo.go). Nil: never.
	solo     *soloFence
	maxOps   int
	maxBytes int
	timeout  time.Duration
	metrics  *Metrics
	// tracer, if set, traces each Txn (tracing.go); nil traces nothing.
	tracer trace.Tracer

	mu sync.Mutex
	// cond wakes one idle worker when it has something to send (units
	// arrive with no Txn in flight, or a Txn's worth waits), and every
	// worker on close. A worker whose Txn lands needs no waking: it comes
	// back for what waits, and wakes another if it leaves a Txn's worth.
	cond     *sync.Cond
	urgent   []*commitUnit       // waiting urgent units, oldest first; taken before queue
	queue    []*commitUnit       // the other waiting units, oldest first
	inflight map[string]struct{} // keys of units being committed
	closed   bool
	busy     int // Txns in flight
	// spillAt is how many waiting units let a worker send a Txn while
	// another is in flight: about a Txn's worth, a unit being two to four
	// compares and ops. Fewer wait for the Txn in flight and go together.
	spillAt int

	wg sync.WaitGroup

	// txns and unitsSent count Txns sent and the units they carried, for
	// the average batch size (benchmarks, debugging).
	txns, unitsSent atomic.Int64
}

func newGroupCommitter(kv clientv3.KV, workers, maxOps, maxBytes int, timeout time.Duration, m *Metrics) *groupCommitter {
	c := &groupCommitter{
		kv:       kv,
		maxOps:   maxOps,
		maxBytes: maxBytes,
		timeout:  timeout,
		metrics:  m,
		inflight: make(map[string]struct{}),
		allocs:   newAllocTable(),
		writer:   func() string { return "" },
		spillAt:  max(1, maxOps/4),
	}
	c.cond = sync.NewCond(&c.mu)
	c.wg.Add(workers)
	for range workers {
		go c.run()
	}
	return c
}

// submit queues units; wait on each for its result. After close it fails
// with ErrClosed and queues nothing.
func (c *groupCommitter) submit(units ...*commitUnit) error {
	now := time.Now()
	for _, u := range units {
		u.prepare()
		u.queuedAt = now
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	for _, u := range units {
		if u.urgent {
			c.urgent = append(c.urgent, u)
		} else {
			c.queue = append(c.queue, u)
		}
	}
	wake := !c.leaveToTxnInFlightLocked()
	c.mu.Unlock()
	if wake {
		c.cond.Signal()
	}
	return nil
}

// errNotSent settles a unit whose writer's deadline passed before any Txn
// took it: it was not written.
var errNotSent = errors.New("store: not sent to etcd before the deadline")

// wait returns the unit's result, or, if ctx ends first: errNotSent for a
// unit that no Txn took (it is then withdrawn: not written), or ctx's error
// for one already sent (its outcome unknown).
func (c *groupCommitter) wait(ctx context.Context, u *commitUnit) commitResult {
	select {
	case <-u.done:
		return u.res
	case <-ctx.Done():
	}
	c.mu.Lock()
	taken := u.taken
	c.mu.Unlock()
	if !taken {
		// ctx has ended, so the committer drops the unit when it meets it.
		return commitResult{err: errNotSent}
	}
	return commitResult{err: ctx.Err()}
}

// close stops accepting units and returns once every queued and in-flight
// unit has been settled.
func (c *groupCommitter) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cond.Broadcast()
	c.wg.Wait()
}

func (u *commitUnit) prepare() {
	u.done = make(chan struct{})
	u.keys = u.keys[:0]
	u.bytes = 0
	add := func(k []byte) {
		for _, seen := range u.keys {
			if seen == string(k) {
				return
			}
		}
		u.keys = append(u.keys, string(k))
	}
	for i := range u.cmps {
		k := u.cmps[i].KeyBytes()
		add(k)
		// A keys-only read carries revisions but neither value nor lease.
		if t := u.cmps[i].GetCompare().Target; t == pb.Compare_VALUE || t == pb.Compare_LEASE {
			u.readValues = true
		}
		u.bytes += len(k) + len(u.cmps[i].ValueBytes()) + 16
	}
	for _, op := range u.ops {
		k := opKey(op)
		add(k)
		u.bytes += len(k) + len(op.GetRequestPut().GetValue()) + 16
	}
	for i := range u.fences {
		u.bytes += len(u.fences[i].KeyBytes()) + 16
	}
	for _, ch := range u.charges {
		u.bytes += 2*len(ch.key) + 48
	}
}

func (u *commitUnit) finish(res commitResult) {
	u.res = res
	close(u.done)
}

func (c *groupCommitter) run() {
	defer c.wg.Done()
	for {
		batch, ok := c.next()
		if !ok {
			return
		}
		c.commit(batch)
		c.release(batch)
	}
}

// commit settles every unit of batch, resending the units whose compares
// held after a Txn failed because of others'.
func (c *groupCommitter) commit(batch []*commitUnit) {
	pending := batch
	compacted := 0
	fencedOut := false // a solo fence failed: this batch bumps from now on
	for len(pending) > 0 {
		bounds := c.allocs.bounds(pending)
		lease := int64(0)
		if !fencedOut {
			lease = c.solo.current()
		}
		cmps, ops, solo := c.buildTxn(pending, bounds, lease)
		if !solo {
			lease = 0
		}
		c.txns.Add(1)
		c.unitsSent.Add(int64(len(pending)))
		txnCtx := context.Background()
		var span trace.Span
		if c.tracer != nil {
			txnCtx, span = c.startTxnSpan(pending, len(cmps)+len(ops))
		}
		ctx, cancel := context.WithTimeout(txnCtx, c.timeout)
		start := time.Now()
		resp, err := c.send(ctx, cmps, ops)
		cancel()
		if span != nil {
			endTxnSpan(span, resp, err)
		}
		c.metrics.observeTxn(time.Since(start), len(pending))
		if err != nil {
			if isRequestTooLarge(err) && len(pending) > 1 {
				// One unit too large must not fail the others it shares the
				// Txn with: send each alone, so only the culprit fails.
				for _, u := range pending {
					c.commit([]*commitUnit{u})
				}
				return
			}
			c.failAll(pending, err)
			return
		}
		if resp.Succeeded {
			c.allocs.committed(pending, bounds, resp.Header.Revision, solo)
			// Counted before the callers hear: one that reads the
			// metrics on return sees its own commit in them.
			c.metrics.unitsDone(resultCommitted, len(pending))
			for _, u := range pending {
				u.finish(commitResult{rev: resp.Header.Revision})
			}
			return
		}
		c.metrics.txnConflict()
		current, soloHeld, err := c.readAt(pending, resp.Header.Revision, lease)
		if errors.Is(err, rpctypes.ErrCompacted) && compacted < 3 {
			// The failed revision is gone already: resending judges the
			// units again against a newer one.
			compacted++
			continue
		}
		if err != nil {
			c.failAll(pending, err)
			return
		}
		if !soloHeld {
			// Another replica is registered now: send everything again,
			// bumping allocation keys, and judge the units then.
			c.solo.lost(lease)
			fencedOut = true
			continue
		}
		pending = c.settleFailed(pending, current, resp.Header.Revision, bounds)
	}
}

// send commits one Txn: to the etcd's KV service directly when the
// committer has it, else through clientv3, which copies the compares and
// converts the ops.
func (c *groupCommitter) send(ctx context.Context, cmps []clientv3.Cmp, ops []*pb.RequestOp) (*clientv3.TxnResponse, error) {
	if c.direct == nil {
		then := make([]clientv3.Op, len(ops))
		for i, op := range ops {
			then[i] = clientOp(op)
		}
		return c.kv.Txn(ctx).If(cmps...).Then(then...).Commit()
	}
	// The request lends the units' compares and ops: etcd encodes it for
	// its log before it answers or gives up waiting, and reads it only.
	req := &pb.TxnRequest{Compare: make([]*pb.Compare, len(cmps)), Success: ops}
	for i := range cmps {
		req.Compare[i] = cmps[i].GetCompare()
	}
	resp, err := c.direct.Txn(ctx, req)
	if err != nil {
		// As clientv3 returns it: etcd's error, or ctx's when it ended.
		return nil, clientv3.ContextError(ctx, err)
	}
	return (*clientv3.TxnResponse)(resp), nil
}

// buildTxn gathers the batch's compares and writes.
//
// Compares that many units share go in once: etcd evaluates each compare by
// reading its key, and every binding of a shard carries the same fence. Of
// the charge compares on one allocation key only the strictest is needed,
// since all of them must hold. Each unit's own compares are still judged
// one by one in settleFailed should the Txn fail.
//
// With soloLease set, charges with a view compare their allocation key
// without bumping it, under the solo fence (solo.go); solo reports whether
// any did. Declared pods (no view) bump their key either way.
func (c *groupCommitter) buildTxn(pending []*commitUnit, bounds map[string]allocTip, soloLease int64) (cmps []clientv3.Cmp, ops []*pb.RequestOp, solo bool) {
	// Sized up front, so that a batch of a thousand units does not regrow
	// them as it fills them.
	ncmps, nops := 0, 0
	for _, u := range pending {
		ncmps += len(u.cmps) + len(u.fences) + len(u.charges)
		nops += len(u.ops) + len(u.charges)
	}
	cmps = make([]clientv3.Cmp, 0, ncmps+1)
	ops = make([]*pb.RequestOp, 0, nops)
	type chargeState struct {
		cmpAt int // index of the key's compare in cmps, or -1
		put   bool
	}
	var (
		fences  map[cmpIdentity]bool
		charged map[string]chargeState // by allocation key
	)
	for _, u := range pending {
		cmps = append(cmps, u.cmps...)
		ops = append(ops, u.ops...)
		for i := range u.fences {
			id := identify(&u.fences[i])
			if fences[id] {
				continue
			}
			if fences == nil {
				fences = make(map[cmpIdentity]bool)
			}
			fences[id] = true
			cmps = append(cmps, u.fences[i])
		}
		for _, ch := range u.charges {
			st, seen := charged[ch.key]
			if !seen {
				if charged == nil {
					charged = make(map[string]chargeState)
				}
				st.cmpAt = -1
			}
			if !st.put && (soloLease == 0 || ch.view == 0) {
				ops = append(ops, putString(ch.key, c.writer()))
				st.put = true
			}
			if ch.view > 0 {
				solo = solo || soloLease != 0
				bound := bounds[ch.key].bound(ch.view)
				switch {
				case st.cmpAt < 0:
					st.cmpAt = len(cmps)
					cmps = append(cmps, ch.compare(bound))
				case bound+1 < cmps[st.cmpAt].GetCompare().GetModRevision():
					cmps[st.cmpAt] = ch.compare(bound)
				}
			}
			charged[ch.key] = st
		}
	}
	if solo {
		if len(cmps) >= c.maxOps {
			// No room for the fence: bump, as the batch was sized for.
			return c.buildTxn(pending, bounds, 0)
		}
		cmps = append(cmps, c.solo.compare(soloLease))
	}
	return cmps, ops, solo
}
