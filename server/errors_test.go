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

// A watcher cut off for reading too slowly is told, in a form a client can
// act on, where to resume.
func TestToStatusFellBehind(t *testing.T) {
	err := &store.FellBehindError{Resume: 42, Why: "more than 8 events behind"}
	st := status.Convert(toStatus(err, "watch bindings"))
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("code %v (%s), want ResourceExhausted", st.Code(), st.Message())
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if info.GetReason() != ErrorReasonFellBehind || info.GetMetadata()["resume_revision"] != "42" {
		t.Errorf("ErrorInfo %v, want reason %s with resume_revision 42", info, ErrorReasonFellBehind)
	}
}

// Only a revision followed by a later one is known to have been sent
// whole: a cut-off between one transaction's events resumes before it.
func TestSentRevisionsResumeBeforeASplitRevision(t *testing.T) {
	s := newSentRevisions(10)
	for _, rev := range []int64{11, 11, 12, 12} {
		s.starting(rev)
		s.done(rev)
	}
	if got := s.resume(12); got != 11 {
		t.Errorf("after revisions 11,11,12,12: resume %d, want 11 (12 may be split)", got)
	}
	s.starting(13) // stuck: never done
	if got := s.resume(12); got != 12 {
		t.Errorf("with a send of 13 stuck: resume %d, want 12", got)
	}
	s.synced(20)
	if got := s.resume(25); got != 20 {
		t.Errorf("after a progress marker at 20: resume %d, want 20", got)
	}
	if got := s.resume(5); got != 5 {
		t.Errorf("resume %d past the store's 5", got)
	}
}
