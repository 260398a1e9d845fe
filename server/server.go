// Package server is Berth's gRPC front: the services, the interceptor chain
// (metrics, logging, validation, panic recovery), request validation and the
// mapping of errors to gRPC statuses. It reaches the store and the
// scheduling core only through the small interfaces in deps.go; the wiring
// of a running process (listeners, etcd, the core's loops) is package
// replica's.
package server

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/server/auth"
)

// Config is what the front needs from the replica that runs it.
type Config struct {
	Store     Store
	Scheduler Scheduler
	// Registerer receives the RPC and watch-stream metrics.
	Registerer prometheus.Registerer
	Logger     *zap.Logger
	// TLS, when set, serves gRPC over TLS (e.g. auth.TLS.ServerConfig).
	TLS *tls.Config
	// Auth, when set, authenticates and authorizes every call.
	Auth *auth.Authorizer
}

// Server is the gRPC front of one replica.
type Server struct {
	grpc   *grpc.Server
	health *health.Server
	logger *zap.Logger
	// streams ends with Shutdown; long-lived streams watch it.
	streams    context.Context
	endStreams context.CancelFunc
}

// New builds the front with every service registered; it serves once
// Serve is called.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	s := &Server{logger: cfg.Logger, health: health.NewServer()}
	s.streams, s.endStreams = context.WithCancel(context.Background())

	watchers := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "berth_watch_subscribers", Help: "Open WatchBindings streams.",
	})
	grpcMetrics := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets(prometheus.ExponentialBuckets(0.0001, 2, 18)),
	))
	cfg.Registerer.MustRegister(watchers, grpcMetrics)

	opts := append(interceptorOptions(cfg.Logger.Named("grpc"), grpcMetrics, cfg.Auth),
		grpc.MaxRecvMsgSize(16<<20),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	)
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	s.grpc = grpc.NewServer(opts...)
	berthv1.RegisterClusterServiceServer(s.grpc, &clusterService{store: cfg.Store, sched: cfg.Scheduler})
	berthv1.RegisterPodServiceServer(s.grpc, &podService{store: cfg.Store, sched: cfg.Scheduler})
	berthv1.RegisterSchedulerServiceServer(s.grpc, &schedulerService{
		store: cfg.Store, sched: cfg.Scheduler, streams: s.streams, watchers: watchers,
	})
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	grpcMetrics.InitializeMetrics(s.grpc)
	return s
}

// Serve accepts RPCs on lis until Shutdown; it returns
// grpc.ErrServerStopped if Shutdown came first.
func (s *Server) Serve(lis net.Listener) error { return s.grpc.Serve(lis) }

// SetServing reports the replica healthy to health checks.
func (s *Server) SetServing() { s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING) }

// Shutdown reports not serving, ends watch streams (their subscribers
// resume elsewhere), and stops accepting RPCs while in-flight ones, and
// their commits, finish. After grace the remaining connections are closed.
func (s *Server) Shutdown(grace time.Duration) {
	s.health.Shutdown()
	s.endStreams()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(grace):
		s.logger.Warn("graceful stop timed out; closing remaining connections")
		s.grpc.Stop()
		<-done
	}
}
