package berth

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-io/berth/clients/go/berthtest"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

var errStop = errors.New("stop")

func bound(name string, rev int64) *berthv1.BindingEvent {
	return &berthv1.BindingEvent{Type: berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND, Namespace: "ns", Name: name, Uid: "u-" + name, NodeName: "n1", Revision: rev}
}

func unbound(name string, rev int64) *berthv1.BindingEvent {
	ev := bound(name, rev)
	ev.Type = berthv1.BindingEventType_BINDING_EVENT_TYPE_UNBOUND
	return ev
}

// label names an event by pod, type and revision, for readable diffs.
func label(ev *berthv1.BindingEvent) string {
	t := "+"
	if ev.GetType() == berthv1.BindingEventType_BINDING_EVENT_TYPE_UNBOUND {
		t = "-"
	}
	return t + ev.GetName() + "@" + strconv.FormatInt(ev.GetRevision(), 10)
}

// collectUntil returns an fn that records events and stops at the event
// labelled last, so a lost or repeated event shows in the diff instead of
// leaving the watch waiting.
func collectUntil(last string, got *[]string) func(*berthv1.BindingEvent) error {
	return func(ev *berthv1.BindingEvent) error {
		*got = append(*got, label(ev))
		if label(ev) == last {
			return errStop
		}
		return nil
	}
}

// TestWatchResumesAfterDisconnects is long because it is a table of
// disconnect scenarios over one event log, written out case by case.
func TestWatchResumesAfterDisconnects(t *testing.T) {
	// Revision 6 is one transaction binding three pods: disconnects that
	// split it must neither repeat nor drop any of them.
	log := []*berthv1.BindingEvent{
		bound("a", 5),
		bound("b", 6), bound("c", 6), bound("d", 6),
		bound("e", 7),
		unbound("a", 8),
		bound("f", 9),
	}
	want := []string{"+a@5", "+b@6", "+c@6", "+d@6", "+e@7", "-a@8", "+f@9"}

	tests := []struct {
		name  string
		from  int64
		fault berthtest.WatchFault
		// wantFroms are the from_revision of every stream opened.
		wantFroms []int64
	}{
		{
			name: "unavailable in the middle of a revision, then clean end",
			from: 4,
			fault: func(stream, sent int) error {
				switch {
				case stream == 0 && sent == 3: // after a@5, b@6, c@6
					return status.Error(codes.Unavailable, "server restarting")
				case stream == 1 && sent == 4: // resumed from 5: b, c skipped, d, e delivered
					return berthtest.ErrEndStream
				}
				return nil
			},
			wantFroms: []int64{4, 5, 6},
		},
		{
			name: "failure before the first event resumes from the caller's revision",
			from: 4,
			fault: func(stream, sent int) error {
				if stream < 2 && sent == 0 {
					return status.Error(codes.Unavailable, "not ready")
				}
				return nil
			},
			wantFroms: []int64{4, 4, 4},
		},
		{
			name: "breaks at a revision boundary",
			from: 1,
			fault: func(stream, sent int) error {
				if stream == 0 && sent == 5 { // after e@7
					return status.Error(codes.ResourceExhausted, "too many streams")
				}
				return nil
			},
			wantFroms: []int64{1, 6},
		},
		{
			name: "a listing cut short is redone from 0 without repeats",
			from: 0,
			fault: func(stream, sent int) error {
				if stream == 0 && sent == 3 { // listing delivered a, b, c only
					return status.Error(codes.Unavailable, "restart")
				}
				return nil
			},
			wantFroms: []int64{0, 0},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := berthtest.Start(t)
			srv.AddEvents(log...)
			srv.SetWatchFault(tt.fault)
			c := dialTest(t, srv)

			var got []string
			err := c.WatchBindings(t.Context(), tt.from, collectUntil(want[len(want)-1], &got))
			if !errors.Is(err, errStop) {
				t.Fatalf("WatchBindings = %v, want fn's error", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantFroms, srv.WatchRequests()); diff != "" {
				t.Errorf("from revisions (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestWatchDeliversLiveEvents(t *testing.T) {
	srv := berthtest.Start(t)
	c := dialTest(t, srv)
	srv.AddEvents(bound("a", 3))
	var got []string
	err := c.WatchBindings(t.Context(), 0, func(ev *berthv1.BindingEvent) error {
		got = append(got, label(ev))
		if len(got) == 1 {
			// Written while the stream is open: must arrive without reconnecting.
			srv.AddEvents(bound("b", 4))
			return nil
		}
		return errStop
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("WatchBindings = %v", err)
	}
	if diff := cmp.Diff([]string{"+a@3", "+b@4"}, got); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
	if n := len(srv.WatchRequests()); n != 1 {
		t.Errorf("opened %d streams, want 1", n)
	}
}

func TestWatchCompacted(t *testing.T) {
	t.Run("at start", func(t *testing.T) {
		srv := berthtest.Start(t)
		srv.Compact(10)
		c := dialTest(t, srv)
		err := c.WatchBindings(t.Context(), 3, func(*berthv1.BindingEvent) error {
			t.Error("fn called on a compacted watch")
			return nil
		})
		var ce *CompactedError
		if !errors.As(err, &ce) || ce.OldestRevision != 10 {
			t.Fatalf("WatchBindings = %v, want *CompactedError{10}", err)
		}
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("status.Code = %v, want FailedPrecondition through Unwrap", status.Code(err))
		}
	})
	t.Run("while disconnected", func(t *testing.T) {
		srv := berthtest.Start(t)
		srv.AddEvents(bound("a", 5), bound("b", 6), bound("c", 20))
		srv.SetWatchFault(func(stream, sent int) error {
			if stream == 0 && sent == 2 {
				srv.Compact(15) // history is lost while the client is away
				return status.Error(codes.Unavailable, "restart")
			}
			return nil
		})
		c := dialTest(t, srv)
		var got []string
		err := c.WatchBindings(t.Context(), 1, collectUntil("+c@20", &got))
		var ce *CompactedError
		if !errors.As(err, &ce) || ce.OldestRevision != 15 {
			t.Fatalf("WatchBindings = %v, want *CompactedError{15}", err)
		}
		if diff := cmp.Diff([]string{"+a@5", "+b@6"}, got); diff != "" {
			t.Errorf("events before compaction (-want,+got):\n%s", diff)
		}
	})
}

func TestAsCompacted(t *testing.T) {
	withInfo := func(msg string, md map[string]string) error {
		st, err := status.New(codes.FailedPrecondition, msg).WithDetails(&errdetails.ErrorInfo{Reason: "COMPACTED", Metadata: md})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	tests := []struct {
		name   string
		err    error
		want   int64
		wantOK bool
	}{
		{"error info and message", berthtest.CompactedError(42), 42, true},
		{"error info wins over message", withInfo("compacted; oldest available revision is 7", map[string]string{CompactRevisionKey: "9"}), 9, true},
		{"message only", status.Error(codes.FailedPrecondition, "watch from 3: compacted; oldest available revision is 1234"), 1234, true},
		{"bad error info falls back to message", withInfo("compacted; oldest available revision is 7", map[string]string{CompactRevisionKey: "x"}), 7, true},
		{"other failed precondition", status.Error(codes.FailedPrecondition, "uid mismatch"), 0, false},
		{"other code with the message", status.Error(codes.Internal, "oldest available revision is 5"), 0, false},
		{"not a status", errors.New("oldest available revision is 5"), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ce, ok := asCompacted(tt.err)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			if ok && ce.OldestRevision != tt.want {
				t.Errorf("OldestRevision = %d, want %d", ce.OldestRevision, tt.want)
			}
		})
	}
}

func TestWatchReturnsPermanentErrors(t *testing.T) {
	srv := berthtest.Start(t)
	srv.AddEvents(bound("a", 5))
	srv.SetWatchFault(func(int, int) error { return status.Error(codes.PermissionDenied, "no") })
	c := dialTest(t, srv)
	err := c.WatchBindings(t.Context(), 0, func(*berthv1.BindingEvent) error { return nil })
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("WatchBindings = %v, want PermissionDenied", err)
	}
	if n := len(srv.WatchRequests()); n != 1 {
		t.Errorf("opened %d streams, want 1 (no retry)", n)
	}
}

func TestWatchEndsWithContext(t *testing.T) {
	t.Run("while waiting for events", func(t *testing.T) {
		srv := berthtest.Start(t)
		srv.AddEvents(bound("a", 5))
		c := dialTest(t, srv)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		err := c.WatchBindings(ctx, 0, func(*berthv1.BindingEvent) error {
			cancel() // the stream is now idle, blocked in Recv
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("WatchBindings = %v, want context.Canceled", err)
		}
	})
	t.Run("while backing off", func(t *testing.T) {
		srv := berthtest.Start(t)
		srv.AddEvents(bound("a", 5))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		srv.SetWatchFault(func(int, int) error {
			cancel()
			return status.Error(codes.Unavailable, "down")
		})
		// A backoff far longer than any test: only cancellation can end it.
		c := dialTest(t, srv, WithBackoff(time.Hour, time.Hour))
		err := c.WatchBindings(ctx, 0, func(*berthv1.BindingEvent) error {
			t.Error("fn called")
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("WatchBindings = %v, want context.Canceled", err)
		}
	})
}

func TestBackoffDelay(t *testing.T) {
	b := backoff{base: 100 * time.Millisecond, max: time.Second}
	tests := []struct {
		attempt uint
		full    time.Duration // the delay before jitter
	}{
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{3, 400 * time.Millisecond},
		{4, 800 * time.Millisecond},
		{5, time.Second},
		{200, time.Second},
	}
	for _, tt := range tests {
		for range 100 {
			if d := b.delay(tt.attempt); d < tt.full/2 || d > tt.full {
				t.Fatalf("delay(%d) = %v, want within [%v, %v]", tt.attempt, d, tt.full/2, tt.full)
			}
		}
	}
	if d := (backoff{}).delay(3); d != 0 {
		t.Errorf("zero backoff delay = %v, want 0", d)
	}
	if d := (backoff{base: time.Second}).delay(300); d <= 0 {
		t.Errorf("uncapped backoff overflowed: %v", d)
	}
}

// TestWatchCursorProgress: after a listing's progress marker the cursor
// resumes from the marker's revision, not from the listed pods' revisions.
func TestWatchCursorProgress(t *testing.T) {
	cur := newWatchCursor(0)
	if got := cur.resumeFrom(); got != 0 {
		t.Fatalf("before any event: resume from %d, want 0", got)
	}
	a := bound("a", 5)
	cur.delivered(a)
	if got := cur.resumeFrom(); got != 0 {
		t.Fatalf("mid-listing: resume from %d, want 0 (listing is redone)", got)
	}
	if !cur.seen(a) {
		t.Fatal("a listed pod is not remembered for the redone listing")
	}
	cur.progress(9)
	if got := cur.resumeFrom(); got != 9 {
		t.Fatalf("after the marker: resume from %d, want 9", got)
	}
	if cur.seen(bound("b", 10)) {
		t.Fatal("an event after the marker counted as seen")
	}
	cur.delivered(bound("b", 10))
	if got := cur.resumeFrom(); got != 9 {
		t.Fatalf("after b@10: resume from %d, want 9 (revision 10 asked again)", got)
	}
}

// A stream cut off for falling behind resumes at once from the server's
// resume revision (or the cursor's own, if earlier), and fn sees every
// event once and in order. The backoff is an hour: a resume that waited
// would end the test on its deadline instead.
func TestWatchResumesAfterFallingBehind(t *testing.T) {
	log := []*berthv1.BindingEvent{
		bound("a", 5),
		bound("b", 6), bound("c", 6), bound("d", 6),
		bound("e", 7),
		unbound("a", 8),
		bound("f", 9),
	}
	want := []string{"+a@5", "+b@6", "+c@6", "+d@6", "+e@7", "-a@8", "+f@9"}
	tests := []struct {
		name      string
		fault     berthtest.WatchFault
		wantFroms []int64
	}{
		{
			name: "cut off inside a revision: the server's resume is before it",
			fault: func(stream, sent int) error {
				if stream == 0 && sent == 3 { // after a@5, b@6, c@6
					return berthtest.FellBehindError(5)
				}
				return nil
			},
			wantFroms: []int64{4, 5},
		},
		{
			name: "the server sent more than arrived: the cursor's own point wins",
			fault: func(stream, sent int) error {
				if stream == 0 && sent == 5 { // after e@7; the server counts a@8 as sent
					return berthtest.FellBehindError(8)
				}
				return nil
			},
			wantFroms: []int64{4, 6},
		},
		{
			name: "the server's resume is older than the cursor's: seen events are skipped",
			fault: func(stream, sent int) error {
				if stream == 0 && sent == 5 {
					return berthtest.FellBehindError(5)
				}
				return nil
			},
			wantFroms: []int64{4, 5},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := berthtest.Start(t)
			srv.AddEvents(log...)
			srv.SetWatchFault(tt.fault)
			c, err := Dial(t.Context(), srv.Addr, WithBackoff(time.Hour, time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			var got []string
			if err := c.WatchBindings(ctx, 4, collectUntil(want[len(want)-1], &got)); !errors.Is(err, errStop) {
				t.Fatalf("WatchBindings = %v, want fn's error", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("events (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantFroms, srv.WatchRequests()); diff != "" {
				t.Errorf("from revisions (-want,+got):\n%s", diff)
			}
		})
	}
}
