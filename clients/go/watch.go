package berth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// CompactRevisionKey is the errdetails.ErrorInfo metadata key under which
// the server reports the oldest revision a watch can still resume from.
const CompactRevisionKey = "compact_revision"

// CompactedError reports that the revision a watch asked for has been
// compacted away, so the events after it can no longer be replayed. The
// caller should rebuild its state: WatchBindings from revision 0 sends every
// pod currently bound, then live events.
type CompactedError struct {
	// OldestRevision is the oldest revision still available.
	OldestRevision int64
	// status is the FailedPrecondition error the server returned.
	status error
}

func (e *CompactedError) Error() string {
	return fmt.Sprintf("berth: watch revision compacted; oldest available revision is %d", e.OldestRevision)
}

// Unwrap returns the server's status error, so status.Code(err) still
// reports FailedPrecondition.
func (e *CompactedError) Unwrap() error { return e.status }

// FellBehindReason is the errdetails.ErrorInfo reason of a watch the server
// cut off because its reader fell too far behind (ResourceExhausted);
// metadata ResumeRevisionKey holds a revision every event up to which was
// sent.
const (
	FellBehindReason  = "WATCH_FELL_BEHIND"
	ResumeRevisionKey = "resume_revision"
)

// asFellBehind recognises a cut-off for reading too slowly and returns the
// server's resume revision.
func asFellBehind(err error) (int64, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.ResourceExhausted {
		return 0, false
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetReason() != FellBehindReason {
			continue
		}
		if rev, perr := strconv.ParseInt(info.GetMetadata()[ResumeRevisionKey], 10, 64); perr == nil {
			return rev, true
		}
	}
	return 0, false
}

var compactedMessage = regexp.MustCompile(`oldest available revision is (\d+)`)

// asCompacted recognises a compaction failure. The structured ErrorInfo is
// preferred; the message is the fallback for servers that send no details.
// A FailedPrecondition that carries neither is not a compaction.
func asCompacted(err error) (*CompactedError, bool) {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return nil, false
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok {
			continue
		}
		if v, ok := info.GetMetadata()[CompactRevisionKey]; ok {
			if rev, perr := strconv.ParseInt(v, 10, 64); perr == nil {
				return &CompactedError{OldestRevision: rev, status: err}, true
			}
		}
	}
	if m := compactedMessage.FindStringSubmatch(st.Message()); m != nil {
		if rev, perr := strconv.ParseInt(m[1], 10, 64); perr == nil {
			return &CompactedError{OldestRevision: rev, status: err}, true
		}
	}
	return nil, false
}

// WatchBindings calls fn for every binding event after fromRevision (0: for
// every pod currently bound, then for live events), in revision order,
// until ctx ends or fn returns an error.
//
// When the stream breaks (Unavailable, a server restart that ends the
// stream, ...) it reconnects with backoff and resumes after the last event
// fn received, so fn sees every event exactly once and in order across
// disconnects. Several events can share one revision (one etcd transaction
// binds many pods); if a disconnect splits them, the watch asks for that
// whole revision again and skips the events fn already had. This relies on
// the server's promise that events arrive in non-decreasing revision order.
//
// A server that cuts the stream off because fn (or the network) is too slow
// to keep up says where to resume (WATCH_FELL_BEHIND); the watch resumes
// from there, or from the last event fn received if that is earlier (events
// sent but lost with the stream), at once when fn had made progress, and
// with the same skipping of events already seen.
//
// It returns ctx.Err() when ctx ends, fn's error unchanged when fn fails,
// *CompactedError when the revision to resume from was compacted, and any
// other server error (InvalidArgument, Unimplemented, ...) as is. fn runs
// on the caller's goroutine and blocks the stream while it runs.
func (c *Client) WatchBindings(ctx context.Context, fromRevision int64, fn func(*berthv1.BindingEvent) error) error {
	cursor := newWatchCursor(fromRevision)
	// One backoff sequence across consecutive reconnects without an event in
	// between; an event starts it over.
	reconnects := c.backoff.sequence()
	for {
		progressed, err := c.watchStream(ctx, cursor, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var fnErr callbackError
		if errors.As(err, &fnErr) {
			return fnErr.err
		}
		if ce, ok := asCompacted(err); ok {
			return ce
		}
		if !resumable(err) {
			return err
		}
		if progressed {
			reconnects.Reset()
		}
		if rev, ok := asFellBehind(err); ok {
			cursor.capResume(rev)
			if progressed {
				// The reader was slow, not the server: its buffer has
				// room again, so no backoff.
				continue
			}
		}
		if err := waitNext(ctx, reconnects); err != nil {
			return err
		}
	}
}

// callbackError marks an error that came from the caller's fn, so it is
// never mistaken for a stream failure.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }

// watchStream runs one stream until it fails. progressed reports whether fn
// received at least one event.
func (c *Client) watchStream(ctx context.Context, cur *watchCursor, fn func(*berthv1.BindingEvent) error) (progressed bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // releases the stream whatever ends it
	stream, err := c.sched.WatchBindings(ctx, &berthv1.WatchBindingsRequest{FromRevision: cur.resumeFrom()})
	if err != nil {
		return false, err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return progressed, err
		}
		if rev := resp.GetProgressRevision(); rev > 0 && resp.GetEvent() == nil {
			cur.progress(rev)
			continue
		}
		ev := resp.GetEvent()
		if ev == nil || cur.seen(ev) {
			continue
		}
		if err := fn(ev); err != nil {
			return progressed, callbackError{err}
		}
		cur.delivered(ev)
		progressed = true
	}
}

// resumable reports whether a stream failure is worth reconnecting after.
func resumable(err error) bool {
	if errors.Is(err, io.EOF) {
		return true // the server ended the stream, e.g. on graceful shutdown
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.DeadlineExceeded:
		// DeadlineExceeded only reaches here when ctx is still live, so the
		// deadline was a proxy's or the server's, not the caller's.
		return true
	}
	return false
}

// eventKey identifies an event within one revision: etcd writes a key at
// most once per revision, so no two events of a revision share a key. The
// node tells apart node-level events (NODE_LOST), which name no pod.
type eventKey struct {
	typ             berthv1.BindingEventType
	namespace, name string
	uid             string
	node            string
}

func keyOf(ev *berthv1.BindingEvent) eventKey {
	return eventKey{ev.GetType(), ev.GetNamespace(), ev.GetName(), ev.GetUid(), ev.GetNodeName()}
}

// watchCursor remembers what fn has seen, to resume without gap or repeat.
type watchCursor struct {
	from int64 // the caller's fromRevision, used until an event arrives
	last int64 // revision of the last delivered event; 0 before any
	// atLast holds the events already delivered at revision last.
	atLast map[eventKey]struct{}
	// listed holds what a from-0 listing delivered before its progress
	// marker. A listing cut short is not resumable by revision (its events
	// carry each pod's own revision), so it is redone from 0, skipping
	// these.
	listed map[eventKey]struct{}
	// capped, if not 0, is a server's resume revision lower than the
	// cursor's own; it lasts until fn receives more.
	capped int64
}

// capResume resumes from rev if that is earlier than the cursor's own
// point: events at or before the cursor's own are skipped as seen.
func (w *watchCursor) capResume(rev int64) {
	if rev > 0 {
		w.capped = rev
	}
}

func newWatchCursor(from int64) *watchCursor {
	w := &watchCursor{from: from, atLast: make(map[eventKey]struct{})}
	if from == 0 {
		w.listed = make(map[eventKey]struct{})
	}
	return w
}

// progress records the server's word that everything up to rev was sent.
func (w *watchCursor) progress(rev int64) {
	w.listed, w.capped = nil, 0
	w.from, w.last = rev, 0
	clear(w.atLast)
}

// resumeFrom is the from_revision of the next stream.
func (w *watchCursor) resumeFrom() int64 {
	own := w.ownResume()
	if w.capped > 0 && w.listed == nil {
		return min(own, w.capped)
	}
	return own
}

func (w *watchCursor) ownResume() int64 {
	switch {
	case w.listed != nil:
		return 0
	case w.last == 0:
		return w.from
	case w.last > 1:
		// Ask for revision last again: the disconnect may have split it.
		return w.last - 1
	default:
		return w.last // revision 1 is etcd's empty initial state: no events
	}
}

func (w *watchCursor) seen(ev *berthv1.BindingEvent) bool {
	if w.listed != nil {
		_, ok := w.listed[keyOf(ev)]
		return ok
	}
	switch {
	case w.last == 0:
		return false
	case ev.GetRevision() < w.last:
		return true
	case ev.GetRevision() == w.last:
		_, ok := w.atLast[keyOf(ev)]
		return ok
	}
	return false
}

func (w *watchCursor) delivered(ev *berthv1.BindingEvent) {
	w.capped = 0
	if w.listed != nil {
		w.listed[keyOf(ev)] = struct{}{}
		return
	}
	if ev.GetRevision() != w.last {
		clear(w.atLast)
		w.last = ev.GetRevision()
	}
	w.atLast[keyOf(ev)] = struct{}{}
}
