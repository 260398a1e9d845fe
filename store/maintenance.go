package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// MaintenanceConfig tunes the embedded etcd's upkeep: compaction that keeps
// the configured history (EmbeddedConfig.AutoCompactionRetention), and
// defragmentation, which alone returns compacted space to the quota. When
// the database fills anyway (etcd's NOSPACE alarm, writes refused with
// ErrNoSpace), a pass compacts all history, defragments and disarms the
// alarm once the data fits again, so writes resume without a restart.
type MaintenanceConfig struct {
	// Interval between passes; default 30s. Negative: no passes, and etcd's
	// own compactor keeps the retention instead (nothing defragments).
	Interval time.Duration
	// Registerer receives the maintenance metrics; nil: none.
	Registerer prometheus.Registerer
}

const (
	defaultMaintenanceInterval = 30 * time.Second
	// maintenanceCallTimeout bounds each etcd call of a pass; a defrag
	// rewrites the whole file, which for gigabytes takes a while.
	maintenanceCallTimeout = 5 * time.Minute
)

// Disarm once the defragmented file is at most this share of the quota:
// disarming a database still at the brim only trips the alarm again on
// the next write.
const disarmNumerator, disarmDenominator = 8, 10

// retention is how much history compaction keeps: the revisions of the
// last age, or the last revisions.
type retention struct {
	age       time.Duration
	revisions int64
}

// parseRetention reads AutoCompactionRetention: a duration ("5m") or a
// plain count of revisions ("100000"). "0" keeps everything.
func parseRetention(s string) (retention, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 {
		return retention{revisions: n}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return retention{}, fmt.Errorf("%w: compaction retention %q: want a duration or a revision count", ErrInvalidArgument, s)
	}
	return retention{age: d}, nil
}

type maintenanceMetrics struct {
	dbSize, dbInUse, quota, alarm prometheus.Gauge
	compactions, defrags          *prometheus.CounterVec
	disarms                       prometheus.Counter
}

// Reasons a pass compacts or defragments, as metric labels.
const (
	reasonRetention  = "retention"
	reasonFragmented = "fragmented"
	reasonNoSpace    = "nospace"
)

func newMaintenanceMetrics(reg prometheus.Registerer) *maintenanceMetrics {
	m := &maintenanceMetrics{
		dbSize: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_store_etcd_db_size_bytes",
			Help: "Size of the embedded etcd's database file, as of the last maintenance pass.",
		}),
		dbInUse: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_store_etcd_db_size_in_use_bytes",
			Help: "Bytes of the embedded etcd's database holding data; the rest is free for reuse, and returned by defragmentation.",
		}),
		quota: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_store_etcd_quota_bytes",
			Help: "Database size at which the embedded etcd refuses writes (--etcd-quota-bytes).",
		}),
		alarm: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_store_etcd_nospace_alarm",
			Help: "1 while the embedded etcd's NOSPACE alarm is raised and writes fail with ResourceExhausted.",
		}),
		compactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_store_etcd_compactions_total",
			Help: "Compactions of the embedded etcd's history, by reason: retention (periodic) or nospace (the database was full).",
		}, []string{"reason"}),
		defrags: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_store_etcd_defrags_total",
			Help: "Defragmentations of the embedded etcd, by reason: fragmented (periodic) or nospace (the database was full).",
		}, []string{"reason"}),
		disarms: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_store_etcd_alarm_disarms_total",
			Help: "NOSPACE alarms disarmed after maintenance freed space, each resuming writes.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.dbSize, m.dbInUse, m.quota, m.alarm, m.compactions, m.defrags, m.disarms)
	}
	return m
}

// revisionAt is the store revision seen at a time: periodic compaction
// compacts to the newest one older than the retention.
type revisionAt struct {
	at  time.Time
	rev int64
}

// earlierRevision is a revisionAt seen by an earlier process, with the
// member that had it.
type earlierRevision struct {
	revisionAt
	clusterID, memberID uint64
}

// maintainer runs the passes of one embedded etcd.
type maintainer struct {
	// client reaches the member at endpoint over loopback: the in-process
	// client cannot defragment.
	client   *clientv3.Client
	endpoint string
	keep     retention
	log      *zap.Logger
	metrics  *maintenanceMetrics

	mu        sync.Mutex // one pass at a time; guards the fields below
	seen      []revisionAt
	compacted int64
	// earlier are revisions seen before this process started (see
	// RevisionSeen), not yet checked against the member.
	earlier []earlierRevision

	stop context.CancelFunc
	done chan struct{}
}

func newMaintainer(endpoint string, tlsCfg *tls.Config, keep retention, log *zap.Logger, reg prometheus.Registerer) (*maintainer, error) {
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tlsCfg, DialTimeout: 5 * time.Second, Logger: log.Named("client")})
	if err != nil {
		return nil, fmt.Errorf("store: maintenance client: %w", err)
	}
	return &maintainer{client: client, endpoint: endpoint, keep: keep, log: log, metrics: newMaintenanceMetrics(reg)}, nil
}

// start runs a pass every interval until close.
func (m *maintainer) start(interval time.Duration) {
	ctx, stop := context.WithCancel(context.Background())
	m.stop, m.done = stop, make(chan struct{})
	go func() {
		defer close(m.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if err := m.pass(ctx); err != nil && ctx.Err() == nil {
				m.log.Warn("etcd maintenance pass failed", zap.Error(err))
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// close stops the passes, waits for a running one to end, and closes the
// client.
func (m *maintainer) close() {
	if m.stop != nil {
		m.stop()
		<-m.done
	}
	m.client.Close()
}

// pass looks at the database once and does what it needs: recovery from
// a full database first, else compaction to the retention and, when much
// of the file is free, defragmentation.
func (m *maintainer) pass(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, err := m.status(ctx)
	if err != nil {
		return err
	}
	alarms, err := m.noSpaceAlarms(ctx)
	if err != nil {
		return err
	}
	if len(alarms) > 0 {
		return m.recover(ctx, st, alarms)
	}
	m.metrics.alarm.Set(0)
	m.adoptEarlier(st)
	if target := m.retentionTarget(st.Header.Revision, time.Now()); target > m.compacted {
		if err := m.compact(ctx, target, reasonRetention); err != nil {
			return err
		}
	}
	if free := st.DbSize - st.DbSizeInUse; free >= st.DbSizeQuota/8 && free*2 >= st.DbSize {
		// Defragmenting stops the member's reads and writes while it
		// rewrites the file: only when it gives back half the file and a
		// useful share of the quota.
		return m.defrag(ctx, reasonFragmented)
	}
	return nil
}

// recover frees space under the NOSPACE alarm. All history goes, not only
// what the retention would drop: while the alarm holds no client can write
// at all, which is worse than a watcher having to re-list (it is told so
// with the compacted revision).
func (m *maintainer) recover(ctx context.Context, st *clientv3.StatusResponse, alarms []*etcdserverpb.AlarmMember) error {
	m.metrics.alarm.Set(1)
	m.log.Warn("etcd database space exceeded: writes are refused; compacting all history and defragmenting",
		zap.Int64("db_size_bytes", st.DbSize), zap.Int64("in_use_bytes", st.DbSizeInUse), zap.Int64("quota_bytes", st.DbSizeQuota))
	if st.Header.Revision > m.compacted {
		if err := m.compact(ctx, st.Header.Revision, reasonNoSpace); err != nil {
			return err
		}
		var err error
		if st, err = m.status(ctx); err != nil {
			return err
		}
	}
	limit := st.DbSizeQuota / disarmDenominator * disarmNumerator
	if st.DbSizeInUse > limit {
		m.log.Error("etcd database still full of live data after compaction: delete data or raise --etcd-quota-bytes",
			zap.Int64("in_use_bytes", st.DbSizeInUse), zap.Int64("quota_bytes", st.DbSizeQuota))
		return nil
	}
	if st.DbSize > limit {
		if err := m.defrag(ctx, reasonNoSpace); err != nil {
			return err
		}
		var err error
		if st, err = m.status(ctx); err != nil {
			return err
		}
		if st.DbSize > limit {
			m.log.Error("etcd database still too large after defragmentation; the alarm stays",
				zap.Int64("db_size_bytes", st.DbSize), zap.Int64("quota_bytes", st.DbSizeQuota))
			return nil
		}
	}
	cctx, cancel := context.WithTimeout(ctx, maintenanceCallTimeout)
	defer cancel()
	for _, a := range alarms {
		if _, err := m.client.AlarmDisarm(cctx, (*clientv3.AlarmMember)(a)); err != nil {
			return fmt.Errorf("store: disarm NOSPACE alarm: %w", err)
		}
	}
	m.metrics.disarms.Inc()
	m.metrics.alarm.Set(0)
	m.log.Info("etcd NOSPACE alarm disarmed: writes resume", zap.Int64("db_size_bytes", st.DbSize), zap.Int64("quota_bytes", st.DbSizeQuota))
	return nil
}

// retentionTarget records rev as seen now and returns the newest revision
// the retention lets go (0: none).
func (m *maintainer) retentionTarget(rev int64, now time.Time) int64 {
	if m.keep.revisions > 0 {
		return rev - m.keep.revisions
	}
	if m.keep.age <= 0 {
		return 0
	}
	m.seen = append(m.seen, revisionAt{at: now, rev: rev})
	var target int64
	i := 0
	for ; i < len(m.seen) && !m.seen[i].at.After(now.Add(-m.keep.age)); i++ {
		target = m.seen[i].rev
	}
	// The last revision let go is needed no more: it is compacted now.
	m.seen = m.seen[i:]
	return target
}

// adoptEarlier takes the revisions seen by earlier processes of this
// member into account for the retention: without them, history written
// before a restart would wait a whole retention after it, and every
// restart meanwhile rebuilds etcd's index from all of it. A revision from
// another cluster or member, or newer than the member's (a data dir
// restored from an older backup), says nothing about this history.
func (m *maintainer) adoptEarlier(st *clientv3.StatusResponse) {
	for _, e := range m.earlier {
		if e.clusterID != st.Header.ClusterId || e.memberID != st.Header.MemberId || e.rev > st.Header.Revision {
			m.log.Debug("ignoring a revision seen before the start: not this member's history", zap.Int64("revision", e.rev))
			continue
		}
		i, _ := slices.BinarySearchFunc(m.seen, e.at, func(r revisionAt, at time.Time) int { return r.at.Compare(at) })
		m.seen = slices.Insert(m.seen, i, e.revisionAt)
	}
	m.earlier = nil
}

func (m *maintainer) status(ctx context.Context) (*clientv3.StatusResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, maintenanceCallTimeout)
	defer cancel()
	st, err := m.client.Status(cctx, m.endpoint)
	if err != nil {
		return nil, fmt.Errorf("store: etcd status: %w", err)
	}
	m.metrics.dbSize.Set(float64(st.DbSize))
	m.metrics.dbInUse.Set(float64(st.DbSizeInUse))
	m.metrics.quota.Set(float64(st.DbSizeQuota))
	return st, nil
}

// noSpaceAlarms returns the raised NOSPACE alarms (one per member that
// raised it), which are disarmed one by one.
func (m *maintainer) noSpaceAlarms(ctx context.Context) ([]*etcdserverpb.AlarmMember, error) {
	cctx, cancel := context.WithTimeout(ctx, maintenanceCallTimeout)
	defer cancel()
	resp, err := m.client.AlarmList(cctx)
	if err != nil {
		return nil, fmt.Errorf("store: list etcd alarms: %w", err)
	}
	var out []*etcdserverpb.AlarmMember
	for _, a := range resp.Alarms {
		if a.Alarm == etcdserverpb.AlarmType_NOSPACE {
			out = append(out, a)
		}
	}
	return out, nil
}

// compact drops history before rev and waits until its space is free.
func (m *maintainer) compact(ctx context.Context, rev int64, reason string) error {
	cctx, cancel := context.WithTimeout(ctx, maintenanceCallTimeout)
	defer cancel()
	_, err := m.client.Compact(cctx, rev, clientv3.WithCompactPhysical())
	if errors.Is(err, rpctypes.ErrCompacted) {
		m.compacted = rev // someone compacted further already
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: compact etcd to revision %d: %w", rev, err)
	}
	m.compacted = rev
	m.metrics.compactions.WithLabelValues(reason).Inc()
	m.log.Info("etcd history compacted", zap.Int64("revision", rev), zap.String("reason", reason))
	return nil
}

func (m *maintainer) defrag(ctx context.Context, reason string) error {
	cctx, cancel := context.WithTimeout(ctx, maintenanceCallTimeout)
	defer cancel()
	start := time.Now()
	if _, err := m.client.Defragment(cctx, m.endpoint); err != nil {
		return fmt.Errorf("store: defragment etcd: %w", err)
	}
	m.metrics.defrags.WithLabelValues(reason).Inc()
	m.log.Info("etcd defragmented", zap.String("reason", reason), zap.Duration("took", time.Since(start)))
	return nil
}

// RevisionSeen tells maintenance that etcd's revision was at least rev at
// time at, before this process started (a start-up snapshot's revision
// and when it was written), on the member of that cluster and member id.
// Compaction to the retention then counts from then, not from when this
// process first saw the revision. The next pass checks the ids and uses
// it; it is ignored if they are not the running member's, or if
// maintenance is off or keeps a count of revisions.
func (e *Embedded) RevisionSeen(clusterID, memberID uint64, rev int64, at time.Time) {
	m := e.maintainer
	if m == nil || m.keep.age <= 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.earlier = append(m.earlier, earlierRevision{revisionAt: revisionAt{at: at, rev: rev}, clusterID: clusterID, memberID: memberID})
}

// Maintain runs one maintenance pass now and returns its error: a pass
// also runs every MaintenanceConfig.Interval. It fails if maintenance is
// off.
func (e *Embedded) Maintain(ctx context.Context) error {
	if e.maintainer == nil {
		return errors.New("store: embedded etcd maintenance is off")
	}
	return e.maintainer.pass(ctx)
}
