package coscheduling_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/framework/runtime"
	"github.com/berth-io/berth/scheduler/plugins/coscheduling"
)

// fakeGroups is a PodGroupLister over fixed counts.
type fakeGroups struct {
	mu     sync.Mutex
	groups map[string]*framework.PodGroup
	live   map[string]int
	bound  map[string]int
	subs   []func(namespace, name string)
}

func newFakeGroups(gs ...*framework.PodGroup) *fakeGroups {
	f := &fakeGroups{groups: map[string]*framework.PodGroup{}, live: map[string]int{}, bound: map[string]int{}}
	for _, g := range gs {
		f.groups[g.Key()] = g
	}
	return f
}

func (f *fakeGroups) Get(ns, name string) (*framework.PodGroup, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.groups[ns+"/"+name]
	return g, ok
}

func (f *fakeGroups) Members(ns, name string) (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.live[ns+"/"+name], f.bound[ns+"/"+name]
}

func (f *fakeGroups) Subscribe(fn func(ns, name string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs = append(f.subs, fn)
}

// set changes a group's counts (or deletes it, for nil) and tells the
// subscribers, as the core does.
func (f *fakeGroups) set(key string, g *framework.PodGroup, live, bound int) {
	f.mu.Lock()
	if g == nil {
		delete(f.groups, key)
	} else {
		f.groups[key] = g
	}
	f.live[key], f.bound[key] = live, bound
	subs := f.subs
	f.mu.Unlock()
	ns, name, _ := strings.Cut(key, "/")
	for _, fn := range subs {
		fn(ns, name)
	}
}

// fakeGangs records what the plugin asks of the core. It also checks that
// a gang is declared before any of its members is released.
type fakeGangs struct {
	mu       sync.Mutex
	h        framework.Handle
	batches  [][]string
	held     []string
	released []string
	early    []string // members already released when their gang was declared
	// onDeclare, if set, runs as a gang is declared, before its members
	// are released.
	onDeclare func()
}

func (g *fakeGangs) BindTogether(pods []*framework.Pod) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
		if w := g.h.GetWaitingPod(framework.WaitingPodKey(p)); w != nil && !slices.Contains(w.GetPendingPlugins(), coscheduling.Name) {
			g.early = append(g.early, p.Name)
		}
	}
	slices.Sort(names)
	g.batches = append(g.batches, names)
	if g.onDeclare != nil {
		g.onDeclare()
	}
}

func (g *fakeGangs) Hold(p *framework.Pod) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = append(g.held, p.Name)
}

func (g *fakeGangs) Release(p *framework.Pod) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.released = append(g.released, p.Name)
}

type env struct {
	fwk    *runtime.Framework
	groups *fakeGroups
	gangs  *fakeGangs
	clock  *fwtest.FakeClock
	plugin *coscheduling.Coscheduling
}

// newEnv builds a real framework running only Coscheduling.
func newEnv(t *testing.T, groups *fakeGroups) *env {
	t.Helper()
	e := &env{groups: groups, gangs: &fakeGangs{}, clock: fwtest.NewFakeClock(time.Unix(1700000000, 0))}
	reg := framework.Registry{coscheduling.Name: func(ctx context.Context, _ any, h framework.Handle) (framework.Plugin, error) {
		e.gangs.h = h
		p, err := coscheduling.New(ctx, nil, h)
		if err == nil {
			e.plugin = p.(*coscheduling.Coscheduling)
		}
		return p, err
	}}
	prof := &runtime.Profile{Plugins: runtime.Plugins{MultiPoint: runtime.PluginSet{Enabled: []runtime.PluginRef{{Name: coscheduling.Name}}}}}
	fwk, err := runtime.NewFramework(context.Background(), reg, prof,
		runtime.WithSnapshotSharedLister(fwtest.NewLister()), runtime.WithClock(e.clock),
		runtime.WithPodGroups(e.groups), runtime.WithGangCommitter(e.gangs))
	if err != nil {
		t.Fatal(err)
	}
	e.fwk = fwk
	return e
}

func member(name, group string) *framework.Pod {
	p := fwtest.Pod(name, fwtest.Resources(100, 0))
	p.PodGroup = group
	p.NodeName = "n1"
	return p
}

func gang(name string, min int32, timeout time.Duration) *framework.PodGroup {
	return &framework.PodGroup{Namespace: "default", Name: name, MinMember: min, ScheduleTimeout: timeout}
}

// permit runs Permit as the shard does and returns its code.
func (e *env) permit(t *testing.T, p *framework.Pod) framework.Code {
	t.Helper()
	return e.fwk.RunPermitPlugins(context.Background(), framework.NewCycleState(), p, p.NodeName).Code()
}

// outcome is what WaitOnPermit returns for a pod already decided.
func (e *env) outcome(t *testing.T, p *framework.Pod) framework.Code {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st := e.fwk.WaitOnPermit(ctx, p)
	if st.IsError() {
		t.Fatalf("WaitOnPermit(%s): %v", p.Name, st)
	}
	return st.Code()
}

func TestPreEnqueueGatesMembersOfMissingGroups(t *testing.T) {
	e := newEnv(t, newFakeGroups(gang("g", 2, time.Minute)))
	tests := []struct {
		name string
		pod  *framework.Pod
		want framework.Code
	}{
		{"no group", fwtest.Pod("solo", nil), framework.Success},
		{"existing group", member("a", "g"), framework.Success},
		{"missing group", member("b", "nope"), framework.UnschedulableAndUnresolvable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := e.fwk.PreEnqueueCheck(tc.pod)
			if st.Code() != tc.want {
				t.Fatalf("PreEnqueue = %v, want %v", st, tc.want)
			}
			if tc.want != framework.Success && st.Plugin() != coscheduling.Name {
				t.Errorf("gated by %q, want %q", st.Plugin(), coscheduling.Name)
			}
		})
	}
}

func TestPreFilterNeedsMinMemberMembers(t *testing.T) {
	groups := newFakeGroups(gang("g", 3, time.Minute))
	e := newEnv(t, groups)
	run := func(p *framework.Pod) *framework.Status {
		_, st, _ := e.fwk.RunPreFilterPlugins(context.Background(), framework.NewCycleState(), framework.NewPodInfo(p))
		return st
	}
	groups.live["default/g"] = 2
	st := run(member("a", "g"))
	if st.Code() != framework.UnschedulableAndUnresolvable || st.Plugin() != coscheduling.Name {
		t.Fatalf("2 of 3 members: %v (plugin %q), want UnschedulableAndUnresolvable from Coscheduling", st, st.Plugin())
	}
	if want := "pod group default/g has 2 of the 3 members it needs"; st.Message() != want {
		t.Errorf("message %q, want %q", st.Message(), want)
	}
	groups.live["default/g"] = 3
	if st := run(member("a", "g")); !st.IsSuccess() {
		t.Fatalf("3 of 3 members: %v", st)
	}
	if st := run(member("x", "gone")); st.Code() != framework.UnschedulableAndUnresolvable {
		t.Fatalf("missing group: %v", st)
	}
	if st := run(fwtest.Pod("solo", nil)); !st.IsSuccess() {
		t.Fatalf("pod without group: %v", st)
	}
}

// The member that makes min_member releases every waiting member, and the
// gang is declared before any of them goes.
func TestPermitReleasesTheGangTogether(t *testing.T) {
	e := newEnv(t, newFakeGroups(gang("g", 3, time.Minute)))
	a, b, c := member("a", "g"), member("b", "g"), member("c", "g")
	for _, p := range []*framework.Pod{a, b} {
		if got := e.permit(t, p); got != framework.Wait {
			t.Fatalf("Permit(%s) = %v, want Wait", p.Name, got)
		}
	}
	if got := e.permit(t, c); got != framework.Success {
		t.Fatalf("Permit(c) = %v, want Success", got)
	}
	for _, p := range []*framework.Pod{a, b} {
		if got := e.outcome(t, p); got != framework.Success {
			t.Errorf("%s: %v, want released", p.Name, got)
		}
	}
	if diff := cmp.Diff([][]string{{"a", "b", "c"}}, e.gangs.batches); diff != "" {
		t.Errorf("gangs (-want,+got):\n%s", diff)
	}
	if len(e.gangs.early) != 0 {
		t.Errorf("members %v were released before their gang was declared", e.gangs.early)
	}
	if diff := cmp.Diff([]string{"a", "b"}, e.gangs.held); diff != "" {
		t.Errorf("assumptions held (-want,+got):\n%s", diff)
	}
	if e.clock.Pending() != 0 {
		t.Errorf("%d timeout timers left running", e.clock.Pending())
	}
}

// Bound members count toward min_member; members of another group do not.
func TestPermitCountsBoundMembersOnly(t *testing.T) {
	groups := newFakeGroups(gang("g", 3, time.Minute), gang("other", 3, time.Minute))
	groups.bound["default/g"] = 2
	e := newEnv(t, groups)
	if got := e.permit(t, member("o1", "other")); got != framework.Wait {
		t.Fatalf("Permit(o1) = %v, want Wait", got)
	}
	if got := e.permit(t, member("a", "g")); got != framework.Success {
		t.Fatalf("with 2 bound, Permit(a) = %v, want Success", got)
	}
	if diff := cmp.Diff([][]string{{"a"}}, e.gangs.batches); diff != "" {
		t.Errorf("gangs (-want,+got):\n%s", diff)
	}
}

// A timeout of one member, through Unreserve, releases every waiting
// member of its group at once, and only of its group.
func TestTimeoutRejectsTheWholeGroup(t *testing.T) {
	e := newEnv(t, newFakeGroups(gang("g", 3, 10*time.Second), gang("other", 2, time.Hour)))
	a, b, o := member("a", "g"), member("b", "g"), member("o", "other")
	if got := e.permit(t, a); got != framework.Wait {
		t.Fatalf("Permit(a) = %v", got)
	}
	e.clock.Advance(5 * time.Second)
	if got := e.permit(t, b); got != framework.Wait {
		t.Fatalf("Permit(b) = %v", got)
	}
	if got := e.permit(t, o); got != framework.Wait {
		t.Fatalf("Permit(o) = %v", got)
	}
	e.clock.Advance(5 * time.Second) // a's timeout; b has 5s left
	if got := e.outcome(t, a); got != framework.Unschedulable {
		t.Fatalf("a after its timeout: %v, want Unschedulable", got)
	}
	// The shard runs Unreserve for the member that failed.
	e.fwk.RunReservePluginsUnreserve(context.Background(), framework.NewCycleState(), a, a.NodeName)
	if got := e.outcome(t, b); got != framework.Unschedulable {
		t.Fatalf("b: %v, want rejected with a", got)
	}
	if w := e.fwk.GetWaitingPod(framework.WaitingPodKey(o)); w == nil {
		t.Fatal("a member of another group was released")
	}
	if diff := cmp.Diff([]string{"a"}, e.gangs.released); diff != "" {
		t.Errorf("released (-want,+got):\n%s", diff)
	}
	if len(e.gangs.batches) != 0 {
		t.Errorf("gangs declared: %v, want none", e.gangs.batches)
	}
}

// A member rejected while it waits is no longer waiting, though its
// cycle has yet to notice: here a sibling's failed cycle turns it away,
// and that sibling, back at Permit, must wait for it rather than release a
// gang it will never join (its commit would wait for it in vain).
func TestRejectedMemberIsNotReleasedIntoAGang(t *testing.T) {
	e := newEnv(t, newFakeGroups(gang("g", 2, time.Minute)))
	a, b := member("a", "g"), member("b", "g")
	if got := e.permit(t, a); got != framework.Wait {
		t.Fatalf("Permit(a) = %v, want Wait", got)
	}
	// b's previous cycle failed; its Unreserve rejects a, which has not
	// yet left WaitOnPermit.
	e.fwk.RunReservePluginsUnreserve(context.Background(), framework.NewCycleState(), b, b.NodeName)
	if got := e.permit(t, b); got != framework.Wait {
		t.Errorf("Permit(b) = %v, want Wait: the only other member was rejected", got)
	}
	if len(e.gangs.batches) != 0 {
		t.Errorf("gangs declared: %v, want none", e.gangs.batches)
	}
	if got := e.outcome(t, a); got != framework.Unschedulable {
		t.Errorf("a: %v, want rejected", got)
	}
}

// A member rejected without the plugin (its timer, a failed assumption
// write) between being listed and being released fails the gang it was
// released into: its own Release may have come before the gang existed.
func TestMemberRejectedWhileReleasedFailsTheGang(t *testing.T) {
	e := newEnv(t, newFakeGroups(gang("g", 2, time.Minute)))
	a, b := member("a", "g"), member("b", "g")
	if got := e.permit(t, a); got != framework.Wait {
		t.Fatalf("Permit(a) = %v, want Wait", got)
	}
	e.gangs.onDeclare = func() {
		e.fwk.GetWaitingPod(framework.WaitingPodKey(a)).Reject("", "assumption write failed")
	}
	if got := e.permit(t, b); got != framework.Success {
		t.Fatalf("Permit(b) = %v, want Success", got)
	}
	if diff := cmp.Diff([]string{"a"}, e.gangs.released); diff != "" {
		t.Errorf("released (-want,+got):\n%s", diff)
	}
	if got := e.outcome(t, a); got != framework.Unschedulable {
		t.Errorf("a: %v, want rejected", got)
	}
}

// Waiting members are judged again when their group changes: enough bound
// members release them; a deleted group rejects them.
func TestGroupChangesRejudgeWaitingMembers(t *testing.T) {
	groups := newFakeGroups(gang("g", 3, time.Minute), gang("h", 3, time.Minute))
	e := newEnv(t, groups)
	a, b, c := member("a", "g"), member("b", "g"), member("c", "h")
	for _, p := range []*framework.Pod{a, b, c} {
		if got := e.permit(t, p); got != framework.Wait {
			t.Fatalf("Permit(%s) = %v", p.Name, got)
		}
	}
	groups.set("default/g", gang("g", 3, time.Minute), 3, 1)
	for _, p := range []*framework.Pod{a, b} {
		if got := e.outcome(t, p); got != framework.Success {
			t.Errorf("%s: %v, want released once a member is bound", p.Name, got)
		}
	}
	if diff := cmp.Diff([][]string{{"a", "b"}}, e.gangs.batches); diff != "" {
		t.Errorf("gangs (-want,+got):\n%s", diff)
	}
	groups.set("default/h", nil, 1, 0)
	if got := e.outcome(t, c); got != framework.Unschedulable {
		t.Errorf("c: %v, want rejected when its group is deleted", got)
	}
}

func TestPodsWithoutGroupPassEverywhere(t *testing.T) {
	e := newEnv(t, newFakeGroups())
	p := fwtest.Pod("solo", nil)
	if st := e.fwk.PreEnqueueCheck(p); st != nil {
		t.Fatal(st)
	}
	if _, st, _ := e.fwk.RunPreFilterPlugins(context.Background(), framework.NewCycleState(), framework.NewPodInfo(p)); st != nil {
		t.Fatal(st)
	}
	if got := e.permit(t, p); got != framework.Success {
		t.Fatalf("Permit = %v", got)
	}
	e.fwk.RunReservePluginsUnreserve(context.Background(), framework.NewCycleState(), p, "")
	if len(e.gangs.batches)+len(e.gangs.held)+len(e.gangs.released) != 0 {
		t.Fatalf("the core was asked about a pod outside any group: %+v", e.gangs)
	}
}

// Without a core (no handle), members are held back rather than placed
// alone.
func TestWithoutRegistryMembersAreGated(t *testing.T) {
	pl, err := coscheduling.New(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := pl.(*coscheduling.Coscheduling).PreEnqueue(context.Background(), member("a", "g"))
	if st.Code() != framework.UnschedulableAndUnresolvable {
		t.Fatalf("PreEnqueue = %v", st)
	}
}

func TestEventsWakeOnlyTheirOwnGroup(t *testing.T) {
	e := newEnv(t, newFakeGroups())
	evs, err := e.plugin.EventsToRegister(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hintFor := func(ev framework.ClusterEvent, p *framework.Pod, obj any) framework.QueueingHint {
		t.Helper()
		for _, reg := range evs {
			if reg.Event.Match(ev) {
				h, err := reg.QueueingHintFn(p, nil, obj)
				if err != nil {
					t.Fatal(err)
				}
				return h
			}
		}
		t.Fatalf("no registration for %+v", ev)
		return framework.QueueSkip
	}
	podAdd := framework.ClusterEvent{Resource: framework.EventResourcePod, ActionType: framework.ActionAdd}
	groupAdd := framework.ClusterEvent{Resource: framework.EventResourcePodGroup, ActionType: framework.ActionAdd}
	groupUpdate := framework.ClusterEvent{Resource: framework.EventResourcePodGroup, ActionType: framework.ActionUpdate}
	other := member("x", "g")
	other.Namespace = "elsewhere"
	tests := []struct {
		name string
		ev   framework.ClusterEvent
		obj  any
		want framework.QueueingHint
	}{
		{"sibling added", podAdd, member("b", "g"), framework.Queue},
		{"member of another group added", podAdd, member("b", "h"), framework.QueueSkip},
		{"same group name in another namespace", podAdd, other, framework.QueueSkip},
		{"own group created", groupAdd, gang("g", 2, 0), framework.Queue},
		{"own group changed", groupUpdate, gang("g", 1, 0), framework.Queue},
		{"another group created", groupAdd, gang("h", 2, 0), framework.QueueSkip},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := hintFor(tc.ev, member("a", "g"), tc.obj); got != tc.want {
				t.Errorf("hint %v, want %v", got, tc.want)
			}
		})
	}
}
