package replica

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/berth-io/berth/scheduler"
	"github.com/berth-io/berth/store"
)

// BenchmarkSnapshotLoad reads and loads the start-up snapshot named by
// BERTH_BENCH_SNAPSHOT into an empty core, as a restart does beside the
// etcd open; it reports the CPU seconds each load takes (cpu-s/op), which
// the machine's other work does not change the way it changes the time.
// A snapshot of the smaller check is left by
//
//	berth load --nodes 20000 --pods 200000 --restarts=false --data-dir D
//
// and one restart of "berth serve --data-dir D/data" on it, in
// D/data/berth-startup.snap.
func BenchmarkSnapshotLoad(b *testing.B) {
	path := os.Getenv("BERTH_BENCH_SNAPSHOT")
	if path == "" {
		b.Skip("BERTH_BENCH_SNAPSHOT names no snapshot file")
	}
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		ctx, cancel := context.WithCancel(context.Background())
		br, _ := snapshotBridge(ctx, b)
		began := cpuTime()
		b.StartTimer()
		sn, err := store.ReadSnapshot(path, "", nil)
		if err != nil {
			b.Fatal(err)
		}
		sn.Load(br)
		b.StopTimer()
		cpu += cpuTime() - began
		cancel()
		b.StartTimer()
	}
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
}

// snapshotBridge is a bridge into an empty core that owns no shard, about
// to be loaded from a start-up snapshot as a restart's is.
func snapshotBridge(ctx context.Context, tb testing.TB) (*bridge, *scheduler.Scheduler) {
	tb.Helper()
	sched, err := scheduler.New(ctx, scheduler.Config{OwnNone: true, Logger: zap.NewNop()}, &storeCommitter{})
	if err != nil {
		tb.Fatal(err)
	}
	return &bridge{sched: sched, ready: make(chan struct{}), applied: func(int64, int) {}, fromSnapshot: true}, sched
}

// cpuTime is the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
