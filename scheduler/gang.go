package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.uber.org/zap"

	"github.com/berth-io/berth/scheduler/framework"
	fwruntime "github.com/berth-io/berth/scheduler/framework/runtime"
)

// GroupBinder is an optional part of a Committer, needed for gangs: the
// members released together at Permit are bound in one transaction, and a
// member waiting for the rest holds a durable assumption tied to this
// replica's life.
type GroupBinder interface {
	// BindGroup binds every pod to its NodeName, or none of them. An error
	// means none was bound (or, if storage did not answer, that the outcome
	// is unknown and the watch will tell). Committing it also drops the
	// pods' assumptions.
	BindGroup(ctx context.Context, pods []*framework.Pod) error
	// Assume records that pods wait on their NodeName for their gangs, so
	// the reservations outlive this cycle but not this replica.
	Assume(ctx context.Context, pods []*framework.Pod) error
	// Unassume drops assumptions made by Assume.
	Unassume(ctx context.Context, pods []*framework.Pod) error
}

// errNoGroupBinder fails gangs whose committer cannot bind them together:
// binding members one by one could leave a gang partly bound.
var errNoGroupBinder = errors.New("scheduler: the committer cannot bind pod groups")

// gangBatch is the members of one gang released together at Permit. Their
// binding cycles meet here; the last to arrive commits all of them in one
// BindGroup, and every member gets its result.
type gangBatch struct {
	group string
	mu    sync.Mutex
	want  map[string]string // pod key -> uid of the members expected
	// arrived are the members whose binding cycles reached the commit.
	arrived    []*framework.Pod
	committing bool
	done       chan struct{}
	err        error // set before done closes
}

// assumption is one member's durable assumption. Its writes are ordered by
// mu, so a release never overtakes the write it undoes.
type assumption struct {
	mu       sync.Mutex
	pod      *framework.Pod
	written  bool // a write was attempted: it may have landed
	released bool // no write may start any more
}

// BindTogether implements framework.GangCommitter.
func (g *groupSet) BindTogether(pods []*framework.Pod) {
	if len(pods) == 0 {
		return
	}
	b := &gangBatch{group: framework.PodGroupKey(pods[0]), want: make(map[string]string, len(pods)), done: make(chan struct{})}
	for _, p := range pods {
		b.want[p.Key()] = p.UID
	}
	g.gangMu.Lock()
	for _, p := range pods {
		if old := g.batches[p.Key()]; old != nil && old != b {
			// Cannot happen while the plugin releases each waiting member
			// once; should it, the older gang must not wait for a member
			// that went elsewhere.
			g.failBatch(old, fmt.Errorf("pod %s was released again", p.Key()))
		}
		g.batches[p.Key()] = b
	}
	g.gangMu.Unlock()
}

// batchOf returns the gang commit a member was released into, if any.
func (g *groupSet) batchOf(p *framework.Pod) *gangBatch {
	if p.PodGroup == "" {
		return nil
	}
	g.gangMu.Lock()
	defer g.gangMu.Unlock()
	b := g.batches[p.Key()]
	if b == nil || b.want[p.Key()] != p.UID {
		return nil
	}
	return b
}

// failBatch ends a batch that will not commit, waking its members. Each
// member's entry stays until the member itself comes by (bindStep or
// Release): a member released into a failed gang must fail too, never
// bind alone.
func (g *groupSet) failBatch(b *gangBatch, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.committing || b.err != nil {
		return
	}
	b.err = err
	close(b.done)
}

// leave drops a member's entry once it is done with its batch.
func (g *groupSet) leave(b *gangBatch, p *framework.Pod) {
	g.gangMu.Lock()
	if g.batches[p.Key()] == b {
		delete(g.batches, p.Key())
	}
	g.gangMu.Unlock()
}

// Hold implements framework.GangCommitter. The member's pending siblings
// are tried at once, skipping their backoff: members released together
// back off together, but one that failed alone may be far behind, and a
// gang only forms while its members wait at the same time. The assumption
// is only noted here: writeHeld stores it once the framework counts the pod
// as waiting, so a failed write can always find the pod to turn away.
func (g *groupSet) Hold(p *framework.Pod) {
	if keys := g.siblings(p); len(keys) > 0 {
		g.s.shardFor(p).queue.Activate(keys...)
	}
	if _, ok := g.s.committer.(GroupBinder); !ok {
		return
	}
	g.gangMu.Lock()
	g.assumed[p.Key()] = &assumption{pod: p}
	g.gangMu.Unlock()
}

// writeHeld stores, in the background so the scheduling loop never waits
// on storage, the assumption Hold noted for p, which Permit has just left
// waiting.
func (g *groupSet) writeHeld(p *framework.Pod) {
	gb, ok := g.s.committer.(GroupBinder)
	if !ok {
		return
	}
	g.gangMu.Lock()
	a := g.assumed[p.Key()]
	g.gangMu.Unlock()
	if a == nil || a.pod.UID != p.UID {
		return
	}
	g.s.binding.Add(1)
	go func() {
		defer g.s.binding.Done()
		err := g.writeAssumption(gb, a)
		if err == nil {
			return
		}
		if errors.Is(err, ErrCommitConflict) {
			// Another writer took the room since the placement's view (or
			// the shard moved): the member cannot hold it, so its gang is
			// released and retried like any failed member.
			g.rejectWaiting(a, err)
			return
		}
		// Best effort: the pod is held in memory either way, and its
		// binding is fenced; only a crash's cleanup is at stake.
		g.s.logger.Warn("record assumption", zap.String("pod", p.Key()), zap.Error(err))
	}()
}

// writeAssumption writes a member's assumption unless it was released.
func (g *groupSet) writeAssumption(gb GroupBinder, a *assumption) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.released {
		return nil
	}
	a.written = true
	ctx, cancel := context.WithTimeout(context.Background(), g.s.cfg.BindTimeout)
	defer cancel()
	return gb.Assume(ctx, []*framework.Pod{a.pod})
}

// rejectWaiting turns away a member whose assumption could not be written.
// The write starts only once the pod waits, so a pod no longer waiting was
// already allowed into its gang's commit (which then fails its fence) or
// released.
func (g *groupSet) rejectWaiting(a *assumption, why error) {
	p := a.pod
	fwk := g.s.shardFor(p).frameworkFor(p)
	if fwk == nil {
		return
	}
	if w := fwk.GetWaitingPod(framework.WaitingPodKey(p)); w != nil && w.GetPod().UID == p.UID {
		w.Reject("", fmt.Sprintf("assumption of %s on %s: %v", p.Key(), p.NodeName, why))
	}
}

// Release implements framework.GangCommitter: the member's gang commit, if
// it was released into one, fails for all, and its assumption is dropped.
func (g *groupSet) Release(p *framework.Pod) {
	g.gangMu.Lock()
	if b := g.batches[p.Key()]; b != nil && b.want[p.Key()] == p.UID {
		g.failBatch(b, fmt.Errorf("member %s was released", p.Key()))
		delete(g.batches, p.Key())
	}
	a := g.assumed[p.Key()]
	if a != nil && a.pod.UID == p.UID {
		delete(g.assumed, p.Key())
	} else {
		a = nil
	}
	g.gangMu.Unlock()
	if a == nil {
		return
	}
	g.s.binding.Add(1)
	go func() {
		defer g.s.binding.Done()
		a.mu.Lock()
		defer a.mu.Unlock()
		a.released = true
		if !a.written {
			return
		}
		g.unassume([]*framework.Pod{a.pod})
	}()
}

func (g *groupSet) unassume(pods []*framework.Pod) {
	gb, ok := g.s.committer.(GroupBinder)
	if !ok || len(pods) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.s.cfg.BindTimeout)
	defer cancel()
	if err := gb.Unassume(ctx, pods); err != nil {
		// It goes with this replica's lease at the latest.
		g.s.logger.Warn("drop assumptions", zap.Int("pods", len(pods)), zap.Error(err))
	}
}

// bindStep ends a binding cycle whose Permit and PreBind gave st: a gang
// member released with others joins their joint commit; any other pod
// runs the Bind plugins, as usual.
func (sh *shard) bindStep(ctx context.Context, fwk *fwruntime.Framework, state *framework.CycleState, assumed *framework.Pod, st *framework.Status) *framework.Status {
	b := sh.s.groups.batchOf(assumed)
	if b == nil {
		if !st.IsSuccess() {
			return st
		}
		return fwk.RunBindPlugins(ctx, state, assumed, assumed.NodeName)
	}
	if !st.IsSuccess() {
		sh.s.groups.Release(assumed)
		return st
	}
	if err := sh.s.groups.join(ctx, b, assumed); err != nil {
		return framework.AsStatus(fmt.Errorf("gang %s: %w", b.group, err))
	}
	return nil
}

// join adds a member to its gang commit and returns the commit's outcome.
// The last member to arrive commits; the others wait for it. A member
// whose ctx ends before every member arrived fails the gang; once the
// commit is under way, all wait for its outcome, so none is forgotten
// while it may still land.
func (g *groupSet) join(ctx context.Context, b *gangBatch, p *framework.Pod) error {
	defer g.leave(b, p)
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		return b.err
	}
	b.arrived = append(b.arrived, p)
	if len(b.arrived) < len(b.want) {
		b.mu.Unlock()
		select {
		case <-b.done:
		case <-ctx.Done():
			g.failBatch(b, fmt.Errorf("waiting for the other members: %w", context.Cause(ctx)))
			<-b.done
		}
		return b.err
	}
	b.committing = true
	pods := b.arrived
	b.mu.Unlock()

	err := g.commit(ctx, pods)
	b.mu.Lock()
	b.err = err
	close(b.done)
	b.mu.Unlock()
	return err
}

// commit binds a gang's members together. Their assumptions' writes are
// settled first and no more may start, so none lands after the commit
// that drops them.
func (g *groupSet) commit(ctx context.Context, pods []*framework.Pod) error {
	gb, ok := g.s.committer.(GroupBinder)
	if !ok {
		return errNoGroupBinder
	}
	g.gangMu.Lock()
	var held []*assumption
	for _, p := range pods {
		if a := g.assumed[p.Key()]; a != nil && a.pod.UID == p.UID {
			delete(g.assumed, p.Key())
			held = append(held, a)
		}
	}
	g.gangMu.Unlock()
	for _, a := range held {
		a.mu.Lock()
		a.released = true
	}
	err := gb.BindGroup(ctx, pods)
	var stale []*framework.Pod
	for _, a := range held {
		if err != nil && a.written {
			stale = append(stale, a.pod)
		}
		a.mu.Unlock()
	}
	if len(stale) > 0 {
		g.s.binding.Add(1)
		go func() {
			defer g.s.binding.Done()
			g.unassume(stale)
		}()
	}
	return err
}

// releaseWaiting turns away the pods held at Permit that match: when the
// scheduler stops, or a shard moves away. Waiting is not a commit under
// way, so nothing is abandoned halfway; their binding cycles then undo the
// placements and drop the assumptions at once, instead of holding room
// (and Stop) until their gangs' timeouts.
func (s *Scheduler) releaseWaiting(why string, match func(*framework.Pod) bool) {
	for _, sh := range s.shards {
		for _, fwk := range sh.frameworks {
			var held []framework.WaitingPod
			fwk.IterateOverWaitingPods(func(w framework.WaitingPod) {
				if match(w.GetPod()) {
					held = append(held, w)
				}
			})
			for _, w := range held {
				w.Reject("", why)
			}
		}
	}
}
