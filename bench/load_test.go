package bench

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-io/berth/internal/cgroup"
	"github.com/berth-io/berth/replica"
	"github.com/google/go-cmp/cmp"
)

func TestLoadConfigValidate(t *testing.T) {
	good := LoadConfig{
		Server: ServerCommand{Path: "berth"}, Nodes: 1, Pods: 1, Batch: 1000, Concurrency: 8,
		Timeout: time.Minute, StartTimeout: time.Minute,
	}
	if err := good.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for name, edit := range map[string]func(*LoadConfig){
		"no nodes":         func(lc *LoadConfig) { lc.Nodes = 0 },
		"no pods":          func(lc *LoadConfig) { lc.Pods = 0 },
		"batch over 1000":  func(lc *LoadConfig) { lc.Batch = 1001 },
		"no concurrency":   func(lc *LoadConfig) { lc.Concurrency = 0 },
		"pid without addr": func(lc *LoadConfig) { lc.PID = 42 },
		"no binary":        func(lc *LoadConfig) { lc.Server.Path = "" },
		"no start timeout": func(lc *LoadConfig) { lc.StartTimeout = 0 },
		"negative rounds":  func(lc *LoadConfig) { lc.RestartRounds = -1 },
		"too many rounds":  func(lc *LoadConfig) { lc.RestartRounds = maxRestartRounds + 1 },
		"negative budget":  func(lc *LoadConfig) { lc.MemoryBudget = -1 },
		"budget with addr": func(lc *LoadConfig) { lc.Addr, lc.MemoryBudget = "127.0.0.1:1", 1<<30 },
	} {
		lc := good
		edit(&lc)
		if lc.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func sampleLoadResult() loadResult {
	return loadResult{
		run: runResult{
			workload: WorkloadScale, nodes: 2, pods: 4, bound: 4,
			submitDur: 2 * time.Second, elapsed: 4 * time.Second, serverCPU: 6 * time.Second,
			latencies: []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 4 * time.Millisecond},
		},
		pid:    7,
		loaded: replica.ProcessMemory{Peak: 4000, Resident: 2000, Anon: 1500, File: 500},
		stored: 4,
		restarts: []restartResult{
			{signal: syscall.SIGTERM, stop: time.Second, toServing: 2 * time.Second, toBound: 3 * time.Second, mem: replica.ProcessMemory{Peak: 400, Resident: 300},
				phases: []startupPhase{{"etcd", 1500 * time.Millisecond}, {"serving", 2 * time.Second}}},
			{signal: syscall.SIGKILL, toServing: 4 * time.Second, toBound: 5 * time.Second, mem: replica.ProcessMemory{Peak: 500, Resident: 350},
				cpuToServing: cpuTimes{user: 6 * time.Second, system: 1500 * time.Millisecond}},
		},
	}
}

func TestLoadSummary(t *testing.T) {
	got := loadSummary(sampleLoadResult())
	want := `summary: workload=scale nodes=2 pods=4 bound=4 retried=0 submit-pods/s=2 pods/s=1 server-cpu-ms/1k-pods=1500000 store-all=2s peak-rss=4000 rss-after=2000 anon-after=1500 file-after=500 peak-bytes/pod=1000 bytes/pod-after=500 term-serving=2s term-bound=3s kill-serving=4s kill-bound=5s status="ok"`
	if got != want {
		t.Errorf("summary\n got %s\nwant %s", got, want)
	}
}

// The load's items: the bench's two, the time to store and submit rate,
// the server's CPU and memory over the load, and per restart its timings
// and memory.
func TestLoadPerfData(t *testing.T) {
	items := loadPerfData(sampleLoadResult()).DataItems
	type key struct{ metric, unit, phase, signal string }
	var got []key
	for _, it := range items {
		got = append(got, key{it.Labels["Metric"], it.Unit, it.Labels["phase"], it.Labels["signal"]})
		if it.Labels["workload"] != WorkloadScale || it.Labels["nodes"] != "2" || it.Labels["pods"] != "4" || it.Labels["status"] != "" {
			t.Errorf("%s labels %v; want workload scale, 2 nodes, 4 pods, no status", it.Labels["Metric"], it.Labels)
		}
	}
	want := []key{
		{metricThroughput, "pods/s", "", ""},
		{metricSubmitToBound, "ms", "", ""},
		{metricStoreAll, "ms", "", ""},
		{metricSubmitRate, "pods/s", "", ""},
		{metricServerCPU, "ms", "", ""},
		{metricServerMemory, "bytes", "load", ""},
		{metricRestart, "ms", "", "SIGTERM"},
		{metricStartupPhases, "ms", "", "SIGTERM"},
		{metricServerMemory, "bytes", "restart", "SIGTERM"},
		{metricRestart, "ms", "", "SIGKILL"},
		{metricServerMemory, "bytes", "restart", "SIGKILL"},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(key{})); diff != "" {
		t.Fatalf("items (-want,+got):\n%s", diff)
	}
	if d := items[4].Data; d["Total"] != 6000 || d["PerThousandPods"] != 1_500_000 {
		t.Errorf("server CPU %v, want 6000 ms in all, 1,500,000 per 1,000 of the 4 pods", d)
	}
	if d := items[5].Data; d["Peak"] != 4000 || d["PeakPerPod"] != 1000 || d["AfterLoadPerPod"] != 500 || d["AfterLoadAnon"] != 1500 || d["AfterLoadFile"] != 500 {
		t.Errorf("load memory %v", d)
	}
	if d := items[7].Data; len(d) != 2 || d["etcd"] != 1500 || d["serving"] != 2000 {
		t.Errorf("SIGTERM start-up phases %v; want etcd at 1500 ms, serving at 2000 ms", d)
	}
	if d := items[9].Data; d["ToServing"] != 4000 || d["ToFirstBinding"] != 5000 || d["CPUUserToServing"] != 6000 || d["CPUSystemToServing"] != 1500 {
		t.Errorf("SIGKILL restart %v; want 4000 and 5000 ms, CPU 6000 ms user and 1500 ms system", d)
	}

	failed := sampleLoadResult()
	failed.err = errors.New("restart after SIGKILL: boom")
	for _, it := range loadPerfData(failed).DataItems {
		if it.Labels["status"] != "failed" {
			t.Errorf("%s of a failed run not labelled failed: %v", it.Labels["Metric"], it.Labels)
		}
	}
	if s := loadSummary(failed); !strings.HasSuffix(s, `status="restart after SIGKILL: boom"`) {
		t.Errorf("failed summary %s", s)
	}

	// Pods not all stored: no time to store them all, nor a rate of it.
	partial := sampleLoadResult()
	partial.stored, partial.err = 3, errors.New("submit: boom")
	for _, it := range loadPerfData(partial).DataItems {
		if m := it.Labels["Metric"]; m == metricStoreAll || m == metricSubmitRate {
			t.Errorf("%s item for a load that stored 3 of 4 pods", m)
		}
	}
	if s := loadSummary(partial); !strings.Contains(s, " submit-pods/s=0 ") || !strings.Contains(s, " store-all=0s ") {
		t.Errorf("partial summary %s", s)
	}
}

// A restart's line says how its CPU to SERVING split between user and
// system time, where a VM's page faults show, and, when the child's
// metrics were read, when each start-up phase ended.
func TestPrintRestart(t *testing.T) {
	rs := sampleLoadResult().restarts
	var out strings.Builder
	printRestart(&out, rs[1])
	want := "restart after SIGKILL: stopped in 0s; new berth serve pid 0 SERVING in 4s (CPU 6s user, 1.5s system), first new pod bound in 5s (on ); peak 0 MiB by then\n"
	if out.String() != want {
		t.Errorf("restart line\n got %q\nwant %q", out.String(), want)
	}
	out.Reset()
	printRestart(&out, rs[0])
	if got, want := out.String(), "\n  start-up phases ended, from the replica's start: etcd 1.5s, serving 2s\n"; !strings.HasSuffix(got, want) {
		t.Errorf("restart lines\n%s\nwant them to end %q", got, want)
	}
}

// Over several rounds each restart line names its round, a spread line per
// signal gives min / median / max (the lower middle for an even count),
// the summary gives the medians, and each round's items carry its number.
func TestRestartRounds(t *testing.T) {
	r := sampleLoadResult()
	r.restarts = nil
	for round, s := range []struct{ term, kill time.Duration }{{3, 9}, {1, 7}, {2, 8}, {4, 6}} {
		r.restarts = append(r.restarts,
			restartResult{signal: syscall.SIGTERM, round: round + 1, toServing: s.term * time.Second, toBound: s.term*time.Second + time.Second},
			restartResult{signal: syscall.SIGKILL, round: round + 1, toServing: s.kill * time.Second, toBound: s.kill*time.Second + time.Second})
	}
	// A failed restart counts in no spread.
	r.restarts = append(r.restarts, restartResult{signal: syscall.SIGKILL, round: 5, toServing: time.Hour, err: errors.New("boom")})

	var out strings.Builder
	printRestartSpread(&out, r.restarts, 5)
	want := "restarts over 5 rounds, min / median / max:\n" +
		"  after SIGTERM: SERVING in 1s / 2s / 4s; first new pod bound in 2s / 3s / 5s\n" +
		"  after SIGKILL: SERVING in 6s / 7s / 9s; first new pod bound in 7s / 8s / 10s\n"
	if out.String() != want {
		t.Errorf("spread\n got %q\nwant %q", out.String(), want)
	}
	if s := loadSummary(r); !strings.Contains(s, " term-serving=2s term-bound=3s kill-serving=7s kill-bound=8s ") {
		t.Errorf("summary %s; want the medians", s)
	}
	out.Reset()
	printRestart(&out, r.restarts[2])
	if !strings.HasPrefix(out.String(), "round 2: restart after SIGTERM: ") {
		t.Errorf("restart line %q does not name its round", out.String())
	}
	rounds := map[string]int{}
	for _, it := range loadPerfData(r).DataItems {
		if it.Labels["Metric"] == metricRestart {
			rounds[it.Labels["signal"]+"/"+it.Labels["round"]]++
		}
	}
	if want := map[string]int{"SIGTERM/1": 1, "SIGTERM/2": 1, "SIGTERM/3": 1, "SIGTERM/4": 1, "SIGKILL/1": 1, "SIGKILL/2": 1, "SIGKILL/3": 1, "SIGKILL/4": 1}; !maps.Equal(rounds, want) {
		t.Errorf("restart items by signal/round %v; want %v", rounds, want)
	}
}

// The phase gauge is picked out of a scrape and ordered by when each
// phase ended, ties by name.
func TestStartupPhasesOf(t *testing.T) {
	got := startupPhasesOf(map[string]float64{
		`berth_startup_phase_seconds{phase="snapshot"}`: 5.83,
		`berth_startup_phase_seconds{phase="store"}`:    4.06,
		`berth_startup_phase_seconds{phase="etcd"}`:     4.06,
		`berth_startup_phase_seconds_other{phase="x"}`:  1,
		`berth_store_txn_duration_seconds_count`:        7,
	})
	want := []startupPhase{{"etcd", 4060 * time.Millisecond}, {"store", 4060 * time.Millisecond}, {"snapshot", 5830 * time.Millisecond}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(startupPhase{}), durationNear); diff != "" {
		t.Errorf("phases (-want,+got):\n%s", diff)
	}
}

// durationNear compares durations to the microsecond: the gauge's seconds
// are floats.
var durationNear = cmp.Comparer(func(a, b time.Duration) bool { return (a - b).Abs() < time.Microsecond })

// The child's metrics address is the run's unless --serve-args names
// another, the last one winning, in either flag form; "-" turns it off.
func TestChildMetricsAddr(t *testing.T) {
	const own = "127.0.0.1:9000"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, own},
		{[]string{"--gc-percent", "100"}, own},
		{[]string{"--metrics-listen", "127.0.0.1:9100"}, "127.0.0.1:9100"},
		{[]string{"-metrics-listen=127.0.0.1:9200"}, "127.0.0.1:9200"},
		{[]string{"--metrics-listen", "127.0.0.1:9100", "--metrics-listen=127.0.0.1:9300"}, "127.0.0.1:9300"},
		{[]string{"--metrics-listen", "-"}, ""},
		{[]string{"--metrics-listen"}, own},
		{[]string{"--metrics-listener", "127.0.0.1:9400"}, own},
	} {
		if got := childMetricsAddr(own, tc.args); got != tc.want {
			t.Errorf("childMetricsAddr(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// A child that dies after the kernel's OOM killer struck in its group is
// said to have died of the budget; one that died otherwise is not.
func TestOOMNote(t *testing.T) {
	root := t.TempDir()
	self := filepath.Join(t.TempDir(), "cgroup")
	if err := os.WriteFile(self, []byte("4:memory:/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "memory"), 0o755); err != nil {
		t.Fatal(err)
	}
	g, err := cgroup.Paths{Root: root, Self: self}.NewMemoryGroup("load-1", 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	l := &loader{lc: LoadConfig{MemoryBudget: 1 << 30}, group: g}
	oom := filepath.Join(g.Dir(), "memory.oom_control")
	for _, tc := range []struct {
		kills string
		want  string
	}{
		{"0", ""},
		{"1", " (killed by the kernel, out of memory: over --memory-budget 1073741824 bytes)"},
	} {
		if err := os.WriteFile(oom, []byte("oom_kill_disable 0\nunder_oom 0\noom_kill "+tc.kills+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := l.oomNote(); got != tc.want {
			t.Errorf("after %s OOM kills: note %q; want %q", tc.kills, got, tc.want)
		}
	}
	if got := (&loader{}).oomNote(); got != "" {
		t.Errorf("without a budget: note %q", got)
	}
}

func TestRunsThisBinary(t *testing.T) {
	if !runsThisBinary(os.Args[0]) {
		t.Errorf("%s, this test binary, is not found to be this process's", os.Args[0])
	}
	if runsThisBinary("/bin/sh") || runsThisBinary(filepath.Join(t.TempDir(), "absent")) {
		t.Error("another binary, or none, is found to be this process's")
	}
}
