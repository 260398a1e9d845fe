package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testTraceDir is the synthetic trace the trace package tests with.
const testTraceDir = "trace/testdata"

func smallBench(t *testing.T, workload string, sizes Sizes) Config {
	t.Helper()
	return Config{
		Workload: workload, Sizes: sizes, Batch: 50, Concurrency: 4,
		Timeout: time.Minute, Stall: 30 * time.Second, TraceWindow: 2,
		DataDir: t.TempDir(), TraceDir: testTraceDir, Quiet: true, Replicas: 1,
	}
}

// TestBenchSmall runs the basic workload end to end through an in-process
// server with embedded etcd on loopback.
func TestBenchSmall(t *testing.T) {
	var out bytes.Buffer
	bc := smallBench(t, WorkloadBasic, Sizes{Nodes: 20, InitPods: -1, Pods: 200})
	results, err := runBenchmarks(context.Background(), bc, &out)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	if len(results) != 1 {
		t.Fatalf("%d results, want 1", len(results))
	}
	r := results[0]
	if r.bound != 200 || len(r.latencies) != 200 || r.podsPerSec() <= 0 || r.nodes != 20 {
		t.Errorf("result: %d nodes, %d bound, %d latencies, %.0f pods/s; want 20 nodes and 200 bound\n%s",
			r.nodes, r.bound, len(r.latencies), r.podsPerSec(), out.String())
	}
	for _, want := range []string{"summary: workload=basic nodes=20 init=0 pods=200 bound=200 ", "submit-to-bound:", `status="ok"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestBenchTraceReplay replays the synthetic trace: every pod that fits
// binds, the one too big for any node is deleted unbound and counted
// unschedulable, and every pod is deleted at its trace time.
func TestBenchTraceReplay(t *testing.T) {
	var out bytes.Buffer
	bc := smallBench(t, WorkloadAlibaba, Sizes{InitPods: -1})
	results, err := runBenchmarks(context.Background(), bc, &out)
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out.String())
	}
	r := results[0]
	if r.nodes != 3 || r.pods != 6 || r.bound != 5 || r.unschedulable != 1 || r.deletes != 6 {
		t.Errorf("nodes %d pods %d bound %d unschedulable %d deleted %d; want 3, 6, 5, 1, 6\n%s",
			r.nodes, r.pods, r.bound, r.unschedulable, r.deletes, out.String())
	}
	if !strings.Contains(out.String(), "e.g. ") || !strings.Contains(out.String(), "pod-3") {
		t.Errorf("output does not name the unschedulable pod:\n%s", out.String())
	}
}

func TestPrintTable(t *testing.T) {
	var out bytes.Buffer
	printTable(&out, []runResult{
		{workload: "basic", nodes: 5, pods: 10, bound: 10, elapsed: time.Second, latencies: []time.Duration{time.Millisecond}},
		{workload: "preemption", nodes: 5, pods: 10, err: errStalled},
	})
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("table has %d lines, want a header and 2 rows:\n%s", len(lines), out.String())
	}
	for i, want := range [][]string{
		{"workload", "nodes", "init", "pods", "bound", "pods/s", "p50", "p99", "status"},
		{"basic", "5", "0", "10", "10", "10", "1ms", "1ms", "ok"},
		{"preemption", "5", "0", "10", "0", "0", "0s", "0s", "bench:", "no", "progress"},
	} {
		if diff := strings.Join(strings.Fields(lines[i]), " "); diff != strings.Join(want, " ") {
			t.Errorf("line %d = %q, want fields %q", i, diff, want)
		}
	}
}

func TestAllSkipsAlibabaWithoutTrace(t *testing.T) {
	// Deep enough that the search never leaves the temporary directory.
	deep := filepath.Join(t.TempDir(), "a", "b", "c", "d", "e")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(deep) // no trace above
	bc := smallBench(t, WorkloadAll, Sizes{InitPods: -1})
	bc.TraceDir = ""
	var out bytes.Buffer
	if res := benchOne(context.Background(), bc, WorkloadAlibaba, &out); res.skipped == "" || res.err != nil {
		t.Errorf("under all: skipped %q, err %v; want skipped with no error", res.skipped, res.err)
	}
	bc.Workload = WorkloadAlibaba
	if res := benchOne(context.Background(), bc, WorkloadAlibaba, &out); res.err == nil || !strings.Contains(res.err.Error(), "--trace-dir") {
		t.Errorf("alone: err %v, want one asking for --trace-dir", res.err)
	}
}

func TestResolveTraceDirTakesTheFlag(t *testing.T) {
	if _, err := resolveTraceDir("/explicit"); err != nil {
		t.Errorf("an explicit --trace-dir is taken as is: %v", err)
	}
}

// Under --rate the output labels both latencies and warns when the pods
// went out too slowly for the percentiles to be those of --rate alone.
func TestPrintDetailsRate(t *testing.T) {
	r := runResult{workload: "basic", nodes: 5, pods: 2, bound: 2, elapsed: time.Second, rate: 1000, sentRate: 990, sendLag: time.Millisecond,
		latencies: []time.Duration{10 * time.Millisecond}, callLatencies: []time.Duration{2 * time.Millisecond}}
	var out bytes.Buffer
	printDetails(&out, r)
	for _, want := range []string{"calls started at 990 pods/s", "submit-to-bound:  p50 10ms", "due time", "from call start:  p50 2ms", "server's share"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "WARNING") {
		t.Errorf("on time, yet warned:\n%s", out.String())
	}
	if strings.Contains(out.String(), "acked") || strings.Contains(out.String(), "trivial") {
		t.Errorf("no split and no floor measured, yet printed:\n%s", out.String())
	}

	split := r
	split.ackLatencies = []time.Duration{3 * time.Millisecond}
	split.afterAckLatencies = []time.Duration{4 * time.Millisecond}
	split.floorLatencies = []time.Duration{500 * time.Microsecond}
	out.Reset()
	printDetails(&out, split)
	for _, want := range []string{"call acked:     p50 3ms", "ack to bound:   p50 4ms", "trivial call:     p50 500µs", "health check"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	r.sentRate, r.sendLag = 600, time.Second
	out.Reset()
	printDetails(&out, r)
	if !strings.Contains(out.String(), "WARNING: pods went out at 600 pods/s, below 95% of --rate 1000") {
		t.Errorf("behind, yet no warning:\n%s", out.String())
	}
}
