package scheduler

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
)

// cycleRecorder is a Tracer that counts, per pod uid, cycles started and
// ended, and checks the cycle's context reaches the plugins' side of the
// loop (it is what a span would ride on).
type cycleRecorder struct {
	mu             sync.Mutex
	started, ended map[string]int
}

type cycleKey struct{}

func (r *cycleRecorder) StartCycle(ctx context.Context, pod *framework.Pod) (context.Context, func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started[pod.UID]++
	return context.WithValue(ctx, cycleKey{}, pod.UID), func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.ended[pod.UID]++
	}
}

// bindingRecorder remembers the cycle value (a span, in production) each
// binding's context carried.
type bindingRecorder struct {
	nopCommitter
	mu     sync.Mutex
	cycles map[string]any
}

func (b *bindingRecorder) Bind(ctx context.Context, p *framework.Pod, _ string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cycles[p.UID] = ctx.Value(cycleKey{})
	return nil
}

// Every cycle is started and ended once, and the binding it starts carries
// the cycle's context values, so its commit can be linked to the cycle.
func TestTracerSeesEveryCycleStartAndEnd(t *testing.T) {
	rec := &cycleRecorder{started: map[string]int{}, ended: map[string]int{}}
	binds := &bindingRecorder{cycles: map[string]any{}}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := New(ctx, Config{Shards: 1, Tracer: rec}, binds)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	s.UpsertNode(&framework.Node{Name: "n1", Allocatable: framework.ResourceList{framework.ResourceCPU: 1000, framework.ResourcePods: 10}})
	s.UpsertPod(cpuPod("fits", 0, 100, ""))
	eventually(t, "the cycle of pod fits ends", func() error {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if rec.started["fits"] != 1 || rec.ended["fits"] != 1 {
			return fmt.Errorf("started %d, ended %d", rec.started["fits"], rec.ended["fits"])
		}
		return nil
	})
	eventually(t, "pod fits is bound", func() error {
		binds.mu.Lock()
		defer binds.mu.Unlock()
		if got, ok := binds.cycles["fits"]; !ok {
			return fmt.Errorf("not bound")
		} else if got != "fits" {
			return fmt.Errorf("binding context carries cycle %v, want fits", got)
		}
		return nil
	})
}

// nopTracer starts nothing: the cheapest tracer a tracing system could
// plug in, to compare the hook's cost with Tracer nil.
type nopTracer struct{}

func (nopTracer) StartCycle(ctx context.Context, _ *framework.Pod) (context.Context, func()) {
	return ctx, endNothing
}

// BenchmarkCycleHook is what the tracing hook adds to each scheduling
// cycle: with tracing off (no Tracer) it must allocate nothing.
func BenchmarkCycleHook(b *testing.B) {
	pod := cpuPod("p", 0, 100, "")
	for _, bc := range []struct {
		name   string
		tracer Tracer
	}{{"off", nil}, {"nop", nopTracer{}}} {
		b.Run(bc.name, func(b *testing.B) {
			s := &Scheduler{cfg: Config{Tracer: bc.tracer}}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				_, end := s.startCycle(ctx, pod)
				end()
			}
		})
	}
}

func TestCycleHookOffAllocatesNothing(t *testing.T) {
	s := &Scheduler{}
	pod := cpuPod("p", 0, 100, "")
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		_, end := s.startCycle(ctx, pod)
		end()
	}); n != 0 {
		t.Fatalf("untraced cycle hook allocates %v times", n)
	}
}
