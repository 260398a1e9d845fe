// Package replica runs one Berth replica: it opens the store, builds the
// scheduling core, bridges the store's watch into the core, joins the
// replicas' membership (which hands out shards), and serves the gRPC front
// and the operator's metrics listener. cmd/berth calls only this package.
package replica

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/berth-io/berth/scheduler"
	"github.com/berth-io/berth/server"
	"github.com/berth-io/berth/server/admission"
	"github.com/berth-io/berth/store"
)

// Replica is a running replica.
type Replica struct {
	cfg      Config
	logger   *zap.Logger
	reg      *prometheus.Registry
	lastRev  prometheus.Gauge
	embedded *store.Embedded
	store    *store.Store
	sched    *scheduler.Scheduler
	// committer is the core's, given the store once it is open: the core
	// is built before, so a start-up snapshot can load while etcd opens.
	committer *storeCommitter
	// bridge feeds the core from the store (and from a start-up snapshot).
	bridge *bridge
	// snapshots keeps the start-up snapshot; nil when off.
	snapshots *snapshots
	// appliedRev is the latest revision the cache holds.
	appliedRev atomic.Int64
	// appliedChanges counts the changes the cache has taken in since the
	// start, the nodes and pods of a listing or a snapshot included.
	appliedChanges atomic.Int64

	front   *server.Server
	lis     net.Listener
	metrics *metricsListener
	sec     *security
	// etcdEndpoints are the store's, for the start-up log.
	etcdEndpoints []string

	schedCancel context.CancelFunc
	// syncCancel ends the sync, which a stop lets run on after the
	// scheduler (catchUpBeforeStop).
	syncCancel context.CancelFunc
	// schedDone closes when the scheduler has stopped and its binding
	// cycles have ended; only then is the membership (and its fence)
	// given up.
	schedDone    chan struct{}
	memberCancel context.CancelFunc
	healthCancel context.CancelFunc
	group        *errgroup.Group
	stopOnce     sync.Once
	stopErr      error
	syncReady    chan struct{}
	// ownershipKnown is set once the membership has settled which shards
	// are ours; until then a replica cannot say it schedules.
	ownershipKnown atomic.Bool
	// startup times the phases of Start and what follows it.
	startup *startupClock
	// servingOnce calls Config.OnServing at the first SERVING.
	servingOnce sync.Once
	// submits links scheduling cycles to the submits of their pods; nil
	// unless tracing.
	submits *submitLinks
}

// Start brings a replica up, phase by phase: metrics, storage, the
// scheduling core, the gRPC front, listeners, then the loops (membership,
// the store's watch into the core, scheduling once the cache is whole, and
// serving). It returns once the replica accepts RPCs. ctx bounds start-up
// only; the replica runs until Stop.
func Start(ctx context.Context, cfg Config) (_ *Replica, err error) {
	began := time.Now()
	cfg.setDefaults()
	r := &Replica{cfg: cfg, logger: cfg.Logger, syncReady: make(chan struct{})}
	if r.tracingOn() {
		r.submits = newSubmitLinks(maxSubmitLinks)
	}
	defer func() {
		if err != nil {
			r.closeListeners()
			r.waitSnapshotLoad()
			r.closeBackends()
		}
	}()
	r.newMetrics()
	r.startup = newStartupClock(began, r.reg, r.logger.Named("startup"))
	if r.sec, err = loadSecurity(cfg); err != nil {
		return nil, err
	}
	// The ports are bound before anything else starts, so that the embedded
	// etcd's free ports cannot be the one a restart needs, and a port in use
	// fails the start at once instead of after etcd's open. Calls that
	// arrive before run wait in the kernel's queue.
	if err := r.listen(); err != nil {
		return nil, err
	}
	r.startup.mark(phaseListen)
	// The core first, so that a start-up snapshot loads into it while
	// etcd opens, which is most of a restart.
	r.committer = &storeCommitter{}
	if err := r.newScheduler(ctx); err != nil {
		return nil, err
	}
	r.bridge = &bridge{sched: r.sched, ready: r.syncReady, applied: r.applied,
		startup: r.startup, beforeLoad: r.cfg.beforeLoad, beforePodPut: r.cfg.beforePodPut}
	r.loadSnapshot()
	if err := r.openStore(ctx); err != nil {
		return nil, err
	}
	r.committer.store = r.store
	r.front = server.New(r.frontConfig())
	r.run()
	r.logger.Info("berth serving", zap.String("grpc", r.lis.Addr().String()), zap.String("advertise", r.cfg.Advertise),
		zap.Stringer("metrics", r.metrics.addr()), zap.String("replica", r.cfg.ReplicaID),
		zap.Bool("tls", r.sec.tls != nil), zap.Bool("auth", r.sec.auth != nil && r.sec.auth.Enabled()),
		zap.Bool("tracing", r.tracingOn()))
	return r, nil
}

func (r *Replica) frontConfig() server.Config {
	l := r.cfg.Limits
	cfg := server.Config{
		Store: r.store, Scheduler: r.sched, Registerer: r.reg, Logger: r.logger,
		Admission: admission.Config{
			MaxInFlight: l.MaxInFlight, MaxWait: l.MaxWait,
			MaxStreams: l.MaxStreams, MaxStreamsPerPeer: l.MaxStreamsPerClient,
		},
		MaxConcurrentStreams: l.MaxStreamsPerConnection,
		KeepaliveTime:        l.KeepaliveTime, KeepaliveTimeout: l.KeepaliveTimeout,
		TLS: r.sec.grpcTLS(), Auth: r.sec.auth,
	}
	if r.tracingOn() {
		cfg.TracerProvider, cfg.Submitting, cfg.Unsubmitted = r.cfg.TracerProvider, r.submits.remember, r.submits.forget
	}
	return cfg
}

// newMetrics makes the registry every part of the replica reports to.
func (r *Replica) newMetrics() {
	r.reg = newRegistry()
	r.lastRev = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "berth_cache_revision", Help: "Latest etcd revision applied to this replica's cache.",
	})
	r.reg.MustRegister(r.lastRev)
}

// openStore starts the embedded etcd unless external endpoints are given,
// then opens the store on it.
func (r *Replica) openStore(ctx context.Context) error {
	storeCfg := r.cfg.Store
	storeCfg.Logger = r.logger.Named("store")
	storeCfg.Metrics = store.NewMetrics(r.reg)
	if r.tracingOn() {
		storeCfg.Tracer = r.tracer()
	}
	if r.embeddedEtcd() {
		dir, err := filepath.Abs(r.cfg.DataDir)
		if err != nil {
			return err
		}
		ec := r.cfg.Embedded
		ec.Dir, ec.Logger, ec.Maintenance.Registerer = dir, r.logger, r.reg
		r.logger.Info("starting embedded etcd", zap.String("dir", dir), zap.String("client", ec.ClientAddr))
		// The store reaches its etcd in-process; the TCP port (for the
		// maintenance client and an operator's etcdctl) is locked with
		// client certificates so it is no back door (issue 10).
		ec.ClientCertAuth = true
		r.embedded, err = store.StartEmbedded(ctx, ec)
		if err != nil {
			return fmt.Errorf("start embedded etcd in %s: %w", dir, err)
		}
		storeCfg.Endpoints = r.embedded.Endpoints()
		storeCfg.Client = r.embedded.Client()
		storeCfg.KVClient = r.embedded.KVClient()
		storeCfg.TLS = r.embedded.ClientTLS()
		r.logger.Info("embedded etcd client port needs a client certificate", zap.Strings("endpoints", r.embedded.Endpoints()),
			zap.String("certificates", r.embedded.ClientTLSDir()))
		if storeCfg.MaxTxnOps == 0 {
			storeCfg.MaxTxnOps = store.EmbeddedMaxTxnOps
		}
	} else {
		// Nothing of ours to start: the phase ends at once.
		storeCfg.Endpoints = r.cfg.EtcdEndpoints
	}
	r.startup.mark(phaseEtcd)
	r.etcdEndpoints = storeCfg.Endpoints
	var err error
	r.store, err = store.Open(ctx, storeCfg)
	if err != nil {
		return fmt.Errorf("open store: %w", err)
	}
	r.logger.Info("store open", zap.Strings("etcd", r.etcdEndpoints), zap.Bool("embedded_etcd", r.embedded != nil),
		zap.String("prefix", storeCfg.Prefix))
	r.startup.mark(phaseStore)
	return nil
}

// embeddedEtcd says whether the replica runs its own etcd: no endpoints
// were given. It is known from the configuration, before etcd starts.
func (r *Replica) embeddedEtcd() bool { return len(r.cfg.EtcdEndpoints) == 0 }

// newScheduler builds the core, committing through the store.
func (r *Replica) newScheduler(ctx context.Context) error {
	schedCfg := r.cfg.Scheduler
	// Shards are handed out by the membership, even to a lone replica: the
	// claims cost one Txn each at start and fence every commit.
	schedCfg.OwnNone = true
	schedCfg.Logger = r.logger.Named("scheduler")
	schedCfg.Metrics = scheduler.NewMetrics(r.reg)
	if r.tracingOn() {
		schedCfg.Tracer = cycleTracer{tracer: r.tracer(), submits: r.submits}
	}
	var err error
	r.sched, err = scheduler.New(ctx, schedCfg, r.committer)
	if err != nil {
		return err
	}
	r.sched.Register(r.reg)
	return nil
}

// listen opens the gRPC and metrics listeners, and names the replica after
// its address when no id was given.
func (r *Replica) listen() error {
	var err error
	r.lis, err = net.Listen("tcp", r.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", r.cfg.Listen, err)
	}
	var gatherer prometheus.Gatherer = r.reg
	if r.embeddedEtcd() {
		gatherer = prometheus.Gatherers{r.reg, etcdServerMetrics()}
	}
	r.metrics, err = listenMetrics(r.cfg.MetricsListen, gatherer, r.reg, r.cfg.Security.EnablePprof, r.sec.httpTLS())
	if err != nil {
		r.lis.Close()
		return err
	}
	if r.cfg.ReplicaID == "" {
		r.cfg.ReplicaID = defaultReplicaID(r.lis.Addr(), r.embeddedEtcd())
	}
	if r.cfg.Advertise == "" {
		r.cfg.Advertise = advertiseAddr(r.lis.Addr())
	}
	return nil
}

// closeListeners closes what listen opened, for a start that failed before
// run served them.
func (r *Replica) closeListeners() {
	if r.lis != nil {
		r.lis.Close()
	}
	if r.metrics != nil {
		r.metrics.lis.Close()
	}
}

// run starts the replica's loops. Each has its own context, so Stop can
// end them in order: scheduling before the membership that fences its
// commits.
func (r *Replica) run() {
	var schedCtx, syncCtx, memberCtx, healthCtx context.Context
	schedCtx, r.schedCancel = context.WithCancel(context.Background())
	syncCtx, r.syncCancel = context.WithCancel(context.Background())
	memberCtx, r.memberCancel = context.WithCancel(context.Background())
	healthCtx, r.healthCancel = context.WithCancel(context.Background())
	r.schedDone = make(chan struct{})
	g := &errgroup.Group{}
	r.group = g
	g.Go(func() error { return r.runMembership(memberCtx) })
	g.Go(func() error { return r.runSync(syncCtx) })
	if r.snapshots != nil {
		g.Go(func() error { return r.runSnapshots(schedCtx) })
	}
	g.Go(func() error {
		// Scheduling starts once the cache holds the whole cluster, so no
		// pod is placed against a partial view.
		defer close(r.schedDone)
		select {
		case <-r.syncReady:
		case <-schedCtx.Done():
			return nil
		}
		r.logger.Info("scheduler started", zap.Int("logical_shards", r.sched.LogicalShards()))
		r.sched.Run(schedCtx)
		return nil
	})
	g.Go(func() error { return r.newHealthProbe().run(healthCtx) })
	g.Go(func() error { return r.front.Serve(r.lis) })
	if r.metrics != nil {
		g.Go(r.metrics.serve)
	}
}

// runMembership keeps this replica in the membership, which hands it
// shards, until ctx ends.
func (r *Replica) runMembership(ctx context.Context) error {
	err := r.store.RunMembership(ctx, store.MembershipConfig{
		ID:      r.cfg.ReplicaID,
		Address: r.cfg.Advertise,
		TTL:     r.cfg.LeaseTTL,
		Shards:  r.sched.LogicalShards(),
	}, settlingOwner{Scheduler: r.sched, wantView: r.store.WantView, settled: func(owned int) {
		r.ownershipKnown.Store(true)
		r.startup.mark(phaseOwnership, zap.Int("owned_shards", owned))
	}})
	if errors.Is(err, context.Canceled) || errors.Is(err, store.ErrClosed) {
		return nil
	}
	return err
}

// runSync feeds the store's watch into the core until ctx ends, then waits
// for the node_lost marks under way.
func (r *Replica) runSync(ctx context.Context) error {
	// The bridge is ours once the start-up load is over.
	snap := r.waitSnapshotLoad()
	if snap != nil && r.embedded != nil {
		go r.adoptSnapshotRevision(ctx, snap)
	}
	b := r.bridge
	b.store, b.ctx, b.log = r.store, ctx, r.logger.Named("sync")
	if r.snapshots != nil {
		b.snapshotRejected = func() {
			r.snapshots.rejected.Store(true)
			r.snapshots.written.Store(0)
			r.snapshots.changes.Discard()
		}
		r.store.RecordChanges(r.snapshots.changes)
		defer r.snapshots.changes.Close()
	}
	err := r.store.SyncFrom(ctx, b, snap)
	b.waitMarking()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// applied records the latest revision the cache holds, reached after
// that many changes.
func (r *Replica) applied(rev int64, changes int) {
	r.appliedRev.Store(rev)
	r.appliedChanges.Add(int64(changes))
	r.lastRev.Set(float64(rev))
}

// settlingOwner is the scheduler as the membership's shard owner, also
// told when the ownership is first settled.
type settlingOwner struct {
	*scheduler.Scheduler
	wantView func(rev int64)
	settled  func(owned int)
}

// AcquireShard also asks the sync to show a view that includes the claim:
// the store refuses bindings whose view predates their shard's claim, and
// the claim itself is no change the cache would see.
func (o settlingOwner) AcquireShard(shard int, epoch int64) {
	o.wantView(epoch)
	o.Scheduler.AcquireShard(shard, epoch)
}

func (o settlingOwner) ShardsSettled(owned int) { o.settled(owned) }

var _ store.ShardsSettledHandler = settlingOwner{}

// newHealthProbe follows storage, membership and the cache into the
// front's health checks.
func (r *Replica) newHealthProbe() *healthProbe {
	interval, timeout := probeTiming(r.cfg.LeaseTTL)
	return &healthProbe{
		storage: func(ctx context.Context) error {
			_, err := r.store.CurrentRevision(ctx)
			return err
		},
		member:    func() bool { return r.store.SessionLease() != 0 },
		ownership: r.ownershipKnown.Load,
		synced: func() bool {
			select {
			case <-r.syncReady:
				return true
			default:
				return false
			}
		},
		report: func(h server.Health) {
			// Marked first, so whoever sees SERVING finds the phase too.
			if h.Storage && h.Scheduling {
				r.startup.mark(phaseServing)
				if r.cfg.OnServing != nil {
					r.servingOnce.Do(r.cfg.OnServing)
				}
			}
			r.front.SetHealth(h)
		},
		interval: interval, timeout: timeout,
		log: r.logger.Named("health"),
	}
}

// Addr is the gRPC listener's address.
func (r *Replica) Addr() string { return r.lis.Addr().String() }

// MetricsAddr is the metrics listener's address, or "" when disabled.
func (r *Replica) MetricsAddr() string {
	if r.metrics == nil {
		return ""
	}
	return r.metrics.lis.Addr().String()
}

// WaitSynced blocks until the cache holds the cluster or ctx ends.
func (r *Replica) WaitSynced(ctx context.Context) error {
	select {
	case <-r.syncReady:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stop shuts down in order: drain the front (report not serving, end
// watch streams, let in-flight RPCs and their commits finish) and the
// metrics listener; stop the scheduler, waiting for binding cycles under
// way; let the sync catch up with etcd; leave the membership; write the
// start-up snapshot; flush and close the store; stop the embedded etcd
// last.
func (r *Replica) Stop() error {
	r.stopOnce.Do(func() {
		r.logger.Info("berth draining")
		// Stopped first, so no probe reports on a store being closed; the
		// drain turns every service NOT_SERVING at once.
		r.healthCancel()
		r.drain()
		r.schedCancel()
		<-r.schedDone
		r.catchUpBeforeStop()
		r.syncCancel()
		r.memberCancel()
		if err := r.group.Wait(); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			r.stopErr = err
		}
		// Nothing writes any more: the next start begins where this ends.
		r.finalSnapshot()
		r.closeBackends()
		r.logger.Info("berth stopped")
	})
	return r.stopErr
}

// drain stops taking requests: after it, nothing new reaches the store or
// the core from outside.
func (r *Replica) drain() {
	r.front.Shutdown(r.cfg.ShutdownGrace)
	if r.metrics != nil {
		r.metrics.shutdown(r.cfg.ShutdownGrace)
	}
}

func (r *Replica) closeBackends() {
	if r.store != nil {
		if err := r.store.Close(); err != nil {
			r.logger.Warn("close store", zap.Error(err))
		}
	}
	if r.embedded != nil {
		r.embedded.Close()
	}
	if r.sec != nil {
		r.sec.close()
	}
}
