package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
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

// BenchmarkCreatePodsBatched loads pods the way `berth load` does (1,000
// per CreatePods call, 8 calls in flight) into a fresh etcd, once with the
// uids Berth assigns (one key per pod) and once with the client's own (a
// uid index key beside each pod). One op is one call. Reports pods/s,
// units per Txn and the process's CPU per pod (etcd's included).
func BenchmarkCreatePodsBatched(b *testing.B) {
	const perCall, inFlight = 1000, 8
	for _, uids := range []string{"assigned", "client"} {
		b.Run("uids="+uids, func(b *testing.B) {
			s := openStore(b, ownEtcd(b, b.TempDir(), ""))
			var idx atomic.Int64
			var failures atomic.Int64
			txns0, units0 := s.groupCommit.txns.Load(), s.groupCommit.unitsSent.Load()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			b.ResetTimer()
			cpu0, start := processCPU(), time.Now()
			var wg sync.WaitGroup
			for range inFlight {
				wg.Go(func() {
					for {
						call := idx.Add(1)
						if call > int64(b.N) {
							return
						}
						pods := make([]*berthv1.Pod, perCall)
						for i := range pods {
							name := fmt.Sprintf("p-%d-%d", call, i)
							uid := ""
							if uids == "client" {
								uid = "u-" + name
							}
							pods[i] = pendingPod("ns", name, uid)
						}
						for _, r := range s.CreatePods(ctx, pods) {
							if r.Err != nil {
								failures.Add(1)
							}
						}
					}
				})
			}
			wg.Wait()
			elapsed, cpu := time.Since(start), processCPU()-cpu0
			b.StopTimer()
			if n := failures.Load(); n > 0 {
				b.Fatalf("%d creates failed", n)
			}
			pods := float64(b.N * perCall)
			b.ReportMetric(pods/elapsed.Seconds(), "pods/s")
			b.ReportMetric(float64(cpu.Microseconds())/pods, "cpu-µs/pod")
			if txns := s.groupCommit.txns.Load() - txns0; txns > 0 {
				b.ReportMetric(float64(s.groupCommit.unitsSent.Load()-units0)/float64(txns), "units/txn")
			}
		})
	}
}

// processCPU is the user and system time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
