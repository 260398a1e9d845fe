package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/scheduler"
	"github.com/berth-io/berth/scheduler/framework"
)

// The fault suite runs three berth etcd members and three berth serve
// replicas as real processes on loopback, drives pods through random
// replicas while it breaks things, then checks from etcd's own history
// that nothing acknowledged was lost, nothing was bound twice, no node was
// overcommitted at any revision, gangs were all-or-nothing, and that a
// watcher resuming across the faults saw every binding exactly once.
//
// Sizing, from the environment (make test-faults sets the full form):
//
//	BERTH_FAULT_ROUNDS  rounds of each fault (default 1)
//	BERTH_FAULT_PODS    pods per round at least (default 300)
//	BERTH_FAULT_RATE    pods/s the driver submits at most (default 150)
type faultConfig struct {
	rounds   int
	pods     int
	rate     float64
	leaseTTL time.Duration
	hold     time.Duration // how long a member stays down
	workers  int
}

const (
	faultPrefix   = "/berth"
	shardCount    = 64
	maxProbes     = 4
	gangsPerRound = 2
)

func faultConfigFromEnv(t *testing.T) faultConfig {
	t.Helper()
	c := faultConfig{rounds: 1, pods: 300, rate: 150, leaseTTL: 2 * time.Second, hold: 2 * time.Second, workers: 4}
	for name, dst := range map[string]*int{"BERTH_FAULT_ROUNDS": &c.rounds, "BERTH_FAULT_PODS": &c.pods} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a positive integer", name, v)
			}
			*dst = n
		}
	}
	if v := os.Getenv("BERTH_FAULT_RATE"); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r <= 0 {
			t.Fatalf("BERTH_FAULT_RATE=%q: want a positive number", v)
		}
		c.rate = r
	}
	return c
}

type faultKind string

const (
	faultReplicaKill faultKind = "replica-kill"
	faultEtcd        faultKind = "etcd-member"
	faultPartition   faultKind = "partition"
	faultRestartAll  faultKind = "restart-all"
)

// TestFaultReplicaKill: kill -9 a replica mid-load, measure failover,
// restart it.
func TestFaultReplicaKill(t *testing.T) { runFaults(t, faultReplicaKill) }

// TestFaultEtcdMember: kill -9 an etcd follower and restart it; then the
// leader.
func TestFaultEtcdMember(t *testing.T) { runFaults(t, faultEtcd) }

// TestFaultPartition: cut a replica off from etcd for longer than its
// lease, then heal.
func TestFaultPartition(t *testing.T) { runFaults(t, faultPartition) }

// TestFaultRestartAll: restart every replica at once, by kill -9 and then
// by SIGTERM.
func TestFaultRestartAll(t *testing.T) { runFaults(t, faultRestartAll) }

// faultRun is one suite run's shared state.
type faultRun struct {
	t    *testing.T
	cfg  faultConfig
	ec   *etcdCluster
	etcd *clientv3.Client
	reps []*replica
	d    *loadDriver
	v    *violations
	// failovers are the measurements, printed at the end.
	failovers []string
}

func runFaults(t *testing.T, kind faultKind) {
	cfg := faultConfigFromEnv(t)
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.rounds)*3*time.Minute+3*time.Minute)
	defer cancel()

	ec := startEtcdCluster(t, 3)
	reps := startReplicas(t, ec, 3, replicaOptions{leaseTTL: cfg.leaseTTL, shards: shardCount})
	liveTarget := max(50, cfg.pods/2)
	slots := liveTarget + cfg.rounds*(gangsPerRound*gangSize+maxProbes) + cfg.workers*submitBatch
	nodes := (slots*5/4 + slotsPerNode - 1) / slotsPerNode
	r := &faultRun{t: t, cfg: cfg, ec: ec, etcd: ec.client(t), reps: reps, d: newLoadDriver(t, reps, liveTarget), v: newViolations()}
	from := r.d.registerNodes(ctx, nodes)
	w := startBindingWatcher(t, reps, from)
	t.Logf("%s: %d rounds, >= %d pods per round at <= %.0f pods/s, %d nodes of %d slots, ~%d pods alive, lease TTL %s",
		kind, cfg.rounds, cfg.pods, cfg.rate, nodes, slotsPerNode, liveTarget, cfg.leaseTTL)

	for round := 1; round <= cfg.rounds; round++ {
		roundStart := time.Now()
		base := r.d.acked.Load()
		faultDone := make(chan struct{})
		var load sync.WaitGroup
		load.Add(1)
		go func() {
			defer load.Done()
			r.d.submitGangs(ctx, round, gangsPerRound)
			r.d.runRound(ctx, round, cfg.pods, cfg.rate, cfg.workers, faultDone)
		}()
		// Break things once the round's load is flowing.
		if err := r.d.waitAcked(ctx, base+int64(cfg.pods/4)); err != nil {
			close(faultDone)
			load.Wait()
			t.Fatalf("round %d: load did not start: %v", round, err)
		}
		r.inject(ctx, kind, round)
		close(faultDone)
		load.Wait()
		t.Logf("round %d done in %s: %d pods acknowledged so far", round, time.Since(roundStart).Round(time.Millisecond), r.d.acked.Load())
	}
	if ctx.Err() != nil {
		t.Fatalf("suite ran out of time: %v", ctx.Err())
	}
	r.report(ctx, kind, w, from, began)
}

// inject runs one round's fault to its end: everything is back up when it
// returns.
func (r *faultRun) inject(ctx context.Context, kind faultKind, round int) {
	switch kind {
	case faultReplicaKill:
		victim := r.reps[rand.IntN(len(r.reps))]
		probe := r.prepareFailover(ctx, victim, round)
		victim.kill9()
		r.measureFailover(ctx, probe, fmt.Sprintf("round %d: kill -9 %s", round, victim.id))
		r.restart(ctx, victim)
	case faultEtcd:
		leader := r.ec.leader(r.t, r.etcd)
		follower := (leader + 1 + rand.IntN(len(r.ec.members)-1)) % len(r.ec.members)
		r.bounceMember(ctx, follower)
		// Then whoever leads now.
		r.bounceMember(ctx, r.ec.leader(r.t, r.etcd))
	case faultPartition:
		victim := r.reps[rand.IntN(len(r.reps))]
		probe := r.prepareFailover(ctx, victim, round)
		victim.setCut(true)
		cutAt := time.Now()
		r.measureFailover(ctx, probe, fmt.Sprintf("round %d: %s cut off from etcd", round, victim.id))
		// The cut outlasts the lease whatever the measurement did.
		hold(ctx, r.cfg.leaseTTL+r.cfg.hold-time.Since(cutAt))
		victim.setCut(false)
		victim.waitServing(r.t)
		r.waitRegistered(ctx, victim)
	case faultRestartAll:
		// A crash of every replica at once, then, once they are back and
		// the load has moved on, a graceful stop of every one at once.
		r.restartAll(ctx, round, true)
		base := r.d.acked.Load()
		if err := r.d.waitAcked(ctx, base+int64(r.cfg.pods/8)); err != nil {
			r.t.Fatalf("round %d: no load after the restart: %v", round, err)
		}
		r.restartAll(ctx, round, false)
	}
}

// restartAll stops every replica at once (kill -9, or SIGTERM which must
// exit 0), then starts them all and waits until they serve.
func (r *faultRun) restartAll(ctx context.Context, round int, crash bool) {
	var wg sync.WaitGroup
	for _, rep := range r.reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if crash {
				rep.kill9()
				return
			}
			if code := rep.term(30 * time.Second); code != 0 {
				r.v.add(vUncleanStop, "round %d: %s exited %d after SIGTERM", round, rep.id, code)
			}
		}()
	}
	wg.Wait()
	for _, rep := range r.reps {
		rep.start(r.t)
	}
	for _, rep := range r.reps {
		rep.waitServing(r.t)
		r.waitRegistered(ctx, rep)
	}
}

// bounceMember kills etcd member i, keeps it down for the hold, restarts
// it and waits until it follows a leader again.
func (r *faultRun) bounceMember(ctx context.Context, i int) {
	r.ec.members[i].kill9()
	hold(ctx, r.cfg.hold)
	r.ec.members[i].start(r.t)
	r.ec.waitMember(r.t, i)
}

// hold is a fault's own duration: the one wait the suite takes on a clock.
func hold(ctx context.Context, d time.Duration) {
	_ = waitUntil(ctx, time.Now().Add(d))
}

func (r *faultRun) restart(ctx context.Context, rep *replica) {
	rep.start(r.t)
	rep.waitServing(r.t)
	r.waitRegistered(ctx, rep)
}

// waitRegistered waits until another replica lists rep, when replicas are
// listed at all, so the next fault hits a whole cluster.
func (r *faultRun) waitRegistered(ctx context.Context, rep *replica) {
	other := r.other(rep)
	err := pollFor(ctx, 30*time.Second, func() (bool, error) {
		resp, ok, err := listReplicas(ctx, other)
		if !ok {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		for _, x := range resp.GetReplicas() {
			if x.GetAddress() == rep.addr || x.GetId() == rep.id {
				return true, nil
			}
		}
		return false, fmt.Errorf("%s not listed", rep.id)
	})
	if err != nil {
		r.t.Logf("%s did not register again: %v", rep.id, err)
	}
}

func (r *faultRun) other(rep *replica) *replica {
	for {
		o := r.reps[rand.IntN(len(r.reps))]
		if o != rep {
			return o
		}
	}
}

// pollFor calls fn every 20ms until it reports done, or d or ctx ends.
func pollFor(ctx context.Context, d time.Duration, fn func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		done, err := fn()
		if done {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return errors.Join(ctx.Err(), last)
		}
	}
}

// failoverProbe is what prepareFailover learned before the fault.
type failoverProbe struct {
	victim *replica
	shards map[int32]bool
	pods   []*berthv1.Pod // one per victim shard, up to maxProbes
	note   string         // why failover is not measured, if it is not
}

// prepareFailover records the victim's shards and makes a probe pod for
// some of them.
func (r *faultRun) prepareFailover(ctx context.Context, victim *replica, round int) *failoverProbe {
	p := &failoverProbe{victim: victim, shards: map[int32]bool{}}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, ok, err := listReplicas(cctx, r.other(victim))
	switch {
	case !ok:
		p.note = "ListReplicas not implemented"
		return p
	case err != nil:
		p.note = "ListReplicas: " + err.Error()
		return p
	}
	for _, x := range resp.GetReplicas() {
		if x.GetAddress() == victim.addr || x.GetId() == victim.id {
			for _, s := range x.GetShards() {
				p.shards[s] = true
			}
		}
	}
	if len(p.shards) == 0 {
		p.note = fmt.Sprintf("%s owned no shard", victim.id)
		return p
	}
	n := max(int(resp.GetShardCount()), 1)
	var shards []int32
	for s := range p.shards {
		shards = append(shards, s)
	}
	sort.Slice(shards, func(i, j int) bool { return shards[i] < shards[j] })
	for _, s := range shards[:min(len(shards), maxProbes)] {
		for k := 0; ; k++ {
			name := fmt.Sprintf("probe%d-%d-%d", round, s, k)
			if scheduler.ShardOf(&framework.Pod{Namespace: faultNamespace, Name: name}, n) == int(s) {
				p.pods = append(p.pods, r.d.newPod(name, ""))
				break
			}
		}
	}
	return p
}

// measureFailover submits the probes right after the fault and times how
// long until no live replica is missing the victim's shards, and until
// every probe is bound. Printed, never asserted.
func (r *faultRun) measureFailover(ctx context.Context, p *failoverProbe, what string) {
	if p.note != "" {
		r.failovers = append(r.failovers, what+": not measured: "+p.note)
		return
	}
	t0 := time.Now()
	var submitted sync.WaitGroup
	submitted.Add(1)
	go func() {
		defer submitted.Done()
		r.d.submit(ctx, p.pods, false)
	}()
	owned := pollFor(ctx, 30*time.Second, func() (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		resp, _, err := listReplicas(cctx, r.other(p.victim))
		if err != nil {
			return false, err
		}
		left := len(p.shards)
		for _, x := range resp.GetReplicas() {
			if x.GetAddress() == p.victim.addr || x.GetId() == p.victim.id {
				continue
			}
			for _, s := range x.GetShards() {
				if p.shards[s] {
					left--
				}
			}
		}
		return left == 0, fmt.Errorf("%d of the victim's %d shards not owned by others", left, len(p.shards))
	})
	ownedAfter := time.Since(t0)
	bound := pollFor(ctx, 30*time.Second, func() (bool, error) {
		for _, pod := range p.pods {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			resp, err := r.etcd.Get(cctx, faultPrefix+"/v1/pods/"+faultNamespace+"/"+pod.GetName())
			cancel()
			if err != nil || len(resp.Kvs) == 0 {
				return false, err
			}
			var got berthv1.Pod
			if err := proto.Unmarshal(resp.Kvs[0].Value, &got); err != nil || !holds(&got) {
				return false, err
			}
		}
		return true, nil
	})
	boundAfter := time.Since(t0)
	submitted.Wait()
	line := fmt.Sprintf("%s: %d shards reassigned after %s, %d probe pods bound after %s", what, len(p.shards),
		orNot(ownedAfter, owned), len(p.pods), orNot(boundAfter, bound))
	r.failovers = append(r.failovers, line)
}

func orNot(d time.Duration, err error) string {
	if err != nil {
		return fmt.Sprintf("NOT within %s (%v)", d.Round(time.Millisecond), err)
	}
	return d.Round(time.Millisecond).String()
}

// report waits for the cluster to settle, reads etcd's history, checks
// it, prints the counts and fails on any violation.
func (r *faultRun) report(ctx context.Context, kind faultKind, w *bindingWatcher, from int64, began time.Time) {
	t := r.t
	alive := r.d.alive()
	settleStart := time.Now()
	unbound := r.quiesce(ctx, alive)
	settled := time.Since(settleStart)
	end := faultPrefix + "/v1/~faults-end"
	if _, err := r.etcd.Put(ctx, end, ""); err != nil {
		t.Fatalf("write end marker: %v", err)
	}
	h, err := scanHistory(ctx, r.etcd, faultPrefix, end, r.d.groupMins())
	if err != nil {
		t.Fatal(err)
	}
	for kind, n := range r.v.count {
		h.v.count[kind] += n
		h.v.examples[kind] = append(h.v.examples[kind], r.v.examples[kind]...)
	}
	for key, msg := range unbound {
		h.v.add(vNotBound, "%s: %s", key, msg)
	}
	checkAlive(h, alive)

	var want int
	for _, b := range h.bindings {
		if b.rev > from {
			want++
		}
	}
	catchUp, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = w.waitFor(catchUp, func(evs []*berthv1.BindingEvent) bool {
		n := 0
		for _, ev := range evs {
			if ev.GetType() == berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND {
				n++
			}
		}
		return n >= want
	})
	cancel()
	if err != nil {
		t.Logf("watcher: %v", err)
	}
	caughtUp := time.Since(settleStart)
	w.stop()
	evs, restarts, lastErr := w.snapshot()
	seenBound := checkWatch(h, evs, from)

	boundAtEnd := 0
	for key := range alive {
		if holds(h.final[key]) {
			boundAtEnd++
		}
	}
	uids := map[string]bool{}
	for _, b := range h.bindings {
		uids[b.uid] = true
	}
	d := r.d
	t.Logf("=== fault suite %s: %d rounds in %s (all alive pods bound %s after the last fault; watcher caught up after %s)",
		kind, r.cfg.rounds, time.Since(began).Round(time.Millisecond), settled.Round(time.Millisecond), caughtUp.Round(time.Millisecond))
	t.Logf("pods: submitted %d, acknowledged %d, refused %d, deleted %d (+%d outcome unknown), alive %d, bound at end %d; submit retries %d",
		d.submitted.Load(), d.acked.Load(), d.rejected.Load(), d.deletedOK.Load(), d.deleteUnsure.Load(), len(alive), boundAtEnd, d.submitRetry.Load())
	if d.gangSkip != "" {
		t.Logf("gangs: skipped: %s", d.gangSkip)
	} else {
		t.Logf("gangs: %d groups of %d (min %d)", len(d.groupMins()), gangSize, gangMin)
	}
	t.Logf("etcd history: %d revisions scanned (1..%d), %d events, %d bindings of %d pod uids, %d shard claims; bindings by replica: %s",
		h.revisions, h.endRev, h.events, len(h.bindings), len(uids), h.shardPuts, formatCounts(h.byReplica))
	t.Logf("watch: %d events seen, %d BOUND (etcd has %d bindings after revision %d), %d restarts (last: %v)",
		len(evs), seenBound, want, from, restarts, lastErr)
	for _, f := range r.failovers {
		t.Logf("failover: %s", f)
	}
	t.Logf("violations: %s", h.v)
	if h.v.total() > 0 {
		t.Errorf("%d violations", h.v.total())
	}
}

// quiesce waits (bounded) until every alive pod is bound, reading etcd,
// and returns those that are not, with their status message.
func (r *faultRun) quiesce(ctx context.Context, alive map[string]string) map[string]string {
	unbound := map[string]string{}
	err := pollFor(ctx, 90*time.Second, func() (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		resp, err := r.etcd.Get(cctx, faultPrefix+"/v1/pods/", clientv3.WithPrefix())
		if err != nil {
			return false, err
		}
		clear(unbound)
		pods := map[string]*berthv1.Pod{}
		for _, kv := range resp.Kvs {
			var p berthv1.Pod
			if err := proto.Unmarshal(kv.Value, &p); err != nil {
				return false, err
			}
			pods[p.GetNamespace()+"/"+p.GetName()] = &p
		}
		for key := range alive {
			if p, ok := pods[key]; ok && !holds(p) {
				unbound[key] = fmt.Sprintf("%s %q", p.GetStatus().GetPhase(), p.GetStatus().GetMessage())
			}
		}
		return len(unbound) == 0, fmt.Errorf("%d alive pods unbound", len(unbound))
	})
	if err != nil {
		r.t.Logf("quiesce: %v", err)
	}
	return unbound
}

func formatCounts(m map[string]int) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := ""
	for _, k := range keys {
		name := k
		if name == "" {
			name = "(unset)"
		}
		out += fmt.Sprintf("%s=%d ", name, m[k])
	}
	return out
}
