package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/berth-io/berth/replica"
)

type benchConfig struct {
	addr        string
	workload    string
	sizes       workloadSizes
	shape       shape
	batch       int
	concurrency int
	timeout     time.Duration
	stall       time.Duration
	dataDir     string
	traceDir    string
	traceWindow int
	shards      int
	replicas    int
	quiet       bool
	cpuProfile  string
	memProfile  string
	gcPercent   int
}

const benchUsage = `Usage: berth bench [flags]

Starts a server with embedded etcd (or targets --addr), registers nodes,
binds the workload's init pods, then submits the measured pods and waits
for each to be bound on WatchBindings, printing pods/s and submit-to-bound
latency. Workloads mirror Kubernetes' scheduler_perf:

  basic               plain pods (the default)
  node-affinity       required node affinity on 2 of 10 zones (SchedulingNodeAffinity)
  topology-spreading  hard zone spreading, maxSkew 1 (TopologySpreading)
  pod-anti-affinity   required anti-affinity per hostname (SchedulingPodAntiAffinity)
  preferred-affinity  preferred pod affinity per hostname (SchedulingPreferredPodAffinity)
  preemption          low priority pods fill the nodes; high priority pods preempt
                      them, the bench deleting each victim announced by EVICT (PreemptionBasic)
  alibaba             replay of the Alibaba OpenB GPU trace, creations and deletions
                      in trace order (--trace-dir)
  all                 each in turn, a fresh server each, then a table

Flags:
`

func bench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	bc, err := parseBenchFlags(args, stderr)
	if err != nil {
		return err
	}
	setGCPercent(bc.gcPercent)
	if bc.cpuProfile != "" {
		f, err := os.Create(bc.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	_, err = runBenchmarks(ctx, bc, stdout)
	if bc.memProfile != "" {
		// Allocations since start, not what is live: what the collector had
		// to keep up with.
		f, ferr := os.Create(bc.memProfile)
		if ferr != nil {
			return errors.Join(err, ferr)
		}
		defer f.Close()
		if perr := pprof.Lookup("allocs").WriteTo(f, 0); perr != nil {
			return errors.Join(err, perr)
		}
	}
	return err
}

func parseBenchFlags(args []string, stderr io.Writer) (benchConfig, error) {
	var bc benchConfig
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, benchUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&bc.addr, "addr", "", "target a running server instead of starting one with embedded etcd; what a run creates is deleted after it")
	fs.StringVar(&bc.workload, "workload", workloadBasic, "workload to run: "+strings.Join(workloadNames(), ", ")+", or all")
	fs.IntVar(&bc.sizes.nodes, "nodes", 0, "nodes to register (0: the workload's default; alibaba: the first N trace nodes)")
	fs.IntVar(&bc.sizes.initPods, "init-pods", -1, "pods bound before measuring (-1: the workload's default)")
	fs.IntVar(&bc.sizes.pods, "pods", 0, "pods to measure (0: the workload's default; alibaba: the first N trace pods by creation)")
	fs.IntVar(&bc.batch, "batch", 100, "pods per SubmitPods call")
	fs.IntVar(&bc.concurrency, "concurrency", 8, "SubmitPods calls in flight (and victim or trace deletions in flight)")
	fs.Int64Var(&bc.shape.nodeCPU, "node-cpu", 0, "node allocatable cpu, millicores (0: the workload's; basic 32000, others 4000; ignored by preemption and alibaba)")
	fs.Int64Var(&bc.shape.nodeMemory, "node-memory", 0, "node allocatable memory, bytes (0: the workload's; basic 128Gi, others 32Gi)")
	fs.Int64Var(&bc.shape.podCPU, "pod-cpu", 0, "pod cpu request, millicores (0: the workload's, 100)")
	fs.Int64Var(&bc.shape.podMemory, "pod-memory", 0, "pod memory request, bytes (0: the workload's; basic 256Mi, others 500Mi)")
	fs.DurationVar(&bc.timeout, "timeout", 10*time.Minute, "give up on a workload after this long")
	fs.DurationVar(&bc.stall, "stall", time.Minute, "give up on a workload when no pod binds, is evicted or deleted for this long (0: never)")
	fs.StringVar(&bc.dataDir, "data-dir", "", "embedded etcd directory, one subdirectory per workload (default: fresh temporary ones)")
	fs.StringVar(&bc.traceDir, "trace-dir", "", "directory of the Alibaba OpenB trace CSVs (default: the first "+traceDirFromRoot+" found walking up from the working directory)")
	fs.IntVar(&bc.traceWindow, "trace-window", 1000, "trace replay: deletions that may wait for their pod at once; creations pause when they are full")
	fs.IntVar(&bc.shards, "shard-loops", 0, "scheduling loops of the embedded server (0: one per CPU)")
	fs.IntVar(&bc.replicas, "replicas", 1, "replicas to start, in this process, sharing one embedded etcd; calls are spread over them (not with --addr)")
	fs.BoolVar(&bc.quiet, "quiet", false, "no progress lines")
	fs.StringVar(&bc.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole process (bench and embedded server) to this file")
	fs.IntVar(&bc.gcPercent, "gc-percent", defaultGCPercent, gcPercentUsage+" (as for serve: the embedded server shares the process)")
	fs.StringVar(&bc.memProfile, "memprofile", "", "write the whole process's allocations (bench and embedded server) to this file when the run ends")
	if err := fs.Parse(args); err != nil {
		return bc, err
	}
	if fs.NArg() > 0 {
		return bc, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if bc.sizes.nodes < 0 || bc.sizes.pods < 0 || bc.batch < 1 || bc.concurrency < 1 || bc.traceWindow < 1 || bc.replicas < 1 {
		return bc, errors.New("--nodes and --pods must not be negative; --batch, --concurrency, --trace-window and --replicas must be positive")
	}
	if bc.replicas > 1 && bc.addr != "" {
		return bc, errors.New("--replicas starts its own replicas: it does not go with --addr")
	}
	return bc, nil
}

// runBenchmarks runs the selected workloads, each with a fresh server
// unless --addr is set, and prints a summary line per workload and, for
// more than one, a table. It fails if any workload did.
func runBenchmarks(ctx context.Context, bc benchConfig, out io.Writer) ([]runResult, error) {
	names := []string{bc.workload}
	if bc.workload == workloadAll {
		names = workloadNames()
	}
	var results []runResult
	for _, name := range names {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(out, "\n=== workload %s\n", name)
		res := benchOne(ctx, bc, name, out)
		printResult(out, res)
		results = append(results, res)
	}
	if len(names) > 1 {
		printTable(out, results)
	}
	var failed []string
	for _, r := range results {
		if r.err != nil || len(r.violations) > 0 {
			failed = append(failed, r.workload)
		}
	}
	switch {
	case len(results) == 1 && results[0].err != nil:
		return results, fmt.Errorf("%s: %w", results[0].workload, results[0].err)
	case len(results) == 1 && len(failed) == 1:
		return results, fmt.Errorf("%s: %d placements violate the workload's constraints", results[0].workload, len(results[0].violations))
	case len(failed) > 0:
		return results, fmt.Errorf("%d of %d workloads failed: %s", len(failed), len(results), strings.Join(failed, ", "))
	case ctx.Err() != nil:
		return results, ctx.Err()
	}
	return results, nil
}

// benchOne runs one workload within --timeout.
func benchOne(ctx context.Context, bc benchConfig, name string, out io.Writer) runResult {
	res := runResult{workload: name}
	var tr *trace
	if name == workloadAlibaba {
		dir, err := resolveTraceDir(bc.traceDir)
		if err != nil && bc.workload == workloadAll && bc.traceDir == "" {
			res.skipped = err.Error()
			return res
		}
		if err == nil {
			tr, err = loadTrace(dir, bc.sizes.nodes, bc.sizes.pods)
		}
		if err != nil {
			res.err = err
			return res
		}
	}
	run := fmt.Sprintf("bench-%d", time.Now().UnixNano()%1e9)
	w, err := newWorkload(name, run, bc.sizes, bc.shape, tr)
	if err != nil {
		res.err = err
		return res
	}
	fmt.Fprintf(out, "%d nodes, %d init pods, %d measured pods\n", w.nodes, w.initPods, w.pods)
	ctx, cancel := context.WithTimeout(ctx, bc.timeout)
	defer cancel()

	if bc.addr == "" && bc.replicas > 1 {
		return benchFleetRun(ctx, bc, w, run, out)
	}
	addr := bc.addr
	if addr == "" {
		srv, dir, cleanup, err := startBenchServer(ctx, bc, name)
		if err != nil {
			res.err = err
			return res
		}
		defer cleanup()
		defer srv.Stop()
		addr = srv.Addr()
		fmt.Fprintf(out, "started berth at %s with embedded etcd in %s\n", addr, dir)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		res.err = err
		return res
	}
	defer conn.Close()
	return runWorkload(ctx, bc, w, run, conn, out)
}

// benchFleetRun runs the workload over --replicas in-process replicas and
// adds each one's share and conflicts to the result.
func benchFleetRun(ctx context.Context, bc benchConfig, w *workload, run string, out io.Writer) runResult {
	f, err := startBenchFleet(ctx, bc, w.name)
	if err != nil {
		return runResult{workload: w.name, err: err}
	}
	defer f.stop()
	addrs := make([]string, len(f.servers))
	for i, s := range f.servers {
		addrs[i] = s.Addr()
	}
	fmt.Fprintf(out, "started %d berth replicas at %s sharing embedded etcd in %s\n", len(addrs), strings.Join(addrs, ", "), f.dir)
	res := runWorkload(ctx, bc, w, run, f.conn(), out)
	if res.replicas, err = f.report(ctx, run); err != nil && res.err == nil {
		res.err = fmt.Errorf("replica report: %w", err)
	}
	return res
}

// startBenchServer starts a fresh in-process server: its own etcd
// directory per workload, so no run sees another's nodes.
func startBenchServer(ctx context.Context, bc benchConfig, workload string) (*replica.Replica, string, func(), error) {
	dir := filepath.Join(bc.dataDir, workload)
	cleanup := func() {}
	if bc.dataDir == "" {
		tmp, err := os.MkdirTemp("", "berth-bench-")
		if err != nil {
			return nil, "", nil, err
		}
		dir, cleanup = tmp, func() { os.RemoveAll(tmp) }
	}
	srv, err := replica.Start(ctx, replica.Config{
		Listen: "127.0.0.1:0", MetricsListen: "-", DataDir: dir, Logger: zap.NewNop(),
		Scheduler: schedulerConfigForBench(bc),
	})
	if err != nil {
		cleanup()
		return nil, "", nil, err
	}
	return srv, dir, cleanup, nil
}

// resolveTraceDir returns --trace-dir, or the trace found walking up from
// the working directory.
func resolveTraceDir(flagDir string) (string, error) {
	if flagDir != "" {
		return flagDir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	if dir := findTraceDir(wd); dir != "" {
		return dir, nil
	}
	return "", fmt.Errorf("no %s above %s: pass --trace-dir", traceDirFromRoot, wd)
}

// printResult prints the latency lines and the one-line summary.
func printResult(out io.Writer, r runResult) {
	if r.bound > 0 {
		verb := "all bound"
		if r.bound < r.pods {
			verb = fmt.Sprintf("%d bound", r.bound)
		}
		fmt.Fprintf(out, "\nnodes %d, pods %d: %s in %s\n", r.nodes, r.pods, verb, r.elapsed.Round(time.Millisecond))
		if r.submitDur > 0 {
			fmt.Fprintf(out, "submit rate:      %.0f pods/s (durable acks)\n", float64(r.pods)/r.submitDur.Seconds())
		}
		fmt.Fprintf(out, "throughput:       %.0f pods/s (submitted, bound durably, seen on the watch)\n", r.podsPerSec())
		fmt.Fprintf(out, "submit-to-bound:  p50 %s  p90 %s  p99 %s  max %s\n",
			r.percentile(0.50), r.percentile(0.90), r.percentile(0.99), r.latencies[len(r.latencies)-1].Round(100*time.Microsecond))
	}
	if r.evictErrors > 0 {
		fmt.Fprintf(out, "%d victim deletions failed\n", r.evictErrors)
	}
	if len(r.replicas) > 0 {
		printReplicas(out, r.replicas)
	}
	for _, v := range r.violations {
		fmt.Fprintf(out, "VIOLATION: %s\n", v)
	}
	if r.err != nil {
		fmt.Fprintf(out, "FAILED: %v\n", r.err)
	}
	if r.skipped != "" {
		fmt.Fprintf(out, "skipped: %s\n", r.skipped)
		return
	}
	fmt.Fprintf(out, "summary: workload=%s nodes=%d init=%d pods=%d bound=%d unschedulable=%d evicted=%d deleted=%d pods/s=%.0f p50=%s p99=%s violations=%d status=%q\n",
		r.workload, r.nodes, r.initPods, r.pods, r.bound, r.unschedulable, r.evicts, r.deletes, r.podsPerSec(),
		r.percentile(0.50), r.percentile(0.99), len(r.violations), firstLine(r.err))
}

// printTable prints one row per workload.
func printTable(out io.Writer, results []runResult) {
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workload\tnodes\tinit\tpods\tbound\tpods/s\tp50\tp99\tstatus")
	for _, r := range results {
		status := firstLine(r.err)
		switch {
		case r.skipped != "":
			status = "skipped: " + r.skipped
		case r.err == nil && len(r.violations) > 0:
			status = fmt.Sprintf("%d violations", len(r.violations))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.0f\t%s\t%s\t%s\n", r.workload, r.nodes, r.initPods, r.pods, r.bound,
			r.podsPerSec(), r.percentile(0.50), r.percentile(0.99), status)
	}
	tw.Flush()
}
