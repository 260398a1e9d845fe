package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/berth-io/berth/bench"
	"github.com/berth-io/berth/bench/trace"
)

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

// benchFlags are berth bench's flags: the run, and what concerns the whole
// process (the collector, profiles).
type benchFlags struct {
	cfg        bench.Config
	cpuProfile string
	memProfile string
	gcPercent  int
	memLimit   string
	gcHeadroom string
	hugePages  bool
}

// runBench is berth bench: the run itself is bench.Run's; this sets up the
// process around it.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	bf, err := parseBenchFlags(args, stderr)
	if err != nil {
		return err
	}
	gc, err := applyGC(bf.gcPercent, bf.memLimit)
	if err != nil {
		return err
	}
	if err := gc.adapt(bf.gcHeadroom); err != nil {
		return err
	}
	gc.hugePagesAdvised = adviseHugePages(bf.hugePages, gc.hugePages, zap.NewNop())
	fmt.Fprintln(stdout, gc)
	if bf.cpuProfile != "" {
		f, err := os.Create(bf.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	err = bench.Run(ctx, bf.cfg, stdout)
	if bf.memProfile != "" {
		// Allocations since start, not what is live: what the collector had
		// to keep up with.
		f, ferr := os.Create(bf.memProfile)
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

// parseBenchFlags parses and checks berth bench's command line.
func parseBenchFlags(args []string, stderr io.Writer) (benchFlags, error) {
	var bf benchFlags
	bc := &bf.cfg
	fs := newFlagSet("bench", benchUsage, stderr)
	fs.StringVar(&bc.Addr, "addr", "", "target a running server instead of starting one with embedded etcd; what a run creates is deleted after it")
	fs.BoolVar(&bc.Keep, "keep", false, "with --addr, leave what the run created in place")
	fs.StringVar(&bc.TLS.CACert, "cacert", "", "with --addr: verify a TLS server with the CA certificates in this file")
	fs.StringVar(&bc.TLS.Cert, "cert", "", "with --addr: client certificate for mutual TLS")
	fs.StringVar(&bc.TLS.Key, "key", "", "with --addr: client key for mutual TLS")
	fs.StringVar(&bc.Workload, "workload", bench.WorkloadBasic, "workload to run: "+strings.Join(bench.WorkloadNames(), ", ")+", or all")
	fs.IntVar(&bc.Sizes.Nodes, "nodes", 0, "nodes to register (0: the workload's default; alibaba: the first N trace nodes)")
	fs.IntVar(&bc.Sizes.InitPods, "init-pods", -1, "pods bound before measuring (-1: the workload's default)")
	fs.IntVar(&bc.Sizes.Pods, "pods", 0, "pods to measure (0: the workload's default; alibaba: the first N trace pods by creation)")
	fs.IntVar(&bc.Batch, "batch", 100, "pods per SubmitPods call")
	fs.Float64Var(&bc.Rate, "rate", 0, "submit the measured pods at this many pods/s, in batches of up to --batch every millisecond, instead of as fast as calls are acknowledged (0); latency then runs from each pod's due time, so pods held back by calls in flight count, with the latency from call start beside it; not for alibaba, whose replay keeps its own pace")
	fs.BoolVar(&bc.StoreFloor, "store-floor", false, "with --rate, instead of a workload, time etcd's part of each pod's path alone on an embedded etcd in this process (a durable Txn creates the pod, a watch delivers it, a second Txn binds it, a second watch delivers the binding): the least a server's submit-to-bound can be on this machine at that rate")
	fs.IntVar(&bc.Concurrency, "concurrency", 8, "SubmitPods calls in flight (and victim or trace deletions in flight)")
	fs.Int64Var(&bc.Shape.NodeCPU, "node-cpu", 0, "node allocatable cpu, millicores (0: the workload's; basic 32000, others 4000; ignored by preemption and alibaba)")
	fs.Int64Var(&bc.Shape.NodeMemory, "node-memory", 0, "node allocatable memory, bytes (0: the workload's; basic 128Gi, others 32Gi)")
	fs.Int64Var(&bc.Shape.PodCPU, "pod-cpu", 0, "pod cpu request, millicores (0: the workload's, 100)")
	fs.Int64Var(&bc.Shape.PodMemory, "pod-memory", 0, "pod memory request, bytes (0: the workload's; basic 256Mi, others 500Mi)")
	fs.DurationVar(&bc.Timeout, "timeout", 10*time.Minute, "give up on a workload after this long")
	fs.DurationVar(&bc.Stall, "stall", time.Minute, "give up on a workload when no pod binds, is evicted or deleted for this long (0: never)")
	fs.StringVar(&bc.DataDir, "data-dir", "", "embedded etcd directory, one subdirectory per workload (default: fresh temporary ones)")
	fs.StringVar(&bc.TraceDir, "trace-dir", "", "directory of the Alibaba OpenB trace CSVs (default: the first "+trace.DirFromRoot+" found walking up from the working directory)")
	fs.IntVar(&bc.TraceWindow, "trace-window", 1000, "trace replay: deletions that may wait for their pod at once; creations pause when they are full")
	fs.IntVar(&bc.ShardLoops, "shard-loops", 0, "scheduling loops of the embedded server (0: one per CPU)")
	fs.IntVar(&bc.Replicas, "replicas", 1, "replicas to start, in this process, sharing one embedded etcd; calls are spread over them (not with --addr)")
	fs.BoolVar(&bc.Quiet, "quiet", false, "no progress lines")
	fs.StringVar(&bc.JSONPath, "json", "", `also write the results to this file as scheduler_perf-style JSON ({"version":"v1","dataItems":[...]})`)
	fs.StringVar(&bc.TimelinePath, "timeline", "", "also write a CSV row per measured pod to this file: when it was due, its call started and was answered, and its binding arrived (Unix ns), to see when the tail happened")
	fs.StringVar(&bf.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole process (bench and embedded server) to this file")
	fs.IntVar(&bf.gcPercent, "gc-percent", defaultGCPercent, gcPercentUsage+" (as for serve: the embedded server shares the process)")
	fs.StringVar(&bf.memLimit, "memory-limit", "", memoryLimitUsage+" (as for serve)")
	fs.StringVar(&bf.gcHeadroom, "gc-headroom", defaultGCHeadroom, gcHeadroomUsage+" (as for serve)")
	fs.BoolVar(&bf.hugePages, "transparent-huge-pages", true, hugePagesUsage+" (as for serve)")
	fs.StringVar(&bf.memProfile, "memprofile", "", "write the whole process's allocations (bench and embedded server) to this file when the run ends")
	if err := fs.Parse(args); err != nil {
		return bf, err
	}
	if fs.NArg() > 0 {
		return bf, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return bf, bc.Validate()
}
