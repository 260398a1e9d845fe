package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	berth "github.com/berth-io/berth/clients/go"
)

// globals are the flags every command accepts, before or after its name.
type globals struct {
	endpoints string // comma-separated; --addr is the older name of one
	output    string
	timeout   time.Duration
	// TLS and authentication: all empty means plaintext without a token.
	cacert, cert, key, token string
}

func (g *globals) register(fs *pflag.FlagSet, getenv func(string) string) {
	endpoints := berth.DefaultAddr
	if addr := getenv("BERTH_ADDR"); addr != "" {
		endpoints = addr
	}
	if e := getenv("BERTH_ENDPOINTS"); e != "" {
		endpoints = e
	}
	fs.StringVar(&g.endpoints, "endpoints", endpoints, "server `addresses`, comma-separated; tried in order (env BERTH_ENDPOINTS)")
	fs.StringVar(&g.endpoints, "addr", endpoints, "server `address`, the older name of --endpoints (env BERTH_ADDR)")
	fs.StringVarP(&g.output, "output", "o", formatTable, "output `format`: table, wide, json or yaml")
	fs.DurationVar(&g.timeout, "timeout", 10*time.Second, "time limit of the command, 0 for none (watch has none)")
	// As etcdctl: the environment gives the defaults, so a shell can be
	// set up once for a secured cluster.
	fs.StringVar(&g.cacert, "cacert", getenv("BERTH_CACERT"), "verify the server with the CA certificates in `FILE` (enables TLS; env BERTH_CACERT)")
	fs.StringVar(&g.cert, "cert", getenv("BERTH_CERT"), "client certificate `FILE` for mutual TLS (with --key; env BERTH_CERT)")
	fs.StringVar(&g.key, "key", getenv("BERTH_KEY"), "client private key `FILE` for mutual TLS (with --cert; env BERTH_KEY)")
	fs.StringVar(&g.token, "token", getenv("BERTH_TOKEN"), "bearer `token` sent with every call (needs TLS; env BERTH_TOKEN)")
}

// dial connects to the servers of --endpoints, with the TLS and token of
// the global flags. This is the one place a connection is made.
func (c *cli) dial(ctx context.Context) (*berth.Client, error) {
	opts, err := c.global.dialOptions()
	if err != nil {
		return nil, usageError{err.Error()}
	}
	var addrs []string
	for _, a := range strings.Split(c.global.endpoints, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	switch len(addrs) {
	case 0:
		return nil, usageErrorf("--endpoints names no server")
	case 1:
		return berth.Dial(ctx, addrs[0], opts...)
	}
	// Several servers: a resolver of this client alone hands gRPC the
	// list, and its default pick_first policy moves to the next address
	// when one cannot be reached.
	r := manual.NewBuilderWithScheme("berthctl")
	state := resolver.State{}
	for _, a := range addrs {
		state.Addresses = append(state.Addresses, resolver.Address{Addr: a})
	}
	r.InitialState(state)
	opts = append(opts, berth.WithDialOptions(grpc.WithResolvers(r)))
	return berth.Dial(ctx, r.Scheme()+":///endpoints", opts...)
}

// dialOptions turns --cacert, --cert, --key and --token into client options.
func (g *globals) dialOptions() ([]berth.Option, error) {
	var opts []berth.Option
	if (g.cert == "") != (g.key == "") {
		return nil, errors.New("--cert and --key go together")
	}
	useTLS := g.cacert != "" || g.cert != ""
	if useTLS {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if g.cacert != "" {
			pem, err := os.ReadFile(g.cacert)
			if err != nil {
				return nil, fmt.Errorf("--cacert: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--cacert: no certificates in %s", g.cacert)
			}
			cfg.RootCAs = pool
		}
		if g.cert != "" {
			pair, err := tls.LoadX509KeyPair(g.cert, g.key)
			if err != nil {
				return nil, fmt.Errorf("--cert/--key: %w", err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		opts = append(opts, berth.WithTransportCredentials(credentials.NewTLS(cfg)))
	}
	if g.token != "" {
		if !useTLS {
			return nil, errors.New("--token needs TLS (--cacert): a token sent in plaintext could be read on the way")
		}
		opts = append(opts, berth.WithDialOptions(grpc.WithPerRPCCredentials(bearerToken(g.token))))
	}
	return opts, nil
}

// bearerToken sends "authorization: Bearer TOKEN" with every call.
type bearerToken string

func (t bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

func (bearerToken) RequireTransportSecurity() bool { return true }
