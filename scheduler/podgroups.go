package scheduler

import (
	"sync"
	"sync/atomic"

	"github.com/berth-io/berth/scheduler/framework"
)

// groupSet is the core's registry of pod groups, fed by the store's watch,
// with an index of their members fed by every pod event, so gang plugins
// count members without scanning pods. It also gathers gangs for their
// joint commit and keeps their durable assumptions (gang.go).
//
// Lock order: the Coscheduling plugin's lock, then a shard queue's lock
// (PreEnqueue reads groups under it), then mu; gangMu before a gangBatch's
// mu; mu and gangMu are never held together.
type groupSet struct {
	s *Scheduler

	mu       sync.RWMutex
	groups   map[string]*framework.PodGroup // by namespace/name
	members  map[string]*groupMembers       // by group key
	memberOf map[string]string              // pod key -> group key
	// indexed mirrors len(memberOf), so pods outside any group skip the
	// lock while no pod was ever indexed.
	indexed atomic.Int64

	subsMu sync.Mutex
	subs   []func(namespace, name string)

	gangMu  sync.Mutex
	batches map[string]*gangBatch  // pod key -> the gang commit it joins
	assumed map[string]*assumption // pod key -> its durable assumption
}

// groupMembers counts one group's stored pods.
type groupMembers struct {
	pods               map[string]member
	total, live, bound int
}

// member is what the index keeps of a pod: enough to count it.
type member struct {
	uid   string
	bound bool // on a node and not finished
	done  bool // finished: holds nothing, cannot help the gang
}

func (m *groupMembers) add(key string, st member) {
	m.pods[key] = st
	m.total++
	if !st.done {
		m.live++
	}
	if st.bound {
		m.bound++
	}
}

func (m *groupMembers) remove(key string) {
	st, ok := m.pods[key]
	if !ok {
		return
	}
	delete(m.pods, key)
	m.total--
	if !st.done {
		m.live--
	}
	if st.bound {
		m.bound--
	}
}

func newGroupSet(s *Scheduler) *groupSet {
	return &groupSet{
		s:        s,
		groups:   map[string]*framework.PodGroup{},
		members:  map[string]*groupMembers{},
		memberOf: map[string]string{},
		batches:  map[string]*gangBatch{},
		assumed:  map[string]*assumption{},
	}
}

var (
	_ framework.PodGroupLister = (*groupSet)(nil)
	_ framework.GangCommitter  = (*groupSet)(nil)
)

// Get implements framework.PodGroupLister.
func (g *groupSet) Get(namespace, name string) (*framework.PodGroup, bool) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	pg, ok := g.groups[namespace+"/"+name]
	return pg, ok
}

// Members implements framework.PodGroupLister.
func (g *groupSet) Members(namespace, name string) (live, bound int) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if m := g.members[namespace+"/"+name]; m != nil {
		return m.live, m.bound
	}
	return 0, 0
}

// Subscribe implements framework.PodGroupLister.
func (g *groupSet) Subscribe(fn func(namespace, name string)) {
	g.subsMu.Lock()
	g.subs = append(g.subs, fn)
	g.subsMu.Unlock()
}

func (g *groupSet) notify(namespace, name string) {
	g.subsMu.Lock()
	subs := g.subs
	g.subsMu.Unlock()
	for _, fn := range subs {
		fn(namespace, name)
	}
}

// observe indexes the latest stored state of a pod. added reports a live
// member new to its group, nowBound one that has just been bound.
func (g *groupSet) observe(p *framework.Pod) (added, nowBound bool) {
	if p.PodGroup == "" && g.indexed.Load() == 0 {
		return false, false
	}
	key, gk := p.Key(), framework.PodGroupKey(p)
	g.mu.Lock()
	defer g.mu.Unlock()
	var prev member
	existed := false
	if old, ok := g.memberOf[key]; ok {
		prev, existed = g.members[old].pods[key]
		if old != gk || prev.uid != p.UID {
			g.dropLocked(key)
			existed = false
		}
	}
	if gk == "" {
		return false, false
	}
	st := member{uid: p.UID, done: p.Phase.Terminal()}
	st.bound = p.NodeName != "" && !st.done
	m := g.members[gk]
	if m == nil {
		m = &groupMembers{pods: map[string]member{}}
		g.members[gk] = m
	}
	if existed {
		m.remove(key)
	} else {
		g.memberOf[key] = gk
		g.indexed.Add(1)
	}
	m.add(key, st)
	return !existed && !st.done, st.bound && !(existed && prev.bound)
}

// forget drops a deleted pod from the index.
func (g *groupSet) forget(p *framework.Pod) {
	if g.indexed.Load() == 0 {
		return
	}
	key := p.Key()
	g.mu.Lock()
	defer g.mu.Unlock()
	gk, ok := g.memberOf[key]
	if !ok {
		return
	}
	if st := g.members[gk].pods[key]; p.UID != "" && st.uid != p.UID {
		return
	}
	g.dropLocked(key)
}

func (g *groupSet) dropLocked(key string) {
	gk := g.memberOf[key]
	delete(g.memberOf, key)
	g.indexed.Add(-1)
	m := g.members[gk]
	m.remove(key)
	if len(m.pods) == 0 {
		delete(g.members, gk)
	}
}

// siblings lists the keys of p's live, unbound fellow members.
func (g *groupSet) siblings(p *framework.Pod) []string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	m := g.members[framework.PodGroupKey(p)]
	if m == nil {
		return nil
	}
	out := make([]string, 0, m.live-m.bound)
	for key, st := range m.pods {
		if !st.done && !st.bound && key != p.Key() {
			out = append(out, key)
		}
	}
	return out
}

// resetMembers empties the index before a fresh listing refills it.
func (g *groupSet) resetMembers() {
	g.mu.Lock()
	g.members = map[string]*groupMembers{}
	g.memberOf = map[string]string{}
	g.indexed.Store(0)
	g.mu.Unlock()
}

// counts returns what GetPodGroup shows: members stored in any phase, and
// those bound.
func (g *groupSet) counts(namespace, name string) (total, bound int) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if m := g.members[namespace+"/"+name]; m != nil {
		return m.total, m.bound
	}
	return 0, 0
}

// observeMember indexes a pod and tells whoever it may help: a new member
// can lift its siblings over min_member (they are retried), a newly bound
// one can release members waiting at Permit.
func (s *Scheduler) observeMember(p *framework.Pod) {
	added, nowBound := s.groups.observe(p)
	if added {
		ev := framework.ClusterEvent{Resource: framework.EventResourcePod, ActionType: framework.ActionAdd, Label: "PodGroupMemberAdd"}
		s.metrics.event(ev.Label)
		s.shardFor(p).queue.MoveAllToActiveOrBackoffQueue(ev, nil, p, nil)
	}
	if nowBound {
		s.groups.notify(p.Namespace, p.PodGroup)
	}
}

// ResetPodGroups replaces every pod group, as after a fresh listing.
func (s *Scheduler) ResetPodGroups(groups []*framework.PodGroup) {
	fresh := make(map[string]*framework.PodGroup, len(groups))
	for _, pg := range groups {
		fresh[pg.Key()] = pg
	}
	s.groups.mu.Lock()
	old := s.groups.groups
	s.groups.groups = fresh
	s.groups.mu.Unlock()
	for key, pg := range fresh {
		if prev, ok := old[key]; !ok || *prev != *pg {
			s.podGroupChanged(pg, ok)
		}
	}
	for key, pg := range old {
		if _, ok := fresh[key]; !ok {
			s.groups.notify(pg.Namespace, pg.Name)
		}
	}
}

// UpsertPodGroup adds or replaces a pod group and wakes its members.
func (s *Scheduler) UpsertPodGroup(pg *framework.PodGroup) {
	s.groups.mu.Lock()
	_, existed := s.groups.groups[pg.Key()]
	s.groups.groups[pg.Key()] = pg
	s.groups.mu.Unlock()
	s.podGroupChanged(pg, existed)
}

// DeletePodGroup forgets a pod group. Its pending members wait, gated,
// until it exists again; those waiting at Permit are released.
func (s *Scheduler) DeletePodGroup(namespace, name string) {
	s.groups.mu.Lock()
	delete(s.groups.groups, namespace+"/"+name)
	s.groups.mu.Unlock()
	s.groups.notify(namespace, name)
}

// podGroupChanged retries the members a group's creation or change may
// help (gated for want of it, or short of min_member), in the one shard
// that serves them, and re-judges those waiting at Permit.
func (s *Scheduler) podGroupChanged(pg *framework.PodGroup, existed bool) {
	ev := framework.ClusterEvent{Resource: framework.EventResourcePodGroup, ActionType: framework.ActionAdd, Label: "PodGroupAdd"}
	if existed {
		ev.ActionType, ev.Label = framework.ActionUpdate, "PodGroupUpdate"
	}
	s.metrics.event(ev.Label)
	s.shardFor(&framework.Pod{Namespace: pg.Namespace, PodGroup: pg.Name}).queue.MoveAllToActiveOrBackoffQueue(ev, nil, pg, nil)
	s.groups.notify(pg.Namespace, pg.Name)
}

// PodGroupMembers counts a group's members as this replica's cache knows
// them: stored in any phase, and bound (or running).
func (s *Scheduler) PodGroupMembers(namespace, name string) (members, bound int) {
	return s.groups.counts(namespace, name)
}
