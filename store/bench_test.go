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
		b.Run(fmt.Sprintf("writers=%d/workers=%d", bc.writers, bc.workers), func(b *testing.B) {
			s := openStore(b, sharedEtcd(b), func(c *Config) { c.CommitWorkers = bc.workers })
			ns := fmt.Sprintf("bench-%d", benchRun.Add(1))
			run := runCreates(b, s, bc.writers, func(i int64) []*berthv1.Pod {
				return []*berthv1.Pod{pendingPod(ns, fmt.Sprintf("p-%d", i), "")}
			})
			b.ReportMetric(float64(b.N)/run.elapsed.Seconds(), "pods/s")
			run.reportUnitsPerTxn(b)
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
			run := runCreates(b, s, inFlight, func(call int64) []*berthv1.Pod {
				pods := make([]*berthv1.Pod, perCall)
				for i := range pods {
					name := fmt.Sprintf("p-%d-%d", call, i)
					uid := ""
					if uids == "client" {
						uid = "u-" + name
					}
					pods[i] = pendingPod("ns", name, uid)
				}
				return pods
			})
			pods := float64(b.N * perCall)
			b.ReportMetric(pods/run.elapsed.Seconds(), "pods/s")
			b.ReportMetric(float64(run.cpu.Microseconds())/pods, "cpu-µs/pod")
			run.reportUnitsPerTxn(b)
		})
	}
}

// createRun is what runCreates measured.
type createRun struct {
	elapsed, cpu time.Duration // wall time, and the process's CPU (etcd's included)
	txns, units  int64         // group commits sent, and the units they carried
}

func (r createRun) reportUnitsPerTxn(b *testing.B) {
	if r.txns > 0 {
		b.ReportMetric(float64(r.units)/float64(r.txns), "units/txn")
	}
}

// runCreates makes b.N CreatePods calls from `callers` goroutines, call i
// creating the pods batch(i) returns, timed from after the timer reset;
// any pod not created fails the benchmark.
func runCreates(b *testing.B, s *Store, callers int, batch func(i int64) []*berthv1.Pod) createRun {
	var idx, failures atomic.Int64
	txns0, units0 := s.groupCommit.txns.Load(), s.groupCommit.unitsSent.Load()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.ResetTimer()
	cpu0, start := processCPU(), time.Now()
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for {
				i := idx.Add(1)
				if i > int64(b.N) {
					return
				}
				for _, r := range s.CreatePods(ctx, batch(i)) {
					if r.Err != nil {
						failures.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	run := createRun{elapsed: time.Since(start), cpu: processCPU() - cpu0}
	b.StopTimer()
	if n := failures.Load(); n > 0 {
		b.Fatalf("%d creates failed", n)
	}
	run.txns = s.groupCommit.txns.Load() - txns0
	run.units = s.groupCommit.unitsSent.Load() - units0
	return run
}

// processCPU is the user and system time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
