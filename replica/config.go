package replica

import (
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/berth-io/berth/scheduler"
	"github.com/berth-io/berth/store"
)

// Config configures a Berth replica. Zero fields take the defaults noted.
type Config struct {
	// Listen is the gRPC address; default 127.0.0.1:7070. Port 0 picks one.
	Listen string
	// Advertise is the gRPC address other replicas and ListReplicas report
	// for this one. Default: the listener's address, with the host name in
	// place of a wildcard host (0.0.0.0, ::).
	Advertise string
	// MetricsListen serves Prometheus /metrics; default 127.0.0.1:7071;
	// "-" disables it.
	MetricsListen string
	// DataDir holds the embedded etcd's data; default ./berth-data.
	DataDir string
	// EtcdEndpoints selects an external etcd cluster instead of the
	// embedded one.
	EtcdEndpoints []string
	// Embedded tunes the embedded etcd (client address, quota, request
	// limit, compaction retention, maintenance); Dir, Logger and the
	// metrics registry are filled in by Start. Its server metrics join the
	// replica's on /metrics.
	Embedded store.EmbeddedConfig
	// Store carries the remaining etcd client settings (TLS, auth,
	// timeouts, prefix); its Endpoints are filled in by Start.
	Store store.Config
	// Scheduler configures the core.
	Scheduler scheduler.Config
	// ReplicaID names this replica among those sharing the store; keep it
	// stable across restarts. Default: hostname-port.
	ReplicaID string
	// LeaseTTL is the replica's etcd lease: after this long without
	// renewal its shards move to other replicas. Default 10s.
	LeaseTTL time.Duration
	// Security: TLS, authentication, authorization and audit (issue 10).
	Security Security
	// ShutdownGrace bounds the graceful stop; default 10s.
	ShutdownGrace time.Duration
	// Limits bounds what the gRPC front takes on.
	Limits Limits
	Logger *zap.Logger
	// TracerProvider, when set, traces calls, admissions, group-committed
	// Txns and scheduling cycles (see package tracing). Nil, the default,
	// traces nothing at no cost.
	TracerProvider trace.TracerProvider

	// DisableStartupSnapshot turns off the start-up snapshot kept in the
	// embedded etcd's data dir (it is never kept with external etcd).
	DisableStartupSnapshot bool
	// SnapshotInterval spaces the checks for a periodic write of the
	// start-up snapshot; default 30s.
	SnapshotInterval time.Duration

	// OnServing, if set, is called once, when the replica first reports
	// SERVING: its start-up load is over. berth serve ends the collector's
	// start-up target there.
	OnServing func()

	// beforeLoad, for tests, runs after each listing (or start-up
	// snapshot) is read and before it is loaded into the core.
	beforeLoad func()
	// beforePodPut, for tests, runs as the sync delivers each pod.
	beforePodPut func()
	// crashLike, for tests, stops without the final snapshot, leaving the
	// data dir's files as a kill -9 would.
	crashLike bool
	// maxChangeLogFiles, for tests, replaces defaultMaxChangeLogFiles.
	maxChangeLogFiles int
}

func (cfg *Config) setDefaults() {
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:7070"
	}
	if cfg.MetricsListen == "" {
		cfg.MetricsListen = "127.0.0.1:7071"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = "berth-data"
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
}

// Limits are the gRPC front's bounds: past them calls and streams are
// turned away with ResourceExhausted and a RetryInfo rather than queued into
// memory. Zero fields take the defaults noted.
type Limits struct {
	// MaxInFlight is how many unary calls run at once (default 1024); up to
	// four times as many wait up to MaxWait (default 2s) for a slot.
	MaxInFlight int
	MaxWait     time.Duration
	// MaxStreams bounds the streams open at once (default 4096), and
	// MaxStreamsPerClient those from one client host (default 256).
	MaxStreams          int
	MaxStreamsPerClient int
	// MaxStreamsPerConnection is HTTP/2's per-connection bound (default
	// 1024).
	MaxStreamsPerConnection uint32
	// KeepaliveTime and KeepaliveTimeout find clients that vanished: a
	// connection silent for KeepaliveTime is pinged and closed, with its
	// streams, if no answer comes within KeepaliveTimeout (defaults 30s,
	// 10s).
	KeepaliveTime, KeepaliveTimeout time.Duration
}
