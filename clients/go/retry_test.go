package berth

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-io/berth/clients/go/berthtest"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// A retry whose wait would pass the caller's deadline is not made: the
// caller gets the server's own status and message, not DeadlineExceeded.
func TestRetryStopsBeforeTheDeadline(t *testing.T) {
	srv := berthtest.Start(t)
	srv.SetUnaryFault(func(method string, _ int) error {
		if method == upsertNodeMethod {
			return status.Error(codes.Unavailable, "upsert node: storage unavailable")
		}
		return nil
	})
	// The first wait alone (at least half an hour) is past the deadline.
	c, err := Dial(t.Context(), srv.Addr, WithBackoff(time.Hour, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, _, err = c.UpsertNode(ctx, &berthv1.Node{Name: "n1", Allocatable: map[string]int64{"cpu": 1000}})
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || st.Message() != "upsert node: storage unavailable" {
		t.Errorf("UpsertNode: %v; want the server's Unavailable: upsert node: storage unavailable", err)
	}
	if calls := srv.Calls(upsertNodeMethod); calls != 1 {
		t.Errorf("server saw %d calls, want 1", calls)
	}
}

// A try cut short by the caller's deadline after an earlier refusal
// reports the refusal.
func TestRetryCutByTheDeadlineReportsTheServersAnswer(t *testing.T) {
	refused := status.Error(codes.Unavailable, "submit pod: storage unavailable")
	calls := 0
	invoker := func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
		calls++
		if calls == 1 {
			return refused
		}
		<-ctx.Done() // the server takes longer than the caller waits
		return status.FromContextError(ctx.Err()).Err()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	err := retryUnary(5, backoff{})(ctx, "/m", nil, nil, nil, invoker)
	if err != refused {
		t.Errorf("got %v, want the server's answer %v", err, refused)
	}
	if calls != 2 {
		t.Errorf("%d tries, want 2", calls)
	}
}

// Without an earlier answer, the deadline is what the caller sees.
func TestRetryFirstTryCutByTheDeadline(t *testing.T) {
	invoker := func(ctx context.Context, _ string, _, _ any, _ *grpc.ClientConn, _ ...grpc.CallOption) error {
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if err := retryUnary(5, backoff{})(ctx, "/m", nil, nil, nil, invoker); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("got %v, want DeadlineExceeded", err)
	}
}

// TestNoRetryIsOneAttempt: a caller that retries by itself sees its own
// first attempt's answer, never one from a hidden retry.
func TestNoRetryIsOneAttempt(t *testing.T) {
	calls := 0
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		calls++
		return status.Error(codes.Unavailable, "down")
	}
	intercept := retryUnary(5, backoff{})
	if err := intercept(context.Background(), "/m", nil, nil, nil, invoker, NoRetry()); status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want the first attempt's Unavailable", err)
	}
	if calls != 1 {
		t.Fatalf("%d attempts with NoRetry, want 1", calls)
	}
	calls = 0
	intercept(context.Background(), "/m", nil, nil, nil, invoker)
	if calls != 5 {
		t.Fatalf("%d attempts without it, want 5", calls)
	}
}
