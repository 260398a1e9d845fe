package bench

import (
	"context"
	"slices"
	"sync"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// floorEvery spaces the trivial calls: often enough for a p99 over a
// few seconds, rarely enough to add little to the load measured.
const floorEvery = 10 * time.Millisecond

// floorProbe times a trivial unary call (a health check: no store, no
// scheduler) over the same connection while paced pods go out. Its
// latency is what the client, gRPC and the shared CPUs alone cost a call
// at that moment: a submit-to-bound tail that this floor shares is not
// the server's pipeline.
type floorProbe struct {
	health healthpb.HealthClient

	mu   sync.Mutex
	lat  []time.Duration
	stop context.CancelFunc
	done chan struct{}
}

// start calls until stop; a server without the health service (a call
// fails) leaves the probe empty.
func (f *floorProbe) start(ctx context.Context) {
	ctx, f.stop = context.WithCancel(ctx)
	f.done = make(chan struct{})
	go func() {
		defer close(f.done)
		tick := time.NewTicker(floorEvery)
		defer tick.Stop()
		for {
			begin := time.Now()
			if _, err := f.health.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				return
			}
			took := time.Since(begin)
			f.mu.Lock()
			f.lat = append(f.lat, took)
			f.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// finish stops the calls and returns their latencies, sorted.
func (f *floorProbe) finish() []time.Duration {
	if f.stop == nil {
		return nil
	}
	f.stop()
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Clone(f.lat)
	slices.Sort(out)
	return out
}
