package replica

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/berth-io/berth/server"
)

// healthProbe follows what the replica can do and reports it to the
// front's health checks, so a load balancer or orchestrator stops sending
// work to a replica cut off from etcd within a lease period, and sends it
// again once it is whole.
type healthProbe struct {
	// storage is one cheap linearizable etcd read, bounded by ctx.
	storage func(ctx context.Context) error
	// member reports a live session: its shards (or the others') are owned
	// rightly.
	member func() bool
	// ownership reports that the membership has settled which shards are
	// ours; nil: not followed.
	ownership func() bool
	// synced reports a cache that holds the cluster.
	synced func() bool
	report func(server.Health)
	// interval between probes; timeout bounds one storage read. Their sum
	// is how long a lost etcd can go unreported.
	interval, timeout time.Duration
	log               *zap.Logger
}

const startingProbeInterval = 50 * time.Millisecond

// probeTiming fits the probe inside the lease: a replica reports etcd lost
// well before its shards move, and a slow but live etcd (a read taking a
// good fraction of a second under load) is not mistaken for a dead one.
func probeTiming(leaseTTL time.Duration) (interval, timeout time.Duration) {
	if leaseTTL <= 0 {
		leaseTTL = 10 * time.Second
	}
	interval = min(max(leaseTTL/10, 100*time.Millisecond), time.Second)
	timeout = min(max(leaseTTL/4, 500*time.Millisecond), 3*time.Second)
	return interval, timeout
}

// run probes until ctx ends, reporting each change (and the first state).
func (p *healthProbe) run(ctx context.Context) error {
	t := time.NewTimer(p.interval)
	defer t.Stop()
	var last server.Health
	first, served := true, false
	for {
		h, storageErr := p.check(ctx)
		if ctx.Err() != nil {
			return nil // stopping: the drain reports NOT_SERVING itself
		}
		if first || h != last {
			p.logChange(h, storageErr, served)
			p.report(h)
			first, last = false, h
			served = served || (h.Storage && h.Scheduling)
		}
		// Quicker while starting, so a new replica takes work soon after
		// it can.
		next := p.interval
		if !served {
			next = min(next, startingProbeInterval)
		}
		t.Reset(next)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (p *healthProbe) check(ctx context.Context) (server.Health, error) {
	pctx, cancel := context.WithTimeout(ctx, p.timeout)
	err := p.storage(pctx)
	cancel()
	return server.Health{Storage: err == nil, Scheduling: p.member() && p.ownershipKnown() && p.synced()}, err
}

func (p *healthProbe) ownershipKnown() bool { return p.ownership == nil || p.ownership() }

// logChange warns of a replica that stopped serving; while it starts, not
// serving yet is no news.
func (p *healthProbe) logChange(h server.Health, storageErr error, served bool) {
	fields := []zap.Field{zap.Bool("storage", h.Storage), zap.Bool("member", p.member()),
		zap.Bool("ownership", p.ownershipKnown()), zap.Bool("synced", p.synced())}
	if storageErr != nil {
		fields = append(fields, zap.NamedError("storage_error", storageErr))
	}
	if h.Storage && h.Scheduling {
		p.log.Info("health: serving", fields...)
		return
	}
	if served {
		p.log.Warn("health: not serving", fields...)
	}
}
