package queue

import (
	"context"
	"errors"
	"fmt"
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

func TestGatedPods(t *testing.T) {
	gate := func(p *framework.Pod) *framework.Status {
		if len(p.SchedulingGates()) > 0 {
			return framework.NewStatus(framework.UnschedulableAndUnresolvable, "waiting for gates").WithPlugin("SchedulingGates")
		}
		return nil
	}
	q, clock := newTestQueue(t, WithPreEnqueue(gate), WithQueueingHints(map[string][]framework.ClusterEventWithHint{
		"SchedulingGates": {{Event: framework.ClusterEvent{Resource: framework.EventResourcePod, ActionType: framework.ActionUpdatePodSchedulingGates}}},
	}))
	gated := newPod("gated", 0)
	gated.EditExtras().SchedulingGates = []string{"example.com/wait"}
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
	open.EditExtras().SchedulingGates = nil
	q.Update(&stillGated, &open)
	checkPools(t, q, pools{Active: []string{key("gated")}})
	got := pop(t, q)
	if got.Pod != &open || got.GatingPlugin != "" || len(got.UnschedulablePlugins) != 0 {
		t.Errorf("popped %+v; want the ungated version with no gate recorded", got)
	}
}

// Long for its subtests, which share the helpers set up at the top.
func TestUpdate(t *testing.T) {
	statusOnly := func(p *framework.Pod) *framework.Pod {
		c := *p
		c.Revision++
		c.EditExtras().NominatedNodeName = "n1"
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

// BenchmarkAddPop fills activeQ and drains it. order=default is New(nil),
// which keeps each pod's sort keys beside it; order=given hands the same
// DefaultLess in as any QueueSort plugin's Less, read through the pods.
func BenchmarkAddPop(b *testing.B) {
	for _, n := range []int{10000, 50000} {
		for _, order := range []struct {
			name string
			less framework.LessFunc
		}{{"default", nil}, {"given", DefaultLess}} {
			b.Run(fmt.Sprintf("pods=%d/order=%s", n, order.name), func(b *testing.B) {
				benchAddPop(b, n, order.less)
			})
		}
	}
}

func benchAddPop(b *testing.B, n int, less framework.LessFunc) {
	pods := make([]*framework.Pod, n)
	for i := range pods {
		pods[i] = newPod("p"+strconv.Itoa(i), int32(i%7))
	}
	q := New(less)
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
	// A Pod's own fields and those of its extras, each named once.
	extras := reflect.TypeFor[framework.PodExtras]()
	var fields []string
	for _, typ := range []reflect.Type{reflect.TypeFor[framework.Pod](), extras} {
		for i := range typ.NumField() {
			if name := typ.Field(i).Name; name != "Extras" {
				fields = append(fields, name)
			}
		}
	}
	for _, name := range fields {
		if !slices.Contains(status, name) && !slices.Contains(spec, name) {
			t.Errorf("framework.Pod.%s is neither spec nor status here", name)
		}
	}
	// Status fields really are ignored, spec fields really are not.
	base := newPod("p", 0)
	for _, name := range append(slices.Clone(status), spec...) {
		changed := *base
		holder := reflect.ValueOf(&changed).Elem()
		if _, ok := extras.FieldByName(name); ok {
			holder = reflect.ValueOf(changed.EditExtras()).Elem()
		}
		setNonZero(t, holder.FieldByName(name))
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
	case reflect.Uint8:
		v.SetUint(v.Uint() + 1)
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
