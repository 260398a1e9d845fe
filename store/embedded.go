package store

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3rpc"
	"go.etcd.io/etcd/server/v3/proxy/grpcproxy/adapter"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.uber.org/zap"
)

// EmbeddedConfig configures an in-process, single-member etcd.
type EmbeddedConfig struct {
	// Dir holds etcd's data (WAL and database); required. Restarting on the
	// same Dir keeps the data.
	Dir string
	// ClientAddr is the host:port clients connect to; default
	// "127.0.0.1:0", where port 0 picks a free port (see Endpoints).
	ClientAddr string
	// Logger is the parent of etcd's own log (named "etcd": warn and above,
	// without the benign shutdown and start-up noise) and of maintenance's;
	// default none.
	Logger *zap.Logger
	// MaxTxnOps is the server's limit on ops per Txn; default 1024, so that
	// group commits carry many writes. Pass the same to Config.MaxTxnOps.
	MaxTxnOps uint
	// MaxRequestBytes is the server's request size limit; default 1.5 MiB,
	// etcd's own, which a group commit (Config.MaxTxnBytes, 1 MiB) fits
	// under: one client's request cannot take a large bite of the quota.
	MaxRequestBytes uint
	// QuotaBackendBytes is the database size at which etcd refuses writes
	// (ErrNoSpace); default 4 GiB.
	QuotaBackendBytes int64
	// AutoCompactionRetention keeps this much history for watches to resume
	// from: a duration ("5m", "1h") compacts periodically, a plain integer
	// ("100000") keeps that many revisions. Default "5m": at the target write
	// rates this bounds the database while leaving minutes for a subscriber
	// to reconnect and resume. StartEmbedded's maintenance does the
	// compacting (see MaintenanceConfig); ApplyTo leaves it to etcd.
	AutoCompactionRetention string
	// Maintenance tunes compaction, defragmentation and recovery from a
	// full database.
	Maintenance MaintenanceConfig
	// ClientCertAuth serves the client port over TLS and admits only
	// clients with a certificate made for this run (see clientPKI): for a
	// replica, which reaches its etcd in-process, so the port is no back
	// door. Endpoints then are https and ClientTLS holds the credentials.
	ClientCertAuth bool
	// SnapshotCount is how many applied entries etcd lets its log grow by
	// between snapshots; default 50 (etcd's own is 10,000). A restart
	// reads and replays every entry since the last snapshot, and Berth's
	// entries are group commits of up to a thousand writes (up to 1.5 MiB)
	// each. A snapshot costs little here: the database is the state, so it
	// is a commit of it plus a few KB of membership.
	SnapshotCount uint64
}

// EmbeddedMaxTxnOps is the embedded server's Txn size limit; clients of it
// should pass the same as Config.MaxTxnOps so group commits can use it.
const EmbeddedMaxTxnOps = 1024

// Embedded defaults.
const (
	defaultEmbeddedClientAddr   = "127.0.0.1:0"
	defaultEmbeddedMaxRequest   = 3 << 19 // 1.5 MiB
	defaultEmbeddedQuota        = 4 << 30
	defaultEmbeddedRetention    = "5m"
	defaultEmbeddedStartTimeout = 60 * time.Second
	defaultEmbeddedSnapshots    = 50
	embeddedMemberName          = "berth"
	// embeddedCatchUpEntries is how many applied raft entries etcd keeps in
	// memory after each compaction of its log, for a slow follower to catch
	// up from. A single member has no follower, and at etcd's 5,000 the
	// entries (each a group commit of up to a thousand writes) held tens of
	// MB of pod values at 200,000 pods. etcd needs at least one; it also
	// keeps up to 100 more between its in-memory snapshots.
	embeddedCatchUpEntries = 10
	// embeddedWarnApply is when etcd logs an apply as slow. etcd's 100 ms
	// suits small requests; a group commit of a thousand pods takes that
	// long on a busy 2-core machine, and each warning prints the whole
	// request (~160 KB). An apply of a second holds up every write behind
	// it: that is trouble worth a line (slow applies are counted in etcd's
	// metrics either way).
	embeddedWarnApply = time.Second
	// The embedded member's raft tick and election timeout (etcd's
	// default 100 and 1000 ms); see singleMember.
	embeddedTickMs, embeddedElectionMs = 50, 250
)

// The WAL's upkeep. Every start reads the WAL from its oldest file twice
// (once for snapshot records, then to replay), so the WAL kept is start-up
// time. etcd cuts 64 MB files, keeps five and purges every 30 s: after
// loading 200,000 pods a restart read ~190 MB of WAL it did not need, all
// of it older than the last snapshot.
const (
	// walSegmentBytes is the size of a WAL file, the unit it is purged
	// in: small, so that little is kept beyond the file holding the last
	// snapshot and those after it.
	walSegmentBytes = 8 << 20
	// walPurgeInterval spaces the embedded member's purges: often enough
	// that a kill -9 right after a burst of writes leaves only the WAL since
	// the last snapshot; each is a directory listing.
	walPurgeInterval = time.Second
	// walKeepFiles is as few as etcd allows: the files a restart needs
	// (from the one holding the last snapshot on) stay locked by the WAL,
	// and no purge removes a locked file.
	walKeepFiles = 1
)

// walSegmentOnce sets wal.SegmentSizeBytes, a package variable that every
// member in the process reads when it cuts a file. Each member Berth runs
// is configured by ApplyTo first, so setting it there, once, happens before
// any member reads it.
var walSegmentOnce sync.Once

func (c EmbeddedConfig) withDefaults() EmbeddedConfig {
	if c.ClientAddr == "" {
		c.ClientAddr = defaultEmbeddedClientAddr
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.MaxTxnOps == 0 {
		c.MaxTxnOps = EmbeddedMaxTxnOps
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = defaultEmbeddedMaxRequest
	}
	if c.QuotaBackendBytes == 0 {
		c.QuotaBackendBytes = defaultEmbeddedQuota
	}
	if c.AutoCompactionRetention == "" {
		c.AutoCompactionRetention = defaultEmbeddedRetention
	}
	if c.Maintenance.Interval == 0 {
		c.Maintenance.Interval = defaultMaintenanceInterval
	}
	if c.SnapshotCount == 0 {
		c.SnapshotCount = defaultEmbeddedSnapshots
	}
	return c
}

// Embedded is a running in-process etcd.
type Embedded struct {
	etcd       *embed.Etcd
	pki        *clientPKI // nil unless ClientCertAuth
	endpoints  []string
	maintainer *maintainer // nil when maintenance is off
	// stopPurge ends the WAL purger; purged closes once it has.
	stopPurge chan struct{}
	purged    <-chan struct{}
	closeOnce sync.Once
}

// StartEmbedded starts a single-member etcd in cfg.Dir and waits until it
// serves (or ctx ends, or a minute passes without a deadline). On failure
// nothing is left running. The peer URL is on a free loopback port.
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig) (_ *Embedded, err error) {
	cfg = cfg.withDefaults()
	if cfg.Dir == "" {
		return nil, fmt.Errorf("%w: embedded etcd needs a data dir", ErrInvalidArgument)
	}
	host, port, err := net.SplitHostPort(cfg.ClientAddr)
	if err != nil {
		return nil, fmt.Errorf("%w: client address %q: %w", ErrInvalidArgument, cfg.ClientAddr, err)
	}
	keep, err := parseRetention(cfg.AutoCompactionRetention)
	if err != nil {
		return nil, err
	}
	maintain := cfg.Maintenance.Interval > 0
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultEmbeddedStartTimeout)
		defer cancel()
	}
	// Free ports are found by binding and releasing, so another process can
	// take one in between; then etcd fails to listen and we try other ports.
	scheme := "http"
	var pki *clientPKI
	if cfg.ClientCertAuth {
		if pki, err = newClientPKI(cfg.Dir, host); err != nil {
			return nil, fmt.Errorf("store: embedded etcd client TLS: %w", err)
		}
		scheme = "https"
		defer func() {
			if err != nil {
				pki.remove()
			}
		}()
	}
	const attempts = 3
	for attempt := 1; ; attempt++ {
		clientPort, peerPort := port, "0"
		if clientPort == "0" {
			if clientPort, err = freePort(host); err != nil {
				return nil, err
			}
		}
		if peerPort, err = freePort("127.0.0.1"); err != nil {
			return nil, err
		}
		clientURL := url.URL{Scheme: scheme, Host: net.JoinHostPort(host, clientPort)}
		peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", peerPort)}
		ec := cfg.singleMember(clientURL, peerURL, pki, maintain)
		e, err := startAndWait(ctx, ec)
		if err == nil {
			emb := &Embedded{etcd: e, endpoints: []string{clientURL.String()}, pki: pki}
			if maintain {
				if emb.maintainer, err = newMaintainer(clientURL.String(), emb.ClientTLS(), keep, cfg.Logger.Named("etcd-maintenance"), cfg.Maintenance.Registerer); err != nil {
					e.Close()
					return nil, err
				}
				emb.maintainer.start(cfg.Maintenance.Interval)
			}
			emb.purgeWAL(cfg.Logger)
			return emb, nil
		}
		if attempt == attempts || !errors.Is(err, syscall.EADDRINUSE) || ctx.Err() != nil {
			return nil, fmt.Errorf("store: start embedded etcd: %w", err)
		}
	}
}

// singleMember is the etcd configuration of the embedded member at those
// URLs. With maintain, Berth's maintainer compacts (and counts it), not
// etcd's own timer.
func (c EmbeddedConfig) singleMember(clientURL, peerURL url.URL, pki *clientPKI, maintain bool) *embed.Config {
	ec := embed.NewConfig()
	ec.Name = embeddedMemberName
	ec.Dir = c.Dir
	ec.ListenClientUrls = []url.URL{clientURL}
	ec.AdvertiseClientUrls = []url.URL{clientURL}
	ec.ListenPeerUrls = []url.URL{peerURL}
	ec.AdvertisePeerUrls = []url.URL{peerURL}
	ec.InitialCluster = ec.InitialClusterFromName(ec.Name)
	if pki != nil {
		ec.ClientTLSInfo = pki.server
	}
	c.ApplyTo(ec)
	ec.SnapshotCatchUpEntries = embeddedCatchUpEntries
	// Purged by purgeWAL, more often than etcd's own purger would.
	ec.MaxWalFiles = 0
	// A restarted single member elects itself once a randomised election
	// timeout (one to two timeouts) has passed, less the ticks etcd skips
	// for a lone member: 0.1 to 1 s of every restart at etcd's defaults,
	// with no peer to wait for. Five ticks is the shortest timeout etcd
	// allows, so the tick sets the wait: 50 ms makes it 50 to 250 ms. It
	// is not shorter because a member whose last tick is more than three
	// ticks old checks its leadership with a linearizable read before it
	// renews a lease: 150 ms is a lag a loaded 2-core machine rarely
	// reaches, 30 ms one it would. etcd's request timeout (5 s plus two
	// election timeouts) stays above the store's own 5 s bound on every
	// call.
	ec.TickMs, ec.ElectionMs = embeddedTickMs, embeddedElectionMs
	if maintain {
		ec.AutoCompactionRetention = "0"
	}
	return ec
}

// ApplyTo sets on ec what every etcd member Berth runs shares (Txn and
// request limits, quota, compaction, logging), defaulting zero fields. Dir,
// names, URLs and membership are left to the caller, so a clustered member
// (berth etcd) is configured like the single embedded one.
func (c EmbeddedConfig) ApplyTo(ec *embed.Config) {
	c = c.withDefaults()
	ec.MaxTxnOps = c.MaxTxnOps
	ec.MaxRequestBytes = c.MaxRequestBytes
	ec.QuotaBackendBytes = c.QuotaBackendBytes
	ec.SnapshotCount = c.SnapshotCount
	ec.WarningApplyDuration = embeddedWarnApply
	walSegmentOnce.Do(func() { wal.SegmentSizeBytes = walSegmentBytes })
	ec.AutoCompactionMode, ec.AutoCompactionRetention = compactionMode(c.AutoCompactionRetention)
	ec.LogLevel = "warn"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(etcdLogger(c.Logger))
}

// purgeWAL removes the WAL files no start needs any more, every
// walPurgeInterval until Close. It is etcd's own purge (which skips files
// the WAL holds locked), run more often.
func (e *Embedded) purgeWAL(log *zap.Logger) {
	// Errors only: etcd's purge warns of every file it finds still locked,
	// which at one purge a second is the usual case, not news.
	log = log.Named("etcd-wal").WithOptions(zap.IncreaseLevel(zap.ErrorLevel))
	e.stopPurge = make(chan struct{})
	purged, errc := fileutil.PurgeFileWithDoneNotify(log, e.etcd.Server.Cfg.WALDir(), "wal", walKeepFiles, walPurgeInterval, e.stopPurge)
	e.purged = purged
	go func() {
		select {
		case err := <-errc:
			// The WAL then grows until the next start purges it.
			log.Error("etcd WAL purge stopped", zap.Error(err))
		case <-purged:
		}
	}()
}

func startAndWait(ctx context.Context, ec *embed.Config) (*embed.Etcd, error) {
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, err // StartEtcd cleans up after itself
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, err
	case <-e.Server.StopNotify():
		e.Close()
		return nil, errors.New("etcd stopped while starting")
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
}

// compactionMode maps a retention to etcd's mode: durations are periodic,
// plain integers count revisions.
func compactionMode(retention string) (mode, value string) {
	if _, err := strconv.ParseInt(strings.TrimSpace(retention), 10, 64); err == nil {
		return embed.CompactorModeRevision, retention
	}
	return embed.CompactorModePeriodic, retention
}

func freePort(host string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("store: find a free port on %s: %w", host, err)
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}

// Endpoints are the client URLs to pass to Config.Endpoints.
func (e *Embedded) Endpoints() []string { return e.endpoints }

// ClientTLS is what a client needs to reach the port of an etcd started
// with ClientCertAuth (for Config.TLS); nil otherwise.
func (e *Embedded) ClientTLS() *tls.Config {
	if e.pki == nil {
		return nil
	}
	return e.pki.client.Clone()
}

// ClientTLSDir holds ca.crt, client.crt and client.key for etcdctl while
// the etcd runs; "" without ClientCertAuth.
func (e *Embedded) ClientTLSDir() string {
	if e.pki == nil {
		return ""
	}
	return e.pki.dir
}

// Client returns a new client that calls the server in-process, for
// Config.Client: no gRPC, HTTP/2 or socket between the store and its own
// etcd, which cost a tenth of the CPU of a write-heavy benchmark.
// Its KV also streams ranges (inProcessKV).
func (e *Embedded) Client() *clientv3.Client {
	c := v3client.New(e.etcd.Server)
	c.KV = clientv3.NewKVFromKVClient(e.KVClient(), c)
	return c
}

// KVClient returns the server's KV service, called in-process, for
// Config.KVClient.
func (e *Embedded) KVClient() pb.KVClient {
	kv := v3rpc.NewQuotaKVServer(e.etcd.Server)
	return inProcessKV{KVClient: adapter.KvServerToKvClient(kv), server: kv}
}

// Close stops maintenance (waiting for a running pass) and the WAL's
// purges, then the server:
// it ends client requests (waiting up to the request timeout for open
// streams such as watches), stops raft and closes the listeners and the
// database. Later calls do nothing.
func (e *Embedded) Close() {
	e.closeOnce.Do(func() {
		if e.maintainer != nil {
			e.maintainer.close()
		}
		if e.stopPurge != nil {
			close(e.stopPurge)
			<-e.purged
		}
		e.etcd.Close()
		e.pki.remove()
	})
}
