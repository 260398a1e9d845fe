package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// BenchmarkCreatePodsWatched is BenchmarkCreatePods at 256 writers while a
// replica-style watch of the pods prefix consumes every event, with and
// without previous values: the cost a running replica adds to each write.
func BenchmarkCreatePodsWatched(b *testing.B) {
	for _, prevKV := range []bool{false, true} {
		b.Run(fmt.Sprintf("prevkv=%v", prevKV), func(b *testing.B) {
			s := openStore(b, sharedEtcd(b), func(*Config) {})
			ns := fmt.Sprintf("bench-%d", benchRun.Add(1))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			opts := []clientv3.OpOption{clientv3.WithPrefix()}
			if prevKV {
				opts = append(opts, clientv3.WithPrevKV())
			}
			var seen atomic.Int64
			wch := s.client.Watch(ctx, s.keys.pods+ns+"/", opts...)
			watching := make(chan struct{})
			go func() {
				defer close(watching)
				for resp := range wch {
					seen.Add(int64(len(resp.Events)))
					if seen.Load() >= int64(b.N) {
						return
					}
				}
			}()
			var idx atomic.Int64
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range 256 {
				wg.Go(func() {
					for {
						i := idx.Add(1)
						if i > int64(b.N) {
							return
						}
						if r := s.CreatePods(ctx, []*berthv1.Pod{pendingPod(ns, fmt.Sprintf("p-%d", i), "")})[0]; r.Err != nil {
							b.Error(r.Err)
							return
						}
					}
				})
			}
			wg.Wait()
			<-watching
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "pods/s")
		})
	}
}
