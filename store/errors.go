package store

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors. Callers test them with errors.Is; the store wraps them
// with detail.
var (
	ErrNotFound        = errors.New("store: not found")
	ErrAlreadyExists   = errors.New("store: already exists")
	ErrConflict        = errors.New("store: conflict")
	ErrCompacted       = errors.New("store: revision compacted")
	ErrFutureRevision  = errors.New("store: revision is in the future")
	ErrUnavailable     = errors.New("store: unavailable")
	ErrClosed          = errors.New("store: closed")
	ErrInvalidArgument = errors.New("store: invalid argument")
	// ErrNoSpace is etcd refusing writes because its database reached its
	// quota (the NOSPACE alarm). Reads still work. Retrying at once is
	// pointless: writes resume once compaction and defragmentation have
	// freed space and the alarm is disarmed (Embedded does this itself).
	ErrNoSpace = errors.New("store: etcd database space exceeded")
)

// CompactedError reports that the requested revision is older than the
// compaction point, so the events after it can no longer be replayed: the
// caller must re-list. errors.Is(err, ErrCompacted) holds.
type CompactedError struct {
	// CompactRevision is the oldest revision still readable.
	CompactRevision int64
}

func (e *CompactedError) Error() string {
	return fmt.Sprintf("store: revision compacted (oldest available revision %d)", e.CompactRevision)
}

// Is makes errors.Is(err, ErrCompacted) true.
func (e *CompactedError) Is(target error) bool { return target == ErrCompacted }

// isNoSpace tells whether err is etcd's "database space exceeded", as the
// in-process client (rpctypes.EtcdError) or a gRPC status reports it.
func isNoSpace(err error) bool {
	return errors.Is(err, rpctypes.ErrNoSpace) || errors.Is(err, rpctypes.ErrGRPCNoSpace) ||
		rpctypes.ErrorDesc(err) == rpctypes.ErrorDesc(rpctypes.ErrGRPCNoSpace)
}

// isRequestTooLarge tells whether etcd refused a request over its size limit
// (--max-request-bytes). Retrying the same request cannot succeed: it is the
// caller's object that is too large, so it is an invalid argument.
func isRequestTooLarge(err error) bool {
	return errors.Is(err, rpctypes.ErrRequestTooLarge) || errors.Is(err, rpctypes.ErrGRPCRequestTooLarge) ||
		rpctypes.ErrorDesc(err) == rpctypes.ErrorDesc(rpctypes.ErrGRPCRequestTooLarge)
}

// isUnavailable tells whether err means etcd could not answer in time: it is
// down, unreachable, leaderless, overloaded, or our deadline passed. A full
// database is not among them, though etcd reports it as ResourceExhausted
// too: waiting does not cure it (see ErrNoSpace).
func isUnavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if isNoSpace(err) {
		return false
	}
	var code codes.Code
	var etcdErr rpctypes.EtcdError
	if errors.As(err, &etcdErr) {
		code = etcdErr.Code()
	} else if st, ok := status.FromError(err); ok {
		code = st.Code()
	} else {
		return false
	}
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted:
		return true
	}
	return false
}

// callError turns an etcd client error into a store error. parent is the
// caller's own context: its cancellation is reported as such, while expiry of
// the store's own (earlier) deadline means etcd did not answer in time.
func (s *Store) callError(parent context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if s.isClosed() {
		return fmt.Errorf("%w: %s", ErrClosed, op)
	}
	if perr := parent.Err(); perr != nil && errors.Is(perr, context.Canceled) {
		return fmt.Errorf("store: %s: %w", op, perr)
	}
	if errors.Is(err, rpctypes.ErrCompacted) {
		return fmt.Errorf("%w: %s", ErrCompacted, op)
	}
	if errors.Is(err, rpctypes.ErrFutureRev) {
		return fmt.Errorf("%w: %s", ErrFutureRevision, op)
	}
	if isNoSpace(err) {
		return fmt.Errorf("%w: %s", ErrNoSpace, op)
	}
	if isRequestTooLarge(err) {
		return fmt.Errorf("%w: %s: etcd request too large", ErrInvalidArgument, op)
	}
	if isUnavailable(err) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
	}
	return fmt.Errorf("store: %s: %w", op, err)
}

// StaleViewError is the conflict of a binding whose view is too old: another
// writer charged the node after the view the placement was checked against,
// or the view predates the claim of the pod's shard. Retrying is pointless
// until the view has reached Revision. errors.Is(err, ErrConflict) holds.
type StaleViewError struct {
	Revision int64
}

func (e *StaleViewError) Error() string {
	return fmt.Sprintf("store: conflict: the placement's view is older than revision %d (the node was charged or the shard claimed then)", e.Revision)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *StaleViewError) Is(target error) bool { return target == ErrConflict }
