package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/server"
)

type benchConfig struct {
	addr        string
	nodes       int
	pods        int
	batch       int
	concurrency int
	nodeCPU     int64
	nodeMemory  int64
	podCPU      int64
	podMemory   int64
	timeout     time.Duration
	dataDir     string
	shards      int
	quiet       bool
}

func bench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var bc benchConfig
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&bc.addr, "addr", "", "target a running server instead of starting one with embedded etcd")
	fs.IntVar(&bc.nodes, "nodes", 5000, "nodes to register")
	fs.IntVar(&bc.pods, "pods", 10000, "pods to submit")
	fs.IntVar(&bc.batch, "batch", 100, "pods per SubmitPods call")
	fs.IntVar(&bc.concurrency, "concurrency", 8, "SubmitPods calls in flight")
	fs.Int64Var(&bc.nodeCPU, "node-cpu", 32000, "node allocatable cpu, millicores")
	fs.Int64Var(&bc.nodeMemory, "node-memory", 128<<30, "node allocatable memory, bytes")
	fs.Int64Var(&bc.podCPU, "pod-cpu", 100, "pod cpu request, millicores")
	fs.Int64Var(&bc.podMemory, "pod-memory", 256<<20, "pod memory request, bytes")
	fs.DurationVar(&bc.timeout, "timeout", 10*time.Minute, "give up after this long")
	fs.StringVar(&bc.dataDir, "data-dir", "", "embedded etcd directory (default: a fresh temporary one)")
	fs.IntVar(&bc.shards, "shard-loops", 0, "scheduling loops of the embedded server (0: one per CPU)")
	fs.BoolVar(&bc.quiet, "quiet", false, "no progress lines")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if bc.nodes < 1 || bc.pods < 1 || bc.batch < 1 || bc.concurrency < 1 {
		return errors.New("--nodes, --pods, --batch and --concurrency must be positive")
	}
	ctx, cancel := context.WithTimeout(ctx, bc.timeout)
	defer cancel()

	addr := bc.addr
	if addr == "" {
		dir := bc.dataDir
		if dir == "" {
			tmp, err := os.MkdirTemp("", "berth-bench-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			dir = tmp
		}
		srv, err := server.Start(ctx, server.Config{
			Listen: "127.0.0.1:0", MetricsListen: "-", DataDir: dir, Logger: zap.NewNop(),
			Scheduler: schedulerConfigForBench(bc),
		})
		if err != nil {
			return err
		}
		defer srv.Stop()
		addr = srv.Addr()
		fmt.Fprintf(stdout, "started berth at %s with embedded etcd in %s\n", addr, dir)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	return runBench(ctx, bc, conn, stdout)
}

func runBench(ctx context.Context, bc benchConfig, conn *grpc.ClientConn, out io.Writer) error {
	cluster := berthv1.NewClusterServiceClient(conn)
	pods := berthv1.NewPodServiceClient(conn)
	sched := berthv1.NewSchedulerServiceClient(conn)
	run := fmt.Sprintf("bench-%d", time.Now().UnixNano()%1e9)

	start := time.Now()
	lastRev, err := registerNodes(ctx, cluster, bc, run)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "registered %d nodes in %s\n", bc.nodes, time.Since(start).Round(time.Millisecond))

	// Watch from the last node write: every binding of this run comes after.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	stream, err := sched.WatchBindings(watchCtx, &berthv1.WatchBindingsRequest{FromRevision: lastRev})
	if err != nil {
		return err
	}
	submitted := make([]atomic.Int64, bc.pods) // unix nanos of each pod's submit
	var nSubmitted, nBound atomic.Int64
	latencies := make([]time.Duration, 0, bc.pods)
	allBound := make(chan error, 1)
	var lastBound time.Time
	go func() {
		seen := make([]bool, bc.pods)
		for {
			resp, err := stream.Recv()
			if err != nil {
				allBound <- fmt.Errorf("watch: %w", err)
				return
			}
			ev := resp.GetEvent()
			if ev.GetType() != berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND || !strings.HasPrefix(ev.GetName(), run+"-") {
				continue
			}
			var i int
			if _, err := fmt.Sscanf(ev.GetName()[len(run)+1:], "%d", &i); err != nil || i < 0 || i >= bc.pods {
				continue
			}
			if seen[i] {
				allBound <- fmt.Errorf("pod %s bound twice (revision %d)", ev.GetName(), ev.GetRevision())
				return
			}
			seen[i] = true
			now := time.Now()
			latencies = append(latencies, now.Sub(time.Unix(0, submitted[i].Load())))
			lastBound = now
			if nBound.Add(1) == int64(bc.pods) {
				allBound <- nil
				return
			}
		}
	}()

	progressDone := make(chan struct{})
	var progress sync.WaitGroup
	if !bc.quiet {
		progress.Add(1)
		go func() {
			defer progress.Done()
			t := time.NewTicker(time.Second)
			defer t.Stop()
			var prev int64
			for {
				select {
				case <-progressDone:
					return
				case <-t.C:
					b := nBound.Load()
					fmt.Fprintf(out, "  submitted %d/%d  bound %d  (%d pods/s)\n", nSubmitted.Load(), bc.pods, b, b-prev)
					prev = b
				}
			}
		}()
	}

	submitStart := time.Now()
	if err := submitPods(ctx, pods, bc, run, submitted, &nSubmitted); err != nil {
		close(progressDone)
		return err
	}
	submitDur := time.Since(submitStart)
	err = <-allBound
	close(progressDone)
	progress.Wait()
	if err != nil {
		return fmt.Errorf("%w (%d of %d pods bound)", err, nBound.Load(), bc.pods)
	}
	total := lastBound.Sub(submitStart)
	slices.Sort(latencies)
	pct := func(p float64) time.Duration {
		return latencies[int(p*float64(len(latencies)-1))].Round(100 * time.Microsecond)
	}
	fmt.Fprintf(out, "\nnodes %d, pods %d: all bound in %s\n", bc.nodes, bc.pods, total.Round(time.Millisecond))
	fmt.Fprintf(out, "submit rate:      %.0f pods/s (durable acks)\n", float64(bc.pods)/submitDur.Seconds())
	fmt.Fprintf(out, "throughput:       %.0f pods/s (submitted, bound durably, seen on the watch)\n", float64(bc.pods)/total.Seconds())
	fmt.Fprintf(out, "submit-to-bound:  p50 %s  p90 %s  p99 %s  max %s\n", pct(0.50), pct(0.90), pct(0.99), latencies[len(latencies)-1].Round(100*time.Microsecond))
	return nil
}

func registerNodes(ctx context.Context, cluster berthv1.ClusterServiceClient, bc benchConfig, run string) (int64, error) {
	var maxRev atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	for i := 0; i < bc.nodes; i++ {
		g.Go(func() error {
			resp, err := cluster.UpsertNode(gctx, &berthv1.UpsertNodeRequest{Node: &berthv1.Node{
				Name: fmt.Sprintf("%s-node-%05d", run, i),
				Allocatable: map[string]int64{
					"cpu": bc.nodeCPU, "memory": bc.nodeMemory, "pods": 110, "ephemeral-storage": 100 << 30,
				},
				Labels: map[string]string{
					"kubernetes.io/hostname":      fmt.Sprintf("%s-node-%05d", run, i),
					"topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%10),
				},
			}})
			if err != nil {
				return fmt.Errorf("upsert node %d: %w", i, err)
			}
			for {
				cur := maxRev.Load()
				if resp.GetRevision() <= cur || maxRev.CompareAndSwap(cur, resp.GetRevision()) {
					return nil
				}
			}
		})
	}
	return maxRev.Load(), g.Wait()
}

func submitPods(ctx context.Context, pods berthv1.PodServiceClient, bc benchConfig, run string, submitted []atomic.Int64, n *atomic.Int64) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(bc.concurrency)
	for lo := 0; lo < bc.pods; lo += bc.batch {
		hi := min(lo+bc.batch, bc.pods)
		g.Go(func() error {
			req := &berthv1.SubmitPodsRequest{}
			for i := lo; i < hi; i++ {
				req.Pods = append(req.Pods, &berthv1.Pod{
					Namespace: "bench", Name: fmt.Sprintf("%s-%d", run, i),
					Labels: map[string]string{"app": run},
					Containers: []*berthv1.Container{{
						Name: "main", Image: "registry.example/app:1",
						Requests: map[string]int64{"cpu": bc.podCPU, "memory": bc.podMemory},
					}},
				})
			}
			now := time.Now().UnixNano()
			for i := lo; i < hi; i++ {
				submitted[i].Store(now)
			}
			resp, err := pods.SubmitPods(gctx, req)
			if err != nil {
				return fmt.Errorf("submit pods %d-%d: %w", lo, hi-1, err)
			}
			for i, r := range resp.GetResults() {
				if r.GetCode() != 0 {
					return fmt.Errorf("submit pod %d: code %d: %s", lo+i, r.GetCode(), r.GetMessage())
				}
			}
			n.Add(int64(hi - lo))
			return nil
		})
	}
	return g.Wait()
}
