package store

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// A restart's listing is most of its time to first binding, and at a
// million pods most of the listing is decoding protobuf, not reading
// etcd. So the listing reads every kind at once (one revision for all),
// and each kind's pages are decoded on all cores while the next page is
// read.

// listForSync reads what h is reset with: budgets first, at the current
// revision, then every other kind at that same revision, concurrently.
// Undecodable values are logged and skipped.
func (s *Store) listForSync(ctx context.Context, h SyncHandler) (*syncListing, error) {
	l := &syncListing{nodeRevs: map[string]int64{}}
	var err error
	l.rev, err = listDecoded(ctx, s, "budgets", s.keys.budgets, 0, decodeBudget,
		func(b *berthv1.DisruptionBudget, _ *mvccpb.KeyValue) { l.budgets = append(l.budgets, b) })
	if err != nil {
		return nil, err
	}
	// Each goroutine fills its own fields of l; Wait publishes them.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		_, err := listDecoded(gctx, s, "nodes", s.keys.nodes, l.rev, decodeNode, func(n *berthv1.Node, kv *mvccpb.KeyValue) {
			l.nodes = append(l.nodes, n)
			l.nodeRevs[n.Name] = kv.ModRevision
		})
		return err
	})
	if _, ok := h.(PodGroupHandler); ok {
		g.Go(func() error {
			_, err := listDecoded(gctx, s, "pod groups", s.keys.groups, l.rev, decodePodGroup,
				func(g *berthv1.PodGroup, _ *mvccpb.KeyValue) { l.groups = append(l.groups, g) })
			return err
		})
	}
	g.Go(func() error {
		if _, ok := h.(StoredPodHandler); ok {
			_, err := s.rangePages(gctx, "sync list pods", s.keys.pods, clientv3.GetPrefixRangeEnd(s.keys.pods), l.rev, syncPageBytes,
				func(kvs []*mvccpb.KeyValue) {
					for _, kv := range kvs {
						l.pods = append(l.pods, PodRecord{ModRevision: kv.ModRevision, Value: kv.Value})
					}
				})
			return err
		}
		_, err := listDecoded(gctx, s, "pods", s.keys.pods, l.rev, decodePod, func(p *berthv1.Pod, kv *mvccpb.KeyValue) {
			l.pods = append(l.pods, PodRecord{Pod: p, ModRevision: kv.ModRevision, Value: kv.Value})
		})
		return err
	})
	if _, ok := h.(AssumptionHandler); ok {
		g.Go(func() error {
			_, err := listDecoded(gctx, s, "assumptions", s.keys.assumes, l.rev, decodeAssumption,
				func(a Assumption, _ *mvccpb.KeyValue) { l.assumptions = append(l.assumptions, a) })
			return err
		})
	}
	if _, ok := h.(NodeLeaseHandler); ok {
		g.Go(func() error {
			_, err := s.rangeAt(gctx, "sync list node leases", s.keys.nodeLeases, clientv3.GetPrefixRangeEnd(s.keys.nodeLeases), l.rev,
				func(kv *mvccpb.KeyValue) { l.leased = append(l.leased, s.keys.nodeLeaseName(string(kv.Key))) })
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return l, nil
}

// decodedPage is one page of a listing on its way through the decoders:
// done closes once vals and ok are filled.
type decodedPage[T any] struct {
	kvs  []*mvccpb.KeyValue
	vals []T
	ok   []bool
	done chan struct{}
}

// listDecoded ranges over prefix at rev (0: current, returned) for a sync
// listing of what, decoding each value for keep, which is called in key
// order from one goroutine; an undecodable value is logged and skipped.
// Pages are decoded by a worker per core while the next is read; about two
// pages per worker are in flight, which bounds the memory held by values
// not yet decoded.
func listDecoded[T any](ctx context.Context, s *Store, what, prefix string, rev int64, decode func([]byte) (T, error), keep func(T, *mvccpb.KeyValue)) (int64, error) {
	workers := runtime.GOMAXPROCS(0)
	jobs := make(chan *decodedPage[T], workers)
	inOrder := make(chan *decodedPage[T], workers)
	var decoders sync.WaitGroup
	for range workers {
		decoders.Go(func() {
			for p := range jobs {
				decodePageOf(s, p, what, decode)
			}
		})
	}
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		for p := range inOrder {
			<-p.done
			for i, kv := range p.kvs {
				if p.ok[i] {
					keep(p.vals[i], kv)
				}
			}
		}
	}()
	rev, err := s.rangePages(ctx, "sync list "+what, prefix, clientv3.GetPrefixRangeEnd(prefix), rev, syncPageBytes, func(kvs []*mvccpb.KeyValue) {
		p := &decodedPage[T]{kvs: kvs, done: make(chan struct{})}
		inOrder <- p
		jobs <- p
	})
	close(jobs)
	close(inOrder)
	<-kept
	decoders.Wait()
	return rev, err
}

// decodePageOf decodes one page, logging what it cannot.
func decodePageOf[T any](s *Store, p *decodedPage[T], what string, decode func([]byte) (T, error)) {
	p.vals, p.ok = make([]T, len(p.kvs)), make([]bool, len(p.kvs))
	for i, kv := range p.kvs {
		v, err := decode(kv.Value)
		if err != nil {
			s.log.Warn("store sync: skipping undecodable "+strings.TrimSuffix(what, "s"), zap.ByteString("key", kv.Key), zap.Error(err))
			continue
		}
		p.vals[i], p.ok[i] = v, true
	}
	close(p.done)
}

// rangeAt reads every key in [start, end) in chunks, all at revision rev (0:
// the current revision, which it returns), calling fn for each in key order.
// Each chunk has its own RequestTimeout, so large listings are not cut short.
func (s *Store) rangeAt(ctx context.Context, op, start, end string, rev int64, fn func(*mvccpb.KeyValue)) (int64, error) {
	return s.rangePages(ctx, op, start, end, rev, scanPageBytes, func(kvs []*mvccpb.KeyValue) {
		for _, kv := range kvs {
			fn(kv)
		}
	})
}

// rangePages is rangeAt a page at a time, aiming at pages of pageBytes: fn
// gets each chunk's key-values, in key order, and may keep the slice. It
// streams the range (rangestream.go) unless the etcd cannot.
func (s *Store) rangePages(ctx context.Context, op, start, end string, rev int64, pageBytes int, fn func([]*mvccpb.KeyValue)) (int64, error) {
	if !s.noRangeStream.Load() {
		read, err := s.streamPages(ctx, op, start, end, rev, pageBytes, fn)
		if !errors.Is(err, errNoRangeStream) {
			return read, err
		}
		if !s.noRangeStream.Swap(true) {
			s.log.Info("store: etcd has no RangeStream (before 3.7): ranges are read in pages, each counting the rest of its range")
		}
	}
	chunk := s.chunk
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(int64(chunk))}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		cctx, cancel := s.bound(ctx)
		resp, err := s.client.Get(cctx, start, opts...)
		cancel()
		if err != nil {
			return 0, s.callError(ctx, op, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		size := 0
		for _, kv := range resp.Kvs {
			size += len(kv.Key) + len(kv.Value)
		}
		if len(resp.Kvs) > 0 {
			fn(resp.Kvs)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		chunk = nextChunkFor(chunk, size, pageBytes)
	}
}
