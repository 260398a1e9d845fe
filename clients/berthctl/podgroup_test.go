package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/replica"
	"github.com/berth-io/berth/store"
)

func TestPodGroupFromFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    *berthv1.PodGroup
		wantErr bool
	}{
		{"defaults", []string{"g"}, &berthv1.PodGroup{Namespace: "ns", Name: "g", MinMember: 1}, false},
		{"everything", []string{"g", "--min-member", "4", "--schedule-timeout", "90s"},
			&berthv1.PodGroup{Namespace: "ns", Name: "g", MinMember: 4, ScheduleTimeout: durationpb.New(90 * time.Second)}, false},
		{"zero members", []string{"g", "--min-member", "0"}, nil, true},
		{"negative timeout", []string{"g", "--schedule-timeout", "-1s"}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var f podGroupSpecFlags
			pos := parseInto(t, f.register, tc.args...)
			got, err := f.build("ns", pos[0])
			if (err != nil) != tc.wantErr {
				t.Fatalf("build: %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// The podgroup commands against a real server: the fake one knows no
// groups.
func TestRunPodGroupCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	etcd, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Close)
	srv, err := replica.Start(ctx, replica.Config{Listen: "127.0.0.1:0", MetricsListen: "-", EtcdEndpoints: etcd.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop() })
	berthctl := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }}
		code := c.run(ctx, append([]string{"--addr", srv.Addr()}, args...))
		return code, out.String(), errOut.String()
	}
	must := func(args ...string) string {
		t.Helper()
		code, out, errOut := berthctl(args...)
		if code != exitOK {
			t.Fatalf("berthctl %s: exit %d\nstderr: %s", strings.Join(args, " "), code, errOut)
		}
		return out
	}

	out := must("podgroup", "apply", "train", "-n", "ml", "--min-member", "3")
	if !strings.HasPrefix(out, "podgroup/ml/train applied (revision ") {
		t.Errorf("apply printed %q", out)
	}
	must("podgroup", "apply", "eval", "-n", "ml", "--schedule-timeout", "5s")
	out = must("podgroup", "list")
	want := "" +
		"NAMESPACE   NAME    MIN MEMBER   SCHEDULE TIMEOUT\n" +
		"ml          eval    1            5s\n" +
		"ml          train   3            1m0s\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("podgroup list (-want,+got):\n%s", diff)
	}
	out = must("-o", "json", "podgroup", "get", "train", "-n", "ml")
	var resp berthv1.GetPodGroupResponse
	if err := protojson.Unmarshal([]byte(out), &resp); err != nil || resp.GetPodGroup().GetMinMember() != 3 {
		t.Fatalf("podgroup get -o json printed %q (%v)", out, err)
	}
	must("podgroup", "delete", "eval", "-n", "ml")
	code, _, errOut := berthctl("podgroup", "get", "eval", "-n", "ml")
	if code != exitError || !strings.Contains(errOut, "NotFound") {
		t.Errorf("get after delete: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = berthctl("podgroup", "apply", "Bad_Name")
	if code != exitError || !strings.Contains(errOut, "pod_group.name") {
		t.Errorf("bad name: exit %d, stderr %q", code, errOut)
	}
}
