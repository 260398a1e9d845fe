package queue

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/berth-io/berth/scheduler/framework"
)

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

// Long for its table: one case per behaviour, kept together so they
// read side by side.
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

// Long for its table: one case per behaviour, kept together so they
// read side by side.
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
