package main

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/berth-io/berth/clients/go/berthtest"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func TestRunPodReports(t *testing.T) {
	srv := berthtest.Start(t)
	mustInvoke(t, srv, "pod", "submit", "web", "-n", "team-a") // uid-1
	if err := srv.Bind("team-a", "web", "n1"); err != nil {
		t.Fatal(err)
	}

	// Without --uid the pod's current uid is used.
	out := mustInvoke(t, srv, "pod", "confirm", "web", "-n", "team-a", "--node", "n1")
	if want := "pod/team-a/web running on n1 (revision 3)\n"; out != want {
		t.Errorf("pod confirm printed %q, want %q", out, want)
	}
	out = mustInvoke(t, srv, "pod", "reject", "web", "-n", "team-a", "--uid", "uid-1", "--reason", "image pull failed", "-o", "json")
	var rej berthv1.RejectBindingResponse
	if err := protojson.Unmarshal([]byte(out), &rej); err != nil {
		t.Fatalf("pod reject -o json printed %q: %v", out, err)
	}
	if st := rej.GetPod().GetStatus(); st.GetPhase() != berthv1.PodPhase_POD_PHASE_PENDING || len(st.GetRejections()) != 1 ||
		st.GetRejections()[0].GetNodeName() != "n1" || st.GetRejections()[0].GetReason() != "image pull failed" {
		t.Errorf("pod reject = %v, want pending with n1's rejection", st)
	}
	out = mustInvoke(t, srv, "pod", "complete", "web", "-n", "team-a", "--phase", "failed", "--message", "gave up")
	if want := "pod/team-a/web failed (revision 5)\n"; out != want {
		t.Errorf("pod complete printed %q, want %q", out, want)
	}

	for _, tc := range []struct {
		args       []string
		code       int
		wantStderr string
	}{
		{[]string{"pod", "confirm", "web", "-n", "team-a", "--uid", "stale"}, exitError, "error: FailedPrecondition:"},
		{[]string{"pod", "confirm", "nope"}, exitError, "error: NotFound:"},
		{[]string{"pod", "complete", "web", "-n", "team-a"}, exitUsage, "--phase must be succeeded or failed"},
		{[]string{"pod", "complete", "web", "-n", "team-a", "--phase", "running"}, exitUsage, "--phase must be succeeded or failed"},
		{[]string{"pod", "reject"}, exitUsage, "want NAME"},
	} {
		code, _, errOut := invoke(t, srv, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.wantStderr) {
			t.Errorf("berthctl %s: exit %d, stderr %q; want %d and %q", strings.Join(tc.args, " "), code, errOut, tc.code, tc.wantStderr)
		}
	}
}

func TestRunNodeRenew(t *testing.T) {
	srv := berthtest.Start(t)
	code, _, errOut := invoke(t, srv, "node", "renew", "nope")
	if code != exitError || !strings.Contains(errOut, "error: NotFound:") {
		t.Errorf("renew of a missing node: exit %d, stderr %q", code, errOut)
	}
	mustInvoke(t, srv, "node", "add", "plain")
	code, _, errOut = invoke(t, srv, "node", "renew", "plain")
	if code != exitError || !strings.Contains(errOut, "error: FailedPrecondition:") {
		t.Errorf("renew of a node without lease: exit %d, stderr %q", code, errOut)
	}
	mustInvoke(t, srv, "node", "add", "leased", "--lease-ttl", "30s")
	if out := mustInvoke(t, srv, "node", "renew", "leased"); out != "node/leased lease renewed for 30s\n" {
		t.Errorf("node renew printed %q", out)
	}
	if code, _, errOut := invoke(t, srv, "node", "add", "odd", "--lease-ttl", "1500ms"); code != exitUsage || !strings.Contains(errOut, "whole number of seconds") {
		t.Errorf("--lease-ttl 1500ms: exit %d, stderr %q", code, errOut)
	}
}
