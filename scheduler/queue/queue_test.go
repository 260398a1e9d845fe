package queue

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
)

func newPod(name string, priority int32) *framework.Pod {
	return &framework.Pod{Namespace: "ns", Name: name, UID: name, Priority: priority, Phase: framework.PodPending}
}

func key(name string) string { return "ns/" + name }

func newTestQueue(t testing.TB, opts ...Option) (*PriorityQueue, *fakeClock) {
	clock := newFakeClock()
	q := New(nil, append([]Option{WithClock(clock)}, opts...)...)
	t.Cleanup(q.Close)
	return q, clock
}

// pools lists the keys in each pool, sorted.
type pools struct{ Active, Backoff, Unsched []string }

func poolsOf(q *PriorityQueue) pools {
	q.mu.Lock()
	defer q.mu.Unlock()
	var p pools
	for k, e := range q.entries {
		switch e.pool {
		case poolActive:
			p.Active = append(p.Active, k)
		case poolBackoff:
			p.Backoff = append(p.Backoff, k)
		case poolUnschedulable:
			p.Unsched = append(p.Unsched, k)
		}
	}
	slices.Sort(p.Active)
	slices.Sort(p.Backoff)
	slices.Sort(p.Unsched)
	return p
}

func checkPools(t *testing.T, q *PriorityQueue, want pools) {
	t.Helper()
	if diff := cmp.Diff(want, poolsOf(q)); diff != "" {
		t.Errorf("pools (-want,+got):\n%s", diff)
	}
	a, b, u := q.Len()
	if a != len(want.Active) || b != len(want.Backoff) || u != len(want.Unsched) {
		t.Errorf("Len() = %d,%d,%d; want %d,%d,%d", a, b, u, len(want.Active), len(want.Backoff), len(want.Unsched))
	}
}

// pop pops with a deadline so a broken queue fails instead of hanging.
func pop(t testing.TB, q *PriorityQueue) *framework.QueuedPodInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	qpi, err := q.Pop(ctx)
	if err != nil {
		t.Fatalf("Pop: %v", err)
	}
	return qpi
}

func set(names ...string) map[string]struct{} {
	s := map[string]struct{}{}
	for _, n := range names {
		s[n] = struct{}{}
	}
	return s
}

// failAttempt pops the only active pod and hands it back as rejected by
// plugins.
func failAttempt(t *testing.T, q *PriorityQueue, name string, plugins ...string) *framework.QueuedPodInfo {
	t.Helper()
	qpi := pop(t, q)
	if qpi.Pod.Name != name {
		t.Fatalf("popped %s, want %s", qpi.Pod.Name, name)
	}
	qpi.UnschedulablePlugins = set(plugins...)
	if err := q.AddUnschedulableIfNotPresent(qpi); err != nil {
		t.Fatal(err)
	}
	return qpi
}

func TestPopOrder(t *testing.T) {
	type add struct {
		name     string
		priority int32
		step     time.Duration // clock step before adding
	}
	reverse := func(a, b *framework.QueuedPodInfo) bool { return a.Pod.Priority < b.Pod.Priority }
	tests := []struct {
		name string
		less framework.LessFunc
		adds []add
		want []string
	}{
		{
			name: "priority first",
			adds: []add{{"low", 1, 0}, {"high", 10, time.Second}, {"mid", 5, time.Second}},
			want: []string{"high", "mid", "low"},
		},
		{
			name: "then earlier timestamp",
			adds: []add{{"first", 5, 0}, {"second", 5, time.Second}, {"third", 5, time.Second}, {"urgent", 6, time.Second}},
			want: []string{"urgent", "first", "second", "third"},
		},
		{
			name: "equal pods leave in arrival order",
			adds: []add{{"a", 0, 0}, {"b", 0, 0}, {"c", 0, 0}, {"d", 0, 0}},
			want: []string{"a", "b", "c", "d"},
		},
		{
			name: "the given less function decides",
			less: reverse,
			adds: []add{{"high", 10, 0}, {"low", 1, 0}},
			want: []string{"low", "high"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			q := New(tc.less, WithClock(clock))
			defer q.Close()
			for _, a := range tc.adds {
				clock.Step(a.step)
				q.Add(newPod(a.name, a.priority))
			}
			var got []string
			for range tc.adds {
				got = append(got, pop(t, q).Pod.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pop order (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestBackoffDuration(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
		want []time.Duration // for attempts 1, 2, ...
	}{
		{
			name: "defaults",
			want: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second},
		},
		{
			name: "configured",
			opts: []Option{WithPodInitialBackoff(100 * time.Millisecond), WithPodMaxBackoff(time.Second)},
			want: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, clock := newTestQueue(t, tc.opts...)
			var got []time.Duration
			for i := range tc.want {
				got = append(got, q.BackoffDuration(i+1))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("BackoffDuration (-want,+got):\n%s", diff)
			}

			// The same durations end to end: a pod failing again and again
			// waits exactly that long in backoffQ before it is active again.
			q.Add(newPod("p", 0))
			for i, d := range tc.want {
				failAttempt(t, q, "p") // no plugin: straight to backoffQ
				checkPools(t, q, pools{Backoff: []string{key("p")}})
				clock.Step(d - time.Nanosecond)
				q.flushBackoffCompleted()
				if _, b, _ := q.Len(); b != 1 {
					t.Fatalf("attempt %d: left backoffQ before %v", i+1, d)
				}
				clock.Step(time.Nanosecond)
				q.flushBackoffCompleted()
				checkPools(t, q, pools{Active: []string{key("p")}})
			}
		})
	}
}

func TestRunMovesCompletedBackoff(t *testing.T) {
	q, clock := newTestQueue(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q.Run(ctx)
	q.Add(newPod("p", 0))
	failAttempt(t, q, "p")
	checkPools(t, q, pools{Backoff: []string{key("p")}})

	got := make(chan *framework.QueuedPodInfo, 1)
	go func() {
		qpi, err := q.Pop(ctx)
		if err == nil {
			got <- qpi
		}
	}()
	// Step the clock each time the flusher waits on it, until the pod pops.
	deadline := time.After(5 * time.Second)
	for {
		select {
		case qpi := <-got:
			if qpi.Attempts != 2 {
				t.Errorf("attempts = %d, want 2", qpi.Attempts)
			}
			return
		case <-clock.afterCalled:
			clock.Step(time.Second)
		case <-deadline:
			t.Fatal("pod never left backoffQ")
		}
	}
}

// Plugins and their registrations for the event tests.
var testHints = map[string][]framework.ClusterEventWithHint{
	"NodeResourcesFit": {
		{Event: framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionAdd}},
		{
			Event: framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionUpdateNodeAllocatable},
			QueueingHintFn: func(_ *framework.Pod, _, newObj any) (framework.QueueingHint, error) {
				if n, ok := newObj.(*framework.Node); ok && n.Name == "big" {
					return framework.Queue, nil
				}
				return framework.QueueSkip, nil
			},
		},
	},
	"TaintToleration": {
		{Event: framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionAdd | framework.ActionUpdateNodeTaint},
			QueueingHintFn: func(_ *framework.Pod, _, _ any) (framework.QueueingHint, error) { return framework.QueueSkip, nil }},
		{Event: framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionUpdateNodeTaint}},
	},
	"Broken": {
		{Event: framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionAdd},
			QueueingHintFn: func(_ *framework.Pod, _, _ any) (framework.QueueingHint, error) {
				return framework.QueueSkip, errors.New("boom")
			}},
	},
	"Quiet": {
		{Event: framework.ClusterEvent{Resource: framework.EventResourceAssigned, ActionType: framework.ActionDelete}},
	},
}

var (
	nodeAdd       = framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionAdd, Label: "NodeAdd"}
	nodeAllocUp   = framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionUpdateNodeAllocatable, Label: "NodeAllocatable"}
	nodeTaint     = framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionUpdateNodeTaint, Label: "NodeTaint"}
	nodeLabel     = framework.ClusterEvent{Resource: framework.EventResourceNode, ActionType: framework.ActionUpdateNodeLabel, Label: "NodeLabel"}
	assignedDel   = framework.ClusterEvent{Resource: framework.EventResourceAssigned, ActionType: framework.ActionDelete, Label: "AssignedPodDelete"}
	wildcardEvent = framework.ClusterEvent{Resource: framework.EventResourceWildcard, ActionType: framework.ActionAll, Label: "Wildcard"}
)

func TestMoveAllToActiveOrBackoffQueue(t *testing.T) {
	// Each pod was rejected by the named plugins.
	rejected := map[string][]string{
		"fit":        {"NodeResourcesFit"},
		"taint":      {"TaintToleration"},
		"broken":     {"Broken"},
		"unknown":    {"Unregistered"},
		"fit+taint":  {"NodeResourcesFit", "TaintToleration"},
		"quiet":      {"Quiet"},
		"fitPending": nil, // PendingPlugins: NodeResourcesFit
	}
	all := []string{"broken", "fit", "fit+taint", "fitPending", "quiet", "taint", "unknown"}
	keys := func(names ...string) []string {
		var out []string
		for _, n := range names {
			out = append(out, key(n))
		}
		slices.Sort(out)
		return out
	}
	without := func(moved ...string) []string {
		var out []string
		for _, n := range all {
			if !slices.Contains(moved, n) {
				out = append(out, n)
			}
		}
		return keys(out...)
	}
	big := &framework.Node{Name: "big"}
	small := &framework.Node{Name: "small"}

	tests := []struct {
		name     string
		event    framework.ClusterEvent
		newObj   any
		preCheck func(*framework.Pod) bool
		step     time.Duration // clock step before the event
		want     pools
	}{
		{
			name:  "node add: plugins that registered it without hint, or whose hint failed",
			event: nodeAdd,
			want:  pools{Active: keys("fitPending"), Backoff: keys("broken", "fit", "fit+taint"), Unsched: without("broken", "fit", "fit+taint", "fitPending")},
		},
		{
			name:   "hint says Queue",
			event:  nodeAllocUp,
			newObj: big,
			want:   pools{Active: keys("fitPending"), Backoff: keys("fit", "fit+taint"), Unsched: without("fit", "fit+taint", "fitPending")},
		},
		{
			name:   "hint says QueueSkip: nobody moves",
			event:  nodeAllocUp,
			newObj: small,
			want:   pools{Unsched: keys(all...)},
		},
		{
			name:  "any matching registration with Queue moves the pod",
			event: nodeTaint,
			want:  pools{Backoff: keys("fit+taint", "taint"), Unsched: without("fit+taint", "taint")},
		},
		{
			name:  "an event nobody registered moves nothing",
			event: nodeLabel,
			want:  pools{Unsched: keys(all...)},
		},
		{
			name:  "another resource",
			event: assignedDel,
			want:  pools{Backoff: keys("quiet"), Unsched: without("quiet")},
		},
		{
			name:  "wildcard moves everything",
			event: wildcardEvent,
			want:  pools{Backoff: keys(all...)},
		},
		{
			name:     "preCheck filters",
			event:    nodeAdd,
			preCheck: func(p *framework.Pod) bool { return p.Name != "fit" },
			want:     pools{Active: keys("fitPending"), Backoff: keys("broken", "fit+taint"), Unsched: without("broken", "fit+taint", "fitPending")},
		},
		{
			name:  "backoff already over: straight to activeQ",
			event: nodeTaint,
			step:  2 * time.Second,
			want:  pools{Active: keys("fit+taint", "taint"), Unsched: without("fit+taint", "taint")},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, clock := newTestQueue(t, WithQueueingHints(testHints))
			for _, name := range all {
				q.Add(newPod(name, 0))
				qpi := pop(t, q)
				qpi.UnschedulablePlugins = set(rejected[name]...)
				if name == "fitPending" {
					qpi.PendingPlugins = set("NodeResourcesFit")
				}
				if err := q.AddUnschedulableIfNotPresent(qpi); err != nil {
					t.Fatal(err)
				}
			}
			checkPools(t, q, pools{Unsched: keys(all...)})
			clock.Step(tc.step)
			q.MoveAllToActiveOrBackoffQueue(tc.event, nil, tc.newObj, tc.preCheck)
			checkPools(t, q, tc.want)
		})
	}
}

func TestEventDuringAttempt(t *testing.T) {
	tests := []struct {
		name string
		// during runs between Pop and the failed attempt's hand-back.
		during  func(q *PriorityQueue, p *framework.Pod)
		before  func(q *PriorityQueue) // runs before Pop
		plugins []string
		pending []string
		want    pools
	}{
		{
			name:    "relevant event: backoffQ",
			during:  func(q *PriorityQueue, _ *framework.Pod) { q.MoveAllToActiveOrBackoffQueue(nodeAdd, nil, nil, nil) },
			plugins: []string{"NodeResourcesFit"},
			want:    pools{Backoff: []string{key("p")}},
		},
		{
			name:    "relevant event for a Pending plugin: activeQ",
			during:  func(q *PriorityQueue, _ *framework.Pod) { q.MoveAllToActiveOrBackoffQueue(nodeAdd, nil, nil, nil) },
			pending: []string{"NodeResourcesFit"},
			want:    pools{Active: []string{key("p")}},
		},
		{
			name:    "irrelevant event: unschedulable",
			during:  func(q *PriorityQueue, _ *framework.Pod) { q.MoveAllToActiveOrBackoffQueue(nodeTaint, nil, nil, nil) },
			plugins: []string{"NodeResourcesFit"},
			want:    pools{Unsched: []string{key("p")}},
		},
		{
			name: "hint says skip: unschedulable",
			during: func(q *PriorityQueue, _ *framework.Pod) {
				q.MoveAllToActiveOrBackoffQueue(nodeAllocUp, nil, &framework.Node{Name: "small"}, nil)
			},
			plugins: []string{"NodeResourcesFit"},
			want:    pools{Unsched: []string{key("p")}},
		},
		{
			name:    "relevant event before the pod was popped: unschedulable",
			before:  func(q *PriorityQueue) { q.MoveAllToActiveOrBackoffQueue(nodeAdd, nil, nil, nil) },
			plugins: []string{"NodeResourcesFit"},
			want:    pools{Unsched: []string{key("p")}},
		},
		{
			name: "own spec changed: backoffQ",
			during: func(q *PriorityQueue, p *framework.Pod) {
				c := *p
				c.Labels = map[string]string{"fixed": "yes"}
				q.Update(p, &c)
			},
			plugins: []string{"NodeResourcesFit"},
			want:    pools{Backoff: []string{key("p")}},
		},
		{
			name: "own status changed: unschedulable",
			during: func(q *PriorityQueue, p *framework.Pod) {
				c := *p
				c.Revision++
				q.Update(p, &c)
			},
			plugins: []string{"NodeResourcesFit"},
			want:    pools{Unsched: []string{key("p")}},
		},
		{
			name:    "activated: backoffQ",
			during:  func(q *PriorityQueue, _ *framework.Pod) { q.Activate(key("p")) },
			plugins: []string{"NodeResourcesFit"},
			want:    pools{Backoff: []string{key("p")}},
		},
		{
			name:    "deleted: dropped",
			during:  func(q *PriorityQueue, p *framework.Pod) { q.Delete(p) },
			plugins: []string{"NodeResourcesFit"},
			want:    pools{},
		},
		{
			name:   "no rejecting plugin (internal error): backoffQ",
			during: func(*PriorityQueue, *framework.Pod) {},
			want:   pools{Backoff: []string{key("p")}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := newTestQueue(t, WithQueueingHints(testHints))
			// Another pod in flight keeps the event log alive throughout.
			q.Add(newPod("other", 0))
			other := pop(t, q)
			q.Add(newPod("p", 0))
			if tc.before != nil {
				tc.before(q)
			}
			qpi := pop(t, q)
			if tc.during != nil {
				tc.during(q, qpi.Pod)
			}
			qpi.UnschedulablePlugins = set(tc.plugins...)
			qpi.PendingPlugins = set(tc.pending...)
			if err := q.AddUnschedulableIfNotPresent(qpi); err != nil {
				t.Fatal(err)
			}
			checkPools(t, q, tc.want)
			q.Done(other.Pod.Key())
			if n := len(q.inFlight.events); n != 0 {
				t.Errorf("%d events kept with nothing in flight", n)
			}
		})
	}
}

func TestEventWindowsPerPod(t *testing.T) {
	q, _ := newTestQueue(t, WithQueueingHints(testHints))
	q.Add(newPod("a", 1))
	q.Add(newPod("b", 0))
	a := pop(t, q)
	q.MoveAllToActiveOrBackoffQueue(nodeAdd, nil, nil, nil) // a sees it, b does not
	b := pop(t, q)
	q.MoveAllToActiveOrBackoffQueue(nodeLabel, nil, nil, nil) // nobody cares

	// b fails on NodeResourcesFit: the node add happened before b's attempt.
	b.UnschedulablePlugins = set("NodeResourcesFit")
	if err := q.AddUnschedulableIfNotPresent(b); err != nil {
		t.Fatal(err)
	}
	// a fails on the same plugin: the node add happened during its attempt.
	a.UnschedulablePlugins = set("NodeResourcesFit")
	if err := q.AddUnschedulableIfNotPresent(a); err != nil {
		t.Fatal(err)
	}
	checkPools(t, q, pools{Backoff: []string{key("a")}, Unsched: []string{key("b")}})
}

func TestGatedPods(t *testing.T) {
	gate := func(p *framework.Pod) *framework.Status {
		if len(p.SchedulingGates) > 0 {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, "waiting for gates").WithPlugin("SchedulingGates")
		}
		return nil
	}
	q, clock := newTestQueue(t, WithPreEnqueue(gate), WithQueueingHints(map[string][]framework.ClusterEventWithHint{
		"SchedulingGates": {{Event: framework.ClusterEvent{Resource: framework.EventResourcePod, ActionType: framework.ActionUpdatePodSchedulingGates}}},
	}))
	gated := newPod("gated", 0)
	gated.SchedulingGates = []string{"example.com/wait"}
	q.Add(gated)
	checkPools(t, q, pools{Unsched: []string{key("gated")}})

	q.mu.Lock()
	qpi := q.entries[key("gated")].qpi
	q.mu.Unlock()
	if qpi.GatingPlugin != "SchedulingGates" {
		t.Errorf("GatingPlugin = %q", qpi.GatingPlugin)
	}

	// Nothing but lifting the gate lets it out.
	clock.Step(10 * time.Minute)
	q.flushUnschedulableLeftover()
	q.flushBackoffCompleted()
	q.MoveAllToActiveOrBackoffQueue(wildcardEvent, nil, nil, nil)
	q.Activate(key("gated"))
	stillGated := *gated
	stillGated.Revision = 7
	q.Update(gated, &stillGated)
	checkPools(t, q, pools{Unsched: []string{key("gated")}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := q.Pop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Pop of a gated pod = %v, %v; want it to stay queued", got, err)
	}

	open := stillGated
	open.SchedulingGates = nil
	q.Update(&stillGated, &open)
	checkPools(t, q, pools{Active: []string{key("gated")}})
	got := pop(t, q)
	if got.Pod != &open || got.GatingPlugin != "" || len(got.UnschedulablePlugins) != 0 {
		t.Errorf("popped %+v; want the ungated version with no gate recorded", got)
	}
}

func TestFlushUnschedulable(t *testing.T) {
	tests := []struct {
		name     string
		opts     []Option
		attempts int // attempts before the last failure
		wait     time.Duration
		want     pools
	}{
		{name: "not yet", wait: 5 * time.Minute, attempts: 1, want: pools{Unsched: []string{key("p")}}},
		{name: "after 5 minutes, backoff long over: activeQ", wait: 5*time.Minute + time.Second, attempts: 1, want: pools{Active: []string{key("p")}}},
		{
			name: "short interval, still backing off: backoffQ", opts: []Option{WithUnschedulableFlushInterval(5 * time.Second)},
			attempts: 4, wait: 6 * time.Second, want: pools{Backoff: []string{key("p")}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, clock := newTestQueue(t, append(tc.opts, WithQueueingHints(testHints))...)
			q.Add(newPod("p", 0))
			qpi := failAttempt(t, q, "p", "NodeResourcesFit")
			qpi.Attempts = tc.attempts // as if it had failed this often
			checkPools(t, q, pools{Unsched: []string{key("p")}})
			clock.Step(tc.wait)
			q.flushUnschedulableLeftover()
			checkPools(t, q, tc.want)
		})
	}
}

func TestUpdate(t *testing.T) {
	statusOnly := func(p *framework.Pod) *framework.Pod {
		c := *p
		c.Revision++
		c.NominatedNodeName = "n1"
		return &c
	}
	relabel := func(p *framework.Pod) *framework.Pod {
		c := *p
		c.Labels = map[string]string{"v": "2"}
		return &c
	}

	t.Run("activeQ: status-only keeps position, priority change re-sorts", func(t *testing.T) {
		q, clock := newTestQueue(t)
		a, b, c := newPod("a", 0), newPod("b", 0), newPod("c", 0)
		for _, p := range []*framework.Pod{a, b, c} {
			q.Add(p)
			clock.Step(time.Second)
		}
		newA := statusOnly(a)
		q.Update(a, newA)
		urgentC := *c
		urgentC.Priority = 10
		q.Update(c, &urgentC)
		var got []string
		var popped []*framework.Pod
		for range 3 {
			qpi := pop(t, q)
			got = append(got, qpi.Pod.Name)
			popped = append(popped, qpi.Pod)
		}
		if diff := cmp.Diff([]string{"c", "a", "b"}, got); diff != "" {
			t.Errorf("pop order (-want,+got):\n%s", diff)
		}
		if popped[1] != newA {
			t.Error("status-only update did not replace the stored pod")
		}
	})

	t.Run("backoffQ: status-only keeps the backoff", func(t *testing.T) {
		q, clock := newTestQueue(t)
		p := newPod("p", 0)
		q.Add(p)
		failAttempt(t, q, "p")
		clock.Step(500 * time.Millisecond)
		q.Update(p, statusOnly(p))
		clock.Step(499 * time.Millisecond)
		q.flushBackoffCompleted()
		checkPools(t, q, pools{Backoff: []string{key("p")}})
		clock.Step(time.Millisecond)
		q.flushBackoffCompleted()
		checkPools(t, q, pools{Active: []string{key("p")}})
	})

	t.Run("unschedulable: status-only stays, spec change moves", func(t *testing.T) {
		q, _ := newTestQueue(t, WithQueueingHints(testHints))
		p := newPod("p", 0)
		q.Add(p)
		failAttempt(t, q, "p", "NodeResourcesFit")
		s := statusOnly(p)
		q.Update(p, s)
		checkPools(t, q, pools{Unsched: []string{key("p")}})
		q.mu.Lock()
		stored := q.entries[key("p")].qpi.Pod
		q.mu.Unlock()
		if stored != s {
			t.Error("status-only update did not replace the stored pod")
		}
		q.Update(s, relabel(s))
		checkPools(t, q, pools{Backoff: []string{key("p")}})
	})

	t.Run("unknown pod is added; Add of a queued pod updates it", func(t *testing.T) {
		q, _ := newTestQueue(t)
		p := newPod("p", 0)
		q.Update(nil, p)
		q.Add(p)
		q.Add(statusOnly(p))
		checkPools(t, q, pools{Active: []string{key("p")}})
	})
}

func TestDelete(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, q *PriorityQueue)
	}{
		{name: "activeQ", setup: func(t *testing.T, q *PriorityQueue) {}},
		{name: "backoffQ", setup: func(t *testing.T, q *PriorityQueue) { failAttempt(t, q, "p") }},
		{name: "unschedulable", setup: func(t *testing.T, q *PriorityQueue) { failAttempt(t, q, "p", "NodeResourcesFit") }},
		{name: "in flight, then requeued", setup: func(t *testing.T, q *PriorityQueue) {
			qpi := pop(t, q)
			q.Delete(qpi.Pod)
			q.Requeue(qpi)
		}},
		{name: "in flight, then failed", setup: func(t *testing.T, q *PriorityQueue) {
			qpi := pop(t, q)
			q.Delete(qpi.Pod)
			if err := q.AddUnschedulableIfNotPresent(qpi); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := newTestQueue(t, WithQueueingHints(testHints))
			q.Add(newPod("keep", -1))
			q.Add(newPod("p", 0))
			tc.setup(t, q)
			q.Delete(newPod("p", 0))
			checkPools(t, q, pools{Active: []string{key("keep")}})
			if diff := cmp.Diff([]string{"keep"}, podNames(q.PendingPods())); diff != "" {
				t.Errorf("PendingPods (-want,+got):\n%s", diff)
			}
		})
	}
}

func podNames(ps []*framework.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

func TestRequeueSkipsBackoff(t *testing.T) {
	q, _ := newTestQueue(t)
	q.Add(newPod("p", 0))
	qpi := pop(t, q)
	qpi.UnschedulablePlugins = set("NodeResourcesFit") // ignored: not a failure
	q.Requeue(qpi)
	checkPools(t, q, pools{Active: []string{key("p")}})
	if again := pop(t, q); again.Attempts != 2 {
		t.Errorf("attempts = %d, want 2", again.Attempts)
	}
}

func TestAddUnschedulableIfPresent(t *testing.T) {
	q, _ := newTestQueue(t)
	q.Add(newPod("p", 0))
	qpi := pop(t, q)
	q.Add(newPod("p", 0)) // noted for the in-flight pod, not queued twice
	checkPools(t, q, pools{})
	q.Done(qpi.Pod.Key())
	q.Add(newPod("p", 0)) // now a fresh pending pod
	if err := q.AddUnschedulableIfNotPresent(qpi); err == nil {
		t.Error("handing back a pod already queued succeeded")
	}
	checkPools(t, q, pools{Active: []string{key("p")}})
}

func TestActivate(t *testing.T) {
	q, _ := newTestQueue(t, WithQueueingHints(testHints))
	q.Add(newPod("b", 0))
	failAttempt(t, q, "b")
	q.Add(newPod("u", 0))
	failAttempt(t, q, "u", "NodeResourcesFit")
	q.Add(newPod("a", 0))
	checkPools(t, q, pools{Active: []string{key("a")}, Backoff: []string{key("b")}, Unsched: []string{key("u")}})
	q.Activate(key("a"), key("b"), key("u"), key("missing"))
	checkPools(t, q, pools{Active: []string{key("a"), key("b"), key("u")}})
}

func TestPromote(t *testing.T) {
	popNames := func(q *PriorityQueue, n int) []string {
		var out []string
		for range n {
			out = append(out, pop(t, q).Pod.Name)
		}
		return out
	}
	t.Run("from the unschedulable pool", func(t *testing.T) {
		q, clock := newTestQueue(t, WithQueueingHints(testHints))
		q.Add(newPod("preemptor", 0))
		clock.Step(time.Second)
		q.Add(newPod("later", 0))
		q.Add(newPod("important", 10))
		if got := pop(t, q).Pod.Name; got != "important" {
			t.Fatalf("popped %s first, want important", got)
		}
		q.Done(key("important"))
		failAttempt(t, q, "preemptor", "NodeResourcesFit")
		clock.Step(time.Second)
		q.Add(newPod("latest", 0))
		q.Promote(key("preemptor"))
		q.Promote(key("missing"))
		// Back at its arrival: before later and latest, behind nothing of
		// higher priority; no backoff waited out.
		if got, want := popNames(q, 3), []string{"preemptor", "later", "latest"}; !slices.Equal(got, want) {
			t.Errorf("pop order %v, want %v", got, want)
		}
	})
	t.Run("while being scheduled", func(t *testing.T) {
		q, clock := newTestQueue(t, WithQueueingHints(testHints))
		q.Add(newPod("preemptor", 0))
		clock.Step(time.Second)
		q.Add(newPod("later", 0))
		qpi := pop(t, q)
		q.Promote(key("preemptor")) // its victims went during its attempt
		qpi.UnschedulablePlugins = set("NodeResourcesFit")
		if err := q.AddUnschedulableIfNotPresent(qpi); err != nil {
			t.Fatal(err)
		}
		checkPools(t, q, pools{Active: []string{key("later"), key("preemptor")}})
		if got, want := popNames(q, 2), []string{"preemptor", "later"}; !slices.Equal(got, want) {
			t.Errorf("pop order %v, want %v", got, want)
		}
	})
	t.Run("Activate keeps the back of the line", func(t *testing.T) {
		q, clock := newTestQueue(t, WithQueueingHints(testHints))
		q.Add(newPod("first", 0))
		clock.Step(time.Second)
		q.Add(newPod("later", 0))
		failAttempt(t, q, "first", "NodeResourcesFit")
		q.Activate(key("first"))
		if got, want := popNames(q, 2), []string{"later", "first"}; !slices.Equal(got, want) {
			t.Errorf("pop order %v, want %v", got, want)
		}
	})
}

func TestPopBlocks(t *testing.T) {
	t.Run("wakes on Add", func(t *testing.T) {
		q, _ := newTestQueue(t)
		got := make(chan string, 1)
		go func() {
			qpi, err := q.Pop(context.Background())
			if err != nil {
				got <- err.Error()
				return
			}
			got <- qpi.Pod.Name
		}()
		select {
		case g := <-got:
			t.Fatalf("Pop on an empty queue returned %q", g)
		default:
		}
		q.Add(newPod("p", 0))
		select {
		case g := <-got:
			if g != "p" {
				t.Errorf("Pop = %q, want p", g)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Pop did not wake on Add")
		}
	})
	t.Run("wakes on Close and on ctx", func(t *testing.T) {
		q, _ := newTestQueue(t)
		ctx, cancel := context.WithCancel(context.Background())
		errs := make(chan error, 2)
		go func() { _, err := q.Pop(ctx); errs <- err }()
		go func() { _, err := q.Pop(context.Background()); errs <- err }()
		cancel()
		first := <-errs
		q.Close()
		second := <-errs
		got := []error{first, second}
		if !slices.ContainsFunc(got, func(e error) bool { return errors.Is(e, context.Canceled) }) ||
			!slices.ContainsFunc(got, func(e error) bool { return errors.Is(e, ErrClosed) }) {
			t.Errorf("errors = %v; want one Canceled and one ErrClosed", got)
		}
		if _, err := q.Pop(context.Background()); !errors.Is(err, ErrClosed) {
			t.Errorf("Pop after Close = %v", err)
		}
	})
}

func BenchmarkAddPop10000(b *testing.B) {
	const n = 10000
	pods := make([]*framework.Pod, n)
	for i := range pods {
		pods[i] = newPod("p"+strconv.Itoa(i), int32(i%7))
	}
	q := New(nil)
	defer q.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, p := range pods {
			q.Add(p)
		}
		for range n {
			qpi, err := q.Pop(ctx)
			if err != nil {
				b.Fatal(err)
			}
			q.Done(qpi.Pod.Key())
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "pods/s")
}

// TestConcurrentPoppers checks that several poppers racing with an adder
// get every pod exactly once.
func TestConcurrentPoppers(t *testing.T) {
	q, _ := newTestQueue(t)
	const n, poppers = 1000, 4
	got := make(chan string, n)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range poppers {
		go func() {
			for {
				qpi, err := q.Pop(ctx)
				if err != nil {
					return
				}
				q.Done(qpi.Pod.Key())
				got <- qpi.Pod.Name
			}
		}()
	}
	for i := range n {
		q.Add(newPod(strconv.Itoa(i), int32(i%3)))
	}
	seen := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for len(seen) < n {
		select {
		case name := <-got:
			if seen[name] {
				t.Fatalf("%s popped twice", name)
			}
			seen[name] = true
		case <-deadline:
			t.Fatalf("only %d of %d pods popped", len(seen), n)
		}
	}
	checkPools(t, q, pools{})
}

// TestPodFieldsClassified fails when a field is added to framework.Pod
// without deciding whether changing it is a spec change (which moves an
// unschedulable pod) or status only (which must not, or every recorded
// diagnosis would churn the queue). Classify it here and in clearStatus.
func TestPodFieldsClassified(t *testing.T) {
	status := []string{"NodeName", "Phase", "NominatedNodeName", "StatusMessage", "PreemptedBy", "Rejections", "StartTime", "Revision", "Source",
		"ViewRevision", "Shard", "ShardEpoch"}
	spec := []string{
		"Namespace", "Name", "UID", "Labels", "Priority", "Containers", "InitContainers", "Overhead",
		"SchedulerName", "NodeSelector", "Tolerations", "Affinity", "TopologySpreadConstraints",
		"SchedulingGates", "PreemptionPolicy", "PodGroup",
	}
	typ := reflect.TypeFor[framework.Pod]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		if !slices.Contains(status, name) && !slices.Contains(spec, name) {
			t.Errorf("framework.Pod.%s is neither spec nor status here", name)
		}
	}
	// Status fields really are ignored, spec fields really are not.
	base := newPod("p", 0)
	for _, name := range append(slices.Clone(status), spec...) {
		changed := *base
		f := reflect.ValueOf(&changed).Elem().FieldByName(name)
		setNonZero(t, f)
		if got, want := sameSpec(base, &changed), slices.Contains(status, name); got != want {
			t.Errorf("changing %s: sameSpec = %v, want %v", name, got, want)
		}
	}
}

// setNonZero gives v a value different from a fresh test pod's.
func setNonZero(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "-changed")
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		v.SetMapIndex(reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem())
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(1, 0)))
			return
		}
		t.Fatalf("no way to change a %s", v.Type())
	case reflect.Interface:
		v.Set(reflect.ValueOf(1))
	default:
		t.Fatalf("no way to change a %s", v.Type())
	}
}
