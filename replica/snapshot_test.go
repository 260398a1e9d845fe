package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/store"
)

// A graceful stop keeps the file only when it and its log hold every
// change applied, and what a restart would replay of the log is no larger
// than keptLogRatio times the file, or keptLogBytes, whatever the log
// files on disk hold.
func TestSnapshotCoveredByLog(t *testing.T) {
	const large = 3 * keptLogBytes
	for _, tc := range []struct {
		name               string
		written, changesAt int64
		applied            int64
		rejected           bool
		file               []int // its size; no file if nil
		toReplay           int   // bytes of frames past the file
		logFiles           []int // sizes on disk, covered frames included
		want               bool
	}{
		{name: "log holds every change", written: 10, changesAt: 7, applied: 7, file: []int{100}, toReplay: 100, logFiles: []int{30, 70}, want: true},
		{name: "no log", written: 10, changesAt: 7, applied: 7, file: []int{100}, want: true},
		{name: "short log, larger than a small file", written: 10, changesAt: 7, applied: 7, file: []int{100}, toReplay: keptLogBytes, want: true},
		{name: "log larger than keptLogBytes and a small file", written: 10, changesAt: 7, applied: 7, file: []int{100}, toReplay: keptLogBytes + 1},
		{name: "long log, within its ratio to a large file", written: 10, changesAt: 7, applied: 7, file: []int{large}, toReplay: keptLogRatio * large, want: true},
		{name: "log past its ratio to a large file", written: 10, changesAt: 7, applied: 7, file: []int{large}, toReplay: keptLogRatio*large + 1},
		{name: "log files mostly frames the file covers", written: 10, changesAt: 7, applied: 7, file: []int{100}, toReplay: 100, logFiles: []int{large, 100}, want: true},
		{name: "changes applied since the last frame", written: 10, changesAt: 7, applied: 8, file: []int{100}},
		{name: "nothing written yet", changesAt: 7, applied: 7, file: []int{100}},
		{name: "snapshot rejected", written: 10, changesAt: 7, applied: 7, rejected: true, file: []int{100}},
		{name: "file gone", written: 10, changesAt: 7, applied: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), snapshotFileName)
			s := newSnapshots(path, 0, func() int64 { return 0 }, prometheus.NewRegistry(), zap.NewNop())
			s.written.Store(tc.written)
			s.changesAt.Store(tc.changesAt)
			s.rejected.Store(tc.rejected)
			for _, size := range tc.file {
				writeSized(t, path, size)
				s.replay.loaded(tc.written, int64(size), 0)
			}
			s.replay.frame(tc.written, 1<<30) // covered by the file: not replayed
			s.replay.frame(tc.written+1, tc.toReplay)
			for i, size := range tc.logFiles {
				writeSized(t, fmt.Sprintf("%s.changes.%d", path, i+1), size)
			}
			logBytes, fileBytes, lacking := s.coveredByLog(tc.applied)
			if covered := lacking == ""; covered != tc.want {
				t.Errorf("covered = %v (%q; log %d bytes to replay, file %d), want %v", covered, lacking, logBytes, fileBytes, tc.want)
			}
		})
	}
}

// snapshotConfig is a replica on an embedded etcd of its own, without
// maintenance, that checks its start-up snapshot every interval.
func snapshotConfig(t *testing.T, id string, interval time.Duration) Config {
	return Config{
		Listen: "127.0.0.1:0", MetricsListen: "-", DataDir: t.TempDir(), ReplicaID: id,
		Embedded: store.EmbeddedConfig{Maintenance: store.MaintenanceConfig{Interval: -1}},
		Logger:   zaptest.NewLogger(t), SnapshotInterval: interval,
	}
}

// writeSized makes a file of size bytes, sparse: only its size counts.
func writeSized(t *testing.T, path string, size int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(f.Truncate(int64(size)), f.Close()); err != nil {
		t.Fatal(err)
	}
}

// While the cache changes the snapshot is rewritten every interval, and it
// follows etcd's revision even when only keys the cache does not hold
// move it, so compaction does not leave it behind.
func TestSnapshotWrittenPeriodically(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := startSynced(ctx, t, snapshotConfig(t, "periodic", 10*time.Millisecond))
	writeCluster(ctx, t, r.store, 2, 4)
	rev, err := r.store.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pollUntil(ctx, t, "a snapshot of the new cluster", func() bool { return r.snapshots.written.Load() >= rev })

	resp, err := r.store.Client().Put(ctx, "/berth/v1/alloc/not-cached", "x")
	if err != nil {
		t.Fatal(err)
	}
	pollUntil(ctx, t, "a snapshot at etcd's revision", func() bool { return r.snapshots.written.Load() >= resp.Header.Revision })
	sn, err := store.ReadSnapshot(filepath.Join(r.cfg.DataDir, snapshotFileName), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if sn.Revision < resp.Header.Revision || sn.Nodes != 2 || sn.Pods != 5 {
		t.Errorf("snapshot at %d with %d nodes, %d pods; want >= %d, 2, 5", sn.Revision, sn.Nodes, sn.Pods, resp.Header.Revision)
	}
}

// The gauge of changes a crash restart would replay from etcd counts what
// the cache took in since the file and its change log last matched it: all
// of it before the first write, none after.
func TestSnapshotChangesBehind(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg := snapshotConfig(t, "behind", time.Hour)
	r := startSynced(ctx, t, cfg)
	behind := func() float64 {
		t.Helper()
		families, err := r.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "berth_startup_snapshot_changes_behind" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no berth_startup_snapshot_changes_behind")
		return 0
	}
	// Its pending pod's binding is a change too: the count settles after.
	rev := writeSettledCluster(ctx, t, r.store, 2, 4)
	pollUntil(ctx, t, "the cluster in the cache", func() bool { return r.appliedRev.Load() >= rev })
	// Two nodes and five pods at least; leases count too.
	if got := behind(); got < 7 {
		t.Fatalf("%v changes behind before any snapshot, want at least 7", got)
	}
	if !r.writeSnapshot(ctx, false) {
		t.Fatal("no snapshot written")
	}
	if got := behind(); got != 0 {
		t.Fatalf("%v changes behind after a write, want 0", got)
	}
	resp := r.store.CreatePods(ctx, []*berthv1.Pod{restartTestPod("one-more", "node-0")})[0]
	if resp.Err != nil {
		t.Fatal(resp.Err)
	}
	pollUntil(ctx, t, "the new pod in the cache", func() bool { return r.appliedRev.Load() >= resp.Revision })
	// The change log beside the file holds it once its frame is written,
	// just after the cache took it in.
	pollUntil(ctx, t, "the new pod in the change log", func() bool { return behind() == 0 })

	// A restart loads the snapshot its stop wrote: what it loaded is not
	// behind, whatever else the catch-up brings.
	if err := r.Stop(); err != nil {
		t.Fatal(err)
	}
	r = startSynced(ctx, t, cfg)
	if r.snapshots.snap == nil || r.snapshots.rejected.Load() {
		t.Fatal("the start-up snapshot was not used")
	}
	if got, keys := behind(), r.snapshots.snap.Keys; got >= float64(keys) {
		t.Fatalf("%v changes behind after loading a snapshot of %d keys", got, keys)
	}
}

// Periodic writes wait snapshotDuty times the last write's duration, so
// that a large snapshot's reads of etcd take a bounded share of the time.
func TestSnapshotWritesSpacedByTheirCost(t *testing.T) {
	last := time.Unix(1000, 0)
	for _, tc := range []struct {
		after, took time.Duration
		due         bool
	}{
		{30 * time.Second, 0, true},
		{30 * time.Second, time.Second, true},      // 20 s of spacing, 30 s passed
		{30 * time.Second, 2 * time.Second, false}, // a 2 s write waits 40 s
		{40 * time.Second, 2 * time.Second, true},
		{90 * time.Second, 5 * time.Second, false}, // a million pods: 100 s
	} {
		if got := snapshotDue(last.Add(tc.after), last, tc.took); got != tc.due {
			t.Errorf("%s after a write of %s: due %v, want %v", tc.after, tc.took, got, tc.due)
		}
	}
}

// A periodic write waits for the change log to grow to its share of the
// file, unless the log continues no file.
func TestSnapshotLogWarrantsWrite(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		written                int64
		fileBytes, loggedSince int64
		broken                 bool
		want                   bool
	}{
		{name: "nothing written yet", loggedSince: 1, want: true},
		{name: "log at its share", written: 10, fileBytes: 4000, loggedSince: 4000 / snapshotLogShare, want: true},
		{name: "log short of its share", written: 10, fileBytes: 4000, loggedSince: 4000/snapshotLogShare - 1},
		{name: "file size unknown", written: 10, want: true},
		{name: "log broken", written: 10, fileBytes: 4000, broken: true, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), snapshotFileName)
			s := newSnapshots(path, 0, func() int64 { return 0 }, prometheus.NewRegistry(), zap.NewNop())
			s.changes = store.OpenChangeLog(path, nil, nil)
			if tc.broken {
				s.changes.Close() // drops frames, as after a failed write
			}
			s.written.Store(tc.written)
			s.replay.loaded(tc.written, tc.fileBytes, tc.loggedSince)
			if got := s.logWarrantsWrite(); got != tc.want {
				t.Errorf("write warranted = %v, want %v", got, tc.want)
			}
		})
	}
}

// The log a restart replays is the frames past the file's revision: those
// logged while a write ran count only if they reach past what it read.
func TestReplayLogCountsFramesPastTheFile(t *testing.T) {
	var l replayLog
	l.loaded(10, 1000, 300) // a file at 10 and 300 bytes of logs after it
	l.frame(9, 50)          // before the file: not replayed
	l.frame(11, 100)
	if logged, file := l.sizes(); logged != 400 || file != 1000 {
		t.Fatalf("after load: %d logged, file %d; want 400, 1000", logged, file)
	}
	l.writeBegins()
	l.frame(12, 20) // the write will read 13: in the file
	l.frame(14, 30) // past it
	l.writeEnds(true, 13, 2000)
	l.frame(13, 40) // logged late, still in the file
	l.frame(15, 5)
	if logged, file := l.sizes(); logged != 35 || file != 2000 {
		t.Errorf("after a write at 13: %d logged, file %d; want 35, 2000", logged, file)
	}
	l.writeBegins()
	l.frame(16, 7)
	l.writeEnds(false, 0, 0) // failed: the old file and its log stand
	if logged, file := l.sizes(); logged != 42 || file != 2000 {
		t.Errorf("after a failed write: %d logged, file %d; want 42, 2000", logged, file)
	}
}

// A change far smaller than the file does not rewrite it, however often
// the check comes; enough of them do.
func TestSnapshotWaitsForTheLogToPay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := startSynced(ctx, t, snapshotConfig(t, "log-pays", 10*time.Millisecond))
	s := r.snapshots
	// The binding of the cluster's pending pod is a change too small to
	// warrant a write; the one that covers it comes once the log goes
	// quiet, from the compaction rule.
	rev := writeSettledCluster(ctx, t, r.store, 4, 200)
	pollUntil(ctx, t, "a snapshot of the cluster", func() bool { return s.written.Load() >= rev })

	written, frames := s.written.Load(), s.frames.Load()
	createPods(ctx, t, r.store, "trickle", 1)
	pollUntil(ctx, t, "the change in the log", func() bool { return s.frames.Load() > frames })
	ticks := s.ticks.Load()
	pollUntil(ctx, t, "three more checks", func() bool { return s.ticks.Load() >= ticks+3 })
	if got := s.written.Load(); got != written {
		logged, file := s.replay.sizes()
		t.Errorf("one pod (%d log bytes) rewrote a %d-byte snapshot: revision %d, was %d", logged, file, got, written)
	}

	createPods(ctx, t, r.store, "burst", 100)
	rev, err := r.store.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pollUntil(ctx, t, "a snapshot after a hundred pods", func() bool { return s.written.Load() >= rev })
}

// createPods stores n pending pods named prefix-i.
func createPods(ctx context.Context, t *testing.T, st *store.Store, prefix string, n int) {
	t.Helper()
	pods := make([]*berthv1.Pod, n)
	for i := range pods {
		pods[i] = restartTestPod(fmt.Sprintf("%s-%d", prefix, i), "")
	}
	for _, res := range st.CreatePods(ctx, pods) {
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	}
}

// Each start logs to a change log file of its own, which only a snapshot
// write removes, so restarts that come faster than the periodic writes
// would pile them up. Past the limit, a start writes the snapshot once its
// sync is ready.
func TestRestartsDoNotPileUpChangeLogs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const limit = 2
	cfg := Config{
		Listen: "127.0.0.1:0", MetricsListen: "-", DataDir: t.TempDir(), ReplicaID: "restarted",
		Embedded: store.EmbeddedConfig{Maintenance: store.MaintenanceConfig{Interval: -1}},
		Logger:   zaptest.NewLogger(t), SnapshotInterval: time.Hour, maxChangeLogFiles: limit,
	}
	base := filepath.Join(cfg.DataDir, snapshotFileName)
	most := 0
	for i := range limit + 3 {
		r, err := Start(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.WaitSynced(ctx); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			writeCluster(ctx, t, r.store, 2, 4)
			waitBound(ctx, t, r.store, "pending-0")
		}
		// The trim is the start's first write; the files stay otherwise.
		trimCtx, trimmed := context.WithTimeout(ctx, 30*time.Second)
		pollUntil(trimCtx, t, fmt.Sprintf("at most %d change logs after start %d", limit, i+1), func() bool {
			return store.ChangeLogFiles(base) <= limit
		})
		trimmed()
		// A change, which this start logs to a file of its own.
		frames := r.snapshots.frames.Load()
		res := r.store.CreatePods(ctx, []*berthv1.Pod{restartTestPod(fmt.Sprintf("later-%d", i), "node-0")})[0]
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		pollUntil(ctx, t, "the change logged", func() bool {
			return r.appliedRev.Load() >= res.Revision && r.snapshots.frames.Load() > frames
		})
		most = max(most, store.ChangeLogFiles(base))
		t.Logf("start %d: %d change log files", i+1, store.ChangeLogFiles(base))
		if err := r.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	if most > limit+1 {
		t.Errorf("%d change log files after a start, want at most %d", most, limit+1)
	}
}

// A snapshot's Reset gives its files back as soon as the pods are
// converted, before the cache is built beside them, and only then: what the
// core keeps was copied out of the lent values, here overwritten once given
// back, as unmapping would take them away.
func TestSnapshotFilesGivenBackOnceConverted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	br, sched := snapshotBridge(ctx, t)
	file := make([]byte, 0, 1<<10) // one array, as a file is
	var records []store.PodRecord
	for _, name := range []string{"a", "b"} {
		p := &berthv1.Pod{Namespace: "ns", Name: name, Uid: "u" + name, NodeName: "n1", Status: &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_BOUND}}
		start := len(file)
		var err error
		if file, err = (proto.MarshalOptions{Deterministic: true}).MarshalAppend(file, p); err != nil || cap(file) != 1<<10 {
			t.Fatalf("encoding %s: %v, or it outgrew the file", name, err)
		}
		records = append(records, store.PodRecord{ModRevision: 5, Value: file[start:len(file):len(file)]})
	}
	gaveBack := 0
	br.Lend(func() {
		gaveBack++
		clear(file)
	})
	br.Reset([]*berthv1.Node{{Name: "n1"}}, records, 5)
	if gaveBack != 1 {
		t.Fatalf("files given back %d times; want once", gaveBack)
	}
	ni, ok := sched.NodeInfo("n1")
	if !ok {
		t.Fatal("node n1 not cached")
	}
	var names []string
	for _, pi := range ni.Pods {
		names = append(names, pi.Pod.Namespace+"/"+pi.Pod.Name+"/"+pi.Pod.UID)
	}
	slices.Sort(names)
	if want := []string{"ns/a/ua", "ns/b/ub"}; !slices.Equal(names, want) {
		t.Errorf("pods on n1 %v; want %v", names, want)
	}
}
