package replica

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/store"
)

// A replica restarted on its data dir says NOT_SERVING while it cannot
// schedule (here: its shards are settled but its listing is held before it
// reaches the core), then SERVING; a new pod binds; and every start-up
// phase was recorded.
func TestRestartServesOnceShardsCanSchedule(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := Config{
		Listen: "127.0.0.1:0", MetricsListen: "-", DataDir: t.TempDir(), ReplicaID: "restarted",
		Embedded: store.EmbeddedConfig{Maintenance: store.MaintenanceConfig{Interval: -1}},
		Logger:   zaptest.NewLogger(t),
	}
	first, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeCluster(ctx, t, first.store, 3, 30)
	waitBound(ctx, t, first.store, "pending-0")
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}

	listed := make(chan struct{})
	gate := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(gate) }) }
	cfg.beforeLoad = func() {
		select {
		case <-listed:
		default:
			close(listed)
		}
		<-gate
	}
	second, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := second.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}()
	defer release() // before Stop, which waits for the held sync

	conn, err := grpc.NewClient(second.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	wantHealth(ctx, t, hc, healthpb.HealthCheckResponse_NOT_SERVING, "before anything is loaded")
	select {
	case <-listed:
	case <-ctx.Done():
		t.Fatal("the listing never came")
	}
	pollUntil(ctx, t, "shard ownership settled", func() bool {
		return second.ownershipKnown.Load() && second.sched.OwnedShards() == second.sched.LogicalShards()
	})
	wantHealth(ctx, t, hc, healthpb.HealthCheckResponse_NOT_SERVING, "with shards owned but the listing not loaded")

	release()
	pollUntil(ctx, t, "SERVING", func() bool {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING
	})
	if got := second.sched.OwnedShards(); got != second.sched.LogicalShards() {
		t.Errorf("SERVING with %d of %d shards owned", got, second.sched.LogicalShards())
	}
	for _, name := range []string{"pending-0", "bound-0"} {
		if _, ok := second.sched.NodeInfo("node-0"); !ok {
			t.Fatalf("node-0 not loaded")
		}
		p, _, err := second.store.GetPod(ctx, "restart", name)
		if err != nil {
			t.Fatal(err)
		}
		if p.GetNodeName() == "" {
			t.Errorf("%s lost its binding across the restart", name)
		}
	}

	newPod := restartTestPod("after-restart", "")
	if r := second.store.CreatePods(ctx, []*berthv1.Pod{newPod})[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	waitBound(ctx, t, second.store, "after-restart")

	families, err := second.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var phases []string
	for _, f := range families {
		if f.GetName() != "berth_startup_phase_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "phase" {
					phases = append(phases, l.GetValue())
				}
			}
		}
	}
	for _, want := range startupPhases {
		if !slices.Contains(phases, want) {
			t.Errorf("berth_startup_phase_seconds has phases %v; missing %q", phases, want)
		}
	}
}

// writeCluster stores nodes, pods declared bound across them, and one
// pending pod for the scheduler.
func writeCluster(ctx context.Context, t *testing.T, st *store.Store, nodes, bound int) {
	t.Helper()
	for i := range nodes {
		n := &berthv1.Node{Name: fmt.Sprintf("node-%d", i), Allocatable: map[string]int64{"cpu": 64000, "memory": 256 << 30, "pods": 110}}
		if _, err := st.PutNodeWithLease(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	pods := []*berthv1.Pod{restartTestPod("pending-0", "")}
	for i := range bound {
		pods = append(pods, restartTestPod(fmt.Sprintf("bound-%d", i), fmt.Sprintf("node-%d", i%nodes)))
	}
	for _, r := range st.CreatePods(ctx, pods) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
}

func restartTestPod(name, node string) *berthv1.Pod {
	return &berthv1.Pod{
		Namespace: "restart", Name: name, NodeName: node,
		Containers: []*berthv1.Container{{Name: "c", Requests: map[string]int64{"cpu": 100, "memory": 1 << 20}}},
	}
}

func waitBound(ctx context.Context, t *testing.T, st *store.Store, name string) {
	t.Helper()
	pollUntil(ctx, t, name+" bound", func() bool {
		p, _, err := st.GetPod(ctx, "restart", name)
		return err == nil && p.GetNodeName() != ""
	})
}

// wantHealth checks the replica's health at once, as a load balancer would.
func wantHealth(ctx context.Context, t *testing.T, hc healthpb.HealthClient, want healthpb.HealthCheckResponse_ServingStatus, when string) {
	t.Helper()
	resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("health %s: %v", when, err)
	}
	if resp.GetStatus() != want {
		t.Fatalf("health %s: %v, want %v", when, resp.GetStatus(), want)
	}
}

// pollUntil polls cond until it holds or ctx ends.
func pollUntil(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}
