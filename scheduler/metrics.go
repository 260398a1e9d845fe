package scheduler

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the scheduling core's collectors. A nil *Metrics records
// nothing, so tests and tools need not register anything.
type Metrics struct {
	attempts        *prometheus.CounterVec
	attemptDuration *prometheus.HistogramVec
	e2eDuration     prometheus.Histogram
	assumeConflicts prometheus.Counter
	bindDuration    prometheus.Histogram
	bindErrors      *prometheus.CounterVec
	statusWrites    *prometheus.CounterVec
	events          *prometheus.CounterVec
	undone          *prometheus.CounterVec
	bindSlotWaits   prometheus.Counter
}

// NewMetrics registers the core's collectors with reg. Gauges that read
// live state (queue lengths, cache sizes) are registered by Register.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_scheduler_attempts_total",
			Help: "Scheduling attempts by result: scheduled, unschedulable or error.",
		}, []string{"result"}),
		attemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "berth_scheduler_attempt_duration_seconds",
			Help:    "Time of one scheduling cycle (snapshot, filter, score, assume), by result.",
			Buckets: prometheus.ExponentialBuckets(0.00002, 2, 16),
		}, []string{"result"}),
		e2eDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "berth_scheduler_pod_scheduling_duration_seconds",
			Help:    "Time from a pod first entering the queue to its binding being durable.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
		}),
		assumeConflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_scheduler_assume_conflicts_total",
			Help: "Placements rejected at assume because another shard took the room first; retried at once.",
		}),
		bindDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "berth_scheduler_bind_duration_seconds",
			Help:    "Time of the binding cycle: permit wait, pre-bind, durable commit.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		bindErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_scheduler_bind_errors_total",
			Help: "Binding cycles that failed, by reason: conflict (the pod changed, another replica charged the node, or the shard moved) or error.",
		}, []string{"reason"}),
		statusWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_scheduler_status_writes_total",
			Help: "Unschedulable diagnoses written to storage, by result.",
		}, []string{"result"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_scheduler_cluster_events_total",
			Help: "Cluster events applied to the cache and queues, by kind.",
		}, []string{"event"}),
		undone: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_scheduler_preemptions_undone_total",
			Help: "Preemption choices taken back, by reason: stale (another shard placed a pod on the node after the snapshot; retried at once) or marks_failed (the victims could not be marked; retried after backoff).",
		}, []string{"reason"}),
		bindSlotWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_scheduler_binding_cycle_waits_total",
			Help: "Times a shard loop waited to start a scheduling cycle because the most binding cycles allowed (--max-binding-cycles) were waiting for their commits: storage commits more slowly than the loops place.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.attempts, m.attemptDuration, m.e2eDuration, m.assumeConflicts,
			m.bindDuration, m.bindErrors, m.statusWrites, m.events, m.undone, m.bindSlotWaits)
	}
	return m
}

// Register adds gauges that read the scheduler's live state at scrape time.
func (s *Scheduler) Register(reg prometheus.Registerer) {
	queueLen := func(pool int) func() float64 {
		return func() float64 {
			var total int
			for _, sh := range s.shards {
				a, b, u := sh.queue.Len()
				total += [3]int{a, b, u}[pool]
			}
			return float64(total)
		}
	}
	for i, pool := range []string{"active", "backoff", "unschedulable"} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "berth_scheduler_pending_pods",
			Help:        "Pods waiting to be scheduled, by queue.",
			ConstLabels: prometheus.Labels{"queue": pool},
		}, queueLen(i)))
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "berth_cache_nodes", Help: "Nodes in the scheduler cache."},
			func() float64 { return float64(s.cache.NodeCount()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "berth_cache_pods", Help: "Bound or assumed pods in the scheduler cache."},
			func() float64 { return float64(s.cache.PodCount()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "berth_scheduler_shards", Help: "Shard loops running in this replica."},
			func() float64 { return float64(len(s.shards)) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "berth_scheduler_binding_cycles",
			Help: "Binding cycles waiting for their commit (those waiting at Permit not counted), against --max-binding-cycles.",
		}, func() float64 { return float64(s.bindSlots.inUse()) }),
	)
}

func (m *Metrics) attempt(result string, seconds float64) {
	if m == nil {
		return
	}
	m.attempts.WithLabelValues(result).Inc()
	m.attemptDuration.WithLabelValues(result).Observe(seconds)
}

func (m *Metrics) bindSlotWait() {
	if m != nil {
		m.bindSlotWaits.Inc()
	}
}

func (m *Metrics) conflict() {
	if m != nil {
		m.assumeConflicts.Inc()
	}
}

func (m *Metrics) bound(bindSeconds, e2eSeconds float64) {
	if m != nil {
		m.bindDuration.Observe(bindSeconds)
		m.e2eDuration.Observe(e2eSeconds)
	}
}

func (m *Metrics) bindError(reason string) {
	if m != nil {
		m.bindErrors.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) statusWrite(result string) {
	if m != nil {
		m.statusWrites.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) event(kind string) {
	if m != nil {
		m.events.WithLabelValues(kind).Inc()
	}
}

// eventN counts n events of one kind at once, as a bulk load applies them.
func (m *Metrics) eventN(kind string, n int) {
	if m != nil && n > 0 {
		m.events.WithLabelValues(kind).Add(float64(n))
	}
}

func (m *Metrics) preemptionUndone(reason string) {
	if m != nil {
		m.undone.WithLabelValues(reason).Inc()
	}
}
