package store

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// The binding fan-out: one etcd watch per replica feeds a ring of recent
// binding events, and every subscriber reads the ring at its own pace. A
// subscriber costs a cursor, not an etcd watch and not a buffer of its own,
// so ten thousand of them cost what one does, and a slow one cannot grow
// memory: it falls off the ring's tail and is told to resume.

// ErrFellBehind reports that a subscriber fell too far behind the live
// stream: more events than the ring holds, or older than the lag bound. The
// subscriber resumes from its last revision (errors.As *FellBehindError).
var ErrFellBehind = errors.New("store: watcher fell behind")

// FellBehindError carries where the subscriber can resume from.
type FellBehindError struct {
	// Resume is the last revision all of whose events were delivered. One
	// Txn's events share a revision, and a subscriber can be cut off
	// between them: resuming from Resume then repeats the ones it had, and
	// skips none.
	Resume int64
	Why    string
}

func (e *FellBehindError) Error() string {
	return fmt.Sprintf("store: watcher fell behind (%s); resume from revision %d", e.Why, e.Resume)
}

// Is makes errors.Is(err, ErrFellBehind) true.
func (e *FellBehindError) Is(target error) bool { return target == ErrFellBehind }

const (
	defaultWatchBuffer = 1 << 16
	defaultWatchMaxLag = 30 * time.Second
	// fanoutBatch is how many events a subscriber takes from the ring per
	// lock: enough to amortise the lock, few enough to stay fair.
	fanoutBatch = 256
	// maxCatchUps bounds the catch-up watches running at once, each on an
	// etcd watch stream of its own (see catchUp): a burst of resumes costs
	// a queue, not a stream and its goroutines per subscriber.
	maxCatchUps = 32
	// watchStreamKey is the gRPC metadata key that puts a watch on an etcd
	// watch stream of its choosing: clientv3 shares one stream among the
	// watches whose contexts carry the same outgoing metadata.
	watchStreamKey = "berth-watch-stream"
)

type ringEntry struct {
	ev *berthv1.BindingEvent
	at time.Time // when the hub received it, for the lag bound
}

// bindingHub holds the ring. Subscribers hold a sequence number (the count
// of events appended before theirs), not a revision: one revision can carry
// many events, and a cursor must be able to stand between them.
//
// covered is what a joining subscriber relies on: every binding event with
// revision > covered is in the ring, in order.
type bindingHub struct {
	s      *Store
	size   int
	maxLag time.Duration
	// batch is how many events a subscriber takes per read (fanoutBatch).
	batch int

	mu       sync.Mutex
	ring     []ringEntry // circular; ring[first] is the oldest
	first    int
	n        int
	firstSeq uint64 // sequence number of ring[first]
	covered  int64
	// wake is closed and replaced whenever events arrive, waking waiters.
	wake    chan struct{}
	stopped error // set once the hub ends for good (store closed)

	catchUpSlots   chan struct{} // a token per running catch-up
	catchUpStreams atomic.Uint64 // numbers each catch-up's stream
}

// hub starts the fan-out on first use. A failed start is retried by the
// next subscriber rather than remembered.
func (s *Store) hub(ctx context.Context) (*bindingHub, error) {
	s.fanoutMu.Lock()
	defer s.fanoutMu.Unlock()
	if s.fanout != nil {
		return s.fanout, nil
	}
	select {
	case <-s.closing:
		return nil, ErrClosed
	default:
	}
	rev, err := s.CurrentRevision(ctx)
	if err != nil {
		return nil, err
	}
	h := &bindingHub{
		s:       s,
		size:    s.cfg.WatchBuffer,
		maxLag:  s.cfg.WatchMaxLag,
		batch:   fanoutBatch,
		ring:    make([]ringEntry, s.cfg.WatchBuffer),
		covered: rev,
		wake:    make(chan struct{}),

		catchUpSlots: make(chan struct{}, maxCatchUps),
	}
	s.fanout = h
	s.fanoutDone.Add(1)
	go func() {
		defer s.fanoutDone.Done()
		h.run(rev)
	}()
	return h, nil
}

// run follows etcd from rev until the store closes, resuming a lost watch
// from the last revision it saw. If etcd compacted past that point (the hub
// itself was cut off for long), the ring restarts at the current revision:
// subscribers behind it are told they fell behind, and their resume meets
// the compaction and re-lists, as rule 4 of the design asks.
func (h *bindingHub) run(rev int64) {
	s := h.s
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.closing:
		case <-ctx.Done():
		}
		cancel()
	}()
	after := rev
	bo := newBackoff()
	for {
		before := after
		err := s.watchBindingsFrom(ctx, after+1, &after, h.appendRevision)
		if ctx.Err() != nil || s.isClosed() {
			h.stop(ErrClosed)
			return
		}
		if errors.Is(err, ErrCompacted) {
			if cur, cerr := s.CurrentRevision(ctx); cerr == nil {
				s.log.Warn("store: binding fan-out cut off past compaction; restarting its ring",
					zap.Int64("after", after), zap.Int64("current", cur))
				h.restart(cur)
				after = cur
				continue
			}
		}
		s.log.Warn("store: binding fan-out watch lost, resuming", zap.Int64("after", after), zap.Error(err))
		if after != before {
			bo.reset()
		}
		if bo.wait(ctx) != nil {
			h.stop(ErrClosed)
			return
		}
	}
}

// appendRevision adds one revision's events at once: a reader never finds
// the ring ending inside a revision, so a batch that ends at the ring's
// head ends a revision (see read).
func (h *bindingHub) appendRevision(evs []*berthv1.BindingEvent) error {
	h.mu.Lock()
	now := time.Now()
	for _, ev := range evs {
		if h.n == h.size {
			// The oldest event leaves: from now on the ring covers only
			// what came after its revision.
			h.covered = h.ring[h.first].ev.Revision
			h.ring[h.first] = ringEntry{}
			h.first = (h.first + 1) % h.size
			h.firstSeq++
			h.n--
		}
		h.ring[(h.first+h.n)%h.size] = ringEntry{ev: ev, at: now}
		h.n++
	}
	h.broadcastLocked()
	h.mu.Unlock()
	h.s.metrics.fanoutEvents(len(evs))
	return nil
}

// restart empties the ring; every cursor falls behind it.
func (h *bindingHub) restart(rev int64) {
	h.mu.Lock()
	clear(h.ring)
	h.firstSeq += uint64(h.n) + 1
	h.first, h.n, h.covered = 0, 0, rev
	h.broadcastLocked()
	h.mu.Unlock()
}

func (h *bindingHub) stop(err error) {
	h.mu.Lock()
	h.stopped = err
	h.broadcastLocked()
	h.mu.Unlock()
}

func (h *bindingHub) broadcastLocked() {
	close(h.wake)
	h.wake = make(chan struct{})
}

func (h *bindingHub) at(i int) *ringEntry { return &h.ring[(h.first+i)%h.size] }

// join returns the cursor of the first event after revision after, and
// false if the ring no longer covers it.
func (h *bindingHub) join(after int64) (uint64, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if after < h.covered {
		return 0, false
	}
	i := sort.Search(h.n, func(i int) bool { return h.at(i).ev.Revision > after })
	return h.firstSeq + uint64(i), true
}

// read copies into buf the events from cursor seq, at most len(buf), and
// tells whether they end a revision; with none, it returns a channel
// closed when more arrive.
//
// The lag bound counts from when an event arrived, or from when the
// subscriber joined if later: one that joins at old events (a resume) is
// not behind for reading them, only for not keeping up from then on.
func (h *bindingHub) read(seq uint64, resume int64, joinedAt time.Time, buf []*berthv1.BindingEvent) (n int, endsRevision bool, _ <-chan struct{}, _ error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if seq < h.firstSeq {
		return 0, false, nil, &FellBehindError{Resume: resume, Why: fmt.Sprintf("more than %d events behind", h.size)}
	}
	i := int(seq - h.firstSeq)
	if i >= h.n {
		if h.stopped != nil {
			return 0, false, nil, h.stopped
		}
		return 0, false, h.wake, nil
	}
	if lag := time.Since(later(h.at(i).at, joinedAt)); lag > h.maxLag {
		return 0, false, nil, &FellBehindError{Resume: resume, Why: fmt.Sprintf("%s behind", lag.Truncate(time.Millisecond))}
	}
	k := 0
	for ; k < len(buf) && i+k < h.n; k++ {
		buf[k] = h.at(i + k).ev
	}
	// Revisions are appended whole, so the ring's head ends one.
	endsRevision = i+k == h.n || h.at(i+k).ev.Revision != buf[k-1].Revision
	return k, endsRevision, nil, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (h *bindingHub) coveredRev() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.covered
}

// FollowBindings is WatchBindings served from the replica's fan-out, with
// the same events, order, options and errors, plus one: a subscriber more
// than the ring's size or its lag bound behind gets a *FellBehindError and
// resumes from its Resume revision. A subscriber older than the ring (a
// resume from long ago) catches up on a watch of its own, then joins the
// ring.
//
// send runs on a goroutine of its own, so that a send stuck on a client that
// stopped reading is noticed, in the listing, the catch-up or the ring:
// FollowBindings then returns the error while send is still blocked, and
// the caller must make send return (a gRPC stream's Send does once its
// handler returns).
func (s *Store) FollowBindings(ctx context.Context, fromRev int64, send func(*berthv1.BindingEvent) error, opts ...WatchOption) error {
	var o watchOptions
	for _, opt := range opts {
		opt(&o)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Until the listing is done its events' revisions are no point to
	// resume from: a subscriber cut off then starts again from fromRev.
	tracker := &sendTracker{resume: fromRev, last: fromRev, listing: fromRev == 0}
	tracked := func(ev *berthv1.BindingEvent) error { return tracker.send(send, ev) }
	o.synced = tracker.synced(o.synced)
	done := make(chan error, 1)
	go func() { done <- s.followBindings(ctx, fromRev, tracked, o) }()
	maxLag := s.cfg.WatchMaxLag
	tick := time.NewTicker(max(maxLag/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			if since, resume := tracker.get(); !since.IsZero() && time.Since(since) > maxLag {
				s.metrics.fanoutCutOff()
				return &FellBehindError{Resume: resume, Why: fmt.Sprintf("a send blocked for over %s", maxLag)}
			}
		}
	}
}

func (s *Store) followBindings(ctx context.Context, fromRev int64, send func(*berthv1.BindingEvent) error, o watchOptions) error {
	after, err := s.startFrom(ctx, fromRev, send, o)
	if err != nil {
		return err
	}
	h, err := s.hub(ctx)
	if err != nil {
		return err
	}
	seq, ok := h.join(after)
	for !ok {
		if after, err = s.catchUp(ctx, h, after, send); err != nil {
			return err
		}
		seq, ok = h.join(after)
	}
	return h.deliver(ctx, seq, after, send)
}

// startFrom does what WatchBindings does before its watch: the listing for
// fromRev 0, the range checks otherwise. It returns the last revision sent.
func (s *Store) startFrom(ctx context.Context, fromRev int64, send func(*berthv1.BindingEvent) error, o watchOptions) (int64, error) {
	if fromRev < 0 {
		return 0, fmt.Errorf("%w: negative revision %d", ErrInvalidArgument, fromRev)
	}
	if fromRev == 0 {
		after, err := s.sendBound(ctx, send)
		if err != nil {
			return 0, err
		}
		if o.synced != nil {
			if err := o.synced(after); err != nil {
				return 0, err
			}
		}
		return after, nil
	}
	cur, err := s.CurrentRevision(ctx)
	if err != nil {
		return 0, err
	}
	if fromRev > cur {
		return 0, fmt.Errorf("%w: %d > current %d", ErrFutureRevision, fromRev, cur)
	}
	return fromRev, nil
}

// catchUp follows a watch of the subscriber's own until it has delivered
// everything up to what the ring covers, then hands over. On a quiet
// cluster that is the next event, which is also the first the subscriber
// needs: until then the private watch is simply its live stream.
func (s *Store) catchUp(ctx context.Context, h *bindingHub, after int64, send func(*berthv1.BindingEvent) error) (int64, error) {
	wch, release, err := s.catchUpWatch(ctx, h, after)
	if err != nil {
		return 0, err
	}
	defer release()
	emit := func(ev *berthv1.BindingEvent) error {
		if err := send(ev); err != nil {
			return sendError{err}
		}
		return nil
	}
	for {
		var resp clientv3.WatchResponse
		var ok bool
		select {
		case resp, ok = <-wch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if !ok {
			return 0, fmt.Errorf("%w: catch-up watch closed", ErrUnavailable)
		}
		if resp.CompactRevision != 0 {
			return 0, &CompactedError{CompactRevision: resp.CompactRevision}
		}
		if err := resp.Err(); err != nil {
			return 0, s.callError(ctx, "catch up bindings", err)
		}
		if resp.IsProgressNotify() {
			// Everything up to the header's revision has been sent.
			after = max(after, resp.Header.Revision)
		} else if err := s.deliverResponse(resp, &after, emit, nil); err != nil {
			var se sendError
			if errors.As(err, &se) {
				return 0, se.err
			}
			return 0, err
		}
		if after >= h.coveredRev() {
			return after, nil
		}
	}
}

// catchUpWatch starts a catch-up's etcd watch from after, and returns its
// channel and what lets go of it, to be called once done with it.
//
// The watch runs alone on an etcd watch stream of its own, never on the
// stream the hub's and the sync's watches share. clientv3 answers a watch
// closed on a shared stream by sending a cancel request from the loop that
// is also the stream's only reader, and the server queues one reply per
// cancel in a small buffer before it reads the next request: a burst of
// cancels (hundreds of subscribers leaving at once) fills that buffer and
// both sides wait on each other for good, the hub and the sync with them.
// A stream's last watch closing ends the stream instead, with no cancel
// sent, so a stream per catch-up cannot wedge; maxCatchUps bounds them.
//
// The stream ends with its watch only if the watch was created first:
// clientv3 keeps a stream alive for good when its watch is cancelled
// before the server's reply, with an orphaned server watch on it. So the
// watch does not end with ctx; release waits for the creation, then
// cancels.
func (s *Store) catchUpWatch(ctx context.Context, h *bindingHub, after int64) (clientv3.WatchChan, func(), error) {
	select {
	case h.catchUpSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	stream := "catch-up-" + strconv.FormatUint(h.catchUpStreams.Add(1), 10)
	wctx := clientv3.WithRequireLeader(context.WithoutCancel(ctx))
	wctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(wctx, watchStreamKey, stream))
	// Watching from after itself (its events are skipped) makes a resume
	// fail on compaction exactly when a range read at after would.
	wch := s.client.Watch(wctx, s.keys.nodeLeases, clientv3.WithRange(clientv3.GetPrefixRangeEnd(s.keys.pods)),
		clientv3.WithRev(after), clientv3.WithPrevKV(), clientv3.WithCreatedNotify())
	release := func() {
		cancel()
		// clientv3 closes wch once it has let go of the watch: waiting
		// for that keeps the slot until the stream winds down, so the
		// slots bound the streams alive, not just those in use.
		for range wch {
		}
		<-h.catchUpSlots
	}
	select {
	case resp, ok := <-wch:
		if !ok {
			release()
			return nil, nil, fmt.Errorf("%w: catch-up watch closed", ErrUnavailable)
		}
		if resp.CompactRevision != 0 {
			release()
			return nil, nil, &CompactedError{CompactRevision: resp.CompactRevision}
		}
		if err := resp.Err(); err != nil {
			release()
			return nil, nil, s.callError(ctx, "catch up bindings", err)
		}
		return wch, release, nil
	case <-ctx.Done():
		go func() {
			<-wch // the creation, or the channel closing
			release()
		}()
		return nil, nil, ctx.Err()
	}
}

// deliver sends ring events from cursor seq (the first after revision
// after) until ctx ends or the subscriber falls behind.
func (h *bindingHub) deliver(ctx context.Context, seq uint64, after int64, send func(*berthv1.BindingEvent) error) error {
	buf := make([]*berthv1.BindingEvent, h.batch)
	// The listing or catch-up that came before may have run ahead of the
	// hub's own watch: the events it already delivered can still arrive in
	// the ring after the cursor, and are passed over. Only the join can be
	// ahead; once past it, events of one revision all count.
	joined, joinedAt := after, time.Now()
	// complete is the last revision sent whole, where a cut-off resumes:
	// a batch can end inside a revision, and after is that revision.
	complete := after
	for {
		n, endsRevision, wake, err := h.read(seq, complete, joinedAt, buf)
		if err != nil {
			if errors.Is(err, ErrFellBehind) {
				h.s.metrics.fanoutCutOff()
			}
			return err
		}
		if n == 0 {
			select {
			case <-wake:
				continue
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		for _, ev := range buf[:n] {
			if ev.Revision <= joined {
				seq++
				continue
			}
			if ev.Revision > after {
				complete = after
			}
			if err := send(ev); err != nil {
				return err
			}
			after = ev.Revision
			seq++
		}
		if endsRevision {
			complete = after
		}
		clear(buf[:n])
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// sendTracker knows when the send in progress began (zero when none is)
// and the revision a subscriber cut off now resumes from: the last one
// sent whole, once the listing (if any) is over. A send stuck inside a
// revision resumes from the one before, repeating what it had of it.
type sendTracker struct {
	mu     sync.Mutex
	since  time.Time
	resume int64
	// last is the revision of the last event sent.
	last    int64
	listing bool
}

func (t *sendTracker) send(send func(*berthv1.BindingEvent) error, ev *berthv1.BindingEvent) error {
	t.mu.Lock()
	t.since = time.Now()
	if !t.listing && ev.Revision > t.last {
		t.resume = t.last // every event before this one was sent
	}
	t.mu.Unlock()
	err := send(ev)
	t.mu.Lock()
	t.since = time.Time{}
	if err == nil && !t.listing {
		t.last = ev.Revision
	}
	t.mu.Unlock()
	return err
}

// synced wraps the OnSynced callback: from the listing's revision on, a
// cut-off subscriber resumes where it got to.
func (t *sendTracker) synced(next func(int64) error) func(int64) error {
	return func(rev int64) error {
		t.mu.Lock()
		t.listing, t.resume, t.last = false, rev, rev
		t.mu.Unlock()
		if next != nil {
			return next(rev)
		}
		return nil
	}
}

func (t *sendTracker) get() (time.Time, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.since, t.resume
}
