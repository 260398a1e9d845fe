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
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/server/admission"
	"github.com/berth-io/berth/server/auth"
	"github.com/berth-io/berth/tracing"
)

// Config is what the front needs from the replica that runs it.
type Config struct {
	Store     Store
	Scheduler Scheduler
	// Registerer receives the RPC and watch-stream metrics.
	Registerer prometheus.Registerer
	Logger     *zap.Logger
	// Admission bounds the calls and streams taken on at once; zero fields
	// take package admission's defaults. Health checks are always exempt.
	Admission admission.Config
	// MaxConcurrentStreams bounds the streams of one connection (HTTP/2
	// SETTINGS); default 1024. The admission limits bound them per client
	// and in total.
	MaxConcurrentStreams uint32
	// KeepaliveTime is how long a connection may be silent before the
	// server pings it, and KeepaliveTimeout how long the ping may go
	// unanswered before the connection, and its streams, are closed: how a
	// client that vanished without closing is noticed. Defaults 30s and
	// 10s.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// TLS, when set, serves gRPC over TLS (e.g. auth.TLS.ServerConfig).
	TLS *tls.Config
	// Auth, when set, authenticates and authorizes every call.
	Auth *auth.Authorizer
	// TracerProvider, when set, traces every call but health checks
	// (otelgrpc) and the admission of submitted pods. Nil, the default,
	// traces nothing and adds no work to any call.
	TracerProvider trace.TracerProvider
	// Submitting, when set with TracerProvider, is told of every valid pod
	// ("namespace/name") a SubmitPod or SubmitPods is about to store, with
	// the context of the admission span, so the pod's scheduling cycle can
	// link to it. It is told before the store write: the watch may hand
	// the pod to a scheduling cycle before the call returns. Unsubmitted
	// is told of those the store then refused.
	Submitting  func(ctx context.Context, pod string)
	Unsubmitted func(ctx context.Context, pod string)
}

func (cfg *Config) setDefaults() {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.MaxConcurrentStreams == 0 {
		cfg.MaxConcurrentStreams = 1024
	}
	if cfg.KeepaliveTime <= 0 {
		cfg.KeepaliveTime = 30 * time.Second
	}
	if cfg.KeepaliveTimeout <= 0 {
		cfg.KeepaliveTimeout = 10 * time.Second
	}
}

// Server is the gRPC front of one replica.
type Server struct {
	grpc   *grpc.Server
	health *health.Server
	logger *zap.Logger
	// streams ends with Shutdown; long-lived streams watch it.
	streams    context.Context
	endStreams context.CancelFunc
	running    *handlers
}

// New builds the front with every service registered; it serves once
// Serve is called.
func New(cfg Config) *Server {
	cfg.setDefaults()
	s := &Server{logger: cfg.Logger, health: health.NewServer(), running: &handlers{}}
	s.streams, s.endStreams = context.WithCancel(context.Background())

	watchers := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "berth_watch_subscribers", Help: "Open WatchBindings streams.",
	})
	grpcMetrics := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets(prometheus.ExponentialBuckets(0.0001, 2, 18)),
	))
	shed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "berth_admission_shed_total", Help: "Calls and streams turned away with ResourceExhausted by admission control, by method and reason.",
	}, []string{"method", "reason"})
	cfg.Registerer.MustRegister(watchers, grpcMetrics, shed)
	admit := cfg.Admission
	admit.Exempt = exemptFromAdmission(admit.Exempt)
	admitter := admission.New(admit, func(method, reason string) { shed.WithLabelValues(method, reason).Inc() })

	opts := append(interceptorOptions(cfg.Logger.Named("grpc"), grpcMetrics, cfg.Auth, admitter, s.running),
		grpc.MaxRecvMsgSize(16<<20),
		grpc.MaxConcurrentStreams(cfg.MaxConcurrentStreams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		// Pings find clients that vanished (a killed process behind a NAT,
		// a cut cable) so their streams end instead of holding subscribers
		// and goroutines for as long as TCP would.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: cfg.KeepaliveTime, Timeout: cfg.KeepaliveTimeout}),
	)
	if cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(cfg.TLS)))
	}
	var admits admitTracer
	if cfg.TracerProvider != nil {
		opts = append(opts, tracingOption(cfg.TracerProvider))
		admits = admitTracer{tracer: cfg.TracerProvider.Tracer(tracing.InstrumentationName), submitting: cfg.Submitting, unsubmitted: cfg.Unsubmitted}
	}
	s.grpc = grpc.NewServer(opts...)
	berthv1.RegisterClusterServiceServer(s.grpc, &clusterService{store: cfg.Store, sched: cfg.Scheduler})
	berthv1.RegisterPodServiceServer(s.grpc, &podService{store: cfg.Store, sched: cfg.Scheduler, admits: admits})
	berthv1.RegisterSchedulerServiceServer(s.grpc, &schedulerService{
		store: cfg.Store, sched: cfg.Scheduler, streams: s.streams, watchers: watchers,
	})
	healthpb.RegisterHealthServer(s.grpc, s.health)
	// Not serving until the replica says what it can do: the health
	// server's own default is a SERVING "".
	s.SetHealth(Health{})
	reflection.Register(s.grpc)
	grpcMetrics.InitializeMetrics(s.grpc)
	return s
}

// exemptFromAdmission adds the health checks to the methods never shed: a
// load balancer must see an overloaded replica as alive, not dead.
func exemptFromAdmission(given map[string]bool) map[string]bool {
	exempt := map[string]bool{
		healthpb.Health_Check_FullMethodName: true,
		healthpb.Health_Watch_FullMethodName: true,
	}
	for m, ok := range given {
		exempt[m] = exempt[m] || ok
	}
	return exempt
}

// Serve accepts RPCs on lis until Shutdown; it returns
// grpc.ErrServerStopped if Shutdown came first.
func (s *Server) Serve(lis net.Listener) error { return s.grpc.Serve(lis) }

// Shutdown reports not serving, ends watch streams (their subscribers
// resume elsewhere), and stops accepting RPCs while in-flight ones, and
// their commits, finish. Once every handler has returned, connections get
// a short while to flush their last answers: one whose client stopped
// reading would never flush, and must not hold the stop for the whole
// grace. After grace the remaining connections are closed regardless.
func (s *Server) Shutdown(grace time.Duration) {
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	s.health.Shutdown()
	s.endStreams()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-deadline.C:
		s.logger.Warn("graceful stop timed out; closing remaining connections")
	case <-s.running.idle():
		flush := time.NewTimer(min(flushGrace, grace))
		defer flush.Stop()
		select {
		case <-done:
			return
		case <-flush.C:
			s.logger.Info("every call answered; closing connections that are not reading")
		case <-deadline.C:
		}
	}
	s.grpc.Stop()
	<-done
}

// flushGrace is how long connections get to flush once every handler has
// returned: ample for a reading client on any network worth serving.
const flushGrace = time.Second
