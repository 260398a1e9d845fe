package berth

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/berth-io/berth/clients/go/berthtest"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

const upsertNodeMethod = "/berth.v1.ClusterService/UpsertNode"

// dialTest connects to srv with no backoff, so retries need no waiting.
func dialTest(t *testing.T, srv *berthtest.Server, opts ...Option) *Client {
	t.Helper()
	c, err := Dial(t.Context(), srv.Addr, append([]Option{WithBackoff(0, 0)}, opts...)...)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestUnaryRetry(t *testing.T) {
	tests := []struct {
		name        string
		maxAttempts uint // 0: default
		failWith    codes.Code
		failures    int // calls that fail before the server recovers
		wantCode    codes.Code
		wantCalls   int
	}{
		{name: "unavailable twice then ok", failWith: codes.Unavailable, failures: 2, wantCode: codes.OK, wantCalls: 3},
		{name: "resource exhausted then ok", failWith: codes.ResourceExhausted, failures: 1, wantCode: codes.OK, wantCalls: 2},
		{name: "default gives up after 5 attempts", failWith: codes.Unavailable, failures: 100, wantCode: codes.Unavailable, wantCalls: 5},
		{name: "max attempts option", maxAttempts: 3, failWith: codes.Unavailable, failures: 100, wantCode: codes.Unavailable, wantCalls: 3},
		{name: "one attempt disables retry", maxAttempts: 1, failWith: codes.Unavailable, failures: 1, wantCode: codes.Unavailable, wantCalls: 1},
		{name: "invalid argument is not retried", failWith: codes.InvalidArgument, failures: 1, wantCode: codes.InvalidArgument, wantCalls: 1},
		{name: "aborted is not retried", failWith: codes.Aborted, failures: 1, wantCode: codes.Aborted, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := berthtest.Start(t)
			srv.SetUnaryFault(func(method string, call int) error {
				if method == upsertNodeMethod && call < tt.failures {
					return status.Error(tt.failWith, "injected")
				}
				return nil
			})
			var opts []Option
			if tt.maxAttempts > 0 {
				opts = append(opts, WithMaxAttempts(tt.maxAttempts))
			}
			c := dialTest(t, srv, opts...)

			node := &berthv1.Node{Name: "n1", Allocatable: map[string]int64{"cpu": 4000}}
			got, _, err := c.UpsertNode(t.Context(), node)
			if code := status.Code(err); code != tt.wantCode {
				t.Fatalf("UpsertNode code = %v (%v), want %v", code, err, tt.wantCode)
			}
			if calls := srv.Calls(upsertNodeMethod); calls != tt.wantCalls {
				t.Errorf("server saw %d calls, want %d", calls, tt.wantCalls)
			}
			if tt.wantCode == codes.OK {
				if diff := cmp.Diff(node, got, protocmp.Transform()); diff != "" {
					t.Errorf("stored node (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

func TestRetriedSubmitIsIdempotent(t *testing.T) {
	srv := berthtest.Start(t)
	const method = "/berth.v1.PodService/SubmitPod"
	// The first call is applied but its response is lost, as when a
	// connection drops after the server commits: the retry must return the
	// pod the first call stored, not fail or store a second one.
	srv.SetResponseFault(func(m string, call int) error {
		if m == method && call == 0 {
			return status.Error(codes.Unavailable, "connection lost")
		}
		return nil
	})
	c := dialTest(t, srv)
	pod := &berthv1.Pod{Namespace: "ns", Name: "p", Containers: []*berthv1.Container{{Name: "main"}}}
	got, rev, err := c.SubmitPod(t.Context(), pod)
	if err != nil {
		t.Fatal(err)
	}
	if calls := srv.Calls(method); calls != 2 {
		t.Errorf("server saw %d SubmitPod calls, want 2", calls)
	}
	stored, err := c.GetPod(t.Context(), "ns", "p")
	if err != nil {
		t.Fatal(err)
	}
	if got.GetUid() == "" || got.GetUid() != stored.GetUid() || rev != 1 {
		t.Errorf("retried submit gave uid %q rev %d; stored uid %q, first write at rev 1", got.GetUid(), rev, stored.GetUid())
	}
}

// The fake refuses a uid another pod has, as the real server does, so a
// caller's handling of UID_IN_USE can be tested against it.
func TestFakeRefusesAUIDInUse(t *testing.T) {
	srv := berthtest.Start(t)
	c := dialTest(t, srv)
	ctr := []*berthv1.Container{{Name: "main"}}
	first, _, err := c.SubmitPod(t.Context(), &berthv1.Pod{Namespace: "ns", Name: "a", Containers: ctr})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.SubmitPod(t.Context(), &berthv1.Pod{Namespace: "other", Name: "b", Uid: first.GetUid(), Containers: ctr})
	st := status.Convert(err)
	if st.Code() != codes.AlreadyExists {
		t.Fatalf("second pod with uid %q: %v, want AlreadyExists", first.GetUid(), err)
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if info.GetReason() != "UID_IN_USE" || info.GetDomain() != "berth.v1" || info.GetMetadata()["holder"] != "ns/a" {
		t.Errorf("error info %v, want UID_IN_USE in berth.v1 with holder ns/a", info)
	}
	if _, err := c.GetPod(t.Context(), "other", "b"); status.Code(err) != codes.NotFound {
		t.Errorf("the refused pod: GetPod gave %v, want NotFound", err)
	}
	// Resubmitting the first pod with its own uid is still idempotent.
	if _, _, err := c.SubmitPod(t.Context(), &berthv1.Pod{Namespace: "ns", Name: "a", Uid: first.GetUid(), Containers: ctr}); err != nil {
		t.Errorf("resubmission with its own uid: %v", err)
	}
}

func TestAllNodesPages(t *testing.T) {
	srv := berthtest.Start(t)
	srv.SetMaxPageSize(2)
	c := dialTest(t, srv)
	want := []string{"a", "b", "c", "d", "e"}
	for _, name := range []string{"d", "a", "e", "c", "b"} {
		if _, _, err := c.UpsertNode(t.Context(), &berthv1.Node{Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for n, err := range c.AllNodes(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n.GetName())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("AllNodes (-want,+got):\n%s", diff)
	}
	if calls := srv.Calls("/berth.v1.ClusterService/ListNodes"); calls != 3 {
		t.Errorf("ListNodes called %d times, want 3 pages", calls)
	}

	// Breaking out early stops fetching.
	for range c.AllNodes(t.Context()) {
		break
	}
	if calls := srv.Calls("/berth.v1.ClusterService/ListNodes"); calls != 4 {
		t.Errorf("ListNodes called %d times after an early break, want 4", calls)
	}
}

func TestAllPodsFiltersAndReportsErrors(t *testing.T) {
	srv := berthtest.Start(t)
	srv.SetMaxPageSize(1)
	c := dialTest(t, srv)
	ctr := []*berthv1.Container{{Name: "main"}}
	pods := []*berthv1.Pod{
		{Namespace: "a", Name: "p1", Containers: ctr},
		{Namespace: "a", Name: "p2", Containers: ctr, NodeName: "n1"},
		{Namespace: "b", Name: "p3", Containers: ctr, NodeName: "n1"},
		{Namespace: "a", Name: "p4", Containers: ctr},
	}
	results, err := c.SubmitPods(t.Context(), pods)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if err := SubmitPodResultErr(r); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		filter PodFilter
		want   []string
	}{
		{PodFilter{}, []string{"a/p1", "a/p2", "a/p4", "b/p3"}},
		{PodFilter{Namespace: "a"}, []string{"a/p1", "a/p2", "a/p4"}},
		{PodFilter{Phase: berthv1.PodPhase_POD_PHASE_BOUND}, []string{"a/p2", "b/p3"}},
		{PodFilter{Namespace: "a", NodeName: "n1"}, []string{"a/p2"}},
	}
	for _, tt := range tests {
		var got []string
		for p, err := range c.AllPods(t.Context(), tt.filter) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, p.GetNamespace()+"/"+p.GetName())
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("AllPods(%+v) (-want,+got):\n%s", tt.filter, diff)
		}
	}

	srv.SetUnaryFault(func(string, int) error { return status.Error(codes.PermissionDenied, "no") })
	var errs int
	for p, err := range c.AllPods(t.Context(), PodFilter{}) {
		if p != nil || status.Code(err) != codes.PermissionDenied {
			t.Errorf("got (%v, %v), want (nil, PermissionDenied)", p, err)
		}
		errs++
	}
	if errs != 1 {
		t.Errorf("iteration yielded %d times on error, want 1", errs)
	}
}

func TestSubmitPodsReportsPerPodErrors(t *testing.T) {
	srv := berthtest.Start(t)
	c := dialTest(t, srv)
	results, err := c.SubmitPods(t.Context(), []*berthv1.Pod{
		{Namespace: "ns", Name: "ok", Containers: []*berthv1.Container{{Name: "main"}}},
		{Namespace: "ns", Name: "no-containers"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []codes.Code
	for _, r := range results {
		got = append(got, status.Code(SubmitPodResultErr(r)))
	}
	if diff := cmp.Diff([]codes.Code{codes.OK, codes.InvalidArgument}, got); diff != "" {
		t.Errorf("result codes (-want,+got):\n%s", diff)
	}
}

func TestSubmitPodsSplitsLargeBatches(t *testing.T) {
	srv := berthtest.Start(t)
	c := dialTest(t, srv)
	pods := make([]*berthv1.Pod, MaxSubmitBatch+5)
	for i := range pods {
		pods[i] = &berthv1.Pod{Namespace: "ns", Name: "p" + strconv.Itoa(i), Containers: []*berthv1.Container{{Name: "main"}}}
	}
	results, err := c.SubmitPods(t.Context(), pods)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(pods) {
		t.Fatalf("got %d results for %d pods", len(results), len(pods))
	}
	for i, r := range results {
		if r.GetPod().GetName() != pods[i].GetName() {
			t.Fatalf("result %d is for %q, want %q", i, r.GetPod().GetName(), pods[i].GetName())
		}
	}
	if calls := srv.Calls("/berth.v1.PodService/SubmitPods"); calls != 2 {
		t.Errorf("SubmitPods called %d times, want 2", calls)
	}
}

func TestDialRejectsCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := Dial(ctx, "127.0.0.1:1"); !errors.Is(err, context.Canceled) {
		t.Errorf("Dial with cancelled ctx: %v, want context.Canceled", err)
	}
}

// A call shed with a RetryInfo is retried no sooner than the server asked,
// even with the client's own backoff at zero.
func TestRetryHonoursRetryInfo(t *testing.T) {
	const asked = 300 * time.Millisecond
	srv := berthtest.Start(t)
	srv.SetUnaryFault(func(method string, call int) error {
		if method != upsertNodeMethod || call > 0 {
			return nil
		}
		st, err := status.New(codes.ResourceExhausted, "overloaded").
			WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(asked)})
		if err != nil {
			return err
		}
		return st.Err()
	})
	c := dialTest(t, srv)
	start := time.Now()
	if _, _, err := c.UpsertNode(t.Context(), &berthv1.Node{Name: "n1", Allocatable: map[string]int64{"cpu": 1000}}); err != nil {
		t.Fatalf("UpsertNode: %v", err)
	}
	// A lower bound only: a timer never fires early, so this cannot flake.
	if waited := time.Since(start); waited < asked {
		t.Errorf("retried after %v, before the %v the server asked for", waited, asked)
	}
	if calls := srv.Calls(upsertNodeMethod); calls != 2 {
		t.Errorf("server saw %d calls, want 2", calls)
	}
}

func TestRetryWaitTakesTheLonger(t *testing.T) {
	b := backoff{base: 100 * time.Millisecond, max: time.Second}
	shed := func(d time.Duration) error {
		st, err := status.New(codes.ResourceExhausted, "overloaded").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)})
		if err != nil {
			t.Fatal(err)
		}
		return st.Err()
	}
	if got := retryWait(shed(10*time.Second), b.delay(1)); got != 10*time.Second {
		t.Errorf("server asked 10s, own backoff <= 100ms: waited %v", got)
	}
	if got := retryWait(status.Error(codes.Unavailable, "down"), b.delay(1)); got < 50*time.Millisecond || got > 100*time.Millisecond {
		t.Errorf("no hint: waited %v, want the own backoff in [50ms, 100ms]", got)
	}
	if got := retryWait(status.Error(codes.Unavailable, "down"), backoff{}.delay(1)); got != 0 {
		t.Errorf("no hint, no backoff: waited %v", got)
	}
}
