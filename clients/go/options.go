package berth

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// DefaultAddr is where a Berth server listens unless told otherwise.
const DefaultAddr = "127.0.0.1:7070"

// Option configures Dial.
type Option func(*config)

type config struct {
	creds       credentials.TransportCredentials
	dialOptions []grpc.DialOption
	maxAttempts uint
	backoff     backoff
}

// defaultConfig holds every default in one place.
func defaultConfig() config {
	return config{
		creds:       insecure.NewCredentials(),
		maxAttempts: 5,
		backoff:     backoff{base: 100 * time.Millisecond, max: 5 * time.Second},
	}
}

// WithTransportCredentials replaces the default plaintext transport, e.g.
// with credentials.NewTLS.
func WithTransportCredentials(creds credentials.TransportCredentials) Option {
	return func(c *config) { c.creds = creds }
}

// WithDialOptions appends gRPC dial options, applied after the client's own
// (so extra interceptors run inside the retry interceptor).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *config) { c.dialOptions = append(c.dialOptions, opts...) }
}

// WithMaxAttempts sets how many times a unary call is tried in all, the
// first try included. 1 disables retries; 0 is treated as 1. Default 5.
func WithMaxAttempts(n uint) Option {
	return func(c *config) { c.maxAttempts = max(n, 1) }
}

// WithBackoff sets the wait before the n-th retry of a unary call, and
// before the n-th consecutive reconnect of WatchBindings: base*2^(n-1),
// capped at limit, with jitter that draws it from [d/2, d]. A base of 0
// retries at once. Default 100ms up to 5s.
func WithBackoff(base, limit time.Duration) Option {
	return func(c *config) { c.backoff = backoff{base: base, max: limit} }
}
