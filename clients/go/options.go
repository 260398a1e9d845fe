package berth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
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

// TLSFiles names PEM files for WithTLSFiles, like etcdctl's --cacert,
// --cert and --key. Empty CACert trusts the system roots; Cert and Key,
// both or neither, are the client's certificate for mutual TLS.
type TLSFiles struct {
	CACert, Cert, Key string
}

// TLSConfig builds the client side tls.Config from the files.
func (f TLSFiles) TLSConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.CACert != "" {
		pem, err := os.ReadFile(f.CACert)
		if err != nil {
			return nil, fmt.Errorf("berth: CA certificate: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("berth: CA certificate %s: no PEM certificate in it", f.CACert)
		}
	}
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("berth: a client certificate needs both the certificate and its key")
	}
	if f.Cert != "" {
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, fmt.Errorf("berth: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// WithTLS dials over TLS with cfg (see TLSFiles.TLSConfig).
func WithTLS(cfg *tls.Config) Option {
	return WithTransportCredentials(credentials.NewTLS(cfg))
}

// WithBearerToken sends "authorization: Bearer <token>" with every call.
// It is sent over plaintext too, for a server on loopback; elsewhere use
// TLS, or the token is only as secret as the network.
func WithBearerToken(token string) Option {
	return WithDialOptions(grpc.WithPerRPCCredentials(bearerToken(token)))
}

type bearerToken string

func (t bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

func (bearerToken) RequireTransportSecurity() bool { return false }
