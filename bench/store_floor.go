package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/berth-io/berth/store"
)

// The store floor's keys, apart from anything Berth writes.
const (
	floorPods     = "/berth-store-floor/pods/"
	floorBindings = "/berth-store-floor/bindings/"
)

// floorDefaultPodsMax bounds the pods a run without --pods sends, so a
// slip in --rate cannot ask for an unbounded table of timestamps.
const floorDefaultPodsMax = 1_000_000

// StoreFloor times, at bc.Rate, the part of each pod's path that is etcd's:
// a durable Txn creates the pod, a watch delivers it, a second durable Txn
// binds it (the bindings of whatever the watch delivered meanwhile go
// together, as Berth's commits group them), and a second watch delivers the
// binding. It runs on an embedded etcd in this process, without gRPC, a
// scheduler or a client process beside it. So its percentiles are the least
// a replica's submit-to-bound can be on this machine and disk at that rate,
// and how far a server's run sits above them is what Berth adds.
func StoreFloor(ctx context.Context, bc Config, out io.Writer) error {
	n := bc.Sizes.Pods
	if n == 0 {
		// Ten seconds' worth: long enough for a p99 past the start.
		n = int(min(bc.Rate*10, floorDefaultPodsMax))
	}
	dir, cleanup, err := floorDir(bc.DataDir)
	if err != nil {
		return err
	}
	defer cleanup()
	etcd, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: dir})
	if err != nil {
		return err
	}
	defer etcd.Close()
	client := etcd.Client()
	defer client.Close()

	ctx, cancel := context.WithTimeout(ctx, bc.Timeout)
	defer cancel()
	f, err := newFloorRun(ctx, client, n, bc.Concurrency)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "store floor: %d pods at %.0f pods/s, in batches of up to %d every millisecond, %d Txns in flight, on an embedded etcd in %s\n",
		n, bc.Rate, bc.Batch, bc.Concurrency, dir)
	cpuBefore, cpuErr := readCPUTimes(os.Getpid())
	p := &pacer{rate: bc.Rate, batch: bc.Batch}
	ticker := time.NewTicker(pacerTick(bc.Rate))
	start := time.Now()
	perr := p.run(ctx, start, ticker.C, n, f.create)
	ticker.Stop()
	err = f.wait(ctx)
	if err == nil {
		err = perr
	}
	if err != nil {
		return fmt.Errorf("store floor: %d of %d pods bound: %w", f.bound.Load(), n, err)
	}
	elapsed := time.Since(start)
	cpuAfter, err := readCPUTimes(os.Getpid())
	cpu := "" // left out where the process's CPU time cannot be read
	if cpuErr == nil && err == nil {
		cpu = fmt.Sprintf(", using %.2f CPUs", (cpuAfter.total()-cpuBefore.total()).Seconds()/elapsed.Seconds())
	}

	lat := make([]time.Duration, n)
	for i := range n {
		lat[i] = time.Unix(0, f.boundAt[i]).Sub(p.dueAt(i))
	}
	slices.Sort(lat)
	fmt.Fprintf(out, "all bound in %s: %.0f pods/s%s\n", elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), cpu)
	printLatencies(out, "create-to-bound: ", lat)
	fmt.Fprintln(out, "                  (from each pod's due time: two durable Txns and two watch deliveries, the floor under a server's submit-to-bound at this rate)")
	return nil
}

// floorDir is dataDir's store-floor subdirectory, emptied, or a temporary
// directory; cleanup removes the temporary one.
func floorDir(dataDir string) (dir string, cleanup func(), err error) {
	if dataDir == "" {
		dir, err = os.MkdirTemp("", "berth-store-floor-")
		return dir, func() { os.RemoveAll(dir) }, err
	}
	dir = filepath.Join(dataDir, "store-floor")
	if err := os.RemoveAll(dir); err != nil {
		return "", nil, err
	}
	return dir, func() {}, os.MkdirAll(dir, 0o700)
}

// floorRun is one store floor: the creates the pacer starts, the binder
// that answers them, and the moment each binding is seen.
type floorRun struct {
	client  *clientv3.Client
	ctx     context.Context
	cancel  context.CancelFunc // ends the watches and the calls in flight
	pod     string             // every pod's value: the basic workload's pod, encoded
	bound   atomic.Int64
	boundAt []int64 // unix nanos, by pod index
	slots   chan struct{}
	running sync.WaitGroup // the binder, the recorder and the creates

	mu       sync.Mutex
	err      error // the first failure; it ends the run
	done     chan struct{}
	doneOnce sync.Once
}

// newFloorRun starts the binder and the binding watch from the store's
// current revision, so no event of the run can be missed.
func newFloorRun(ctx context.Context, client *clientv3.Client, n, inFlight int) (*floorRun, error) {
	resp, err := client.Get(ctx, floorPods, clientv3.WithCountOnly())
	if err != nil {
		return nil, err
	}
	from := resp.Header.Revision + 1
	pod, err := proto.MarshalOptions{Deterministic: true}.Marshal(template{run: "floor", shape: basicShape}.pod(phaseMeasured, 0))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &floorRun{
		client: client, ctx: ctx, cancel: cancel, pod: string(pod),
		boundAt: make([]int64, n), slots: make(chan struct{}, inFlight), done: make(chan struct{}),
	}
	created := client.Watch(ctx, floorPods, clientv3.WithPrefix(), clientv3.WithRev(from))
	bindings := client.Watch(ctx, floorBindings, clientv3.WithPrefix(), clientv3.WithRev(from))
	f.running.Go(func() { f.bind(created) })
	f.running.Go(func() { f.record(bindings, n) })
	return f, nil
}

// create writes pods [lo, hi) in one Txn, waiting for a slot as a client's
// call would.
func (f *floorRun) create(lo, hi int) {
	select {
	case f.slots <- struct{}{}:
	case <-f.ctx.Done():
		return
	}
	f.running.Go(func() {
		defer func() { <-f.slots }()
		ops := make([]clientv3.Op, 0, hi-lo)
		for i := lo; i < hi; i++ {
			ops = append(ops, clientv3.OpPut(floorPods+strconv.Itoa(i), f.pod))
		}
		if _, err := f.client.Txn(f.ctx).Then(ops...).Commit(); err != nil {
			f.fail(fmt.Errorf("create: %w", err))
		}
	})
}

// bind commits a binding for each pod the watch delivers, one Txn at a
// time: what arrives while one is in flight goes in the next.
func (f *floorRun) bind(created clientv3.WatchChan) {
	var pending []string
	for {
		if len(pending) == 0 {
			wr, ok := <-created
			if !f.received(&pending, wr, ok) {
				return
			}
		}
	drain:
		for {
			select {
			case wr, ok := <-created:
				if !f.received(&pending, wr, ok) {
					return
				}
			default:
				break drain
			}
		}
		batch := pending[:min(len(pending), store.EmbeddedMaxTxnOps)]
		ops := make([]clientv3.Op, 0, len(batch))
		for _, i := range batch {
			ops = append(ops, clientv3.OpPut(floorBindings+i, f.pod))
		}
		if _, err := f.client.Txn(f.ctx).Then(ops...).Commit(); err != nil {
			f.fail(fmt.Errorf("bind: %w", err))
			return
		}
		pending = pending[len(batch):]
	}
}

// record stamps each binding as the watch delivers it, and ends the run
// when all n are in.
func (f *floorRun) record(bindings clientv3.WatchChan, n int) {
	for wr := range bindings {
		if f.watchFailed("binding watch", wr) {
			return
		}
		now := time.Now().UnixNano()
		for _, ev := range wr.Events {
			i, err := strconv.Atoi(string(ev.Kv.Key[len(floorBindings):]))
			if err != nil || i < 0 || i >= n {
				f.fail(fmt.Errorf("unexpected binding key %q", ev.Kv.Key))
				return
			}
			f.boundAt[i] = now
			if f.bound.Add(1) == int64(n) {
				f.finish()
				return
			}
		}
	}
}

// received adds the pods of one delivery of the pod watch to pending;
// false when the watch ended, which ends the binder.
func (f *floorRun) received(pending *[]string, wr clientv3.WatchResponse, ok bool) bool {
	if !ok || f.watchFailed("pod watch", wr) {
		return false
	}
	for _, ev := range wr.Events {
		*pending = append(*pending, string(ev.Kv.Key[len(floorPods):]))
	}
	return true
}

// watchFailed ends the run on a watch error; a watch closed by the run's
// own end is not one.
func (f *floorRun) watchFailed(what string, wr clientv3.WatchResponse) bool {
	if err := wr.Err(); err != nil {
		f.fail(fmt.Errorf("%s: %w", what, err))
		return true
	}
	return false
}

func (f *floorRun) fail(err error) {
	f.mu.Lock()
	if f.err == nil && f.ctx.Err() == nil {
		f.err = err
	}
	f.mu.Unlock()
	f.finish()
}

func (f *floorRun) finish() {
	f.doneOnce.Do(func() {
		close(f.done)
		f.cancel()
	})
}

// wait returns when every pod is bound, the run failed, or ctx ended, and
// the run's goroutines are gone.
func (f *floorRun) wait(ctx context.Context) error {
	defer f.running.Wait()
	select {
	case <-f.done:
	case <-ctx.Done():
		f.finish()
		return ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}
