package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/berth-io/berth/bench"
	"github.com/berth-io/berth/internal/hugeheap"
)

// berth load is a command of its own rather than a bench workload: its
// server always runs as a separate process (so its memory is the server's
// alone), it restarts that server, and most of bench's flags (replicas,
// rate, traces, profiles of the bench's own process) do not apply to it.
const loadUsage = `Usage: berth load [flags]

Measures one replica at scale: starts "berth serve" as a child process
(this same binary) on a loopback port with its own data directory,
registers --nodes nodes, submits --pods basic pods through SubmitPods and
waits for every binding on WatchBindings, printing progress (pods
submitted and bound, pods/s, the server's RSS) every --progress. It then
reports pods/s (submitted and bound), the time to store all pods, the
server's peak RSS (VmHWM) and RSS after the load, in total and per pod,
and what of the latter is anonymous memory (the Go heap) and what mapped
files (the embedded etcd's database).

With --restarts (the default) it then SIGTERMs the server and restarts it
on the same data, timing the new process to SERVING (gRPC health) and to
the binding of a pod submitted as soon as it takes calls; then the same
after SIGKILL (kill -9). --restart-rounds 3 times three such pairs and
adds the min / median / max of each kind.

The defaults are the issue's full size (100,000 nodes, 1,000,000 pods);
the smaller check is:

  berth load --nodes 20000 --pods 200000 --json load.json

--addr targets a running server instead (with --pid for its memory); it
does not restart it.

Flags:
`

// runLoad is berth load.
func runLoad(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	lc, err := parseLoadFlags(args, stderr)
	if err != nil {
		return err
	}
	// The server's page faults depend on it (docs/operations.md), so its
	// figures do: say it before them.
	fmt.Fprintf(stdout, "transparent huge pages %s\n", hugeheap.Mode(thpModePath))
	return bench.Load(ctx, lc, stdout)
}

// parseLoadFlags parses and checks berth load's command line.
func parseLoadFlags(args []string, stderr io.Writer) (bench.LoadConfig, error) {
	var lc bench.LoadConfig
	fs := newFlagSet("load", loadUsage, stderr)
	fs.IntVar(&lc.Nodes, "nodes", 100000, "nodes to register (the smaller check: 20000)")
	fs.IntVar(&lc.Pods, "pods", 1000000, "pods to load (the smaller check: 200000)")
	fs.IntVar(&lc.Batch, "batch", 1000, "pods per SubmitPods call (at most 1000)")
	fs.IntVar(&lc.Concurrency, "concurrency", 8, "SubmitPods calls in flight")
	fs.BoolVar(&lc.Restarts, "restarts", true, "after the load, time a restart after SIGTERM and one after SIGKILL")
	fs.IntVar(&lc.RestartRounds, "restart-rounds", 1, "with --restarts, time this many SIGTERM-then-SIGKILL pairs, each on the data the last left, and print their min / median / max (the summary then gives medians)")
	fs.DurationVar(&lc.Progress, "progress", 5*time.Second, "time between progress lines")
	fs.DurationVar(&lc.Timeout, "timeout", time.Hour, "give up on the whole run after this long")
	fs.DurationVar(&lc.Stall, "stall", 2*time.Minute, "give up when no pod binds for this long (0: never)")
	fs.DurationVar(&lc.StartTimeout, "start-timeout", 5*time.Minute, "give up on a start of the server (to SERVING and a first binding) or its stop after this long")
	fs.StringVar(&lc.DataDir, "data-dir", "", "the server's directory: etcd data in data/, one log per start in logs/ (default: a temporary one, removed after)")
	server := fs.String("server", "", "the berth binary to run as the server (default: this one): compares two builds under one load generator")
	serveArgs := fs.String("serve-args", "", `more flags for the child "berth serve", space-separated (e.g. "--gc-percent 100 --shard-loops 2")`)
	fs.StringVar(&lc.Addr, "addr", "", "target a running server instead of starting one; no restarts")
	fs.IntVar(&lc.PID, "pid", 0, "with --addr: the server's process id, for its memory from /proc")
	fs.BoolVar(&lc.Quiet, "quiet", false, "no progress lines")
	budget := fs.String("memory-budget", "", "run the server in a memory cgroup of its own limited to this (bytes or a quantity: 644M, 614Mi, 644MB), as a container's "+
		"limit would: its defaults then fit the heap to it. Linux, with a cgroup this process may make groups in (root under v1; under v2 a group that enables memory for its children)")
	fs.StringVar(&lc.JSONPath, "json", "", `also write the results to this file as scheduler_perf-style JSON ({"version":"v1","dataItems":[...]})`)
	if err := fs.Parse(args); err != nil {
		return lc, err
	}
	if fs.NArg() > 0 {
		return lc, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	lc.ServeArgs = strings.Fields(*serveArgs)
	if *budget != "" {
		n, err := parseBytes("--memory-budget", *budget)
		if err != nil {
			return lc, err
		}
		lc.MemoryBudget = n
	}
	if lc.Addr == "" {
		lc.Server.Path = *server
		if lc.Server.Path == "" {
			exe, err := os.Executable()
			if err != nil {
				return lc, fmt.Errorf("find the berth binary to start: %w", err)
			}
			lc.Server.Path = exe
		}
	}
	return lc, lc.Validate()
}
