package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/store"
)

// A replica restarted on its data dir says NOT_SERVING while it cannot
// schedule (here: its shards are settled but its listing, or its start-up
// snapshot, is held before it reaches the core), then SERVING; a new pod
// binds; and every start-up phase was recorded (but the listing's, when
// the snapshot stood in for it).
func TestRestartServesOnceShardsCanSchedule(t *testing.T) {
	t.Run("listing", func(t *testing.T) { testRestartServesOnceShardsCanSchedule(t, false) })
	t.Run("snapshot", func(t *testing.T) { testRestartServesOnceShardsCanSchedule(t, true) })
}

func testRestartServesOnceShardsCanSchedule(t *testing.T, fromSnapshot bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := Config{
		Listen: "127.0.0.1:0", MetricsListen: "-", DataDir: t.TempDir(), ReplicaID: "restarted",
		Embedded:               store.EmbeddedConfig{Maintenance: store.MaintenanceConfig{Interval: -1}},
		Logger:                 zaptest.NewLogger(t),
		DisableStartupSnapshot: !fromSnapshot,
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
	if fromSnapshot && (second.snapshots.snap == nil || second.snapshots.rejected.Load()) {
		t.Errorf("the start-up snapshot was not used (loaded %v)", second.snapshots.snap != nil)
	}
	for _, want := range startupPhases {
		if fromSnapshot && want == phaseList {
			if slices.Contains(phases, want) {
				t.Errorf("berth_startup_phase_seconds has phase %q though the snapshot was used", want)
			}
			continue
		}
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

// writeSettledCluster is writeCluster followed by the binding of its
// pending pod; it returns etcd's revision then.
func writeSettledCluster(ctx context.Context, t *testing.T, st *store.Store, nodes, bound int) int64 {
	t.Helper()
	writeCluster(ctx, t, st, nodes, bound)
	waitBound(ctx, t, st, "pending-0")
	rev, err := st.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return rev
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

// A restart from the start-up snapshot sees what was written after the
// snapshot and before the restart (here: while no replica ran), and its
// cache is the one a full listing builds; a damaged snapshot is not used
// and the listing takes over.
func TestRestartFromSnapshotMatchesListing(t *testing.T) {
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
	path := filepath.Join(cfg.DataDir, snapshotFileName)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no snapshot after a graceful stop: %v", err)
	}

	// Changes the snapshot does not hold.
	func() {
		e, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: cfg.DataDir, Maintenance: store.MaintenanceConfig{Interval: -1}})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		st, err := store.Open(ctx, store.Config{Endpoints: e.Endpoints(), Client: e.Client(), MaxTxnOps: store.EmbeddedMaxTxnOps})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var later []*berthv1.Pod
		for i := range 5 {
			later = append(later, restartTestPod(fmt.Sprintf("later-%d", i), "node-1"))
		}
		for _, r := range st.CreatePods(ctx, later) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		gone, _, err := st.GetPod(ctx, "restart", "bound-0")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.DeletePod(ctx, "restart", "bound-0", gone.GetUid()); err != nil {
			t.Fatal(err)
		}
	}()

	second, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := second.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	if second.snapshots.snap == nil || second.snapshots.rejected.Load() {
		t.Fatalf("the start-up snapshot was not used (loaded %v)", second.snapshots.snap != nil)
	}
	fromSnapshot := podsByNode(t, second, 3)
	if want := []string{"bound-1", "bound-10", "bound-13"}; !slices.Equal(fromSnapshot["node-1"][:3], want) ||
		!slices.Contains(fromSnapshot["node-1"], "later-4") || slices.Contains(fromSnapshot["node-0"], "bound-0") {
		t.Errorf("cache from the snapshot misses the changes made after it: %v", fromSnapshot)
	}
	if r := second.store.CreatePods(ctx, []*berthv1.Pod{restartTestPod("after-restart", "")})[0]; r.Err != nil {
		t.Fatal(r.Err)
	}
	waitBound(ctx, t, second.store, "after-restart")
	pollUntil(ctx, t, "the binding in the cache", func() bool {
		for _, pods := range podsByNode(t, second, 3) {
			if slices.Contains(pods, "after-restart") {
				return true
			}
		}
		return false
	})
	fromSnapshot = podsByNode(t, second, 3)
	if err := second.Stop(); err != nil {
		t.Fatal(err)
	}

	// A torn snapshot: the third start lists everything instead.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data[:len(data)-7], 0o600); err != nil {
		t.Fatal(err)
	}
	third := startSynced(ctx, t, cfg)
	if third.snapshots.snap != nil {
		t.Fatal("a torn snapshot was loaded")
	}
	if diff := cmp.Diff(podsByNode(t, third, 3), fromSnapshot); diff != "" {
		t.Errorf("cache from the snapshot differs from the listing's (-listing +snapshot):\n%s", diff)
	}
}

// A replica that stops without its final snapshot, as after a kill -9,
// restarts from the last snapshot and the change log beside it: the cache
// it loads already holds the changes made after the file was written, and
// matches the one it stopped with. A graceful stop whose log holds every
// change leaves the file as it was, and the restart is the same.
func TestRestartLoadsTheChangeLog(t *testing.T) {
	t.Run("after a crash", func(t *testing.T) { testRestartLoadsTheChangeLog(t, true) })
	t.Run("after a graceful stop", func(t *testing.T) { testRestartLoadsTheChangeLog(t, false) })
}

func testRestartLoadsTheChangeLog(t *testing.T, crash bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := Config{
		Listen: "127.0.0.1:0", MetricsListen: "-", DataDir: t.TempDir(), ReplicaID: "restarted",
		Embedded: store.EmbeddedConfig{Maintenance: store.MaintenanceConfig{Interval: -1}},
		Logger:   zaptest.NewLogger(t), SnapshotInterval: time.Hour, crashLike: crash,
	}
	first := startSynced(ctx, t, cfg)
	writeCluster(ctx, t, first.store, 3, 30)
	waitBound(ctx, t, first.store, "pending-0")
	if !first.writeSnapshot(ctx, false) {
		t.Fatal("no snapshot written")
	}
	written := first.snapshots.written.Load()
	var later []*berthv1.Pod
	for i := range 5 {
		later = append(later, restartTestPod(fmt.Sprintf("later-%d", i), "node-1"))
	}
	var last int64
	for _, r := range first.store.CreatePods(ctx, later) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		last = max(last, r.Revision)
	}
	gone, _, err := first.store.GetPod(ctx, "restart", "bound-0")
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := first.store.DeletePod(ctx, "restart", "bound-0", gone.GetUid())
	if err != nil {
		t.Fatal(err)
	}
	last = max(last, deleted)
	pollUntil(ctx, t, "the changes in the cache", func() bool { return first.appliedRev.Load() >= last })
	want := podsByNode(t, first, 3)
	file, err := os.ReadFile(first.snapshots.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	if after, err := os.ReadFile(first.snapshots.path); err != nil || !bytes.Equal(after, file) {
		t.Fatalf("the stop rewrote the snapshot (%v), though its change log held every change", err)
	}

	second := startSynced(ctx, t, cfg)
	sn := second.snapshots.snap
	if sn == nil || second.snapshots.rejected.Load() {
		t.Fatalf("the start-up snapshot was not used (loaded %v)", sn != nil)
	}
	pods := 0
	for _, names := range want {
		pods += len(names)
	}
	if sn.BaseRevision != written || sn.Revision < last || sn.Changes < 6 || sn.Pods != pods {
		t.Errorf("loaded file revision %d continued to %d by %d changes, %d pods; want %d, at least %d and 6, %d",
			sn.BaseRevision, sn.Revision, sn.Changes, sn.Pods, written, last, pods)
	}
	// What the next restart would replay is the frames this one did.
	if logged, _ := second.snapshots.replay.sizes(); logged != sn.ChangeBytes || logged == 0 {
		t.Errorf("after the load the log to replay is %d bytes; want the %d of the frames replayed", logged, sn.ChangeBytes)
	}
	if diff := cmp.Diff(want, podsByNode(t, second, 3)); diff != "" {
		t.Errorf("cache after the crash restart differs from the one before (-before +after):\n%s", diff)
	}
}

// awaitSignal waits for done, failing the test if ctx ends first rather
// than hanging until the binary's timeout.
func awaitSignal(ctx context.Context, t *testing.T, what string, done <-chan struct{}) {
	t.Helper()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("waiting for %s: %v", what, ctx.Err())
	}
}

// A graceful stop keeps the file, and the change log it keeps reaches
// every write, though the sync was behind etcd when the stop began: the
// stop lets the sync catch up before ending it. Here the sync is held at
// the first pod of a burst until the scheduler has stopped.
func TestGracefulStopLogsWhatEtcdHolds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := snapshotConfig(t, "stopped", time.Hour)
	var hold atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	cfg.beforePodPut = func() {
		if hold.CompareAndSwap(true, false) {
			close(held)
			<-release
		}
	}
	first := startSynced(ctx, t, cfg)
	// Run before the stop startSynced set up, should the test end early.
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	writeSettledCluster(ctx, t, first.store, 3, 30)
	if !first.writeSnapshot(ctx, false) {
		t.Fatal("no snapshot written")
	}
	file, err := os.ReadFile(first.snapshots.path)
	if err != nil {
		t.Fatal(err)
	}
	hold.Store(true)
	var last int64
	for batch := range 4 {
		var pods []*berthv1.Pod
		for i := range 1000 {
			pods = append(pods, restartTestPod(fmt.Sprintf("burst-%d-%d", batch, i), fmt.Sprintf("node-%d", i%3)))
		}
		for _, r := range first.store.CreatePods(ctx, pods) {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			last = max(last, r.Revision)
		}
	}
	awaitSignal(ctx, t, "the sync held at the burst", held)
	stopped := make(chan error, 1)
	go func() { stopped <- first.Stop() }()
	awaitSignal(ctx, t, "the scheduler stopped", first.schedDone)
	releaseOnce()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if after, err := os.ReadFile(first.snapshots.path); err != nil || !bytes.Equal(after, file) {
		t.Fatalf("the stop rewrote the snapshot (%v); its change log should have been kept", err)
	}
	sn, err := store.ReadSnapshot(first.snapshots.path, first.cfg.Store.Prefix, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if sn.Revision < last || sn.Pods < 4031 {
		t.Errorf("snapshot and log reach revision %d with %d pods; want at least %d (the last write before the stop) and 4031",
			sn.Revision, sn.Pods, last)
	}
}

// podsByNode names the pods the core holds on each of the first n nodes,
// sorted.
func podsByNode(t *testing.T, r *Replica, n int) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for i := range n {
		name := fmt.Sprintf("node-%d", i)
		ni, ok := r.sched.NodeInfo(name)
		if !ok {
			t.Fatalf("%s not in the cache", name)
		}
		var pods []string
		for _, pi := range ni.Pods {
			pods = append(pods, pi.Pod.Name)
		}
		slices.Sort(pods)
		out[name] = pods
	}
	return out
}

// History a restart inherits is compacted once older than the retention,
// counted from when the start-up snapshot saw it, not from the restart.
// When a change log continued the file, the file's own revision counts
// from the file's time, and only the log's later revisions from the log's.
func TestRestartCompactsHistoryTheSnapshotSaw(t *testing.T) {
	t.Run("snapshot alone", func(t *testing.T) { testRestartCompactsHistoryTheSnapshotSaw(t, false) })
	t.Run("continued by a change log", func(t *testing.T) { testRestartCompactsHistoryTheSnapshotSaw(t, true) })
}

func testRestartCompactsHistoryTheSnapshotSaw(t *testing.T, logged bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := Config{
		Listen: "127.0.0.1:0", MetricsListen: "-", DataDir: t.TempDir(), ReplicaID: "compacting",
		Embedded: store.EmbeddedConfig{AutoCompactionRetention: "1h", Maintenance: store.MaintenanceConfig{Interval: time.Hour}},
		Logger:   zaptest.NewLogger(t), SnapshotInterval: time.Hour,
	}
	first, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	writeCluster(ctx, t, first.store, 2, 4)
	waitBound(ctx, t, first.store, "pending-0")
	if !first.writeSnapshot(ctx, true) {
		t.Fatal("no snapshot written")
	}
	if logged {
		// A change after the file: the graceful stop keeps the log that
		// holds it instead of rewriting the file.
		r := first.store.CreatePods(ctx, []*berthv1.Pod{restartTestPod("later", "node-0")})[0]
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		pollUntil(ctx, t, "the change in the log", func() bool {
			return first.snapshots.changesAt.Load() >= first.appliedChanges.Load() && first.appliedRev.Load() >= r.Revision
		})
	}
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	// As if the snapshot had been written longer ago than the retention;
	// a change log beside it keeps its own, fresh time.
	aged := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(filepath.Join(cfg.DataDir, snapshotFileName), aged, aged); err != nil {
		t.Fatal(err)
	}

	second := startSynced(ctx, t, cfg)
	sn := second.snapshots.snap
	if sn == nil || second.snapshots.rejected.Load() {
		t.Fatal("the start-up snapshot was not used")
	}
	if logged != (sn.Revision > sn.BaseRevision) {
		t.Fatalf("loaded file revision %d continued to %d; want a change log: %v", sn.BaseRevision, sn.Revision, logged)
	}
	compactedBefore := func(rev int64) bool {
		_, err := second.store.Client().Get(ctx, "/", clientv3.WithRev(rev))
		if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
			t.Fatal(err)
		}
		return err != nil
	}
	// The file's revision reaches maintenance once the sync has verified
	// the snapshot; each pass looks for it.
	rev := sn.BaseRevision
	pollUntil(ctx, t, "history before the snapshot compacted", func() bool {
		if err := second.embedded.Maintain(ctx); err != nil {
			if ctx.Err() != nil {
				return false // pollUntil says what it waited for
			}
			t.Fatal(err)
		}
		return compactedBefore(rev - 1)
	})
	if compactedBefore(rev) {
		t.Errorf("compacted past the file's revision %d (loaded to %d)", rev, sn.Revision)
	}
}

// startSynced starts a replica, stopped when the test ends, and waits
// until its cache has caught up with the store.
func startSynced(ctx context.Context, t *testing.T, cfg Config) *Replica {
	t.Helper()
	r, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	if err := r.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

// A start whose gRPC port is taken fails before it starts etcd: the ports
// are bound first, so that none of the embedded etcd's free ports can be the
// one a restart needs.
func TestStartBindsItsPortsFirst(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	dir := filepath.Join(t.TempDir(), "data")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := Start(ctx, Config{
		Listen: held.Addr().String(), MetricsListen: "-", DataDir: dir,
		Embedded: store.EmbeddedConfig{Maintenance: store.MaintenanceConfig{Interval: -1}},
		Logger:   zaptest.NewLogger(t),
	})
	if err == nil {
		r.Stop()
		t.Fatalf("Start on the taken address %s succeeded", held.Addr())
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("Start: %v, want address in use", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "member")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("etcd was started before the port was bound: %s/member: %v", dir, err)
	}
}
