package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

const (
	bound   = berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND
	unbound = berthv1.BindingEventType_BINDING_EVENT_TYPE_UNBOUND
	evict   = berthv1.BindingEventType_BINDING_EVENT_TYPE_EVICT
)

var cmpProto = protocmp.Transform()

func event(typ berthv1.BindingEventType, ns, name string, rev int64) *berthv1.BindingEvent {
	return &berthv1.BindingEvent{Type: typ, Namespace: ns, Name: name, Uid: "uid-" + name, NodeName: "n1", Revision: rev}
}

func TestTrackerHandle(t *testing.T) {
	type counts struct {
		InitBound, Bound, Evicts int
		Rev                      int64
	}
	tests := []struct {
		name       string
		events     []*berthv1.BindingEvent
		want       counts
		wantVictim []evictRequest
		wantErr    string
	}{
		{
			name:   "bindings counted per phase",
			events: []*berthv1.BindingEvent{event(bound, initNamespace, "v", 5), event(bound, measuredNamespace, "m", 7)},
			want:   counts{InitBound: 1, Bound: 1, Rev: 7},
		},
		{
			name: "foreign pods only move the revision",
			events: []*berthv1.BindingEvent{
				event(bound, measuredNamespace, "other", 9),
				event(bound, "elsewhere", "m", 10), // same name, other namespace
				event(evict, measuredNamespace, "other", 11),
			},
			want: counts{Rev: 11},
		},
		{
			name:       "evict asks for the victim's deletion with its uid",
			events:     []*berthv1.BindingEvent{event(bound, initNamespace, "v", 5), event(evict, initNamespace, "v", 6), event(unbound, initNamespace, "v", 8)},
			want:       counts{InitBound: 1, Evicts: 1, Rev: 8},
			wantVictim: []evictRequest{{namespace: initNamespace, name: "v", uid: "uid-v"}},
		},
		{
			name:    "bound twice",
			events:  []*berthv1.BindingEvent{event(bound, measuredNamespace, "m", 5), event(bound, measuredNamespace, "m", 6)},
			wantErr: "bound twice",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker()
			tr.add(&berthv1.Pod{Namespace: initNamespace, Name: "v"}, phaseInit)
			tr.add(&berthv1.Pod{Namespace: measuredNamespace, Name: "m"}, phaseMeasured)
			var victims []evictRequest
			var err error
			for _, ev := range tt.events {
				var v *evictRequest
				if v, err = tr.handle(ev, 1); err != nil {
					break
				}
				if v != nil {
					victims = append(victims, *v)
				}
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c := tr.counts()
			got := counts{InitBound: c.bound[phaseInit], Bound: c.bound[phaseMeasured], Evicts: c.evicts, Rev: c.rev}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("counts (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantVictim, victims, cmp.AllowUnexported(evictRequest{})); diff != "" {
				t.Errorf("victims (-want,+got):\n%s", diff)
			}
		})
	}
}

// fakeStream replays responses, then ends like a closed stream.
type fakeStream struct {
	resps []*berthv1.WatchBindingsResponse
}

func (f *fakeStream) Recv() (*berthv1.WatchBindingsResponse, error) {
	if len(f.resps) == 0 {
		return nil, io.EOF
	}
	r := f.resps[0]
	f.resps = f.resps[1:]
	return r, nil
}

// fakePods records DeletePod calls; other methods are not used.
type fakePods struct {
	berthv1.PodServiceClient
	mu      sync.Mutex
	deletes []*berthv1.DeletePodRequest
	err     error
	called  chan struct{}
}

func (f *fakePods) DeletePod(_ context.Context, req *berthv1.DeletePodRequest, _ ...grpc.CallOption) (*berthv1.DeletePodResponse, error) {
	f.mu.Lock()
	f.deletes = append(f.deletes, req)
	f.mu.Unlock()
	f.called <- struct{}{}
	return &berthv1.DeletePodResponse{}, f.err
}

// TestEvictorDeletesVictims drives the orchestrator's side of preemption:
// an EVICT on the watch becomes a DeletePod of exactly that pod.
func TestEvictorDeletesVictims(t *testing.T) {
	tests := []struct {
		name        string
		deleteErr   error
		wantDeletes int
		wantErrs    int
	}{
		{name: "deleted", wantDeletes: 1},
		{name: "already gone counts as deleted", deleteErr: status.Error(codes.NotFound, "gone"), wantDeletes: 1},
		{name: "failure is reported", deleteErr: status.Error(codes.Unavailable, "down"), wantErrs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker()
			tr.add(&berthv1.Pod{Namespace: initNamespace, Name: "v"}, phaseInit)
			tr.add(&berthv1.Pod{Namespace: initNamespace, Name: "w"}, phaseInit)
			pods := &fakePods{called: make(chan struct{}, 4), err: tt.deleteErr}
			ctx, cancel := context.WithCancel(context.Background())
			ev := tr.evict(ctx, pods, 2)
			tr.watch(ctx, &fakeStream{resps: []*berthv1.WatchBindingsResponse{
				{Event: event(bound, initNamespace, "v", 2)},
				{Event: event(bound, initNamespace, "w", 3)},
				{ProgressRevision: 4},
				{Event: event(evict, initNamespace, "v", 5)},
			}})
			select {
			case <-pods.called:
			case <-time.After(10 * time.Second):
				t.Fatal("no DeletePod call for the victim")
			}
			cancel()
			errs, first := ev.wait()
			want := []*berthv1.DeletePodRequest{{Namespace: initNamespace, Name: "v", Uid: "uid-v"}}
			pods.mu.Lock()
			if diff := cmp.Diff(want, pods.deletes, cmpProto); diff != "" {
				t.Errorf("DeletePod calls (-want,+got):\n%s", diff)
			}
			pods.mu.Unlock()
			c := tr.counts()
			if c.deletes != tt.wantDeletes || errs != tt.wantErrs || c.evicts != 1 {
				t.Errorf("deletes %d, errors %d (%v), evicts %d; want %d, %d, 1", c.deletes, errs, first, c.evicts, tt.wantDeletes, tt.wantErrs)
			}
			if !errors.Is(c.err, io.EOF) {
				t.Errorf("watch error %v, want the stream's EOF", c.err)
			}
		})
	}
}

func TestTrackerWaitFor(t *testing.T) {
	tr := newTracker()
	tr.add(&berthv1.Pod{Namespace: measuredNamespace, Name: "m"}, phaseMeasured)
	tr.touch()
	done := make(chan error, 1)
	go func() {
		done <- tr.waitFor(context.Background(), 0, func(c trackerCounts) bool { return c.bound[phaseMeasured] == 1 })
	}()
	if _, err := tr.handle(event(bound, measuredNamespace, "m", 3), 1); err != nil {
		t.Fatal(err)
	}
	tr.wake()
	if err := <-done; err != nil {
		t.Fatalf("waitFor: %v", err)
	}

	// A failed watch ends the wait with its error.
	tr.fail(errors.New("boom"))
	err := tr.waitFor(context.Background(), 0, func(trackerCounts) bool { return false })
	if err == nil || err.Error() != "boom" {
		t.Errorf("waitFor after failure: %v, want boom", err)
	}

	// No progress for the stall period ends it with errStalled.
	idle := newTracker()
	idle.lastProgress = time.Now().Add(-time.Minute).UnixNano()
	if err := idle.waitFor(context.Background(), time.Second, func(trackerCounts) bool { return false }); !errors.Is(err, errStalled) {
		t.Errorf("idle waitFor: %v, want errStalled", err)
	}
}

func TestTrackerSlotWaiter(t *testing.T) {
	tr := newTracker()
	slot := tr.add(&berthv1.Pod{Namespace: measuredNamespace, Name: "m"}, phaseMeasured)
	tr.startSubmit([]int32{slot})
	rec, changed, _ := tr.slot(slot)
	if rec.acked || rec.submitted == 0 {
		t.Fatalf("record %+v: want submitted, not acked", rec)
	}
	err := tr.acked([]int32{slot}, []*berthv1.SubmitPodResult{{Pod: &berthv1.Pod{Uid: "u1"}}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("ack did not wake the slot's waiter")
	}
	if rec := tr.record(slot); !rec.acked || rec.uid != "u1" {
		t.Errorf("record %+v: want acked with uid u1", rec)
	}
	err = tr.acked([]int32{slot}, []*berthv1.SubmitPodResult{{Code: int32(codes.InvalidArgument), Message: "bad"}})
	if err == nil || !strings.Contains(err.Error(), "bad") {
		t.Errorf("rejected submit: %v, want its message", err)
	}
}

// refusingPods answers SubmitPods from a script: each call takes the next
// answer; an answer is a whole-call error or one code per pod.
type refusingPods struct {
	berthv1.PodServiceClient
	answers []func(n int) (*berthv1.SubmitPodsResponse, error)
	calls   [][]string // pod names of each call
}

func (f *refusingPods) SubmitPods(_ context.Context, req *berthv1.SubmitPodsRequest, _ ...grpc.CallOption) (*berthv1.SubmitPodsResponse, error) {
	var names []string
	for _, p := range req.GetPods() {
		names = append(names, p.GetName())
	}
	f.calls = append(f.calls, names)
	answer := f.answers[0]
	f.answers = f.answers[1:]
	return answer(len(names))
}

func codesAnswer(cs ...codes.Code) func(int) (*berthv1.SubmitPodsResponse, error) {
	return func(int) (*berthv1.SubmitPodsResponse, error) {
		resp := &berthv1.SubmitPodsResponse{}
		for i, c := range cs {
			resp.Results = append(resp.Results, &berthv1.SubmitPodResult{Code: int32(c), Pod: &berthv1.Pod{Uid: fmt.Sprint("u", i)}})
		}
		return resp, nil
	}
}

// With retries, a batch refused whole or a pod refused for a transient
// reason is sent again, counted once and stamped once; without, the
// refusal fails the run as before.
func TestSubmitterRetriesTransientRefusals(t *testing.T) {
	tr := newTracker()
	tr.slim = true
	var slots []int32
	for _, name := range []string{"a", "b", "c"} {
		slots = append(slots, tr.add(&berthv1.Pod{Namespace: measuredNamespace, Name: name}, phaseMeasured))
	}
	pods := &refusingPods{answers: []func(int) (*berthv1.SubmitPodsResponse, error){
		func(int) (*berthv1.SubmitPodsResponse, error) { return nil, status.Error(codes.Unavailable, "shed") },
		codesAnswer(codes.OK, codes.Unavailable, codes.OK),
		codesAnswer(codes.OK),
	}}
	sub := newSubmitter(context.Background(), pods, tr, 1)
	sub.retries = 3
	sub.submit(slots)
	if err := sub.wait(); err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"a", "b", "c"}, {"a", "b", "c"}, {"b"}}
	if diff := cmp.Diff(want, pods.calls); diff != "" {
		t.Errorf("calls (-want,+got):\n%s", diff)
	}
	c := tr.counts()
	if c.sent[phaseMeasured] != 3 || c.retried != 1 || tr.ackedCount(phaseMeasured) != 3 {
		t.Errorf("sent %d, retried %d, acked %d; want 3, 1, 3", c.sent[phaseMeasured], c.retried, tr.ackedCount(phaseMeasured))
	}
	for _, s := range slots {
		if rec := tr.record(s); rec.pod != nil || rec.name == "" {
			t.Errorf("slim record %+v: want the body dropped, the name kept", rec)
		}
	}

	// Without retries the transient refusal fails the batch.
	strict := newTracker()
	slot := strict.add(&berthv1.Pod{Namespace: measuredNamespace, Name: "d"}, phaseMeasured)
	sub = newSubmitter(context.Background(), &refusingPods{answers: []func(int) (*berthv1.SubmitPodsResponse, error){
		codesAnswer(codes.Unavailable),
	}}, strict, 1)
	sub.submit([]int32{slot})
	if err := sub.wait(); err == nil || !strings.Contains(err.Error(), "Unavailable") {
		t.Errorf("no retries: %v, want the Unavailable refusal", err)
	}
}

// The split at the ack adds up to the call's latency, except that a BOUND
// event that beat the answer to the call leaves nothing after the ack.
func TestAckSplit(t *testing.T) {
	for _, tc := range []struct {
		name                string
		rec                 podRecord
		wantCall, wantAfter time.Duration
	}{
		{"not acked", podRecord{submitted: 100, boundAt: 900}, 0, 0},
		{"ack first", podRecord{submitted: 100, ackedAt: 400, boundAt: 900}, 300, 500},
		{"bound first", podRecord{submitted: 100, ackedAt: 950, boundAt: 900}, 850, 0},
	} {
		call, after := tc.rec.ackSplit()
		if call != tc.wantCall || after != tc.wantAfter {
			t.Errorf("%s: split (%s, %s), want (%s, %s)", tc.name, call, after, tc.wantCall, tc.wantAfter)
		}
	}
}
