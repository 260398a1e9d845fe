package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/berth-io/berth/replica"
	"github.com/berth-io/berth/scheduler"
	"github.com/berth-io/berth/scheduler/config"
	"github.com/berth-io/berth/store"
	"github.com/berth-io/berth/tracing"
)

const serveUsage = `Usage: berth serve [flags]

Runs one replica: the gRPC API, the scheduler, and (unless --etcd-endpoints)
an embedded etcd. SIGTERM or SIGINT drains it and stops it cleanly.

Flags:
`

// serveFlags binds the replica's flags to a replica.Config.
func serveFlags(fs *flag.FlagSet, cfg *replica.Config, logLevel *string, endpoints *string) {
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:7070", "gRPC listen address")
	fs.StringVar(&cfg.Advertise, "advertise", "", "gRPC address other replicas and ListReplicas report for this one (default: the listen address, with the host name for a wildcard host)")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", "127.0.0.1:7071", `Prometheus /metrics listen address ("-" disables)`)
	fs.StringVar(&cfg.DataDir, "data-dir", "./berth-data", "embedded etcd data directory")
	fs.Var((*negatedBool)(&cfg.DisableStartupSnapshot), "startup-snapshot",
		"keep a snapshot of the cache in the data dir, so a restart loads it while etcd opens (embedded etcd only; default true)")
	fs.DurationVar(&cfg.SnapshotInterval, "startup-snapshot-interval", 30*time.Second, "how often to check whether the start-up snapshot is due a rewrite (its change log reached a quarter of it, or etcd moved on a quiet cache)")
	fs.StringVar(endpoints, "etcd-endpoints", "", "comma-separated external etcd endpoints (instead of the embedded etcd)")
	fs.StringVar(&cfg.Store.Prefix, "etcd-prefix", "/berth", "etcd key prefix")
	fs.DurationVar(&cfg.Store.RequestTimeout, "etcd-request-timeout", 5*time.Second, "bound on each etcd request")
	fs.IntVar(&cfg.Store.WatchBuffer, "watch-buffer", 65536, "recent binding events kept for watchers; a watcher further behind is cut off and resumes")
	fs.DurationVar(&cfg.Store.WatchMaxLag, "watch-max-lag", 30*time.Second, "how far behind in time a watcher may fall, or a send to it block, before it is cut off and resumes")
	fs.IntVar(&cfg.Store.CommitWorkers, "etcd-commit-workers", 0, "group-commit Txns in flight at once (0: the store's default)")
	embeddedEtcdFlags(fs, &cfg.Embedded)
	fs.IntVar(&cfg.Scheduler.Shards, "shard-loops", 0, "scheduling loops (0: one per CPU)")
	fs.Func("max-binding-cycles", fmt.Sprintf("binding cycles waiting for their commit at once; the shard loops wait while this many are (default %d)", scheduler.DefaultMaxBindingCycles), func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1<<20 {
			return fmt.Errorf("want 1-%d, got %q", 1<<20, v)
		}
		cfg.Scheduler.MaxBindingCycles = n
		return nil
	})
	fs.IntVar(&cfg.Scheduler.LogicalShards, "shards", 64, "logical shards that replicas divide; every replica of a cluster must agree")
	fs.StringVar(&cfg.ReplicaID, "replica-id", "", "this replica's id, stable across its restarts (default: hostname-port)")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", 10*time.Second, "replica lease TTL: a replica silent this long loses its shards to the others")
	fs.Func("percentage-of-nodes-to-score", "share of nodes to find feasible before scoring, 1-100 (default: kube-scheduler's adaptive rule)", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 || n > 100 {
			return fmt.Errorf("want 0-100, got %q", v)
		}
		cfg.Scheduler.PercentageOfNodesToScore = int32(n)
		return nil
	})
	frontFlags(fs, &cfg.Limits)
	fs.StringVar(logLevel, "log-level", "info", "debug, info, warn or error")
}

// frontFlags binds the gRPC front's limits: past them calls and streams are
// turned away with ResourceExhausted and a RetryInfo instead of queueing
// into memory.
func frontFlags(fs *flag.FlagSet, l *replica.Limits) {
	fs.IntVar(&l.MaxInFlight, "max-inflight", 1024, "unary calls handled at once; up to 4x more wait up to --max-wait for a slot, the rest are shed with ResourceExhausted")
	fs.DurationVar(&l.MaxWait, "max-wait", 2*time.Second, "how long a call waits for an in-flight slot before it is shed")
	fs.IntVar(&l.MaxStreams, "max-streams", 4096, "streams (WatchBindings) open at once across all clients")
	fs.IntVar(&l.MaxStreamsPerClient, "max-streams-per-client", 256, "streams open at once from one client host")
	fs.Func("max-streams-per-connection", "HTTP/2 streams one connection may open at once (default 1024)", func(v string) error {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 {
			return fmt.Errorf("want a positive count, got %q", v)
		}
		l.MaxStreamsPerConnection = uint32(n)
		return nil
	})
	fs.DurationVar(&l.KeepaliveTime, "keepalive-time", 30*time.Second, "ping a connection silent this long, to find clients that vanished")
	fs.DurationVar(&l.KeepaliveTimeout, "keepalive-timeout", 10*time.Second, "close a connection (and its streams) whose ping goes unanswered this long")
}

// embeddedEtcdFlags binds the embedded etcd's limits and upkeep; with
// --etcd-endpoints they are the external cluster operator's business.
func embeddedEtcdFlags(fs *flag.FlagSet, ec *store.EmbeddedConfig) {
	// This default is the one place that decides whether the embedded etcd
	// opens a TCP client port, and where: the replica itself calls it
	// in-process, the port is for etcdctl, backups and maintenance.
	ec.ClientAddr = "127.0.0.1:0"
	fs.Func("etcd-listen-client", `embedded etcd: client listen address, host:port or http://host:port; port 0 picks a free one (default "127.0.0.1:0"). It requires the per-run client certificate written to the directory logged at start`, func(v string) error {
		addr, err := embeddedClientAddr(v)
		if err != nil {
			return err
		}
		ec.ClientAddr = addr
		return nil
	})
	ec.QuotaBackendBytes = 4 << 30
	fs.Func("etcd-quota-bytes", "embedded etcd: database size at which writes are refused with ResourceExhausted until maintenance frees space (default 4 GiB)", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("want a positive byte count, got %q", v)
		}
		ec.QuotaBackendBytes = n
		return nil
	})
	ec.MaxRequestBytes = 3 << 19
	fs.Func("etcd-max-request-bytes", "embedded etcd: largest request it accepts (default 1.5 MiB; a group commit is at most about 1 MiB)", func(v string) error {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 {
			return fmt.Errorf("want a positive byte count, got %q", v)
		}
		ec.MaxRequestBytes = uint(n)
		return nil
	})
	fs.StringVar(&ec.AutoCompactionRetention, "etcd-compaction-retention", "5m",
		`embedded etcd: history kept for watches to resume from, a duration ("5m") or a revision count ("100000"); "0" keeps all`)
	fs.DurationVar(&ec.Maintenance.Interval, "etcd-maintenance-interval", 30*time.Second,
		"embedded etcd: time between compaction, defragmentation and NOSPACE recovery passes (negative: none)")
}

// embeddedClientAddr accepts host:port or an http URL of one.
func embeddedClientAddr(v string) (string, error) {
	if strings.Contains(v, "://") {
		u, err := url.Parse(v)
		if err != nil {
			return "", err
		}
		if u.Scheme != "http" || u.Path != "" {
			return "", fmt.Errorf("want host:port or http://host:port, got %q", v)
		}
		v = u.Host
	}
	if _, _, err := net.SplitHostPort(v); err != nil {
		return "", err
	}
	return v, nil
}

func serve(ctx context.Context, args []string, stderr io.Writer) error {
	var cfg replica.Config
	var logLevel, endpoints string
	fs := newFlagSet("serve", serveUsage, stderr)
	serveFlags(fs, &cfg, &logLevel, &endpoints)
	var etcdClient etcdClientFlags
	etcdClient.bind(fs)
	configPath := fs.String("config", "", "scheduler configuration file (KubeSchedulerConfiguration-shaped YAML; see scheduler/config)")
	gcPercent := fs.Int("gc-percent", defaultGCPercent, gcPercentUsage)
	memoryLimit := fs.String("memory-limit", "", memoryLimitUsage)
	gcHeadroom := fs.String("gc-headroom", defaultGCHeadroom, gcHeadroomUsage)
	hugePages := fs.Bool("transparent-huge-pages", true, hugePagesUsage)
	var sec securityOptions
	securityFlags(fs, &sec)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errors.New("unexpected arguments: " + strings.Join(fs.Args(), " "))
	}
	gc, err := applyGC(*gcPercent, *memoryLimit)
	if err != nil {
		return err
	}
	if err := gc.adapt(*gcHeadroom); err != nil {
		return err
	}
	cfg.OnServing = gc.holdForStartup()
	if *configPath != "" {
		if err := applySchedulerConfig(fs, *configPath, &cfg); err != nil {
			return err
		}
	}
	if endpoints != "" {
		cfg.EtcdEndpoints = strings.Split(endpoints, ",")
	}
	if err := etcdClient.apply(&cfg, os.Getenv); err != nil {
		return err
	}
	logger, err := newLogger(logLevel)
	if err != nil {
		return err
	}
	defer logger.Sync() //nolint:errcheck // stderr sync errors are not actionable
	cfg.Logger = logger
	gc.hugePagesAdvised = adviseHugePages(*hugePages, gc.hugePages, logger)
	gc.log(logger)
	auditLogger, err := sec.apply(&cfg)
	if err != nil {
		return err
	}
	if auditLogger != nil {
		defer auditLogger.Sync() //nolint:errcheck // as for the main log
	}
	tp, flushTraces, err := tracing.Setup(ctx, os.Getenv)
	if err != nil {
		return err
	}
	defer flushSpans(logger, flushTraces)
	cfg.TracerProvider = tp
	srv, err := replica.Start(ctx, cfg)
	if err != nil {
		return err
	}
	<-ctx.Done()
	return srv.Stop()
}

// flushSpans sends the spans still buffered once the replica has stopped,
// giving a collector that is gone a few seconds, not the process's exit.
func flushSpans(logger *zap.Logger, flush func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := flush(ctx); err != nil {
		logger.Warn("flushing trace spans", zap.Error(err))
	}
}

// applySchedulerConfig loads the file's profiles and percentage into cfg;
// a --percentage-of-nodes-to-score given on the command line wins.
func applySchedulerConfig(fs *flag.FlagSet, path string, cfg *replica.Config) error {
	sc, err := config.Load(path)
	var invalid config.Errors
	if errors.As(err, &invalid) {
		return fmt.Errorf("--config %s is invalid:\n%w", path, err)
	}
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	cfg.Scheduler.Profiles = sc.Profiles
	flagSet := false
	fs.Visit(func(f *flag.Flag) { flagSet = flagSet || f.Name == "percentage-of-nodes-to-score" })
	if !flagSet {
		cfg.Scheduler.PercentageOfNodesToScore = sc.PercentageOfNodesToScore
	}
	return nil
}

// newLogger is the JSON logger to stderr of berth serve, with ISO 8601
// timestamps a person and a log pipeline both read.
func newLogger(level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, err
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.Sampling = nil
	zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	return zc.Build()
}

// negatedBool is a flag that defaults to true and sets a Disable... field
// to its negation, so a zero Config keeps the feature on.
type negatedBool bool

func (b *negatedBool) String() string {
	if b == nil {
		return "true"
	}
	return strconv.FormatBool(!bool(*b))
}

func (b *negatedBool) Set(v string) error {
	on, err := strconv.ParseBool(v)
	if err != nil {
		return err
	}
	*b = negatedBool(!on)
	return nil
}

func (b *negatedBool) IsBoolFlag() bool { return true }
