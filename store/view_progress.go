package store

import (
	"context"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// A placement's view only moves when the sync watch delivers a change in
// the cached range, but a binding may need a view past a revision that
// wrote nothing there: the claim of its shard (solo.go). With no other
// change coming, that binding would wait forever. So a writer that needs a
// newer view says so (WantView), and the sync then asks etcd for progress
// notices on its watch until one shows the revision: etcd sends one only
// after every change up to its revision, which makes that revision the
// view. A sync resuming from a start-up snapshot waits for its catch-up
// target the same way.
type viewWants struct {
	want   atomic.Int64  // the newest view a writer waits for
	seen   atomic.Int64  // the newest revision the sync watch has shown complete
	signal chan struct{} // a new want; buffered 1
}

func newViewWants() *viewWants { return &viewWants{signal: make(chan struct{}, 1)} }

// WantView asks the sync to show, soon, a view of at least rev even if
// nothing in the cached range changes (Applied is then called with it).
func (s *Store) WantView(rev int64) {
	v := s.views
	for {
		cur := v.want.Load()
		if rev <= cur || v.want.CompareAndSwap(cur, rev) {
			break
		}
	}
	if rev > v.seen.Load() {
		select {
		case v.signal <- struct{}{}:
		default:
		}
	}
}

// AwaitView asks the sync for a view of at least rev (WantView) and waits
// until it has delivered every change up to rev, or ctx ends.
func (s *Store) AwaitView(ctx context.Context, rev int64) error {
	s.WantView(rev)
	tick := time.NewTicker(awaitViewPoll)
	defer tick.Stop()
	for s.views.seen.Load() < rev {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// awaitViewPoll is how often AwaitView looks: it serves a stop, where a
// few milliseconds do not matter and a wake-up per change would.
const awaitViewPoll = 5 * time.Millisecond

// shown records that the sync watch has delivered every change up to rev.
func (v *viewWants) shown(rev int64) { v.seen.Store(rev) }

// proveViews asks etcd for progress notices on wctx's watch stream, which
// has shown every change up to seen, while a wanted view is ahead of what
// it has shown, until stop is called. etcd ignores the request while the
// watch is still replaying history, hence the retries.
func (s *Store) proveViews(wctx context.Context, seen int64) (stop func()) {
	v := s.views
	v.seen.Store(seen)
	ctx, cancel := context.WithCancel(wctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			if v.want.Load() > v.seen.Load() {
				if err := s.client.RequestProgress(ctx); err != nil && ctx.Err() == nil {
					s.log.Debug("store sync: progress request for a wanted view", zap.Error(err))
				}
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				case <-v.signal:
				}
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-v.signal:
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
