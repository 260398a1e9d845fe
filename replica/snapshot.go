package replica

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/berth-io/berth/store"
)

// A replica on the embedded etcd keeps a start-up snapshot of what it
// caches in its data dir (see store/snapshot.go), so that a restart loads
// the cache while etcd opens instead of listing it after. The file is
// written periodically while the cache changes and on a graceful stop; a
// restart checks it against etcd and catches up by watch, or discards it
// and lists.

// snapshotFileName is the snapshot's file in the data dir.
const snapshotFileName = "berth-startup.snap"

// defaultSnapshotInterval spaces the checks for a periodic write: each
// write reads the cached range from etcd and writes it out (about a second
// of one core at 200,000 pods), so a short interval would tax the load it
// follows.
const defaultSnapshotInterval = 30 * time.Second

// snapshotDuty bounds the share of time periodic writes take: after a
// write that took d, the next waits at least snapshotDuty*d. A write grows
// with the cluster (seconds at a million pods), and at a fixed interval it
// would tax the load it follows more the larger the cluster is.
const snapshotDuty = 20

// snapshots writes the start-up snapshot and remembers what it wrote.
type snapshots struct {
	path     string
	interval time.Duration
	log      *zap.Logger
	// loaded closes when the start-up load (used or not) is over.
	loaded chan struct{}
	// snap is what was loaded into the core, for the sync to verify; nil
	// if nothing was.
	snap *store.Snapshot
	// rejected: the snapshot loaded did not verify against etcd.
	rejected atomic.Bool
	// written is the revision of the last snapshot written (or loaded and
	// still valid): no write is needed until the cache moves past it.
	written atomic.Int64
	// took is how long the last write took, which spaces the next.
	took atomic.Int64
	// ticks counts the periodic checks that were due (tests wait on it).
	ticks atomic.Int64
	// changesAt is the replica's count of applied changes when the file
	// and its change log last matched the cache (read before a write;
	// after a load; after each change log frame).
	changesAt atomic.Int64
	// changes is the change log beside the file (store/changelog.go).
	changes *store.ChangeLog
	// replay is what of it a restart would replay (snapshot_policy.go).
	replay replayLog
	// frames counts the log's frames: each moves the revision the file
	// and log reach (what a restart checks) to etcd's at the time.
	frames atomic.Int64

	seconds  prometheus.Histogram
	bytes    prometheus.Gauge
	revision prometheus.Gauge
	writes   *prometheus.CounterVec
	logBytes prometheus.Counter
}

// newSnapshots sets up the writes to path and their metrics; applied reads
// the replica's count of changes applied to the cache, for the lag.
func newSnapshots(path string, interval time.Duration, applied func() int64, reg prometheus.Registerer, log *zap.Logger) *snapshots {
	if interval <= 0 {
		interval = defaultSnapshotInterval
	}
	s := &snapshots{
		path: path, interval: interval, log: log, loaded: make(chan struct{}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "berth_startup_snapshot_write_seconds", Help: "Time to write one start-up snapshot.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}),
		bytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_startup_snapshot_bytes", Help: "Size of the last start-up snapshot written.",
		}),
		revision: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_startup_snapshot_revision", Help: "etcd revision of the last start-up snapshot written.",
		}),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_startup_snapshot_writes_total", Help: "Start-up snapshot writes, by result (ok, error; kept: a graceful stop found the file and its change log whole and wrote none).",
		}, []string{"result"}),
		logBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_startup_change_log_bytes_total", Help: "Bytes appended to the start-up snapshot's change log.",
		}),
	}
	// A kill -9 restart replays what the file lacks; the interval is
	// stretched by the writes' cost, so under a heavy load this, not the
	// interval, says how far behind the file is.
	behind := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "berth_startup_snapshot_changes_behind",
		Help: "Changes the cache has applied that the start-up snapshot and its change log lack: what a restart after a crash replays from etcd.",
	}, func() float64 { return float64(applied() - s.changesAt.Load()) })
	reg.MustRegister(s.seconds, s.bytes, s.revision, s.writes, s.logBytes, behind)
	return s
}

// snapshotsOn: only the embedded etcd's data dir is ours to keep a
// snapshot in, and only it can be opened while we read one.
func (r *Replica) snapshotsOn() bool {
	return !r.cfg.DisableStartupSnapshot && r.embeddedEtcd()
}

// loadSnapshot reads the data dir's snapshot and loads it into the core
// through the bridge, in the background, beside the etcd open. The sync
// waits for it (snapshots.loaded).
func (r *Replica) loadSnapshot() {
	if !r.snapshotsOn() {
		r.startup.mark(phaseSnapshot, zap.Bool("used", false), zap.String("reason", "disabled"))
		return
	}
	dir, err := filepath.Abs(r.cfg.DataDir)
	if err != nil {
		dir = r.cfg.DataDir
	}
	s := newSnapshots(filepath.Join(dir, snapshotFileName), r.cfg.SnapshotInterval, r.appliedChanges.Load, r.reg, r.logger.Named("snapshot"))
	s.changes = store.OpenChangeLog(s.path, func(newest int64, bytes int) {
		s.logBytes.Add(float64(bytes))
		s.replay.frame(newest, bytes)
		s.frames.Add(1)
		// Frames continue a snapshot; before the first there is none.
		if s.written.Load() > 0 {
			s.changesAt.Store(r.appliedChanges.Load())
		}
	}, s.log)
	r.snapshots = s
	go func() {
		defer close(s.loaded)
		sn, err := store.ReadSnapshot(s.path, r.cfg.Store.Prefix, r.logger.Named("store"))
		if err != nil {
			reason := err.Error()
			if errors.Is(err, fs.ErrNotExist) {
				reason = "no snapshot in the data dir"
			}
			// Change logs continue a snapshot; without one they are
			// of no use.
			s.changes.Discard()
			r.startup.mark(phaseSnapshot, zap.Bool("used", false), zap.String("reason", reason))
			return
		}
		if r.cfg.beforeLoad != nil {
			r.cfg.beforeLoad()
		}
		r.bridge.fromSnapshot = true
		sn.Load(r.bridge)
		s.snap = sn
		s.written.Store(sn.Revision)
		s.replay.loaded(sn.Revision, sn.FileBytes, sn.ChangeBytes)
		s.changesAt.Store(r.appliedChanges.Load())
		r.startup.mark(phaseSnapshot, zap.Bool("used", true), zap.Int64("revision", sn.Revision),
			zap.Int64("file_revision", sn.BaseRevision), zap.Int("logged_changes", sn.Changes),
			zap.Int("nodes", sn.Nodes), zap.Int("pods", sn.Pods))
	}()
}

// waitSnapshotLoad waits for the start-up load, if one runs, and hands
// over what was loaded (nil if nothing).
func (r *Replica) waitSnapshotLoad() *store.Snapshot {
	if r.snapshots == nil {
		return nil
	}
	<-r.snapshots.loaded
	return r.snapshots.snap
}

// adoptSnapshotRevision tells the embedded etcd's maintenance when the
// start-up snapshot's revision was current, once the sync has verified the
// snapshot against etcd (a rejected one may come from another history,
// such as a data dir restored from an older backup): history it saw then
// need not wait out a whole retention again before it is compacted.
func (r *Replica) adoptSnapshotRevision(ctx context.Context, sn *store.Snapshot) {
	select {
	case <-r.syncReady:
	case <-ctx.Done():
		return
	}
	// A rejection is marked before the listing that makes the sync ready.
	if r.snapshots.rejected.Load() {
		return
	}
	// The file's own revision is the older point when change logs
	// continued it: history before it may go a whole log's span sooner.
	if sn.BaseRevision < sn.Revision && sn.BaseWritten.Before(sn.Written) {
		r.embedded.RevisionSeen(sn.ClusterID, sn.Member, sn.BaseRevision, sn.BaseWritten)
	}
	r.embedded.RevisionSeen(sn.ClusterID, sn.Member, sn.Revision, sn.Written)
}

// staleSnapshotIntervals: a snapshot is rewritten after this many
// intervals in which its change log took no frame, if etcd's revision
// moved (a change too small for the log to warrant a write, or keys the
// cache does not hold, such as shard claims): compaction follows etcd's
// revision, and a restart checks the file and log at the revision of the
// log's last frame, of no use once compaction passed it.
const staleSnapshotIntervals = 4

// defaultMaxChangeLogFiles bounds the change log files a start leaves
// beside the snapshot. Each start logs to a file of its own, and only a
// snapshot write removes them, so a replica that keeps being restarted
// before its first periodic write (a crash loop, a script) would pile
// them up, and every start reads them all.
const defaultMaxChangeLogFiles = 16

// runSnapshots checks every interval, until ctx ends, whether the cache
// moved far enough past the snapshot to write it again (logWarrantsWrite,
// staleSnapshotIntervals); and once the sync is ready, writes at once if
// more than maxChangeLogFiles change logs have piled up.
func (r *Replica) runSnapshots(ctx context.Context) error {
	if !r.trimChangeLogs(ctx) {
		return nil
	}
	tick := time.NewTicker(r.snapshots.interval)
	defer tick.Stop()
	idle := 0
	last := time.Now()
	frames := r.snapshots.frames.Load()
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			return nil
		case now = <-tick.C:
		}
		if !snapshotDue(now, last, time.Duration(r.snapshots.took.Load())) {
			continue
		}
		last = now
		seen := r.snapshots.frames.Load()
		fresh := seen != frames
		frames = seen
		switch {
		case r.snapshots.logWarrantsWrite() && r.writeSnapshot(ctx, false):
			idle = 0
		case fresh:
			// The log's last frame is recent, and with it the revision a
			// restart checks: compaction cannot have passed it.
			idle = 0
		default:
			if idle++; idle >= staleSnapshotIntervals {
				idle = 0
				r.writeSnapshot(ctx, true)
			}
		}
		r.snapshots.ticks.Add(1)
	}
}

// trimChangeLogs waits for the sync to be ready, then writes a snapshot
// if too many change log files are waiting for one: the write removes
// them. It reads etcd beside the first cycles, which only a pile-up makes
// worth it. False if ctx ended first.
func (r *Replica) trimChangeLogs(ctx context.Context) bool {
	select {
	case <-r.syncReady:
	case <-ctx.Done():
		return false
	}
	limit := r.cfg.maxChangeLogFiles
	if limit <= 0 {
		limit = defaultMaxChangeLogFiles
	}
	if n := store.ChangeLogFiles(r.snapshots.path); n > limit {
		r.snapshots.log.Info("start-up snapshot rewritten early: change logs piled up", zap.Int("files", n), zap.Int("limit", limit))
		r.writeSnapshot(ctx, true)
	}
	return true
}

// snapshotDue tells whether a periodic write may run at now, the last
// attempt having been at last and the last write having taken took.
func snapshotDue(now, last time.Time, took time.Duration) bool {
	return now.Sub(last) >= snapshotDuty*took
}

// writeSnapshot writes one if the cache moved past the last one, or, with
// ifEtcdMoved, if etcd's revision did; it tells whether it wrote.
func (r *Replica) writeSnapshot(ctx context.Context, ifEtcdMoved bool) bool {
	s := r.snapshots
	if s == nil || r.store == nil {
		return false
	}
	if r.appliedRev.Load() <= s.written.Load() {
		if !ifEtcdMoved {
			return false
		}
		if rev, err := r.store.CurrentRevision(ctx); err != nil || rev <= s.written.Load() {
			return false
		}
	}
	// Changes applied while the file is written may or may not be in it:
	// counting from before the write errs toward behind.
	changes := r.appliedChanges.Load()
	s.replay.writeBegins()
	w, err := r.store.WriteSnapshot(ctx, s.path)
	s.replay.writeEnds(err == nil, w.Revision, w.Bytes)
	if err != nil {
		s.writes.WithLabelValues("error").Inc()
		if ctx.Err() == nil {
			s.log.Warn("start-up snapshot not written", zap.Error(err))
		}
		return false
	}
	s.writes.WithLabelValues("ok").Inc()
	s.seconds.Observe(w.Duration.Seconds())
	s.bytes.Set(float64(w.Bytes))
	s.revision.Set(float64(w.Revision))
	s.written.Store(w.Revision)
	s.took.Store(int64(w.Duration))
	// The change log's frames may have moved the count past the write's.
	if changes > s.changesAt.Load() {
		s.changesAt.Store(changes)
	}
	s.changes.Rotate(w.Revision)
	s.log.Debug("start-up snapshot written", zap.Int64("revision", w.Revision), zap.Int("keys", w.Keys),
		zap.Int64("bytes", w.Bytes), zap.Duration("took", w.Duration))
	return true
}

// finalSnapshot writes one at a graceful stop, bounded by the grace,
// unless the last one and its change log already hold every change the
// cache applied and the log is short (see keptLogRatio): then the next
// start loads them as it would after a kill -9. Writing reads all of etcd
// (seconds at a million pods) while no request is served; replaying a
// short log costs a restart less than that.
func (r *Replica) finalSnapshot() {
	if r.snapshots == nil || r.cfg.crashLike {
		return
	}
	logBytes, fileBytes, lacking := r.snapshots.coveredByLog(r.appliedChanges.Load())
	fields := []zap.Field{zap.Int64("revision", r.snapshots.written.Load()), zap.Int64("snapshot_bytes", fileBytes),
		zap.Int64("change_log_bytes_to_replay", logBytes)}
	if lacking == "" {
		r.snapshots.writes.WithLabelValues("kept").Inc()
		r.snapshots.log.Info("start-up snapshot and its change log kept: they hold every change", fields...)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.ShutdownGrace)
	defer cancel()
	// It writes nothing if the cache has not moved since the file and log.
	if r.writeSnapshot(ctx, false) {
		r.snapshots.log.Info("start-up snapshot rewritten before stopping", append(fields, zap.String("reason", lacking),
			zap.Duration("took", time.Duration(r.snapshots.took.Load())))...)
	}
}

// catchUpBeforeStop lets the sync apply what etcd holds past the cache
// before a graceful stop ends it, within stopCatchUpBound; the scheduler
// has stopped, so no commit of this replica's is still to come. Under a
// heavy load the sync runs a little behind etcd. Stopped there, the
// change log lacked the last changes, and the next start fetched them
// through the watch after etcd opened (0.7 s at a million pods) instead
// of loading them from the log while etcd opens.
func (r *Replica) catchUpBeforeStop() {
	if r.snapshots == nil || r.cfg.crashLike || r.store == nil {
		return
	}
	select {
	case <-r.syncReady:
	default:
		return // still listing: there is no log to complete
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(r.cfg.ShutdownGrace, stopCatchUpBound))
	defer cancel()
	start, from := time.Now(), r.appliedRev.Load()
	rev, err := r.store.CurrentRevision(ctx)
	if err == nil {
		err = r.store.AwaitView(ctx, rev)
	}
	if err != nil {
		r.snapshots.log.Info("stopping with the cache behind etcd: the next start catches up by watch",
			zap.Int64("cache_revision", r.appliedRev.Load()), zap.Int64("etcd_revision", rev), zap.Error(err))
		return
	}
	r.snapshots.log.Info("cache caught up with etcd before stopping", zap.Int64("from_revision", from),
		zap.Int64("revision", rev), zap.Duration("took", time.Since(start)))
}

// stopCatchUpBound bounds catchUpBeforeStop: a sync that far behind
// is better left to the next start.
const stopCatchUpBound = 5 * time.Second

// keptLogBytes is the change log a graceful stop leaves to be replayed
// rather than writing the snapshot, however small the file. A log is
// replayed beside the etcd open, which takes longer: at a million pods, a
// stop after 21,000 changes (a 10 MB log) took 0.05 s instead of 3.3, and
// the restart that replayed them was no slower.
const keptLogBytes = 16 << 20

// keptLogRatio is the most a change log a graceful stop keeps may be, in
// multiples of the file's size (the inverse sense of snapshotLogShare,
// how far below the file a periodic write lets the log grow). The stop's
// write reads all of etcd while nothing is served; the log's replay runs
// beside the next start's etcd open, which outlasts the file's load.
// After a million-pod load the last periodic write had left a 105 MB file
// (about 400,000 pods) and a log past it of one to four times that:
// rewriting the file made the stop take 2.4-2.6 s and the restart reach
// SERVING 3.9 s after its start (6.3-6.5 s from the signal); keeping the
// log made the stop 0.03-0.08 s and the restart 4.4-4.6 s (4.4-4.6 s
// from the signal). The replay's cost grows with the log, the write's
// with the cluster, so a longer log is still left to the write.
const keptLogRatio = 4

// coveredByLog tells what the snapshot file and its change log lack for a
// graceful stop to keep them ("" if nothing): every applied change, the
// log intact, and what a restart would replay of it no larger than
// keptLogRatio times the file, or keptLogBytes. It also returns the sizes
// of both. The log files on disk are no measure: the one a write was
// logging into is kept whole, though most of its frames are older than
// the file and a restart skips them. Counting those made a stop after a
// heavy load rewrite the file (3.4 s at a million pods) for a log it did
// not need.
func (s *snapshots) coveredByLog(applied int64) (logBytes, fileBytes int64, lacking string) {
	switch {
	case s.written.Load() == 0:
		return 0, 0, "no snapshot written yet"
	case s.rejected.Load():
		return 0, 0, "the snapshot loaded did not match etcd"
	case applied > s.changesAt.Load():
		return 0, 0, "the change log lacks changes the cache applied"
	}
	fi, err := os.Stat(s.path)
	if err != nil {
		return 0, 0, "snapshot file unreadable: " + err.Error()
	}
	logBytes, _ = s.replay.sizes()
	if logBytes > max(keptLogRatio*fi.Size(), keptLogBytes) {
		return logBytes, fi.Size(), fmt.Sprintf("the change log to replay outgrew %d times the snapshot", keptLogRatio)
	}
	return logBytes, fi.Size(), ""
}

// SnapshotRejected implements store.CatchUpHandler: a full listing
// follows; the file is rewritten once the cache is whole again.
func (s *bridge) SnapshotRejected(err error) {
	if s.snapshotRejected != nil {
		s.snapshotRejected()
	}
	s.logger().Warn("start-up snapshot rejected; listing everything", zap.Error(err))
}

// CaughtUp implements store.CatchUpHandler: the cache loaded from the
// snapshot is now as current as etcd was when it was checked, which is
// when a listing's cache would be whole.
func (s *bridge) CaughtUp(rev int64) {
	if s.startup != nil {
		s.startup.mark(phaseCache, zap.Bool("from_snapshot", true), zap.Int64("revision", rev))
	}
	s.markReady()
}

var _ store.CatchUpHandler = (*bridge)(nil)
