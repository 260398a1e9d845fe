package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/berth-io/berth/clients/go/berthtest"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// invoke runs the CLI against srv, with --addr set through BERTH_ADDR.
func invoke(t *testing.T, srv *berthtest.Server, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	c := &cli{stdin: strings.NewReader(""), stdout: &out, stderr: &errOut, getenv: func(k string) string {
		if k == "BERTH_ADDR" {
			return srv.Addr
		}
		return ""
	}}
	code = c.run(t.Context(), args)
	return code, out.String(), errOut.String()
}

// mustInvoke runs the CLI and fails the test unless it exits 0.
func mustInvoke(t *testing.T, srv *berthtest.Server, args ...string) string {
	t.Helper()
	code, out, errOut := invoke(t, srv, args...)
	if code != exitOK {
		t.Fatalf("berthctl %s: exit %d\nstderr: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

func TestRunNodeCommands(t *testing.T) {
	srv := berthtest.Start(t)
	out := mustInvoke(t, srv, "node", "add", "n1", "--cpu", "4", "--memory", "8Gi", "--taint", "gpu=yes:NoSchedule")
	if want := "node/n1 upserted (revision 1)\n"; out != want {
		t.Errorf("node add printed %q, want %q", out, want)
	}
	mustInvoke(t, srv, "node", "add", "-f", "testdata/nodes.yaml")

	out = mustInvoke(t, srv, "node", "list", "--limit", "3")
	want := "" +
		"NAME   CPU   MEMORY   PODS   TAINTS   STATUS\n" +
		"n1     4     8Gi      110    1        Schedulable\n" +
		"n2     0     0        0      0        Cordoned\n" +
		"n3     2     0        0      0        Schedulable\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("node list (-want,+got):\n%s", diff)
	}

	// Global flags work before and after the command name.
	out = mustInvoke(t, srv, "-o", "json", "node", "get", "n3")
	resp := decodeOne(t, out, func() *berthv1.GetNodeResponse { return new(berthv1.GetNodeResponse) })
	if resp.GetNode().GetAllocatable()["cpu"] != 2000 || resp.GetUsage() == nil {
		t.Errorf("node get -o json = %v, want n3 with cpu 2000 and a usage", resp)
	}
	mustInvoke(t, srv, "pod", "submit", "p", "--node", "n3", "--cpu", "500m")
	out = mustInvoke(t, srv, "node", "get", "n3", "--timeout", "5s")
	if !hasRow(out, "cpu", "2", "500m", "25%") || !hasRow(out, "pods", "0", "1", "-") {
		t.Errorf("node get does not show cpu 500m of 2 and 1 pod of 0:\n%s", out)
	}

	out = mustInvoke(t, srv, "node", "delete", "n4")
	if want := "node/n4 deleted (revision 7)\n"; out != want {
		t.Errorf("node delete printed %q, want %q", out, want)
	}
	out = mustInvoke(t, srv, "node", "list", "-o", "yaml")
	back, err := decodeMessages([]byte(out), newNode)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range back {
		names = append(names, n.GetName())
	}
	if diff := cmp.Diff([]string{"n1", "n2", "n3"}, names); diff != "" {
		t.Errorf("nodes after delete (-want,+got):\n%s", diff)
	}
}

func TestRunEntryPointAndStdin(t *testing.T) {
	srv := berthtest.Start(t)
	var out, errOut bytes.Buffer
	c := &cli{stdin: strings.NewReader("name: from-stdin\n"), stdout: &out, stderr: &errOut, getenv: func(string) string { return "" }}
	if code := c.run(t.Context(), []string{"node", "add", "-f", "-", "--addr", srv.Addr}); code != exitOK {
		t.Fatalf("node add -f -: exit %d, stderr %q", code, errOut.String())
	}
	out.Reset()
	if code := run(t.Context(), []string{"--addr", srv.Addr, "node", "list", "-o", "json"}, &out, &errOut); code != exitOK {
		t.Fatalf("run: exit %d, stderr %q", code, errOut.String())
	}
	nodes, err := decodeMessages(out.Bytes(), newNode)
	if err != nil || len(nodes) != 1 || nodes[0].GetName() != "from-stdin" {
		t.Errorf("node list after add from stdin = %v, %v", nodes, err)
	}
}

func TestRunPodCommands(t *testing.T) {
	srv := berthtest.Start(t)
	out := mustInvoke(t, srv, "pod", "submit", "web", "-n", "team-a", "--cpu", "500m", "--memory", "1Gi", "--priority", "5")
	if want := "pod/team-a/web submitted (uid uid-1, revision 1)\n"; out != want {
		t.Errorf("pod submit printed %q, want %q", out, want)
	}
	out = mustInvoke(t, srv, "pod", "submit", "-f", "testdata/pods.jsonl")
	want := "" +
		"pod/a/p1 submitted (uid uid-2, revision 2)\n" +
		"pod/a/p2 submitted (uid uid-3, revision 3)\n"
	if out != want {
		t.Errorf("pod submit -f printed %q, want %q", out, want)
	}
	if err := srv.Bind("a", "p2", "n1"); err != nil {
		t.Fatal(err)
	}

	out = mustInvoke(t, srv, "pod", "list")
	wantTable := "" +
		"NAMESPACE   NAME   PHASE     NODE     PRIORITY   CPU    MEMORY\n" +
		"a           p1     Pending   <none>   0          0      0\n" +
		"a           p2     Bound     n1       0          0      0\n" +
		"team-a      web    Pending   <none>   5          500m   1Gi\n"
	if diff := cmp.Diff(wantTable, out); diff != "" {
		t.Errorf("pod list (-want,+got):\n%s", diff)
	}

	out = mustInvoke(t, srv, "pod", "list", "--phase", "bound", "-o", "json")
	pods, err := decodeMessages([]byte(out), newPod)
	if err != nil {
		t.Fatalf("pod list -o json: %v\n%s", err, out)
	}
	if len(pods) != 1 || pods[0].GetName() != "p2" || pods[0].GetNodeName() != "n1" {
		t.Errorf("pod list --phase bound = %v, want a/p2 on n1", pods)
	}

	out = mustInvoke(t, srv, "pod", "get", "web", "-n", "team-a", "-o", "json")
	got := decodeOne(t, out, newPod)
	wantPod := &berthv1.Pod{
		Namespace: "team-a", Name: "web", Uid: "uid-1", Priority: 5,
		Containers: []*berthv1.Container{{Name: "main", Requests: map[string]int64{"cpu": 500, "memory": 1 << 30}}},
		Status:     &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_PENDING},
	}
	if diff := cmp.Diff(wantPod, got, protocmp.Transform()); diff != "" {
		t.Errorf("pod get (-want,+got):\n%s", diff)
	}

	mustInvoke(t, srv, "pod", "delete", "web", "--namespace", "team-a")
	if code, _, errOut := invoke(t, srv, "pod", "get", "web", "-n", "team-a"); code != exitError || !strings.Contains(errOut, "error: NotFound:") {
		t.Errorf("pod get after delete: exit %d, stderr %q; want 1 and NotFound", code, errOut)
	}
}

func TestRunSubmitManyReportsEachPod(t *testing.T) {
	srv := berthtest.Start(t)
	mustInvoke(t, srv, "pod", "submit", "web", "-n", "team-a")
	// The file's team-a/web has another spec: AlreadyExists for it alone.
	code, out, errOut := invoke(t, srv, "pod", "submit", "-f", "testdata/pods.json")
	if code != exitError {
		t.Errorf("exit %d, want %d", code, exitError)
	}
	if want := "pod/default/batch submitted (uid uid-2, revision 2)\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	for _, s := range []string{"pod/team-a/web: error: AlreadyExists:", "1 of 2 pods were not submitted"} {
		if !strings.Contains(errOut, s) {
			t.Errorf("stderr %q lacks %q", errOut, s)
		}
	}
}

func TestRunErrors(t *testing.T) {
	srv := berthtest.Start(t)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr []string
	}{
		{
			name:       "field violations are printed",
			args:       []string{"node", "add", "-f", "testdata/nameless.yaml"},
			wantCode:   exitError,
			wantStderr: []string{"error: InvalidArgument: invalid node.name: must not be empty\n  node.name: must not be empty\n"},
		},
		{
			name:       "the failing node of a file is named",
			args:       []string{"node", "add", "-f", "testdata/second-nameless.yaml"},
			wantCode:   exitError,
			wantStderr: []string{`error: node 2 of 2 (""): InvalidArgument: invalid node.name: must not be empty`},
		},
		{name: "unknown command", args: []string{"node", "frob"}, wantCode: exitUsage, wantStderr: []string{`unknown command "node frob"`}},
		{name: "no command", args: nil, wantCode: exitUsage, wantStderr: []string{"usage: berthctl"}},
		{name: "help", args: []string{"help"}, wantCode: exitOK, wantStderr: []string{"node add"}},
		{name: "command help", args: []string{"pod", "submit", "-h"}, wantCode: exitOK, wantStderr: []string{"-toleration"}},
		{name: "missing name", args: []string{"node", "add", "--cpu", "1"}, wantCode: exitUsage, wantStderr: []string{"want NAME"}},
		{name: "bad quantity", args: []string{"node", "add", "n", "--memory", "lots"}, wantCode: exitUsage, wantStderr: []string{`invalid quantity "lots"`}},
		{name: "file and spec flags", args: []string{"node", "add", "-f", "testdata/nodes.yaml", "--cpu", "1"}, wantCode: exitUsage, wantStderr: []string{"--cpu cannot be used with -f"}},
		{name: "unknown flag", args: []string{"pod", "list", "--colour"}, wantCode: exitUsage, wantStderr: []string{"flag provided but not defined"}},
		{name: "bad output format", args: []string{"node", "list", "-o", "xml"}, wantCode: exitUsage, wantStderr: []string{`invalid output format "xml"`}},
		{name: "bad phase", args: []string{"pod", "list", "--phase", "asleep"}, wantCode: exitUsage, wantStderr: []string{`invalid phase "asleep"`}},
		{name: "missing file", args: []string{"pod", "submit", "-f", "testdata/none.yaml"}, wantCode: exitError, wantStderr: []string{"error: open testdata/none.yaml"}},
		{name: "not found", args: []string{"node", "get", "ghost"}, wantCode: exitError, wantStderr: []string{`error: NotFound: node "ghost" not found`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := invoke(t, srv, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.wantCode, errOut)
			}
			for _, s := range tt.wantStderr {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
		})
	}
}

// decodeOne reads the one message -o json or yaml printed, quantities and
// all, as -f would.
func decodeOne[T proto.Message](t *testing.T, out string, newMsg func() T) T {
	t.Helper()
	msgs, err := decodeMessages([]byte(out), newMsg)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("reading back %q: %d messages, %v", out, len(msgs), err)
	}
	return msgs[0]
}

// hasRow reports whether a line of table holds exactly the given cells.
func hasRow(table string, cells ...string) bool {
	for _, line := range strings.Split(table, "\n") {
		if slices.Equal(strings.Fields(line), cells) {
			return true
		}
	}
	return false
}

// lineWriter collects output and reports each write on a channel, so a test
// can wait for output without sleeping.
type lineWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes chan struct{}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	select {
	case w.writes <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestRunWatch(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		want   string
		filter func(string) string // keeps what the test can predict
	}{
		{
			name: "table",
			args: []string{"watch", "--from-revision", "4"},
			want: "" +
				"TYPE     NAMESPACE/NAME                           NODE                     REVISION\n" +
				"BOUND    ns/b                                     n2                       6\n" +
				"UNBOUND  ns/a                                     n1                       7\n",
		},
		{
			name: "json lines",
			args: []string{"watch", "-o", "json", "--from-revision", "4"},
			want: "" +
				`{"type":"BINDING_EVENT_TYPE_BOUND","namespace":"ns","name":"b","uid":"u2","nodeName":"n2","revision":"6"}` + "\n" +
				`{"type":"BINDING_EVENT_TYPE_UNBOUND","namespace":"ns","name":"a","uid":"u1","nodeName":"n1","revision":"7"}` + "\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := berthtest.Start(t)
			srv.AddEvents(
				&berthv1.BindingEvent{Type: berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND, Namespace: "ns", Name: "a", Uid: "u1", NodeName: "n1", Revision: 3},
				&berthv1.BindingEvent{Type: berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND, Namespace: "ns", Name: "b", Uid: "u2", NodeName: "n2", Revision: 6},
				&berthv1.BindingEvent{Type: berthv1.BindingEventType_BINDING_EVENT_TYPE_UNBOUND, Namespace: "ns", Name: "a", Uid: "u1", NodeName: "n1", Revision: 7},
			)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			out := &lineWriter{writes: make(chan struct{}, 1)}
			var errOut bytes.Buffer
			// Only BERTH_ADDR: the other BERTH_* variables (TLS files, token)
			// must stay unset.
			c := &cli{stdout: out, stderr: &errOut, getenv: func(k string) string {
				if k == "BERTH_ADDR" {
					return srv.Addr
				}
				return ""
			}}
			done := make(chan int)
			go func() { done <- c.run(ctx, tt.args) }()

			// Interrupt once the expected output is there, as Ctrl-C would.
			for out.String() != tt.want {
				select {
				case <-out.writes:
				case code := <-done:
					t.Fatalf("watch ended early with exit %d; stdout %q; stderr %q", code, out.String(), errOut.String())
				}
			}
			cancel()
			if code := <-done; code != exitOK {
				t.Errorf("interrupted watch exit %d, want 0; stderr %q", code, errOut.String())
			}
		})
	}
}

func TestRunWatchCompacted(t *testing.T) {
	srv := berthtest.Start(t)
	srv.Compact(100)
	code, _, errOut := invoke(t, srv, "watch", "--from-revision", "5")
	if code != exitError || !strings.Contains(errOut, "oldest available revision is 100") || !strings.Contains(errOut, "--from-revision 0") {
		t.Errorf("exit %d, stderr %q; want 1 with the oldest revision and the way out", code, errOut)
	}
}
