package replica

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	berth "github.com/berth-io/berth/clients/go"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/store"
)

// TestWriteRestartData fills a data dir for measuring restarts, far faster
// than loading through a server, which schedules while it loads: it is
// skipped unless BERTH_RESTART_DATA_DIR names the dir. BERTH_RESTART_NODES
// and BERTH_RESTART_PODS size it (default 20,000 and 200,000); the pods are
// declared bound, spread evenly, as they are once a bench has run.
func TestWriteRestartData(t *testing.T) {
	dir := os.Getenv("BERTH_RESTART_DATA_DIR")
	if dir == "" {
		t.Skip("BERTH_RESTART_DATA_DIR not set")
	}
	nodes, pods := envInt(t, "BERTH_RESTART_NODES", 20000), envInt(t, "BERTH_RESTART_PODS", 200000)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	etcd, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	st, err := store.Open(ctx, store.Config{Client: etcd.Client(), MaxTxnOps: store.EmbeddedMaxTxnOps, RequestTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range nodes {
		g.Go(func() error {
			_, err := st.PutNodeWithLease(gctx, restartNode(i))
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	const batch = 1000
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(4)
	for first := 0; first < pods; first += batch {
		g.Go(func() error {
			var ps []*berthv1.Pod
			for i := first; i < min(first+batch, pods); i++ {
				ps = append(ps, restartPod(i, restartNodeName(i%max(nodes, 1))))
			}
			for _, r := range st.CreatePods(gctx, ps) {
				if r.Err != nil {
					return r.Err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %d nodes and %d bound pods to %s", nodes, pods, dir)
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}

func restartNodeName(i int) string { return fmt.Sprintf("restart-node-%06d", i) }

// restartNode and restartPod are shaped like the bench's basic workload.
func restartNode(i int) *berthv1.Node {
	name := restartNodeName(i)
	return &berthv1.Node{
		Name:        name,
		Allocatable: map[string]int64{"cpu": 32000, "memory": 128 << 30, "pods": 110, "ephemeral-storage": 100 << 30},
		Labels:      map[string]string{"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": fmt.Sprintf("zone-%d", i%3)},
	}
}

func restartPod(i int, node string) *berthv1.Pod {
	return &berthv1.Pod{
		Namespace: "bench", Name: fmt.Sprintf("restart-%d", i), NodeName: node,
		Labels: map[string]string{"app": "restart"},
		Containers: []*berthv1.Container{{
			Name: "main", Image: "registry.example/app:1",
			Requests: map[string]int64{"cpu": 100, "memory": 128 << 20},
		}},
	}
}

// TestMeasureRestart times a restart of a real `berth serve` process on a
// data dir TestWriteRestartData filled: it is skipped unless
// BERTH_RESTART_BINARY names the binary. Each of BERTH_RESTART_RUNS runs
// (default 3) starts the binary, submits a new pod as soon as the replica
// answers, reports when health said SERVING and when the pod was bound,
// then kills the process with SIGKILL, as a crash would. It measures; it
// asserts nothing about the times.
func TestMeasureRestart(t *testing.T) {
	bin, dir := os.Getenv("BERTH_RESTART_BINARY"), os.Getenv("BERTH_RESTART_DATA_DIR")
	if bin == "" || dir == "" {
		t.Skip("BERTH_RESTART_BINARY and BERTH_RESTART_DATA_DIR not set")
	}
	for run := range envInt(t, "BERTH_RESTART_RUNS", 3) {
		measureRestart(t, bin, dir, run)
	}
}

func measureRestart(t *testing.T, bin, dir string, run int) {
	const addr = "127.0.0.1:17373"
	logPath := filepath.Join(t.TempDir(), "serve.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "serve", "--data-dir", dir, "--listen", addr, "--metrics-listen", "127.0.0.1:17393",
		"--etcd-request-timeout", "60s")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if out, err := os.ReadFile(logPath); err == nil {
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(line, "startup phase") || strings.Contains(line, "scheduler state loaded") || strings.Contains(line, "starting embedded etcd") || strings.Contains(line, "store open") || strings.Contains(line, "berth serving") {
					t.Logf("run %d log: %s", run, line)
				}
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Reconnect at once: the listener opens only after etcd has started.
	c, err := berth.Dial(ctx, addr, berth.WithMaxAttempts(1), berth.WithDialOptions(grpc.WithConnectParams(grpc.ConnectParams{
		Backoff: backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1, MaxDelay: 5 * time.Millisecond}, MinConnectTimeout: time.Second,
	})))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	health := healthpb.NewHealthClient(c.Conn())
	name := fmt.Sprintf("restart-probe-%d", time.Now().UnixNano())
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	var submitted, serving, bound time.Duration
	var servingCPU, boundCPU time.Duration
	for bound == 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("run %d: no binding: %v", run, ctx.Err())
		case <-tick.C:
		}
		if submitted == 0 {
			p := restartPod(0, "")
			p.Name = name
			if _, _, err := c.SubmitPod(ctx, p); err == nil {
				submitted = time.Since(start)
			}
			continue
		}
		if serving == 0 {
			if resp, err := health.Check(ctx, &healthpb.HealthCheckRequest{}); err == nil && resp.Status == healthpb.HealthCheckResponse_SERVING {
				serving = time.Since(start)
				servingCPU = processCPU(t, cmd.Process.Pid)
			}
		}
		if p, err := c.GetPod(ctx, "bench", name); err == nil && p.GetNodeName() != "" {
			bound = time.Since(start)
			boundCPU = processCPU(t, cmd.Process.Pid)
		}
	}
	t.Logf("run %d: submitted at %s, SERVING seen at %s (%s of CPU), new pod bound at %s (%s of CPU)",
		run, submitted, serving, servingCPU, bound, boundCPU)
}

// processCPU is the user and system CPU time a process has used so far: on
// a shared machine, a steadier figure than the time it took.
func processCPU(t *testing.T, pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Logf("cpu time: %v", err)
		return 0
	}
	// Fields after the command (which may hold spaces) start at state;
	// utime and stime are the 14th and 15th fields, in clock ticks.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}
