package berth

import (
	"context"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// A server that sheds load says when to come back (errdetails.RetryInfo).
// The retry interceptor's backoff sees only the attempt number, so the
// delay travels beside the call: an interceptor outside the retries puts a
// hint in the context, one inside them records the server's delay after
// each attempt, and the backoff waits at least that long.

type retryHintKey struct{}

// retryHint is the delay the server asked for after the last attempt.
type retryHint struct {
	mu    sync.Mutex
	delay time.Duration
}

func (h *retryHint) set(d time.Duration) {
	h.mu.Lock()
	h.delay = d
	h.mu.Unlock()
}

func (h *retryHint) get() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.delay
}

// withRetryHint runs outside the retry interceptor: one hint per call.
func withRetryHint(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(context.WithValue(ctx, retryHintKey{}, &retryHint{}), method, req, reply, cc, opts...)
}

// recordRetryHint runs inside the retry interceptor, once per attempt.
func recordRetryHint(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if h, ok := ctx.Value(retryHintKey{}).(*retryHint); ok {
		h.set(retryDelay(err))
	}
	return err
}

// retryDelay is the RetryInfo delay an error carries, or 0.
func retryDelay(err error) time.Duration {
	if err == nil {
		return 0
	}
	st, ok := status.FromError(err)
	if !ok {
		return 0
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			return max(ri.GetRetryDelay().AsDuration(), 0)
		}
	}
	return 0
}

// retryWait is the wait before retry number attempt: the client's own
// backoff, but never less than what the server asked for.
func retryWait(ctx context.Context, b backoff, attempt uint) time.Duration {
	d := b.delay(attempt)
	if h, ok := ctx.Value(retryHintKey{}).(*retryHint); ok {
		d = max(d, h.get())
	}
	return d
}
