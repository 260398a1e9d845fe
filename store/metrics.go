package store

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the store's collectors. A nil *Metrics records nothing.
type Metrics struct {
	txnDuration  prometheus.Histogram
	commitWait   prometheus.Histogram
	batchUnits   prometheus.Histogram
	txnConflicts prometheus.Counter
	units        *prometheus.CounterVec
	watchEvents  *prometheus.CounterVec
	relists      prometheus.Counter
	shardsOwned  prometheus.Gauge
	shardMoves   *prometheus.CounterVec
	sessions     prometheus.Counter
	replicas     prometheus.Gauge
	fanout       *prometheus.CounterVec
	solo         prometheus.Gauge
	soloLosses   prometheus.Counter
}

// Unit results counted by berth_store_commit_units_total.
const (
	resultCommitted     = "committed"
	resultCompareFailed = "compare_failed"
	resultUnavailable   = "unavailable"
	resultError         = "error"
	resultAbandoned     = "abandoned"
)

// NewMetrics creates the store's collectors and registers them with reg
// (skipped when reg is nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		txnDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "berth_store_txn_duration_seconds",
			Help:    "Time of one group-committed etcd Txn, from send to acknowledgement.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
		}),
		commitWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "berth_store_commit_wait_seconds",
			Help:    "Time a write waited for a group-commit Txn to take it (for the Txn in flight while less than a Txn's worth waits, every Txn slot busy, or a key it touches in flight); its Txn's own time is berth_store_txn_duration_seconds.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16),
		}),
		batchUnits: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "berth_store_txn_batch_units",
			Help:    "Writes (units) carried by one etcd Txn.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
		txnConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_store_txn_compare_failures_total",
			Help: "Txns whose compares failed; the failing writes were settled and the rest resent.",
		}),
		units: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_store_commit_units_total",
			Help: "Group-committed writes by result: committed, compare_failed, unavailable, error, abandoned (caller gone before send).",
		}, []string{"result"}),
		watchEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_store_watch_events_total",
			Help: "etcd watch events received, by consumer: sync or bindings.",
		}, []string{"watch"}),
		relists: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_store_sync_relists_total",
			Help: "Times Sync listed everything again after its watch failed (compaction, lost stream).",
		}),
		shardsOwned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_shards_owned",
			Help: "Logical shards this replica owns and schedules.",
		}),
		shardMoves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_shard_moves_total",
			Help: "Shard ownership changes on this replica: acquired, released (handed to another replica), lost (claim gone or session lost).",
		}, []string{"move"}),
		sessions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_sessions_started_total",
			Help: "etcd sessions (leases) this replica opened; more than one means it lost a lease.",
		}),
		replicas: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_replicas_live",
			Help: "Live replicas registered in etcd, as this replica sees them.",
		}),
		fanout: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_watch_fanout_total",
			Help: "Binding fan-out activity: events (taken into the ring) and cutoffs (subscribers cut off for falling behind).",
		}, []string{"what"}),
		solo: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_store_solo",
			Help: "1 while this replica holds every shard and its bindings compare allocation keys without bumping them; 0 with other replicas.",
		}),
		soloLosses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_store_solo_fence_failures_total",
			Help: "Solo Txns that found another replica registered and were resent with allocation bumps.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.fanout, m.solo, m.soloLosses)
		reg.MustRegister(m.txnDuration, m.commitWait, m.batchUnits, m.txnConflicts, m.units, m.watchEvents, m.relists,
			m.shardsOwned, m.shardMoves, m.sessions, m.replicas)
	}
	return m
}

func (m *Metrics) observeTxn(d time.Duration, units int) {
	if m == nil {
		return
	}
	m.txnDuration.Observe(d.Seconds())
	m.batchUnits.Observe(float64(units))
}

func (m *Metrics) observeCommitWait(d time.Duration) {
	if m != nil {
		m.commitWait.Observe(d.Seconds())
	}
}

func (m *Metrics) txnConflict() {
	if m != nil {
		m.txnConflicts.Inc()
	}
}

func (m *Metrics) unitsDone(result string, n int) {
	if m != nil && n > 0 {
		m.units.WithLabelValues(result).Add(float64(n))
	}
}

func (m *Metrics) watchEvent(watch string, n int) {
	if m != nil && n > 0 {
		m.watchEvents.WithLabelValues(watch).Add(float64(n))
	}
}

func (m *Metrics) relist() {
	if m != nil {
		m.relists.Inc()
	}
}

func (m *Metrics) shardMoved(move string, owned int) {
	if m != nil {
		m.shardMoves.WithLabelValues(move).Inc()
		m.shardsOwned.Set(float64(owned))
	}
}

func (m *Metrics) sessionStarted() {
	if m != nil {
		m.sessions.Inc()
	}
}

func (m *Metrics) liveReplicas(n int) {
	if m != nil {
		m.replicas.Set(float64(n))
	}
}

func (m *Metrics) fanoutEvents(n int) {
	if m != nil {
		m.fanout.WithLabelValues("events").Add(float64(n))
	}
}

func (m *Metrics) fanoutCutOff() {
	if m != nil {
		m.fanout.WithLabelValues("cutoffs").Inc()
	}
}

func (m *Metrics) setSolo(on bool) {
	if m == nil {
		return
	}
	if on {
		m.solo.Set(1)
	} else {
		m.solo.Set(0)
	}
}

func (m *Metrics) soloLost() {
	if m != nil {
		m.soloLosses.Inc()
		m.solo.Set(0)
	}
}
