package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// paced runs a pacer over the given tick times and records each call's size.
func paced(t *testing.T, rate float64, batch, n int, ticks []time.Duration) (sizes []int, err error) {
	t.Helper()
	start := time.Unix(1000, 0)
	ch := make(chan time.Time, len(ticks))
	for _, d := range ticks {
		ch <- start.Add(d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if len(ticks) == 0 {
		cancel() // nothing more will tick: a pacer that waits must end
	}
	next := 0
	p := &pacer{rate: rate, batch: batch}
	err = p.run(ctx, start, ch, n, func(lo, hi int) {
		if lo != next || hi <= lo {
			t.Errorf("send(%d, %d) after %d sent: want contiguous ranges", lo, hi, next)
		}
		next = hi
		sizes = append(sizes, hi-lo)
	})
	return sizes, err
}

func TestPacerSendsOnSchedule(t *testing.T) {
	// 1,000 pods/s ticked every 10ms: the first pod at once, then ten a tick.
	var ticks []time.Duration
	for i := 1; i <= 10; i++ {
		ticks = append(ticks, time.Duration(i)*10*time.Millisecond)
	}
	sizes, err := paced(t, 1000, 100, 100, ticks)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{1, 10, 10, 10, 10, 10, 10, 10, 10, 10, 9}
	if !slices.Equal(sizes, want) {
		t.Errorf("calls %v; want %v", sizes, want)
	}
}

func TestPacerCatchesUpInBatches(t *testing.T) {
	// A tick half a second late (the submitter was blocked) owes 500 pods:
	// they go out at once, in calls of at most --batch.
	sizes, err := paced(t, 1000, 100, 2000, []time.Duration{500 * time.Millisecond, 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := []int{1, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 99}
	if !slices.Equal(sizes, want) {
		t.Errorf("calls %v; want %v", sizes, want)
	}
}

func TestPacerStopsAtItsCount(t *testing.T) {
	// Ticks well past the end send nothing beyond n, and the pacer returns
	// without waiting for more ticks.
	sizes, err := paced(t, 10, 100, 5, []time.Duration{time.Second, 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sizes, []int{1, 4}) {
		t.Errorf("calls %v; want [1 4]", sizes)
	}
}

func TestPacerEndsWithContext(t *testing.T) {
	sizes, err := paced(t, 10, 100, 5, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v; want context.Canceled", err)
	}
	if !slices.Equal(sizes, []int{1}) {
		t.Errorf("calls %v; want [1]: the first pod goes at start", sizes)
	}
}

func TestPacerTick(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		want time.Duration
	}{{1000, time.Millisecond}, {1e6, time.Millisecond}, {500, 2 * time.Millisecond}, {50, 20 * time.Millisecond}, {0.5, 2 * time.Second}} {
		if got := pacerTick(tc.rate); got != tc.want {
			t.Errorf("pacerTick(%v) = %v; want %v", tc.rate, got, tc.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	lat := make([]time.Duration, 2000)
	for i := range lat {
		lat[i] = time.Duration(i+1) * time.Millisecond
	}
	r := runResult{latencies: lat}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{0.50, 1000 * time.Millisecond}, {0.99, 1980 * time.Millisecond}, {0.999, 1998 * time.Millisecond}, {1, 2000 * time.Millisecond}} {
		if got := r.percentile(tc.p); got != tc.want {
			t.Errorf("percentile(%v) of 1..2000ms = %v; want %v", tc.p, got, tc.want)
		}
	}
	if got := (runResult{}).percentile(0.999); got != 0 {
		t.Errorf("percentile of none = %v; want 0", got)
	}
}

// The pacer sends a pod exactly when dueAt says it is due, the time its
// latency is measured from: never before, and not a tick later than it
// could.
func TestPacerDueAtAgreesWithDue(t *testing.T) {
	for _, rate := range []float64{1000, 3, 2500, 7777.7} {
		p := &pacer{rate: rate, batch: 1, start: time.Unix(1000, 123)}
		const n = 5000
		for i := range n {
			at := p.dueAt(i)
			if got := p.due(at, n); got != i+1 {
				t.Fatalf("rate %v: %d due at dueAt(%d); want %d", rate, got, i, i+1)
			}
			if got := p.due(at.Add(-time.Nanosecond), n); got != i {
				t.Fatalf("rate %v: %d due just before dueAt(%d); want %d", rate, got, i, i)
			}
		}
	}
}

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// slowPods accepts every pod, each call taking perCall of the fake clock:
// a server slower than the rate offered.
type slowPods struct {
	berthv1.PodServiceClient
	clock   *fakeClock
	perCall time.Duration
}

func (f *slowPods) SubmitPods(_ context.Context, req *berthv1.SubmitPodsRequest, _ ...grpc.CallOption) (*berthv1.SubmitPodsResponse, error) {
	f.clock.advance(f.perCall)
	resp := &berthv1.SubmitPodsResponse{}
	for _, p := range req.GetPods() {
		resp.Results = append(resp.Results, &berthv1.SubmitPodResult{Pod: &berthv1.Pod{Uid: "uid-" + p.GetName()}})
	}
	return resp, nil
}

// Under --rate a pod's latency runs from when it was due, not from when
// its call got a slot: a server that takes 4ms a call against one pod due
// a millisecond holds the pacer back, and that backlog must show.
func TestSubmitPacedMeasuresFromDueTime(t *testing.T) {
	const (
		n       = 30
		slot    = time.Millisecond // --rate 1000
		perCall = 4 * time.Millisecond
		toBind  = time.Millisecond
	)
	start := time.Unix(1000, 0)
	clock := &fakeClock{now: start}
	tr := newTracker()
	tr.now = clock.Now
	slots := make([]int32, n)
	for i := range slots {
		slots[i] = tr.add(&berthv1.Pod{Namespace: measuredNamespace, Name: fmt.Sprint("p", i)}, phaseMeasured)
	}
	ticks := make(chan time.Time, 3)
	for i := 1; i <= 3; i++ {
		ticks <- start.Add(time.Duration(i) * 10 * time.Millisecond)
	}
	// One call in flight, one pod a call: each waits for the one before.
	sub := newSubmitter(context.Background(), &slowPods{clock: clock, perCall: perCall}, tr, 1)
	if err := submitPaced(sub, &pacer{rate: 1000, batch: 1}, start, ticks, slots); err != nil {
		t.Fatal(err)
	}
	for i, s := range slots {
		rec := tr.record(s)
		if want := start.Add(time.Duration(i) * slot).UnixNano(); rec.due != want {
			t.Errorf("pod %d due at %v; want %v, its slot in the schedule", i, time.Unix(0, rec.due).Sub(start), time.Unix(0, want).Sub(start))
		}
		if want := start.Add(time.Duration(i) * perCall).UnixNano(); rec.submitted != want {
			t.Errorf("pod %d's call started at %v; want %v", i, time.Unix(0, rec.submitted).Sub(start), time.Unix(0, want).Sub(start))
		}
		if _, err := tr.handle(event(bound, measuredNamespace, rec.name, int64(i+1)), rec.submitted+int64(toBind)); err != nil {
			t.Fatal(err)
		}
	}

	r := &runner{t: tr}
	res := runResult{rate: 1000}
	r.measure(&res, start)
	var wantDue, wantCall []time.Duration
	for i := range n {
		wantDue = append(wantDue, time.Duration(i)*(perCall-slot)+toBind)
		wantCall = append(wantCall, toBind)
	}
	if diff := cmp.Diff(wantDue, res.latencies); diff != "" {
		t.Errorf("latencies from due time (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(wantCall, res.callLatencies); diff != "" {
		t.Errorf("latencies from call start (-want,+got):\n%s", diff)
	}
	// 30 pods from 0 to the last call's start at 116ms, plus its 1ms slot.
	if want := n / (float64(n-1)*perCall.Seconds() + slot.Seconds()); math.Abs(res.sentRate-want) > 1e-6 {
		t.Errorf("sent rate %.1f pods/s; want %.1f", res.sentRate, want)
	}
	if want := time.Duration(n-1) * (perCall - slot); res.sendLag != want {
		t.Errorf("last call %v late; want %v", res.sendLag, want)
	}
	if !res.fellBehind() {
		t.Errorf("sent at %.0f pods/s against --rate 1000: want it reported as behind", res.sentRate)
	}
}

// Without --rate, latency runs from the call start as before; on time
// under --rate, within the pacer's tick, the bench is not behind.
func TestMeasureWithoutBacklog(t *testing.T) {
	start := time.Unix(1000, 0).UnixNano()
	ms := int64(time.Millisecond)
	closed := &runner{t: newTracker()}
	closed.t.pods = []podRecord{
		{phase: phaseMeasured, submitted: start + 5*ms, boundAt: start + 8*ms},
		{phase: phaseMeasured, submitted: start + 5*ms, boundAt: start + 6*ms},
		{phase: phaseInit, submitted: start, boundAt: start + 100*ms}, // not measured
	}
	res := runResult{}
	closed.measure(&res, time.Unix(0, start))
	if diff := cmp.Diff([]time.Duration{time.Millisecond, 3 * time.Millisecond}, res.latencies); diff != "" {
		t.Errorf("closed-loop latencies (-want,+got):\n%s", diff)
	}
	if len(res.callLatencies) != 0 || res.sentRate != 0 || res.fellBehind() {
		t.Errorf("closed loop: call latencies %v, sent rate %v, behind %v; want none", res.callLatencies, res.sentRate, res.fellBehind())
	}

	// 100 pods at 1000/s, each sent up to a 10ms tick after its due time.
	paced := &runner{t: newTracker()}
	for i := range int64(100) {
		due := start + i*ms
		sent := start + (i/10+1)*10*ms
		paced.t.pods = append(paced.t.pods, podRecord{phase: phaseMeasured, due: due, submitted: sent, boundAt: sent + 2*ms})
	}
	res = runResult{rate: 1000}
	paced.measure(&res, time.Unix(0, start))
	if res.fellBehind() {
		t.Errorf("sent at %.0f pods/s, last %v late, within a tick: not behind", res.sentRate, res.sendLag)
	}
	if got, want := res.latencies[len(res.latencies)-1], 12*time.Millisecond; got != want {
		t.Errorf("max latency from due time %v; want %v (tick wait and call)", got, want)
	}
	if got, want := res.callLatencies[len(res.callLatencies)-1], 2*time.Millisecond; got != want {
		t.Errorf("max latency from call start %v; want %v", got, want)
	}
}

func TestRateMustBeFinite(t *testing.T) {
	for _, rate := range []float64{-1, math.NaN(), math.Inf(1)} {
		c := Config{Rate: rate, Batch: 1, Concurrency: 1, Replicas: 1, TraceWindow: 1}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "--rate") {
			t.Errorf("rate %v: Validate = %v, want a --rate error", rate, err)
		}
	}
}
