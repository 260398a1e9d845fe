package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkFullListing measures the range scan a replica's start-up Sync
// and a fresh binding watch make over every pod key, at several store
// sizes, through the in-process client that berth serve uses. The largest
// takes about 30 s to fill.
func BenchmarkFullListing(b *testing.B) {
	for _, n := range []int{20_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			s := openStore(b, sharedEtcd(b))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			value := make([]byte, 300) // about an encoded pod
			for i := 0; i < n; i += 500 {
				ops := make([]clientv3.Op, 0, 500)
				for j := i; j < min(i+500, n); j++ {
					ops = append(ops, clientv3.OpPut(fmt.Sprintf("%sns/pod-%07d", s.keys.pods, j), string(value)))
				}
				if _, err := s.client.Txn(ctx).Then(ops...).Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				seen := 0
				if _, err := s.rangeAt(ctx, "bench", s.keys.pods, clientv3.GetPrefixRangeEnd(s.keys.pods), 0, func(*mvccpb.KeyValue) { seen++ }); err != nil {
					b.Fatal(err)
				}
				if seen != n {
					b.Fatalf("listed %d keys, want %d", seen, n)
				}
			}
		})
	}
}
