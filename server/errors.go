package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-io/berth/store"
)

// ErrorReasonCompacted is the errdetails.ErrorInfo reason of a watch resumed
// from a compacted revision; metadata "compact_revision" holds the oldest
// revision still available.
const ErrorReasonCompacted = "REVISION_COMPACTED"

// ErrorReasonNoSpace is the errdetails.ErrorInfo reason of a write refused
// because etcd's database is full. Retrying at once is pointless; writes
// resume once space is freed (the embedded etcd frees it by itself).
const ErrorReasonNoSpace = "DATABASE_SPACE_EXCEEDED"

// ErrorReasonFellBehind is the errdetails.ErrorInfo reason of a watch cut
// off because its subscriber read too slowly (code ResourceExhausted).
// Metadata "resume_revision" is R: every event up to R was sent, and a new
// WatchBindings from R continues the stream. The events of the one revision
// after R may arrive again (a cut-off can split the events one transaction
// wrote); skip those already seen by pod and type.
const ErrorReasonFellBehind = "WATCH_FELL_BEHIND"

// ErrorReasonUIDInUse is the errdetails.ErrorInfo reason of a pod refused
// because another pod already has its uid; metadata "field" is "pod.uid" and
// "holder" names that pod ("namespace/name"), absent when the uid is one
// Berth assigned to another pod (which pod is not known).
const ErrorReasonUIDInUse = "UID_IN_USE"

// toStatus maps store and context errors to gRPC statuses. Anything not
// recognised is Internal, and its text is kept for the operator's log.
func toStatus(err error, what string) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var compacted *store.CompactedError
	var behind *store.FellBehindError
	var uidTaken *store.UIDTakenError
	switch {
	case errors.As(err, &behind):
		st := status.New(codes.ResourceExhausted, fmt.Sprintf("%s: watch fell behind (%s); resume from revision %d", what, behind.Why, behind.Resume))
		if d, derr := st.WithDetails(&errdetails.ErrorInfo{
			Reason: ErrorReasonFellBehind, Domain: "berth.v1",
			Metadata: map[string]string{"resume_revision": strconv.FormatInt(behind.Resume, 10)},
		}); derr == nil {
			st = d
		}
		return st.Err()
	case errors.As(err, &compacted):
		st := status.New(codes.FailedPrecondition, fmt.Sprintf("%s: revision compacted; oldest available revision is %d: re-list with from_revision 0", what, compacted.CompactRevision))
		if d, derr := st.WithDetails(&errdetails.ErrorInfo{
			Reason: ErrorReasonCompacted, Domain: "berth.v1",
			Metadata: map[string]string{"compact_revision": strconv.FormatInt(compacted.CompactRevision, 10)},
		}); derr == nil {
			st = d
		}
		return st.Err()
	case errors.As(err, &uidTaken):
		msg := fmt.Sprintf("%s: pod.uid %q is already the uid of pod %s", what, uidTaken.UID, uidTaken.Holder)
		meta := map[string]string{"field": "pod.uid", "holder": uidTaken.Holder}
		if uidTaken.Holder == "" {
			msg = fmt.Sprintf("%s: pod.uid %q %s", what, uidTaken.UID, store.UIDAssignedElsewhere)
			delete(meta, "holder") // not known: the uid names its pod by a hash
		}
		st := status.New(codes.AlreadyExists, msg)
		if d, derr := st.WithDetails(&errdetails.ErrorInfo{
			Reason: ErrorReasonUIDInUse, Domain: "berth.v1", Metadata: meta,
		}); derr == nil {
			st = d
		}
		return st.Err()
	case errors.Is(err, store.ErrNotFound):
		return status.Errorf(codes.NotFound, "%s not found", what)
	case errors.Is(err, store.ErrAlreadyExists):
		return status.Errorf(codes.AlreadyExists, "%s already exists with a different spec", what)
	case errors.Is(err, store.ErrConflict):
		return status.Errorf(codes.FailedPrecondition, "%s: %v", what, err)
	case errors.Is(err, store.ErrFutureRevision):
		var v violations
		v.add("from_revision", "%v", err)
		return v.err()
	case errors.Is(err, store.ErrInvalidArgument):
		return status.Errorf(codes.InvalidArgument, "%s: %v", what, err)
	case errors.Is(err, store.ErrNoSpace):
		st := status.New(codes.ResourceExhausted, what+": etcd database space exceeded; writes resume once compaction and defragmentation free space (reads still work)")
		if d, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: ErrorReasonNoSpace, Domain: "berth.v1"}); derr == nil {
			st = d
		}
		return st.Err()
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, store.ErrClosed):
		return status.Errorf(codes.Unavailable, "%s: storage unavailable: %v", what, err)
	case errors.Is(err, context.DeadlineExceeded):
		return status.Errorf(codes.DeadlineExceeded, "%s: %v", what, err)
	case errors.Is(err, context.Canceled):
		return status.Errorf(codes.Canceled, "%s: %v", what, err)
	default:
		return status.Errorf(codes.Internal, "%s: %v", what, err)
	}
}
