package server

import (
	"errors"
	"fmt"
	"strings"
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

// A uid refused for naming another pod keeps its ErrorInfo; the holder is
// given when the uid index knows it, and left out when the uid is one Berth
// assigned (it names its pod only by a hash).
func TestToStatusUIDTaken(t *testing.T) {
	for _, tt := range []struct {
		holder     string
		wantInMsg  string
		wantHolder bool
	}{
		{holder: "ns/first", wantInMsg: "is already the uid of pod ns/first", wantHolder: true},
		{holder: "", wantInMsg: store.UIDAssignedElsewhere},
	} {
		st := status.Convert(toStatus(&store.UIDTakenError{UID: "u1", Holder: tt.holder}, "pod ns/rival"))
		if st.Code() != codes.AlreadyExists || !strings.Contains(st.Message(), tt.wantInMsg) {
			t.Errorf("holder %q: %v %q, want AlreadyExists saying %q", tt.holder, st.Code(), st.Message(), tt.wantInMsg)
		}
		var info *errdetails.ErrorInfo
		for _, d := range st.Details() {
			if i, ok := d.(*errdetails.ErrorInfo); ok {
				info = i
			}
		}
		holder, hasHolder := info.GetMetadata()["holder"]
		if info.GetReason() != ErrorReasonUIDInUse || info.GetMetadata()["field"] != "pod.uid" || hasHolder != tt.wantHolder || holder != tt.holder {
			t.Errorf("holder %q: ErrorInfo %v, want reason %s, field pod.uid, holder given: %v", tt.holder, info, ErrorReasonUIDInUse, tt.wantHolder)
		}
	}
}
