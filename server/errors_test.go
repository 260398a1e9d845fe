package server

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-io/berth/store"
)

// A full etcd is ResourceExhausted with a reason clients can act on, not
// Unavailable, which they retry at once and forever (issue 12).
func TestToStatusNoSpace(t *testing.T) {
	// As the store wraps it: the commit path, then the operation.
	err := fmt.Errorf("create pod: %w", fmt.Errorf("%w: txn", store.ErrNoSpace))
	st := status.Convert(toStatus(err, "pod default/p"))
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("code %v (%s), want ResourceExhausted", st.Code(), st.Message())
	}
	var reason string
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			reason = info.Reason
		}
	}
	if reason != ErrorReasonNoSpace {
		t.Errorf("ErrorInfo reason %q, want %q (message %q)", reason, ErrorReasonNoSpace, st.Message())
	}

	unavailable := fmt.Errorf("%w: txn: %w", store.ErrUnavailable, errors.New("no leader"))
	if got := status.Code(toStatus(unavailable, "pod default/p")); got != codes.Unavailable {
		t.Errorf("unavailable store: code %v, want Unavailable", got)
	}
}
