package store

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Tests of the order units are taken in and of what a writer whose time is
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
	if diff := cmp.Diff(want, rec.sent()); diff != "" {
		t.Errorf("Txns (-want +got):\n%s", diff)
	}
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
	if diff := cmp.Diff(want, rec.sent()); diff != "" {
		t.Errorf("Txns (-want +got):\n%s", diff)
	}
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
