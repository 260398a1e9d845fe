package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/replica/replicatest"
)

// What get prints with -o yaml or json, fed back with -f, changes nothing
// on a real server: same uid, same spec, once the pod is bound. Status is
// left out of the comparison, since its times and messages may move.
func TestRoundTripRealServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, _ := replicatest.Start(t)
	berthctl := func(stdin string, args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		c := &cli{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }}
		if code := c.run(ctx, append([]string{"--endpoints", srv.Addr()}, args...)); code != exitOK {
			t.Fatalf("berthctl %s: exit %d\nstderr: %s", strings.Join(args, " "), code, errOut.String())
		}
		return out.String()
	}

	berthctl("", "node", "add", "n1", "--cpu", "64", "--memory", "256Gi", "--resource", "example.com/gpu=8")
	berthctl("name: web\nnamespace: shop\ncontainers:\n- name: main\n  requests: {cpu: 500m, memory: 256Mi}\noverhead: {cpu: \"1.5\"}\n",
		"pod", "submit", "-f", "-")

	// The round trip starts once the pod is bound: a binding between the
	// two gets would show as a change that the round trip did not make.
	deadline := time.Now().Add(30 * time.Second)
	for decodeOne(t, berthctl("", "pod", "get", "web", "-n", "shop", "-o", "json"), newPod).GetNodeName() == "" {
		if time.Now().After(deadline) {
			t.Fatal("pod shop/web was not bound within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}

	ignoreStatus := protocmp.IgnoreFields(&berthv1.Pod{}, "status")
	for _, format := range []string{"yaml", "json"} {
		before := berthctl("", "pod", "get", "web", "-n", "shop", "-o", format)
		if format == "yaml" && (!strings.Contains(before, "cpu: 500m") || !strings.Contains(before, "memory: 256Mi")) {
			t.Errorf("pod get -o yaml does not show the quantities:\n%s", before)
		}
		berthctl(before, "pod", "submit", "-f", "-")
		after := berthctl("", "pod", "get", "web", "-n", "shop", "-o", format)
		if diff := cmp.Diff(decodeOne(t, before, newPod), decodeOne(t, after, newPod), protocmp.Transform(), ignoreStatus); diff != "" {
			t.Errorf("pod get -o %s | pod submit -f - changed the pod (-before,+after):\n%s", format, diff)
		}

		before = berthctl("", "node", "get", "n1", "-o", format)
		if format == "yaml" && !strings.Contains(before, `cpu: "64"`) {
			t.Errorf("node get -o yaml does not show cpu in cores:\n%s", before)
		}
		berthctl(before, "node", "add", "-f", "-")
		after = berthctl("", "node", "get", "n1", "-o", format)
		newResp := func() *berthv1.GetNodeResponse { return new(berthv1.GetNodeResponse) }
		if diff := cmp.Diff(decodeOne(t, before, newResp).GetNode(), decodeOne(t, after, newResp).GetNode(), protocmp.Transform()); diff != "" {
			t.Errorf("node get -o %s | node add -f - changed the node (-before,+after):\n%s", format, diff)
		}
	}
}
