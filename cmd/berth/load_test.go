package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/berth-io/berth/bench"
	"github.com/berth-io/berth/internal/cgroup"
)

func TestParseLoadFlags(t *testing.T) {
	var stderr bytes.Buffer
	lc, err := parseLoadFlags(nil, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if lc.Nodes != 100000 || lc.Pods != 1000000 || lc.Batch != 1000 || lc.Concurrency != 8 || !lc.Restarts || lc.RestartRounds != 1 {
		t.Errorf("defaults %+v; want the issue's 100000 nodes, 1000000 pods, batches of 1000, 8 in flight, one round of restarts", lc)
	}
	lc, err = parseLoadFlags([]string{"--nodes", "20000", "--pods", "200000", "--serve-args", "--gc-percent 100  --shard-loops 2", "--restarts=false", "--restart-rounds", "3"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if lc.Nodes != 20000 || lc.Pods != 200000 || lc.Restarts || lc.RestartRounds != 3 || strings.Join(lc.ServeArgs, " ") != "--gc-percent 100 --shard-loops 2" {
		t.Errorf("parsed %+v", lc)
	}
	lc, err = parseLoadFlags([]string{"--memory-budget", "644MB"}, &stderr)
	if err != nil || lc.MemoryBudget != 644e6 {
		t.Errorf("--memory-budget 644MB: %d, %v; want 644000000 bytes", lc.MemoryBudget, err)
	}
	for _, args := range [][]string{{"--batch", "1001"}, {"--pid", "42"}, {"--pods", "0"}, {"--restart-rounds", "21"}, {"extra"},
		{"--memory-budget", "lots"}, {"--memory-budget", "1Gi", "--addr", "127.0.0.1:7070"}} {
		if _, err := parseLoadFlags(args, &stderr); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

// syncBuffer is the run's output, written by its progress goroutine and
// read by the test as it comes.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	onWrite func(string)
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	if b.onWrite != nil {
		b.onWrite(b.buf.String())
	}
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var serverPIDs = regexp.MustCompile(`berth serve pid (\d+)`)

// assertServersGone checks that every server the output names has ended:
// the run waits for its children, so none may be left even for a moment.
func assertServersGone(t *testing.T, out string) []int {
	t.Helper()
	var pids []int
	for _, m := range serverPIDs.FindAllStringSubmatch(out, -1) {
		pid, _ := strconv.Atoi(m[1])
		pids = append(pids, pid)
		if syscall.Kill(pid, 0) == nil {
			t.Errorf("berth serve pid %d still running after the run", pid)
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	}
	return pids
}

// berth load at CI size, the test binary standing in for berth as its
// child: every pod bound, CPU and memory read, two rounds of both restarts
// timed to a new pod's binding with their CPU and start-up phases, their
// spread, the JSON complete, and no server left behind.
func TestLoadSmallWithRestarts(t *testing.T) {
	t.Setenv(runMainEnv, "1") // the children run main(); this process is past TestMain
	jsonPath := filepath.Join(t.TempDir(), "load.json")
	var out syncBuffer
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"load", "--nodes", "200", "--pods", "2000", "--progress", "1s",
		"--restart-rounds", "2", "--data-dir", t.TempDir(), "--json", jsonPath}, &out, &stderr)
	if code != 0 {
		t.Fatalf("berth load: exit %d: %s\n%s", code, stderr.String(), out.String())
	}
	text := out.String()
	if pids := assertServersGone(t, text); len(pids) != 5 {
		t.Errorf("output names servers %v; want the first and one per restart", pids)
	}
	for _, want := range []string{
		"summary: workload=scale nodes=200 pods=2000 bound=2000 ", `status="ok"`,
		"round 1: restart after SIGTERM: ", "round 1: restart after SIGKILL: ", "round 2: restart after SIGTERM: ", "round 2: restart after SIGKILL: ",
		"restarts over 2 rounds, min / median / max:\n  after SIGTERM: SERVING in ", "\n  after SIGKILL: SERVING in ",
		"server memory:    peak ", "server CPU:       ",
		"  start-up phases ended, from the replica's start: ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if regexp.MustCompile(`(term|kill)-(serving|bound)=0s`).MatchString(text) {
		t.Errorf("a restart figure is missing:\n%s", text)
	}

	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var pd bench.PerfData
	if err := json.Unmarshal(b, &pd); err != nil {
		t.Fatal(err)
	}
	seen := map[string]map[string]float64{}
	for _, it := range pd.DataItems {
		if it.Labels["status"] != "" {
			t.Errorf("%v labelled %q", it.Labels, it.Labels["status"])
		}
		seen[it.Labels["Metric"]+"/"+it.Labels["phase"]+"/"+it.Labels["signal"]] = it.Data
	}
	positive := map[string][]string{
		"SchedulingThroughput//":        {"Average"},
		"submit_to_bound//":             {"Perc50", "Perc99"},
		"time_to_store_all//":           {"Average"},
		"SubmitThroughput//":            {"Average"},
		"server_cpu//":                  {"Total", "PerThousandPods"},
		"server_memory/load/":           {"Peak", "AfterLoad", "PeakPerPod", "AfterLoadPerPod"},
		"restart//SIGTERM":              {"Stop", "ToServing", "ToFirstBinding", "CPUUserToServing"},
		"restart//SIGKILL":              {"ToServing", "ToFirstBinding", "CPUUserToServing"},
		"startup_phases//SIGTERM":       {"etcd", "serving"},
		"startup_phases//SIGKILL":       {"etcd", "serving"},
		"server_memory/restart/SIGTERM": {"Peak", "AtFirstBinding"},
		"server_memory/restart/SIGKILL": {"Peak", "AtFirstBinding"},
	}
	for item, keys := range positive {
		data, ok := seen[item]
		if !ok {
			t.Errorf("no %s item in %s", item, b)
			continue
		}
		for _, k := range keys {
			if data[k] <= 0 {
				t.Errorf("%s %s = %v, want > 0", item, k, data[k])
			}
		}
	}
}

// Under --memory-budget the server and its restarts run in a memory cgroup
// of that size, find its limit by their defaults (90% of it goes to the
// heap's soft limit), and the group is gone after the run. Where this
// process may not make a cgroup, there is nothing to run.
func TestLoadInMemoryBudget(t *testing.T) {
	probe, err := cgroup.Host.NewMemoryGroup(fmt.Sprintf("berth-probe-%d", os.Getpid()), 1<<30)
	if err != nil {
		t.Skipf("cannot make a memory cgroup here: %v", err)
	}
	if err := probe.Remove(); err != nil {
		t.Fatal(err)
	}
	t.Setenv(runMainEnv, "1")
	dir := t.TempDir()
	var out syncBuffer
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"load", "--nodes", "50", "--pods", "200", "--restart-rounds", "1", "--memory-budget", "1Gi",
		"--data-dir", dir, "--serve-args", "--log-level info"}, &out, &stderr)
	if code != 0 {
		t.Fatalf("berth load: exit %d: %s\n%s", code, stderr.String(), out.String())
	}
	text := out.String()
	assertServersGone(t, text)
	m := regexp.MustCompile(`server in memory cgroup (\S+), limited to 1073741824 bytes\n`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("output names no memory cgroup:\n%s", text)
	}
	if _, err := os.Stat(m[1]); !os.IsNotExist(err) {
		t.Errorf("cgroup %s still there after the run: %v", m[1], err)
	}
	for _, start := range []string{"serve-1.log", "serve-2.log", "serve-3.log"} { // the load's and both restarts'
		b, err := os.ReadFile(filepath.Join(dir, "logs", start))
		if err != nil {
			t.Fatal(err)
		}
		if want := `"memory_limit_bytes":966367641,"memory_limit_source":"cgroup"`; !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s: the server did not find the budget", start, want)
		}
	}
}

// Cancelling berth load (Ctrl-C) while it loads ends its server too.
func TestLoadCancelledKillsServer(t *testing.T) {
	t.Setenv(runMainEnv, "1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{onWrite: func(s string) {
		if strings.Contains(s, "registered 200 nodes") {
			cancel()
		}
	}}
	var stderr bytes.Buffer
	code := run(ctx, []string{"load", "--nodes", "200", "--pods", "100000", "--data-dir", t.TempDir()}, out, &stderr)
	if code == 0 {
		t.Fatalf("berth load cancelled while loading: exit 0\n%s", out.String())
	}
	if pids := assertServersGone(t, out.String()); len(pids) != 1 {
		t.Errorf("output names servers %v; want the one started", pids)
	}
}
