package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/berth-io/berth/bench/trace"
	berth "github.com/berth-io/berth/clients/go"
	"github.com/berth-io/berth/replica"
	"github.com/berth-io/berth/scheduler"
)

// Config is one berth bench run; its fields are the command's flags of
// the same names.
type Config struct {
	// Addr targets a running server; empty starts a fresh one per workload.
	Addr string
	// Keep leaves what a run against Addr created in place, to build a
	// data set for a restart measurement.
	Keep bool
	// TLS is the client's certificate material for a server that serves
	// TLS (all empty: plaintext), so a secured deployment can be measured.
	TLS      berth.TLSFiles
	Workload string // one of WorkloadNames, or WorkloadAll
	Sizes    Sizes
	Shape    Shape
	// Batch pods go in one SubmitPods call, with Concurrency calls (and
	// victim or trace deletions) in flight.
	Batch, Concurrency int
	// Rate (pods/s, 0: none) paces the measured pods' submissions instead
	// of sending them as fast as calls are acknowledged; the trace replay
	// keeps its own pace.
	Rate float64
	// StoreFloor times etcd's part of a pod's path alone at Rate, in place
	// of the workloads (see StoreFloor).
	StoreFloor bool
	// Timeout bounds a workload; Stall (0: none) ends one in which no pod
	// binds, is evicted or deleted for that long.
	Timeout, Stall time.Duration
	DataDir        string // embedded etcd, a subdirectory per workload; "": temporary
	TraceDir       string // "": the first trace.DirFromRoot above the working directory
	TraceWindow    int    // replayed deletions that may wait for their pod at once
	ShardLoops     int    // scheduling loops of the embedded server (0: one per CPU)
	Replicas       int    // in-process replicas sharing one embedded etcd (not with Addr)
	Quiet          bool   // no progress lines
	// JSONPath, when set, also receives the results as scheduler_perf-style
	// JSON (PerfData), written even when a workload failed.
	JSONPath string
	// TimelinePath, when set, receives a CSV row per measured pod with the
	// moments its latency is made of (see writeTimeline).
	TimelinePath string

	// timeline is TimelinePath opened by Run, shared by its workloads.
	timeline io.Writer
}

// Validate rejects what the flags must not say; Run calls it.
func (bc Config) Validate() error {
	if bc.Sizes.Nodes < 0 || bc.Sizes.Pods < 0 || bc.Batch < 1 || bc.Concurrency < 1 || bc.TraceWindow < 1 || bc.Replicas < 1 {
		return errors.New("--nodes and --pods must not be negative; --batch, --concurrency, --trace-window and --replicas must be positive")
	}
	if bc.Rate < 0 || math.IsNaN(bc.Rate) || math.IsInf(bc.Rate, 0) {
		return errors.New("--rate must be a number of pods/s, not negative")
	}
	if bc.Replicas > 1 && bc.Addr != "" {
		return errors.New("--replicas starts its own replicas: it does not go with --addr")
	}
	if bc.StoreFloor && (bc.Rate == 0 || bc.Addr != "" || bc.Replicas > 1 || bc.JSONPath != "" || bc.TimelinePath != "") {
		return errors.New("--store-floor needs --rate, and starts its own etcd and prints its figures: it does not go with --addr, --replicas, --json or --timeline")
	}
	return nil
}

func (bc Config) schedulerConfig() scheduler.Config {
	return scheduler.Config{Shards: bc.ShardLoops}
}

// Run runs the selected workloads, each with a fresh server unless Addr is
// set, and prints to out a summary line per workload and, for more than
// one, a table. It fails if any workload did.
func Run(ctx context.Context, bc Config, out io.Writer) error {
	if err := bc.Validate(); err != nil {
		return err
	}
	if bc.StoreFloor {
		return StoreFloor(ctx, bc, out)
	}
	var timeline *os.File
	if bc.TimelinePath != "" {
		f, err := os.Create(bc.TimelinePath)
		if err != nil {
			return fmt.Errorf("--timeline: %w", err)
		}
		if _, err := io.WriteString(f, timelineHeader); err != nil {
			f.Close()
			return fmt.Errorf("--timeline: %w", err)
		}
		timeline, bc.timeline = f, f
	}
	results, err := runBenchmarks(ctx, bc, out)
	if timeline != nil {
		if cerr := timeline.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("--timeline: %w", cerr))
		}
	}
	if bc.JSONPath != "" {
		if jerr := writePerfData(bc.JSONPath, results); jerr != nil {
			return errors.Join(err, fmt.Errorf("--json: %w", jerr))
		}
	}
	return err
}

// runBenchmarks is Run, returning the results for tests.
func runBenchmarks(ctx context.Context, bc Config, out io.Writer) ([]runResult, error) {
	names := []string{bc.Workload}
	if bc.Workload == WorkloadAll {
		names = WorkloadNames()
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
func benchOne(ctx context.Context, bc Config, name string, out io.Writer) runResult {
	res := runResult{workload: name}
	var tr *trace.Trace
	if name == WorkloadAlibaba {
		dir, err := resolveTraceDir(bc.TraceDir)
		if err != nil && bc.Workload == WorkloadAll && bc.TraceDir == "" {
			res.skipped = err.Error()
			return res
		}
		if err == nil {
			tr, err = trace.Load(dir, bc.Sizes.Nodes, bc.Sizes.Pods)
		}
		if err != nil {
			res.err = err
			return res
		}
	}
	run := fmt.Sprintf("bench-%d", time.Now().UnixNano()%1e9)
	w, err := newWorkload(name, run, bc.Sizes, bc.Shape, tr)
	if err != nil {
		res.err = err
		return res
	}
	fmt.Fprintf(out, "%d nodes, %d init pods, %d measured pods\n", w.nodes, w.initPods, w.pods)
	ctx, cancel := context.WithTimeout(ctx, bc.Timeout)
	defer cancel()

	if bc.Addr == "" && bc.Replicas > 1 {
		return benchFleetRun(ctx, bc, w, run, out)
	}
	addr := bc.Addr
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
	creds := insecure.NewCredentials()
	if bc.TLS != (berth.TLSFiles{}) {
		tlsCfg, err := bc.TLS.TLSConfig()
		if err != nil {
			res.err = err
			return res
		}
		creds = credentials.NewTLS(tlsCfg)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		res.err = err
		return res
	}
	defer conn.Close()
	return runWorkload(ctx, bc, w, run, conn, out)
}

// benchFleetRun runs the workload over --replicas in-process replicas and
// adds each one's share and conflicts to the result.
func benchFleetRun(ctx context.Context, bc Config, w *workload, run string, out io.Writer) runResult {
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
func startBenchServer(ctx context.Context, bc Config, workload string) (*replica.Replica, string, func(), error) {
	dir := filepath.Join(bc.DataDir, workload)
	cleanup := func() {}
	if bc.DataDir == "" {
		tmp, err := os.MkdirTemp("", "berth-bench-")
		if err != nil {
			return nil, "", nil, err
		}
		dir, cleanup = tmp, func() { os.RemoveAll(tmp) }
	}
	srv, err := replica.Start(ctx, replica.Config{
		Listen: "127.0.0.1:0", MetricsListen: "-", DataDir: dir, Logger: zap.NewNop(),
		Scheduler: bc.schedulerConfig(),
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
	if dir := trace.FindDir(wd); dir != "" {
		return dir, nil
	}
	return "", fmt.Errorf("no %s above %s: pass --trace-dir", trace.DirFromRoot, wd)
}

// printResult prints the latency lines and the one-line summary.
func printResult(out io.Writer, r runResult) {
	if printDetails(out, r) {
		return
	}
	fmt.Fprintf(out, "summary: workload=%s nodes=%d init=%d pods=%d bound=%d unschedulable=%d evicted=%d deleted=%d pods/s=%.0f p50=%s p99=%s p999=%s violations=%d status=%q\n",
		r.workload, r.nodes, r.initPods, r.pods, r.bound, r.unschedulable, r.evicts, r.deletes, r.podsPerSec(),
		r.percentile(0.50), r.percentile(0.99), r.percentile(0.999), len(r.violations), firstLine(r.err))
}

// printDetails prints the throughput and latency lines, and what went
// wrong; it says whether the workload was skipped.
func printDetails(out io.Writer, r runResult) (skipped bool) {
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
		if r.rate > 0 {
			fmt.Fprintf(out, "offered rate:     %.0f pods/s (--rate), calls started at %.0f pods/s\n", r.rate, r.sentRate)
		}
		printLatencies(out, "submit-to-bound: ", r.latencies)
		if r.rate > 0 {
			fmt.Fprintln(out, "                  (from each pod's due time under --rate: what a client at that rate sees)")
			printLatencies(out, "from call start: ", r.callLatencies)
			fmt.Fprintln(out, "                  (the server's share: leaves out the wait for the pacer's tick and for a call slot)")
			printLatencies(out, "  call acked:    ", r.ackLatencies)
			printLatencies(out, "  ack to bound:  ", r.afterAckLatencies)
			if len(r.ackLatencies) > 0 {
				fmt.Fprintln(out, "                  (split at the durable ack: the create's Txn and the call, then the watch to the scheduler, the cycle, the bind's Txn and the watch back)")
			}
			printLatencies(out, "trivial call:    ", r.floorLatencies)
			if len(r.floorLatencies) > 0 {
				fmt.Fprintln(out, "                  (a health check every 10ms meanwhile: what the client, gRPC and the shared CPUs alone cost a call)")
			}
		}
		if r.fellBehind() {
			fmt.Fprintf(out, "WARNING: pods went out at %.0f pods/s, below 95%% of --rate %.0f (last one %s late): the bench or the server could not keep up, so the percentiles from due time include that backlog\n",
				r.sentRate, r.rate, r.sendLag.Round(time.Millisecond))
		}
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
		return true
	}
	return false
}

// printLatencies prints one line of percentiles of sorted latencies.
func printLatencies(out io.Writer, label string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	fmt.Fprintf(out, "%s p50 %s  p90 %s  p99 %s  p999 %s  max %s\n", label,
		percentile(lat, 0.50), percentile(lat, 0.90), percentile(lat, 0.99), percentile(lat, 0.999), lat[len(lat)-1].Round(100*time.Microsecond))
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
