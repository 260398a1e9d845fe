package replica

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// Start-up phases, in the order they usually end. ownership runs beside
// list and cache; serving needs them all.
const (
	// phaseListen: the gRPC and metrics ports are bound, first of all.
	// Calls are answered from run on, after store.
	phaseListen = "listen"
	// phaseSnapshot: the start-up snapshot was read and loaded into the
	// core, beside the etcd open, or found unusable (its log line says
	// why). It is checked against etcd after.
	phaseSnapshot = "snapshot"
	// phaseEtcd: the embedded etcd is ready (or, with external endpoints,
	// nothing to start).
	phaseEtcd = "etcd"
	// phaseStore: the store's client is open on it.
	phaseStore = "store"
	// phaseList: every node and pod was read at one revision (not when a
	// start-up snapshot is used).
	phaseList = "list"
	// phaseCache: the cache and the queues hold that listing, or the
	// snapshot's state caught up with etcd.
	phaseCache = "cache"
	// phaseOwnership: the membership has settled which shards are ours.
	phaseOwnership = "ownership"
	// phaseServing: health reported SERVING: the shards can schedule.
	phaseServing = "serving"
)

// startupPhases lists every phase, for tests and documentation.
var startupPhases = []string{phaseListen, phaseSnapshot, phaseEtcd, phaseStore, phaseList, phaseCache, phaseOwnership, phaseServing}

// startupClock times a replica's start: each phase's end is recorded once,
// as seconds since Start was called, in berth_startup_phase_seconds and in
// one log line; a later re-listing or new session does not move it. Marks
// come from several goroutines.
type startupClock struct {
	start time.Time
	gauge *prometheus.GaugeVec
	log   *zap.Logger

	mu sync.Mutex
	// done holds when each marked phase ended; last is the latest end, so
	// a log line can say how long its phase added.
	done map[string]time.Duration
	last time.Duration
}

func newStartupClock(start time.Time, reg prometheus.Registerer, log *zap.Logger) *startupClock {
	c := &startupClock{
		start: start, log: log, done: map[string]time.Duration{},
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_startup_phase_seconds",
			Help: "Seconds from the replica's start to the end of each start-up phase (listen, snapshot, etcd, store, list, cache, ownership, serving).",
		}, []string{"phase"}),
	}
	reg.MustRegister(c.gauge)
	return c
}

// mark records the end of phase, the first time only, with fields for its
// log line.
func (c *startupClock) mark(phase string, fields ...zap.Field) {
	c.mu.Lock()
	if _, ok := c.done[phase]; ok {
		c.mu.Unlock()
		return
	}
	at := time.Since(c.start)
	c.done[phase] = at
	added := max(at-c.last, 0)
	c.last = max(c.last, at)
	c.mu.Unlock()
	c.gauge.WithLabelValues(phase).Set(at.Seconds())
	c.log.Info("startup phase done", append([]zap.Field{zap.String("phase", phase),
		zap.Duration("since_start", at), zap.Duration("after_previous", added)}, fields...)...)
}
