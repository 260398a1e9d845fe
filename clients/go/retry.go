package berth

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// retryableCodes are the codes a unary call is tried again on: the server
// (or its storage) could not take the call now, and every Berth write is
// safe to repeat.
var retryableCodes = map[codes.Code]bool{codes.Unavailable: true, codes.ResourceExhausted: true}

// retryUnary tries a unary call up to maxAttempts times, waiting bo's delay
// between tries. It never outlives the caller's deadline: when the next
// wait would reach it, the server's last answer is returned at once; and a
// try cut short by the deadline (or a cancel) after an earlier answer
// returns that answer, so the caller sees why the server refused (say
// "Unavailable: storage unavailable") rather than a bare DeadlineExceeded.
func retryUnary(maxAttempts uint, bo backoff) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		for _, o := range opts {
			if _, ok := o.(noRetry); ok {
				return invoker(ctx, method, req, reply, cc, opts...)
			}
		}
		var answered error // the server's last retryable answer
		waits := bo.sequence()
		for attempt := uint(1); ; attempt++ {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err == nil {
				return nil
			}
			if answered != nil && ctx.Err() != nil {
				return answered
			}
			if !retryableCodes[status.Code(err)] || attempt >= maxAttempts {
				return err
			}
			answered = err
			d := retryWait(err, waits.NextBackOff())
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
				return err
			}
			if !sleep(ctx, d) {
				return err
			}
		}
	}
}

// sleep waits d, or less if ctx ends first (then it reports false).
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// NoRetry makes one call a single attempt, for a caller that retries by
// itself and must know what its own first attempt did (a NotFound after a
// hidden retry could be the answer to a delete that already happened).
func NoRetry() grpc.CallOption { return noRetry{} }

type noRetry struct{ grpc.EmptyCallOption }
