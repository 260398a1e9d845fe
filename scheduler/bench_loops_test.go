package scheduler

import (
	"context"
	"fmt"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-io/berth/scheduler/framework"
)

// watchCommitter stands in for the store: Bind succeeds at once and the
// bound pod comes back through one goroutine, as the store's watch brings
// it to the replica, so the loops contend with confirmations as they do in
// a server.
type watchCommitter struct {
	s         *Scheduler
	confirmed chan *framework.Pod
	bound     atomic.Int64
	// applying is the time the watch spent applying confirmations.
	applying atomic.Int64
	// target and reached signal the benchmark once bound reaches target.
	target  atomic.Int64
	reached chan struct{}
}

func (c *watchCommitter) Bind(_ context.Context, p *framework.Pod, node string) error {
	b := *p
	b.NodeName, b.Phase = node, framework.PodRunning
	c.confirmed <- &b
	if c.bound.Add(1) == c.target.Load() {
		c.reached <- struct{}{}
	}
	return nil
}

func (*watchCommitter) RecordUnschedulable(context.Context, *framework.Pod, Unschedulable) error {
	return nil
}

func (*watchCommitter) Evict(context.Context, *framework.Pod, string, []*framework.Pod) error {
	return nil
}

// watch applies confirmations until ctx ends.
func (c *watchCommitter) watch(ctx context.Context) {
	for {
		select {
		case p := <-c.confirmed:
			start := time.Now()
			c.s.UpsertPod(p)
			c.applying.Add(int64(time.Since(start)))
		case <-ctx.Done():
			return
		}
	}
}

// loopCluster is BenchmarkSchedule's cluster (scheduler/algorithm) in a
// real Scheduler: nodes of 32 cores, 128Gi and 110 pods, each running ten
// pods of mixed sizes, every tenth with a PreferNoSchedule taint.
func loopCluster(b *testing.B, numNodes, loops, parallelism int, reg prometheus.Registerer) (*Scheduler, *watchCommitter) {
	b.Helper()
	c := &watchCommitter{confirmed: make(chan *framework.Pod, 1024), reached: make(chan struct{}, 1)}
	s, err := New(context.Background(), Config{Shards: loops, Parallelism: parallelism, Metrics: NewMetrics(reg)}, c)
	if err != nil {
		b.Fatal(err)
	}
	c.s = s
	for i := range numNodes {
		name := fmt.Sprintf("node-%05d", i)
		n := &framework.Node{Name: name,
			Labels: map[string]string{"kubernetes.io/hostname": name, "zone": fmt.Sprint("z", i%3)},
			Allocatable: framework.ResourceList{framework.ResourceCPU: 32000, framework.ResourceMemory: 128 << 30,
				framework.ResourcePods: 110}}
		if i%10 == 0 {
			n.Taints = []framework.Taint{{Key: "spot", Effect: framework.TaintEffectPreferNoSchedule}}
		}
		s.UpsertNode(n)
		for j := range 10 {
			p := loopPod(fmt.Sprintf("n%d-p%d", i, j), int64(100+(i+j)%7*250), int64(1+(i*j)%5)<<29)
			p.NodeName, p.Phase = name, framework.PodRunning
			s.UpsertPod(p)
		}
	}
	return s, c
}

func loopPod(name string, milliCPU, memory int64) *framework.Pod {
	return &framework.Pod{Namespace: "bench", Name: name, UID: name, Phase: framework.PodPending,
		Containers: []framework.Container{{Name: "c", Requests: framework.ResourceList{
			framework.ResourceCPU: milliCPU, framework.ResourceMemory: memory}}}}
}

// loopPodKinds are BenchmarkLoops' pods, by how much of a cycle the
// signature memo spares:
//   - same: every pod alike (a deployment's replicas). After the first, a
//     cycle re-scores only the nodes changed since the last and reads the
//     winner from the signature's ranked tree, so keeping each loop's
//     snapshot and tree current is most of its work, and every loop does
//     that for every other loop's placements too;
//   - unique: every pod asks for a different amount of memory, so no two
//     share a signature and each cycle filters and scores its window;
//   - spread: alike, with a hard zone spread, which keeps the walk over the
//     window and holds the placement lock exclusively at assumption.
var loopPodKinds = []string{"same", "unique", "spread"}

// loopPodOfKind is the seq-th pod the benchmark submits, of one of
// loopPodKinds.
func loopPodOfKind(kind string, seq int) *framework.Pod {
	name := fmt.Sprint("p", seq)
	switch kind {
	case "unique":
		return loopPod(name, 100, 1<<28+int64(seq)*1024)
	case "spread":
		p := loopPod(name, 100, 1<<28)
		p.Labels = map[string]string{"app": "web"}
		p.TopologySpreadConstraints = []framework.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone",
			WhenUnsatisfiable: framework.DoNotSchedule, LabelSelector: &framework.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
		return p
	}
	return loopPod(name, 100, 1<<28)
}

// BenchmarkLoops runs the real shard loops over 5,000 nodes: every
// iteration submits a batch of pending pods and waits until all are bound.
// Pods spread over the loops by hash, so with two loops each schedules
// about half. pods/s is the throughput of the loops together.
func BenchmarkLoops(b *testing.B) {
	const numNodes, batch = 5000, 1000
	for _, kind := range loopPodKinds {
		for _, cfg := range []struct{ loops, parallelism int }{{1, 1}, {2, 1}, {1, 2}} {
			b.Run(fmt.Sprintf("nodes=%d/pods=%s/loops=%d/parallelism=%d", numNodes, kind, cfg.loops, cfg.parallelism), func(b *testing.B) {
				benchLoops(b, kind, numNodes, batch, cfg.loops, cfg.parallelism)
			})
		}
	}
}

func benchLoops(b *testing.B, kind string, numNodes, batch, loops, parallelism int) {
	reg := prometheus.NewRegistry()
	s, c := loopCluster(b, numNodes, loops, parallelism, reg)
	// The watch outlives the loops, so no binding waits on it.
	runCtx, stopRun := context.WithCancel(context.Background())
	watchCtx, stopWatch := context.WithCancel(context.Background())
	var run, watch sync.WaitGroup
	watch.Add(1)
	go func() { defer watch.Done(); c.watch(watchCtx) }()
	run.Add(1)
	go func() { defer run.Done(); s.Run(runCtx) }()
	defer func() { stopRun(); run.Wait(); stopWatch(); watch.Wait() }()

	var busy, cpu, lockWait time.Duration
	round := 0
	for b.Loop() {
		// Submitting is the store's work, not the loops': only the
		// time from the first pod queued to the last bound counts.
		b.StopTimer()
		pods := make([]*framework.Pod, batch)
		for i := range pods {
			pods[i] = loopPodOfKind(kind, round*batch+i)
		}
		round++
		c.target.Add(int64(batch))
		b.StartTimer()
		start, cpuStart, waitStart := time.Now(), processCPU(b), mutexWait()
		for _, p := range pods {
			s.UpsertPod(p)
		}
		<-c.reached
		busy += time.Since(start)
		cpu += processCPU(b) - cpuStart
		lockWait += mutexWait() - waitStart
	}
	b.ReportMetric(float64(b.N*batch)/busy.Seconds(), "pods/s")
	// CPU per pod does not depend on how much of the machine others
	// take, so it tells whether more loops cost more work per pod.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*batch), "cpu-µs/pod")
	// Time goroutines spent blocked on mutexes, loops and binding
	// cycles alike: how much the loops and their bindings queue on
	// one another's locks.
	b.ReportMetric(float64(lockWait.Microseconds())/float64(b.N*batch), "lock-wait-µs/pod")
	// Every cycle's wall time (snapshot, filter, score, assume) summed
	// over the loops, and the watch's time applying confirmations. Loops
	// that share the work leave the sum where one loop had it; for pods
	// all alike it grows by about two fifths with two loops, as each
	// folds in the other's placements and waits on the cache's lock.
	b.ReportMetric(attemptSeconds(b, reg)*1e6/float64(b.N*batch), "cycle-µs/pod")
	b.ReportMetric(float64(c.applying.Load())/1e3/float64(b.N*batch), "watch-µs/pod")
	b.ReportMetric(0, "ns/op")
}

// attemptSeconds is the time of every scheduling cycle so far, from the
// core's attempt histogram.
func attemptSeconds(b *testing.B, reg *prometheus.Registry) float64 {
	families, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != "berth_scheduler_attempt_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	return sum
}

// processCPU is the user and system time the process used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// mutexWait is the time the process's goroutines spent blocked on
// sync.Mutex and sync.RWMutex so far.
func mutexWait() time.Duration {
	sample := []metrics.Sample{{Name: "/sync/mutex/wait/total:seconds"}}
	metrics.Read(sample)
	return time.Duration(sample[0].Value.Float64() * float64(time.Second))
}
