package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy/adapter"
	"google.golang.org/grpc"
)

// putKeys writes n keys under prefix, from first on, and returns the
// revision of the last write.
func putKeys(t *testing.T, s *Store, prefix string, first, n int) int64 {
	t.Helper()
	var rev int64
	for i := first; i < first+n; i += 100 {
		ops := make([]clientv3.Op, 0, 100)
		for j := i; j < min(i+100, first+n); j++ {
			ops = append(ops, clientv3.OpPut(fmt.Sprintf("%sk%05d", prefix, j), fmt.Sprintf("value of %d", j)))
		}
		resp, err := s.client.Txn(testCtx(t)).Then(ops...).Commit()
		if err != nil {
			t.Fatal(err)
		}
		rev = resp.Header.Revision
	}
	return rev
}

// listPages reads [prefix, end of prefix) with rangePages, returning the
// keys in the order read, the pages' sizes and the revision read at.
func listPages(t *testing.T, s *Store, prefix string, rev int64, pageBytes int) (keys []string, pages []int, read int64) {
	t.Helper()
	read, err := s.rangePages(testCtx(t), "test", prefix, clientv3.GetPrefixRangeEnd(prefix), rev, pageBytes, func(kvs []*mvccpb.KeyValue) {
		pages = append(pages, len(kvs))
		for _, kv := range kvs {
			keys = append(keys, string(kv.Key))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys, pages, read
}

// Streamed, in-process or over gRPC, a range is read whole, in key order,
// at the revision asked for (or the current one), in pages of about the
// size asked for: the listing's contract whichever way it is read.
func TestRangePagesStreamsTheRangeAtOneRevision(t *testing.T) {
	for _, path := range []string{"in-process", "grpc"} {
		t.Run(path, func(t *testing.T) {
			s := openStore(t, sharedEtcd(t), func(c *Config) {
				if path == "grpc" {
					c.Client = nil
				}
			})
			prefix := s.keys.pods
			const n = 600 // RangeStream's chunks start at 10 keys and double: several of them
			at := putKeys(t, s, prefix, 0, n)
			putKeys(t, s, prefix, n, 50) // after the revision listed below

			keys, pages, read := listPages(t, s, prefix, at, 4<<10)
			if read != at || len(keys) != n {
				t.Fatalf("read %d keys at revision %d, want %d at %d", len(keys), read, n, at)
			}
			for i := 1; i < len(keys); i++ {
				if keys[i-1] >= keys[i] {
					t.Fatalf("key %q read after %q", keys[i], keys[i-1])
				}
			}
			if len(pages) < 3 {
				t.Errorf("%d pages of 4 KiB for %d keys of about 25 bytes, want several", len(pages), n)
			}
			if s.noRangeStream.Load() {
				t.Error("read in pages: RangeStream was not used")
			}

			keys, _, read = listPages(t, s, prefix, 0, 1<<20)
			if len(keys) != n+50 || read < at {
				t.Errorf("current revision: read %d keys at %d, want %d at a revision after %d", len(keys), read, n+50, at)
			}
		})
	}
}

// An etcd without RangeStream (before 3.7) gets the same listing in pages,
// and is not asked to stream again.
func TestRangePagesFallsBackWithoutRangeStream(t *testing.T) {
	e := sharedEtcd(t)
	s := openStore(t, e, func(c *Config) {
		c.Client = e.Client()
		// etcd's own in-process adapter answers RangeStream Unimplemented,
		// as a 3.6 server does.
		c.Client.KV = clientv3.NewKVFromKVClient(adapter.KvServerToKvClient(v3rpc.NewQuotaKVServer(e.etcd.Server)), c.Client)
	})
	s.chunk = 7
	prefix := s.keys.pods
	at := putKeys(t, s, prefix, 0, 100)
	putKeys(t, s, prefix, 100, 10)

	keys, pages, read := listPages(t, s, prefix, at, 1)
	if !s.noRangeStream.Load() {
		t.Fatal("RangeStream's Unimplemented not taken as its absence")
	}
	if read != at || len(keys) != 100 || !slices.IsSorted(keys) {
		t.Fatalf("read %d keys at revision %d (sorted: %v), want 100 at %d", len(keys), read, slices.IsSorted(keys), at)
	}
	if len(pages) < 100/7 {
		t.Errorf("%d pages of at most 7 keys for 100 keys", len(pages))
	}
}

// A listing at a compacted revision fails as it did when read in pages.
func TestRangePagesStreamAtCompactedRevision(t *testing.T) {
	s := openStore(t, ownEtcd(t, t.TempDir(), ""))
	prefix := s.keys.pods
	old := putKeys(t, s, prefix, 0, 20)
	last := putKeys(t, s, prefix, 0, 20)
	if _, err := s.client.Compact(testCtx(t), last); err != nil {
		t.Fatal(err)
	}
	_, err := s.rangePages(testCtx(t), "test", prefix, clientv3.GetPrefixRangeEnd(prefix), old, 1<<20, func([]*mvccpb.KeyValue) {})
	if !errors.Is(err, ErrCompacted) {
		t.Fatalf("listing at compacted revision %d: %v, want ErrCompacted", old, err)
	}
}

// stalledKV streams nothing until its caller gives up.
type stalledKV struct{ pb.KVClient }

func (stalledKV) RangeStream(ctx context.Context, _ *pb.RangeRequest, _ ...grpc.CallOption) (pb.KV_RangeStreamClient, error) {
	p := &rangePipe{ctx: ctx, chunks: make(chan *pb.RangeStreamResponse), done: make(chan struct{})}
	go func() {
		<-ctx.Done()
		p.err = ctx.Err()
		close(p.done)
	}()
	return rangePipeClient{p}, nil
}

// A stream that stops sending fails the listing once a chunk is overdue,
// as an unanswered page does.
func TestRangePagesStreamStalled(t *testing.T) {
	e := sharedEtcd(t)
	s := openStore(t, e, func(c *Config) {
		c.RequestTimeout = 200 * time.Millisecond
		c.Client = e.Client()
		c.Client.KV = clientv3.NewKVFromKVClient(stalledKV{e.KVClient()}, c.Client)
	})
	prefix := s.keys.pods
	_, err := s.rangePages(testCtx(t), "test", prefix, clientv3.GetPrefixRangeEnd(prefix), 0, 1<<20, func([]*mvccpb.KeyValue) {
		t.Error("a page from a stalled stream")
	})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("stalled stream: %v, want ErrUnavailable", err)
	}
	if s.noRangeStream.Load() {
		t.Error("a stalled stream taken for a server without RangeStream")
	}
}

// The time the caller takes with a page is not held against the stream:
// a page written out slowly (a snapshot to a slow disk) does not fail the
// listing that a stalled etcd would.
func TestRangePagesSlowConsumerIsNotAStall(t *testing.T) {
	const timeout = 100 * time.Millisecond
	s := openStore(t, sharedEtcd(t), func(c *Config) { c.RequestTimeout = timeout })
	prefix := s.keys.pods
	putKeys(t, s, prefix, 0, 600)
	pages, keys := 0, 0
	_, err := s.rangePages(testCtx(t), "test", prefix, clientv3.GetPrefixRangeEnd(prefix), 0, 4<<10, func(kvs []*mvccpb.KeyValue) {
		pages++
		keys += len(kvs)
		if pages == 1 {
			<-time.After(3 * timeout) // a slow consumer, not a wait for anything
		}
	})
	if err != nil || keys != 600 || pages < 2 {
		t.Fatalf("with a slow first page: %d keys in %d pages, %v; want 600 in several", keys, pages, err)
	}
}
