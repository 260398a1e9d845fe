package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

var benchRun atomic.Int64

// BenchmarkCreatePods measures group-committed pod creation against the
// embedded etcd: `writers` goroutines each create one pod per call, as
// SubmitPod handlers do. Reports pods/s and the average units per Txn.
func BenchmarkCreatePods(b *testing.B) {
	for _, bc := range []struct{ writers, workers int }{
		{1, defaultWorkers}, {64, 1}, {64, 2}, {64, defaultWorkers}, {64, 8}, {256, defaultWorkers},
	} {
		writers := bc.writers
		b.Run(fmt.Sprintf("writers=%d/workers=%d", writers, bc.workers), func(b *testing.B) {
			s := openStore(b, sharedEtcd(b), func(c *Config) { c.CommitWorkers = bc.workers })
			ns := fmt.Sprintf("bench-%d", benchRun.Add(1))
			var idx atomic.Int64
			var failures atomic.Int64
			txns0, units0 := s.groupCommit.txns.Load(), s.groupCommit.unitsSent.Load()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for range writers {
				wg.Go(func() {
					for {
						i := idx.Add(1)
						if i > int64(b.N) {
							return
						}
						p := pendingPod(ns, fmt.Sprintf("p-%d", i), "")
						if r := s.CreatePods(ctx, []*berthv1.Pod{p})[0]; r.Err != nil {
							failures.Add(1)
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if n := failures.Load(); n > 0 {
				b.Fatalf("%d creates failed", n)
			}
			txns := s.groupCommit.txns.Load() - txns0
			units := s.groupCommit.unitsSent.Load() - units0
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "pods/s")
			if txns > 0 {
				b.ReportMetric(float64(units)/float64(txns), "units/txn")
			}
		})
	}
}
