package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/berth-io/berth/replica"
	"github.com/berth-io/berth/store"
)

// etcdPasswordEnv carries the etcd password so that it need not appear on
// the command line (where ps shows it).
const etcdPasswordEnv = "BERTH_ETCD_PASSWORD"

// etcdClientFlags are berth serve's settings for an external etcd cluster:
// TLS, authentication and timeouts.
type etcdClientFlags struct {
	caCert, cert, key  string
	username, password string
	dialTimeout        time.Duration
}

func (f *etcdClientFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.caCert, "etcd-cacert", "", "PEM file of the CAs that sign the etcd servers' certificates (enables TLS)")
	fs.StringVar(&f.cert, "etcd-cert", "", "PEM client certificate for etcd (with --etcd-key; enables TLS)")
	fs.StringVar(&f.key, "etcd-key", "", "PEM private key of --etcd-cert")
	fs.StringVar(&f.username, "etcd-username", "", "etcd user (with auth enabled in etcd)")
	fs.StringVar(&f.password, "etcd-password", "", "etcd password; prefer the "+etcdPasswordEnv+" environment variable, which ps does not show")
	fs.DurationVar(&f.dialTimeout, "etcd-dial-timeout", 5*time.Second, "bound on connecting to etcd at start")
}

// apply fills cfg.Store's TLS, credentials and dial timeout. getenv is
// os.Getenv outside tests.
func (f *etcdClientFlags) apply(cfg *replica.Config, getenv func(string) string) error {
	external := len(cfg.EtcdEndpoints) > 0
	if !external && (f.caCert != "" || f.cert != "" || f.key != "" || f.username != "") {
		return errors.New("--etcd-cacert, --etcd-cert, --etcd-key and --etcd-username need --etcd-endpoints")
	}
	cfg.Store.DialTimeout = f.dialTimeout
	password := f.password
	if password == "" {
		password = getenv(etcdPasswordEnv)
	}
	if f.username == "" && f.password != "" {
		return errors.New("--etcd-password needs --etcd-username")
	}
	if f.username != "" {
		cfg.Store.Username, cfg.Store.Password = f.username, password
	}
	tlsCfg, err := f.tlsConfig(cfg.EtcdEndpoints)
	if err != nil {
		return err
	}
	cfg.Store.TLS = tlsCfg
	return nil
}

// tlsConfig builds the client TLS settings: nil (plain TCP) unless a TLS
// flag is given or an endpoint is https, in which case the system roots are
// trusted unless --etcd-cacert replaces them.
func (f *etcdClientFlags) tlsConfig(endpoints []string) (*tls.Config, error) {
	https := false
	for _, ep := range endpoints {
		https = https || strings.HasPrefix(ep, "https://")
	}
	if f.caCert == "" && f.cert == "" && f.key == "" && !https {
		return nil, nil
	}
	if (f.cert == "") != (f.key == "") {
		return nil, errors.New("--etcd-cert and --etcd-key go together")
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.caCert != "" {
		pem, err := os.ReadFile(f.caCert)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--etcd-cacert %s: no PEM certificate found", f.caCert)
		}
		c.RootCAs = pool
	}
	if f.cert != "" {
		pair, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("--etcd-cert/--etcd-key: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

const etcdUsage = `Usage: berth etcd [flags]

Runs one etcd member in this process, so that a cluster of several can be
run without an etcd binary (see deploy/local-cluster.sh). For example, the
first of three members on one host:

  berth etcd --name e1 --data-dir e1.etcd \
    --listen-client 127.0.0.1:2379 --listen-peer 127.0.0.1:2380 \
    --initial-cluster e1=http://127.0.0.1:2380,e2=http://127.0.0.1:2390,e3=http://127.0.0.1:2400

SIGTERM or SIGINT stops it cleanly.

Flags:
`

type etcdMemberConfig struct {
	name, dataDir            string
	listenClient, listenPeer string
	advClient, advPeer       string
	initialCluster           string
	clusterState, token      string
	maxTxnOps                uint
	retention                string
	logLevel                 string
}

func parseEtcdFlags(args []string, stderr io.Writer) (etcdMemberConfig, error) {
	var c etcdMemberConfig
	fs := newFlagSet("etcd", etcdUsage, stderr)
	fs.StringVar(&c.name, "name", "default", "member name, unique in the cluster")
	fs.StringVar(&c.dataDir, "data-dir", "", `data directory (default "<name>.etcd")`)
	fs.StringVar(&c.listenClient, "listen-client", "127.0.0.1:2379", "client address, host:port or URL")
	fs.StringVar(&c.listenPeer, "listen-peer", "127.0.0.1:2380", "peer address, host:port or URL")
	fs.StringVar(&c.advClient, "advertise-client", "", "client URL given to others (default: --listen-client)")
	fs.StringVar(&c.advPeer, "advertise-peer", "", "peer URL given to others (default: --listen-peer)")
	fs.StringVar(&c.initialCluster, "initial-cluster", "", "every member as name=peerURL, comma-separated (default: this member alone)")
	fs.StringVar(&c.clusterState, "initial-cluster-state", embed.ClusterStateFlagNew, "new (bootstrap with the others) or existing (join a running cluster)")
	fs.StringVar(&c.token, "initial-cluster-token", "berth", "bootstrap token; distinct clusters on one network need distinct tokens")
	fs.UintVar(&c.maxTxnOps, "max-txn-ops", store.EmbeddedMaxTxnOps, "most operations in one Txn; berth serve's group commits use up to this many")
	fs.StringVar(&c.retention, "auto-compaction-retention", "5m", `history kept for watches to resume from: a duration, or a revision count; "0" keeps all`)
	fs.StringVar(&c.logLevel, "log-level", "warn", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, errors.New("unexpected arguments: " + strings.Join(fs.Args(), " "))
	}
	if c.clusterState != embed.ClusterStateFlagNew && c.clusterState != embed.ClusterStateFlagExisting {
		return c, fmt.Errorf("--initial-cluster-state: want new or existing, got %q", c.clusterState)
	}
	if c.dataDir == "" {
		c.dataDir = c.name + ".etcd"
	}
	return c, nil
}

// embedConfig turns the flags into etcd's configuration; limits, compaction
// and logging come from store.EmbeddedConfig, like the single embedded etcd.
func (c etcdMemberConfig) embedConfig(logger *zap.Logger) (*embed.Config, error) {
	ec := embed.NewConfig()
	ec.Name, ec.Dir = c.name, c.dataDir
	var err error
	parse := func(flagName, v string) url.URL {
		if err != nil {
			return url.URL{}
		}
		var u url.URL
		u, err = memberURL(v)
		if err != nil {
			err = fmt.Errorf("--%s: %w", flagName, err)
		}
		return u
	}
	lc, lp := parse("listen-client", c.listenClient), parse("listen-peer", c.listenPeer)
	ac, ap := lc, lp
	if c.advClient != "" {
		ac = parse("advertise-client", c.advClient)
	}
	if c.advPeer != "" {
		ap = parse("advertise-peer", c.advPeer)
	}
	if err != nil {
		return nil, err
	}
	ec.ListenClientUrls, ec.AdvertiseClientUrls = []url.URL{lc}, []url.URL{ac}
	ec.ListenPeerUrls, ec.AdvertisePeerUrls = []url.URL{lp}, []url.URL{ap}
	ec.InitialCluster = ec.InitialClusterFromName(c.name)
	if c.initialCluster != "" {
		if ec.InitialCluster, err = normalizeCluster(c.initialCluster); err != nil {
			return nil, err
		}
	}
	ec.ClusterState = c.clusterState
	ec.InitialClusterToken = c.token
	store.EmbeddedConfig{MaxTxnOps: c.maxTxnOps, AutoCompactionRetention: c.retention}.ApplyTo(ec)
	// Our own logger at the chosen level, not the store's warn-and-above
	// (which cannot lower a level set above warn).
	ec.LogLevel = c.logLevel
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger.Named("etcd"))
	if err := ec.Validate(); err != nil {
		return nil, err
	}
	return ec, nil
}

// memberURL accepts host:port (plain http) or a full URL.
func memberURL(v string) (url.URL, error) {
	if !strings.Contains(v, "://") {
		if _, _, err := net.SplitHostPort(v); err != nil {
			return url.URL{}, err
		}
		return url.URL{Scheme: "http", Host: v}, nil
	}
	u, err := url.Parse(v)
	if err != nil {
		return url.URL{}, err
	}
	return *u, nil
}

// normalizeCluster turns name=host:port entries into name=http://host:port.
func normalizeCluster(v string) (string, error) {
	parts := strings.Split(v, ",")
	for i, p := range parts {
		name, addr, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || name == "" {
			return "", fmt.Errorf("--initial-cluster: want name=peerURL, got %q", p)
		}
		u, err := memberURL(addr)
		if err != nil {
			return "", fmt.Errorf("--initial-cluster %s: %w", name, err)
		}
		parts[i] = name + "=" + u.String()
	}
	return strings.Join(parts, ","), nil
}

// etcdMember runs one member until ctx ends (then closes it) or it fails.
// It does not bound start-up: a member waits for a quorum of its peers,
// however late they start.
func etcdMember(ctx context.Context, args []string, stderr io.Writer) error {
	c, err := parseEtcdFlags(args, stderr)
	if err != nil {
		return err
	}
	lvl, err := zapcore.ParseLevel(c.logLevel)
	if err != nil {
		return err
	}
	level := zap.NewAtomicLevelAt(lvl)
	zc := zap.NewProductionConfig()
	zc.Level, zc.Sampling = level, nil
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder // as berth serve's
	logger, err := zc.Build()
	if err != nil {
		return err
	}
	defer logger.Sync() //nolint:errcheck // stderr sync errors are not actionable
	ec, err := c.embedConfig(logger)
	if err != nil {
		return err
	}
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return err // StartEtcd cleans up after itself
	}
	defer e.Close()
	ready := e.Server.ReadyNotify()
	for {
		select {
		case <-ready:
			logger.Info("etcd member ready", zap.String("name", c.name), zap.Stringers("client", urlStringers(ec.AdvertiseClientUrls)))
			ready = nil
		case err := <-e.Err():
			return fmt.Errorf("etcd %s: %w", c.name, err)
		case <-e.Server.StopNotify():
			return fmt.Errorf("etcd %s stopped (removed from the cluster?)", c.name)
		case <-ctx.Done():
			// Close makes every listener report, at error level, that it
			// was closed: noise on a clean stop.
			level.SetLevel(zap.DPanicLevel)
			return nil // the deferred Close stops serving, then raft, then the database
		}
	}
}

func urlStringers(us []url.URL) []fmt.Stringer {
	out := make([]fmt.Stringer, len(us))
	for i := range us {
		out[i] = &us[i]
	}
	return out
}
