package store

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the store's collectors. A nil *Metrics records nothing.
type Metrics struct {
	txnDuration  prometheus.Histogram
	batchUnits   prometheus.Histogram
	txnConflicts prometheus.Counter
	units        *prometheus.CounterVec
	watchEvents  *prometheus.CounterVec
	relists      prometheus.Counter
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
	}
	if reg != nil {
		reg.MustRegister(m.txnDuration, m.batchUnits, m.txnConflicts, m.units, m.watchEvents, m.relists)
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
