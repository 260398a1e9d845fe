package berth

import (
	"context"
	"fmt"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

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
	retryOpts := []retry.CallOption{
		retry.WithMax(cfg.maxAttempts), // the interceptor counts attempts, not retries
		retry.WithCodes(codes.Unavailable, codes.ResourceExhausted),
		retry.WithBackoff(func(ctx context.Context, attempt uint) time.Duration {
			return retryWait(ctx, cfg.backoff, attempt)
		}),
	}
	dialOpts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(cfg.creds),
		// Streams are not retried here: WatchBindings resumes by revision itself.
		// A shed call's RetryInfo delay is the least the retry waits
		// (retryinfo.go): hint scope, retries, then the per-attempt record.
		grpc.WithChainUnaryInterceptor(withRetryHint, retry.UnaryClientInterceptor(retryOpts...), recordRetryHint),
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
