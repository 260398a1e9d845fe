package berth

import (
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
)

// retryDelay is the delay a shedding server asked for in the error's
// RetryInfo, or 0.
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

// retryWait is the wait before the next retry after err: own, the
// client's own backoff, but never less than what the server asked for.
func retryWait(err error, own time.Duration) time.Duration {
	return max(own, retryDelay(err))
}
