package berth

import (
	"context"
	"fmt"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// Client is a connection to a Berth server. It is safe for concurrent use.
type Client struct {
	conn    *grpc.ClientConn
	cluster berthv1.ClusterServiceClient
	pods    berthv1.PodServiceClient
	sched   berthv1.SchedulerServiceClient
	backoff backoff
}

// Dial creates a client for the server at addr (host:port or any gRPC
// target). The connection is made lazily by the first call, so Dial fails
// only on bad options or a cancelled ctx, not on an unreachable server.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	dialOpts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(cfg.creds),
		// Streams are not retried here: WatchBindings resumes by revision itself.
		grpc.WithChainUnaryInterceptor(retryUnary(cfg.maxAttempts, cfg.backoff)),
		// Client spans, and the W3C trace context sent to the server, come
		// from the process-wide OpenTelemetry provider and propagator: an
		// application that sets them up gets its calls traced into Berth.
		grpc.WithStatsHandler(otelgrpc.NewClientHandler()),
	}, cfg.dialOptions...)
	conn, err := grpc.NewClient(addr, dialOpts...)
	if err != nil {
		return nil, fmt.Errorf("berth: dial %s: %w", addr, err)
	}
	return &Client{
		conn:    conn,
		cluster: berthv1.NewClusterServiceClient(conn),
		pods:    berthv1.NewPodServiceClient(conn),
		sched:   berthv1.NewSchedulerServiceClient(conn),
		backoff: cfg.backoff,
	}, nil
}

// Close closes the connection; calls in flight fail with Canceled.
func (c *Client) Close() error { return c.conn.Close() }

// Conn returns the underlying connection, e.g. for health checks.
func (c *Client) Conn() *grpc.ClientConn { return c.conn }

// ClusterService returns the generated client of berth.v1.ClusterService.
func (c *Client) ClusterService() berthv1.ClusterServiceClient { return c.cluster }

// PodService returns the generated client of berth.v1.PodService.
func (c *Client) PodService() berthv1.PodServiceClient { return c.pods }

// SchedulerService returns the generated client of berth.v1.SchedulerService.
func (c *Client) SchedulerService() berthv1.SchedulerServiceClient { return c.sched }
