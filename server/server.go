// Package server is Berth's gRPC front: services, interceptor chain,
// conversion between wire and core types, and the process lifecycle that
// ties the store, the scheduling core and the listeners together.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/scheduler"
	"github.com/berth-io/berth/store"
)

// Config configures a Berth replica. Zero fields take the defaults noted.
type Config struct {
	// Listen is the gRPC address; default 127.0.0.1:7070. Port 0 picks one.
	Listen string
	// MetricsListen serves Prometheus /metrics; default 127.0.0.1:7071;
	// "-" disables it.
	MetricsListen string
	// DataDir holds the embedded etcd's data; default ./berth-data.
	DataDir string
	// EtcdEndpoints selects an external etcd cluster instead of the
	// embedded one.
	EtcdEndpoints []string
	// Embedded tunes the embedded etcd (quota, request limit, compaction
	// retention, maintenance); Dir, Logger and the metrics registry are
	// filled in by Start.
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
	// ShutdownGrace bounds the graceful stop; default 10s.
	ShutdownGrace time.Duration
	Logger        *zap.Logger
}

// Server is a running replica.
type Server struct {
	cfg      Config
	logger   *zap.Logger
	embedded *store.Embedded
	store    *store.Store
	sched    *scheduler.Scheduler
	grpc     *grpc.Server
	health   *health.Server
	http     *http.Server
	lis      net.Listener
	mlis     net.Listener
	metrics  *serverMetrics

	// shutdown ends with Stop; long-lived streams watch it.
	shutdown    context.Context
	endShutdown context.CancelFunc
	schedCancel context.CancelFunc
	// schedDone closes when the scheduler has stopped and its binding
	// cycles have ended; only then is the membership (and its fence)
	// given up.
	schedDone    chan struct{}
	memberCancel context.CancelFunc
	group        *errgroup.Group
	stopOnce     sync.Once
	stopErr      error
	syncReady    chan struct{}
	lastRev      prometheus.Gauge
}

type serverMetrics struct {
	watchers prometheus.Gauge
}

// Start brings a replica up: storage, cache sync, scheduler, listeners. It
// returns once the replica accepts RPCs. ctx bounds start-up only; the
// replica runs until Stop.
func Start(ctx context.Context, cfg Config) (_ *Server, err error) {
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
	s := &Server{cfg: cfg, logger: cfg.Logger, syncReady: make(chan struct{})}
	s.shutdown, s.endShutdown = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			s.closeBackends()
		}
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.metrics = &serverMetrics{watchers: prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "berth_watch_subscribers", Help: "Open WatchBindings streams.",
	})}
	s.lastRev = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "berth_cache_revision", Help: "Latest etcd revision applied to this replica's cache.",
	})
	reg.MustRegister(s.metrics.watchers, s.lastRev)

	storeCfg := cfg.Store
	storeCfg.Logger = cfg.Logger.Named("store")
	storeCfg.Metrics = store.NewMetrics(reg)
	if len(cfg.EtcdEndpoints) == 0 {
		dir, derr := filepath.Abs(cfg.DataDir)
		if derr != nil {
			return nil, derr
		}
		ec := cfg.Embedded
		ec.Dir, ec.Logger, ec.Maintenance.Registerer = dir, cfg.Logger.Named("etcd"), reg
		s.embedded, err = store.StartEmbedded(ctx, ec)
		if err != nil {
			return nil, fmt.Errorf("start embedded etcd in %s: %w", dir, err)
		}
		storeCfg.Endpoints = s.embedded.Endpoints()
		storeCfg.Client = s.embedded.Client()
		if storeCfg.MaxTxnOps == 0 {
			storeCfg.MaxTxnOps = store.EmbeddedMaxTxnOps
		}
	} else {
		storeCfg.Endpoints = cfg.EtcdEndpoints
	}
	s.store, err = store.Open(ctx, storeCfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}

	schedCfg := cfg.Scheduler
	// Shards are handed out by the membership, even to a lone replica: the
	// claims cost one Txn each at start and fence every commit.
	schedCfg.OwnNone = true
	schedCfg.Logger = cfg.Logger.Named("scheduler")
	schedCfg.Metrics = scheduler.NewMetrics(reg)
	s.sched, err = scheduler.New(ctx, schedCfg, committer{store: s.store})
	if err != nil {
		return nil, err
	}
	s.sched.Register(reg)

	grpcMetrics := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets(prometheus.ExponentialBuckets(0.0001, 2, 18)),
	))
	reg.MustRegister(grpcMetrics)
	opts := append(interceptorOptions(s.logger.Named("grpc"), grpcMetrics),
		grpc.MaxRecvMsgSize(16<<20),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	)
	s.grpc = grpc.NewServer(opts...)
	berthv1.RegisterClusterServiceServer(s.grpc, &clusterService{srv: s})
	berthv1.RegisterPodServiceServer(s.grpc, &podService{srv: s})
	berthv1.RegisterSchedulerServiceServer(s.grpc, &schedulerService{srv: s})
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	grpcMetrics.InitializeMetrics(s.grpc)

	s.lis, err = net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	if cfg.MetricsListen != "-" {
		s.mlis, err = net.Listen("tcp", cfg.MetricsListen)
		if err != nil {
			s.lis.Close()
			return nil, fmt.Errorf("listen %s: %w", cfg.MetricsListen, err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
		// Profiles on the operator-only listener: the first thing to ask
		// for when a replica is slow.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	}

	if cfg.ReplicaID == "" {
		cfg.ReplicaID = defaultReplicaID(s.lis.Addr(), s.embedded != nil)
		s.cfg.ReplicaID = cfg.ReplicaID
	}
	var schedCtx, memberCtx context.Context
	schedCtx, s.schedCancel = context.WithCancel(context.Background())
	memberCtx, s.memberCancel = context.WithCancel(context.Background())
	s.schedDone = make(chan struct{})
	g := &errgroup.Group{}
	s.group = g
	g.Go(func() error {
		err := s.store.RunMembership(memberCtx, store.MembershipConfig{
			ID:      cfg.ReplicaID,
			Address: s.lis.Addr().String(),
			TTL:     cfg.LeaseTTL,
			Shards:  s.sched.LogicalShards(),
		}, s.sched)
		if errors.Is(err, context.Canceled) || errors.Is(err, store.ErrClosed) {
			return nil
		}
		return err
	})
	g.Go(func() error {
		h := &syncer{sched: s.sched, ready: s.syncReady, revision: func(r int64) { s.lastRev.Set(float64(r)) },
			syncerLeaseState: syncerLeaseState{store: s.store, ctx: schedCtx, log: s.logger.Named("sync")}}
		err := s.store.Sync(schedCtx, h)
		h.waitMarking()
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	})
	g.Go(func() error {
		// Scheduling starts once the cache holds the whole cluster, so no
		// pod is placed against a partial view.
		defer close(s.schedDone)
		select {
		case <-s.syncReady:
		case <-schedCtx.Done():
			return nil
		}
		s.sched.Run(schedCtx)
		return nil
	})
	g.Go(func() error { return s.grpc.Serve(s.lis) })
	if s.http != nil {
		g.Go(func() error {
			if err := s.http.Serve(s.mlis); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.logger.Info("berth serving", zap.String("grpc", s.lis.Addr().String()), zap.Stringer("metrics", addrOf(s.mlis)),
		zap.Strings("etcd", storeCfg.Endpoints), zap.Bool("embedded_etcd", s.embedded != nil), zap.String("replica", cfg.ReplicaID))
	return s, nil
}

// defaultReplicaID is stable across restarts of one replica on one host,
// so a restart takes its shards back at once. An embedded etcd serves one
// replica only, whatever port it listens on.
func defaultReplicaID(addr net.Addr, embedded bool) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "berth"
	}
	host = strings.ReplaceAll(host, "/", "-")
	if embedded {
		return host + "-embedded"
	}
	port := "0"
	if ta, ok := addr.(*net.TCPAddr); ok {
		port = strconv.Itoa(ta.Port)
	}
	return host + "-" + port
}

type addrString string

func (a addrString) String() string { return string(a) }

func addrOf(l net.Listener) fmt.Stringer {
	if l == nil {
		return addrString("disabled")
	}
	return l.Addr()
}

// Addr is the gRPC listener's address.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// MetricsAddr is the metrics listener's address, or "" when disabled.
func (s *Server) MetricsAddr() string {
	if s.mlis == nil {
		return ""
	}
	return s.mlis.Addr().String()
}

// WaitSynced blocks until the cache holds the cluster or ctx ends.
func (s *Server) WaitSynced(ctx context.Context) error {
	select {
	case <-s.syncReady:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop shuts down in order: report not serving and end watch streams; stop
// accepting RPCs and let in-flight ones (and their commits) finish; stop the
// scheduler, waiting for binding cycles under way; flush and close the
// store; stop the embedded etcd last.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.logger.Info("berth shutting down")
		s.health.Shutdown()
		s.endShutdown()
		done := make(chan struct{})
		go func() {
			s.grpc.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(s.cfg.ShutdownGrace):
			s.logger.Warn("graceful stop timed out; closing remaining connections")
			s.grpc.Stop()
			<-done
		}
		if s.http != nil {
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownGrace)
			_ = s.http.Shutdown(ctx)
			cancel()
		}
		s.schedCancel()
		<-s.schedDone
		s.memberCancel()
		if err := s.group.Wait(); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.stopErr = err
		}
		s.closeBackends()
		s.logger.Info("berth stopped")
	})
	return s.stopErr
}

func (s *Server) closeBackends() {
	if s.store != nil {
		if err := s.store.Close(); err != nil {
			s.logger.Warn("close store", zap.Error(err))
		}
	}
	if s.embedded != nil {
		s.embedded.Close()
	}
}
