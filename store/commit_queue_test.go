package store

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Tests of how units are taken into Txns (batching, the Txn in flight,
// keys in flight, urgent units first) and of what a writer whose time is
// up gets back.

// A binding waits for no submission queued before it: behind a deep queue
// its writer would give up first.
func TestCommitterTakesUrgentUnitsFirst(t *testing.T) {
	c, rec := stalled(t, 1, 4)
	ctx := testCtx(t)
	p := keyPrefix(t)
	units := putUnits(ctx, p, "q", 6)
	if err := c.submit(units...); err != nil {
		t.Fatal(err)
	}
	urgent := putUnits(ctx, p, "u", 2)
	for _, u := range urgent {
		u.urgent = true
	}
	if err := c.submit(urgent...); err != nil {
		t.Fatal(err)
	}
	rec.release()
	settleAll(ctx, t, c, append(units, urgent...))
	want := [][]string{{p + "first"}, {p + "u0", p + "u1", p + "q0", p + "q1"}, {p + "q2", p + "q3", p + "q4", p + "q5"}}
	rec.wantSent(t, want)
}

// Urgent units go first but leave a quarter of each Txn to the other
// units while any wait, so a backlog of bindings cannot starve new
// submissions until their deadlines pass.
func TestCommitterLeavesSubmissionsAShareOfEachTxn(t *testing.T) {
	c, rec := stalled(t, 1, 4)
	ctx := testCtx(t)
	p := keyPrefix(t)
	units := putUnits(ctx, p, "q", 2)
	for _, u := range putUnits(ctx, p, "u", 8) {
		u.urgent = true
		units = append(units, u)
	}
	if err := c.submit(units...); err != nil {
		t.Fatal(err)
	}
	rec.release()
	settleAll(ctx, t, c, units)
	want := [][]string{
		{p + "first"},
		{p + "u0", p + "u1", p + "u2", p + "q0"},
		{p + "u3", p + "u4", p + "u5", p + "q1"},
		{p + "u6", p + "u7"},
	}
	rec.wantSent(t, want)
}

// expiringCtx is a context whose deadline passes when the test says so.
type expiringCtx struct {
	context.Context
	done chan struct{}
}

func newExpiringCtx(parent context.Context) *expiringCtx {
	return &expiringCtx{Context: parent, done: make(chan struct{})}
}

func (c *expiringCtx) expire()               { close(c.done) }
func (c *expiringCtx) Done() <-chan struct{} { return c.done }

func (c *expiringCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// A writer whose deadline passes while its unit waits in the queue gets it
// back unsent, and the unit is not written: its outcome is known.
func TestCommitterWithdrawsUnitsNotSentByTheDeadline(t *testing.T) {
	c, rec := stalled(t, 1, 1024)
	p := keyPrefix(t)
	short := newExpiringCtx(testCtx(t))
	late := putUnit(short, p+"late", "v")
	if err := c.submit(late); err != nil {
		t.Fatal(err)
	}
	short.expire()
	if res := c.wait(short, late); res.err != errNotSent {
		t.Fatalf("unit queued past its deadline: %v, want errNotSent", res.err)
	}
	rec.release()
	<-late.done
	resp, err := rec.KV.Get(testCtx(t), p+"late")
	if err != nil || len(resp.Kvs) != 0 {
		t.Errorf("withdrawn unit was written: %v %v", resp, err)
	}
}

// A writer whose RequestTimeout passes while its unit is in a Txn, and
// which has time left of its own, gets the Txn's outcome rather than giving
// up on it: giving up would leave the outcome unknown, and the writer would
// send again what may have landed.
func TestCommitSettlesSentUnitsPastTheRequestTimeout(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	rec := newRecordingKV(s.Client().KV, true)
	s.groupCommit.close()
	s.groupCommit = newGroupCommitter(rec, 1, 1024, defaultMaxTxnBytes, 5*time.Second, nil)
	s.cfg.RequestTimeout = 10 * time.Millisecond
	p := keyPrefix(t)
	u := putUnit(nil, p+"sent", "v")
	type outcome struct {
		res commitResult
		err error
	}
	got := make(chan outcome, 1)
	go func() {
		res, err := s.commitOne(testCtx(t), "test put", u)
		got <- outcome{res, err}
	}()
	<-rec.commitsIn
	<-u.ctx.Done() // the request timeout has passed with the Txn in flight
	rec.release()
	o := <-got
	if o.err != nil || o.res.rev == 0 {
		t.Fatalf("unit sent before the request timeout: rev %d, err %v; want its Txn's revision", o.res.rev, o.err)
	}
	resp, err := rec.KV.Get(testCtx(t), p+"sent")
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].ModRevision != o.res.rev {
		t.Errorf("stored %v (err %v), want the value at revision %d", resp, err, o.res.rev)
	}
}

func TestCommitterBatchesWhileATxnIsInFlight(t *testing.T) {
	for _, tt := range []struct {
		name      string
		maxOps    int
		units     int
		wantSizes []int
	}{
		{name: "all in one", maxOps: 1024, units: 50, wantSizes: []int{1, 50}},
		{name: "split at max ops", maxOps: 8, units: 20, wantSizes: []int{1, 8, 8, 4}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, rec := stalled(t, 1, tt.maxOps)
			ctx := testCtx(t)
			var units []*commitUnit
			for i := range tt.units {
				units = append(units, putUnit(ctx, fmt.Sprintf("%sk%03d", keyPrefix(t), i), "v"))
			}
			if err := c.submit(units...); err != nil {
				t.Fatal(err)
			}
			rec.release()
			var lastRev int64
			for i, u := range units {
				res := c.wait(ctx, u)
				if res.err != nil || res.rev < lastRev {
					t.Fatalf("unit %d: rev %d (previous %d) err %v", i, res.rev, lastRev, res.err)
				}
				lastRev = res.rev
			}
			var sizes []int
			for _, keys := range rec.sent() {
				sizes = append(sizes, len(keys))
			}
			if diff := cmp.Diff(tt.wantSizes, sizes); diff != "" {
				t.Errorf("Txn sizes (-want +got):\n%s", diff)
			}
		})
	}
}

// While a Txn is in flight, units that would not fill one wait for it to
// land and then go together, however many workers are idle: a Txn per
// unit costs etcd a raft entry and an fsync each.
func TestCommitterHoldsAFewUnitsForTheTxnInFlight(t *testing.T) {
	c, rec := stalled(t, 4, 16) // spills at 4 waiting units
	ctx := testCtx(t)
	p := keyPrefix(t)
	units := putUnits(ctx, p, "k", 3)
	for _, u := range units {
		if err := c.submit(u); err != nil {
			t.Fatal(err)
		}
		// Let a worker the submission woke run before the next one
		// arrives, so that one sending it at once would be seen.
		runtime.Gosched()
	}
	rec.release()
	settleAll(ctx, t, c, units)
	want := [][]string{{p + "first"}, {p + "k0", p + "k1", p + "k2"}}
	rec.wantSent(t, want)
}

// The rule itself: idle workers leave waiting units to a Txn in flight
// only while they are fewer than a Txn's worth and the committer is open.
func TestLeaveToTxnInFlight(t *testing.T) {
	c := newGroupCommitter(nil, 0, 16, defaultMaxTxnBytes, time.Second, nil) // no workers: nothing is taken
	ctx := testCtx(t)
	units := putUnits(ctx, "", "k", 4)
	check := func(what string, want bool) {
		t.Helper()
		c.mu.Lock()
		defer c.mu.Unlock()
		if got := c.leaveToTxnInFlightLocked(); got != want {
			t.Errorf("%s: leave to the Txn in flight %v, want %v", what, got, want)
		}
	}
	if err := c.submit(units[:3]...); err != nil {
		t.Fatal(err)
	}
	check("no Txn in flight", false)
	c.mu.Lock()
	c.busy = 1
	c.mu.Unlock()
	check("three units waiting, one Txn in flight", true)
	if err := c.submit(units[3]); err != nil {
		t.Fatal(err)
	}
	check("a Txn's worth waiting (16 ops / 4)", false)
	c.mu.Lock()
	c.busy, c.queue, c.closed = 1, c.queue[:1], true
	c.mu.Unlock()
	check("closing", false)
}

// Once about a Txn's worth of units waits, a second Txn goes out beside
// the one in flight.
func TestCommitterSpillsATxnsWorthIntoASecondTxn(t *testing.T) {
	c, rec := stalled(t, 4, 16)
	ctx := testCtx(t)
	p := keyPrefix(t)
	units := putUnits(ctx, p, "k", 4)
	if err := c.submit(units...); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rec.commitsIn:
	case <-ctx.Done():
		t.Fatal("no second Txn while the first was held")
	}
	rec.release()
	settleAll(ctx, t, c, units)
	want := [][]string{{p + "first"}, {p + "k0", p + "k1", p + "k2", p + "k3"}}
	rec.wantSent(t, want)
}

func TestCommitterSameKeyGoesToALaterBatch(t *testing.T) {
	c, rec := stalled(t, 1, 1024)
	ctx := testCtx(t)
	p := keyPrefix(t)
	a1 := createUnit(ctx, p+"a", "one")
	a2 := createUnit(ctx, p+"a", "two")
	b := createUnit(ctx, p+"b", "b")
	if err := c.submit(a1, a2, b); err != nil {
		t.Fatal(err)
	}
	rec.release()
	r1, r2, rb := c.wait(ctx, a1), c.wait(ctx, a2), c.wait(ctx, b)
	if r1.err != nil || rb.err != nil {
		t.Fatalf("a1 %v, b %v", r1.err, rb.err)
	}
	if r2.err != errCompareFailed {
		t.Fatalf("second create of a: %v, want compare failure", r2.err)
	}
	if kv := a2.currentKV(p + "a"); kv == nil || string(kv.Value) != "one" || kv.CreateRevision != r1.rev {
		t.Errorf("second create sees %v, want the first's value at revision %d", kv, r1.rev)
	}
	want := [][]string{{p + "first"}, {p + "a", p + "b"}, {p + "a"}}
	rec.wantSent(t, want)
}
