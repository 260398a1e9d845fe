// Package admission sheds load before it turns into memory: it bounds the
// unary calls a server handles at once, how long a call may wait for a slot,
// and the streams open in total and per peer. A call turned away gets
// ResourceExhausted with a RetryInfo saying when to try again, and has had
// no effect: admission runs before validation and before any handler.
package admission

import (
	"context"
	"net"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Config bounds what a server takes on. Zero fields take the defaults.
type Config struct {
	// MaxInFlight is how many unary calls run at once. Work past it waits.
	MaxInFlight int
	// MaxWaiting is how many unary calls may wait for a slot; past it a call
	// is shed at once, so a burst cannot pile up goroutines and buffers.
	MaxWaiting int
	// MaxWait is how long a call waits for a slot before it is shed.
	MaxWait time.Duration
	// MaxStreams bounds the streams open at once; MaxStreamsPerPeer bounds
	// them per client host, so one client cannot take them all.
	MaxStreams        int
	MaxStreamsPerPeer int
	// RetryAfter is the delay suggested to a shed caller.
	RetryAfter time.Duration
	// Exempt names full methods never shed (health checks: a load balancer
	// must see an overloaded replica as alive, not dead).
	Exempt map[string]bool
}

func (c Config) withDefaults() Config {
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 1024
	}
	if c.MaxWaiting <= 0 {
		c.MaxWaiting = 4 * c.MaxInFlight
	}
	if c.MaxWait <= 0 {
		c.MaxWait = 2 * time.Second
	}
	if c.MaxStreams <= 0 {
		c.MaxStreams = 4096
	}
	if c.MaxStreamsPerPeer <= 0 {
		c.MaxStreamsPerPeer = 256
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = 200 * time.Millisecond
	}
	return c
}

// Observer is told of every shed call, for metrics. reason is "in_flight",
// "wait", "streams" or "peer_streams".
type Observer func(method, reason string)

// Controller holds the counts. One per server.
type Controller struct {
	cfg     Config
	slots   chan struct{}
	observe Observer

	mu          sync.Mutex
	waiting     int
	streams     int
	peerStreams map[string]int
}

// New returns a controller; observe may be nil.
func New(cfg Config, observe Observer) *Controller {
	cfg = cfg.withDefaults()
	if observe == nil {
		observe = func(string, string) {}
	}
	return &Controller{
		cfg:         cfg,
		slots:       make(chan struct{}, cfg.MaxInFlight),
		observe:     observe,
		peerStreams: map[string]int{},
	}
}

// Unary is the interceptor for unary calls.
func (c *Controller) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if c.cfg.Exempt[info.FullMethod] {
		return handler(ctx, req)
	}
	if err := c.acquire(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	defer func() { <-c.slots }()
	return handler(ctx, req)
}

func (c *Controller) acquire(ctx context.Context, method string) error {
	select {
	case c.slots <- struct{}{}:
		return nil
	default:
	}
	c.mu.Lock()
	if c.waiting >= c.cfg.MaxWaiting {
		c.mu.Unlock()
		c.observe(method, "in_flight")
		return c.shed("too many calls in flight")
	}
	c.waiting++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.waiting--
		c.mu.Unlock()
	}()
	timer := time.NewTimer(c.cfg.MaxWait)
	defer timer.Stop()
	select {
	case c.slots <- struct{}{}:
		return nil
	case <-timer.C:
		c.observe(method, "wait")
		return c.shed("no slot freed within " + c.cfg.MaxWait.String())
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// Stream is the interceptor for streams.
func (c *Controller) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if c.cfg.Exempt[info.FullMethod] {
		return handler(srv, ss)
	}
	host := peerHost(ss.Context())
	c.mu.Lock()
	switch {
	case c.streams >= c.cfg.MaxStreams:
		c.mu.Unlock()
		c.observe(info.FullMethod, "streams")
		return c.shed("too many open streams")
	case c.peerStreams[host] >= c.cfg.MaxStreamsPerPeer:
		c.mu.Unlock()
		c.observe(info.FullMethod, "peer_streams")
		return c.shed("too many open streams from this client")
	}
	c.streams++
	c.peerStreams[host]++
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.streams--
		if c.peerStreams[host]--; c.peerStreams[host] == 0 {
			delete(c.peerStreams, host)
		}
		c.mu.Unlock()
	}()
	return handler(srv, ss)
}

// OpenStreams reports the streams admitted and not yet finished.
func (c *Controller) OpenStreams() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams
}

func (c *Controller) shed(why string) error {
	st := status.New(codes.ResourceExhausted, "berth is overloaded: "+why+"; retry later")
	if withInfo, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(c.cfg.RetryAfter)}); err == nil {
		st = withInfo
	}
	return st.Err()
}

// peerHost keys streams by client host, not host:port, since one client
// opens many connections from many ports.
func peerHost(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(p.Addr.String())
	if err != nil {
		return p.Addr.String()
	}
	return host
}
