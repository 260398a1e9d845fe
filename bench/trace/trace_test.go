package trace

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const testTraceDir = "testdata"

func TestParseTraceNodes(t *testing.T) {
	tests := []struct {
		name    string
		csv     string
		want    []Node
		wantErr string
	}{
		{
			name: "columns by name, empty model and gpu",
			csv:  "model,gpu,memory_mib,cpu_milli,sn\nT4,2,1024,16000,n1\n,,2048,8000,n2\n",
			want: []Node{
				{Name: "n1", CPUMilli: 16000, MemoryMiB: 1024, GPUs: 2, Model: "T4"},
				{Name: "n2", CPUMilli: 8000, MemoryMiB: 2048},
			},
		},
		{name: "missing column", csv: "sn,cpu_milli,memory_mib,gpu\nn1,1,1,0\n", wantErr: `lacks column "model"`},
		{name: "bad number", csv: "sn,cpu_milli,memory_mib,gpu,model\nn1,lots,1,0,\n", wantErr: "line 2: cpu_milli"},
		{name: "negative", csv: "sn,cpu_milli,memory_mib,gpu,model\nn1,1,-1,0,\n", wantErr: "memory_mib"},
		{name: "empty required", csv: "sn,cpu_milli,memory_mib,gpu,model\nn1,,1,0,\n", wantErr: "cpu_milli is empty"},
		{name: "empty name", csv: "sn,cpu_milli,memory_mib,gpu,model\n,1,1,0,\n", wantErr: "sn is empty"},
		{name: "short row", csv: "sn,cpu_milli,memory_mib,gpu,model\nn1,1,1\n", wantErr: "wrong number of fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseNodes(strings.NewReader(tt.csv))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("nodes (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestLoadTraceTestdata(t *testing.T) {
	tr, err := Load(testTraceDir, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantNodes := []Node{
		{Name: "node-a", CPUMilli: 32000, MemoryMiB: 131072},
		{Name: "node-b", CPUMilli: 64000, MemoryMiB: 262144, GPUs: 2, Model: "T4"},
		{Name: "node-c", CPUMilli: 96000, MemoryMiB: 393216, GPUs: 8, Model: "G2"},
	}
	if diff := cmp.Diff(wantNodes, tr.Nodes); diff != "" {
		t.Errorf("nodes (-want,+got):\n%s", diff)
	}
	wantPods := []Pod{
		{Name: "pod-0", CPUMilli: 4000, MemoryMiB: 8192, Created: 10, Deleted: 100, HasDeletion: true},
		{Name: "pod-1", CPUMilli: 8000, MemoryMiB: 16384, GPUs: 1, GPUMilli: 500, Created: 5, Deleted: 50, HasDeletion: true},
		{Name: "pod-2", CPUMilli: 2000, MemoryMiB: 4096, GPUs: 2, GPUMilli: 1000, Created: 50, Deleted: 60, HasDeletion: true},
		{Name: "pod-3", CPUMilli: 200000, MemoryMiB: 4096, Created: 20, Deleted: 30, HasDeletion: true},
		{Name: "pod-4", CPUMilli: 1000, MemoryMiB: 1024, Created: 70, Deleted: 70, HasDeletion: true},
		{Name: "pod-5", CPUMilli: 1000, MemoryMiB: 1024, GPUs: 1, GPUMilli: 1000, Created: 80},
	}
	if diff := cmp.Diff(wantPods, tr.Pods); diff != "" {
		t.Errorf("pods (-want,+got):\n%s", diff)
	}
	// Trace order: a deletion precedes a creation of the same second
	// (pod-1's room is free for pod-2); a zero-lifetime pod is deleted
	// after its creation; a pod without deletion time goes last.
	wantEvents := []string{
		"5 create pod-1", "10 create pod-0", "20 create pod-3", "30 delete pod-3",
		"50 delete pod-1", "50 create pod-2", "60 delete pod-2",
		"70 create pod-4", "70 delete pod-4", "80 create pod-5", "100 delete pod-0", "101 delete pod-5",
	}
	if diff := cmp.Diff(wantEvents, eventStrings(tr)); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}

func eventStrings(tr *Trace) []string {
	var out []string
	for _, e := range tr.Events {
		out = append(out, strings.Join([]string{strconv.FormatInt(e.Time, 10), e.Kind.String(), tr.Pods[e.Pod].Name}, " "))
	}
	return out
}

func TestTraceEventsTiesAreDeterministic(t *testing.T) {
	pods := []Pod{
		{Name: "b", Created: 1, Deleted: 3, HasDeletion: true},
		{Name: "a", Created: 1, Deleted: 3, HasDeletion: true},
		{Name: "c", Created: 3, Deleted: 4, HasDeletion: true},
	}
	tr := &Trace{Pods: pods, Events: replayOrder(pods)}
	want := []string{"1 create b", "1 create a", "3 delete b", "3 delete a", "3 create c", "4 delete c"}
	if diff := cmp.Diff(want, eventStrings(tr)); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}

func TestLoadTraceLimits(t *testing.T) {
	tr, err := Load(testTraceDir, 2, 3)
	if err != nil {
		t.Fatal(err)
	}
	var nodes, pods []string
	for _, n := range tr.Nodes {
		nodes = append(nodes, n.Name)
	}
	for _, p := range tr.Pods {
		pods = append(pods, p.Name)
	}
	// The first nodes of the list; the first pods by creation time.
	if diff := cmp.Diff([]string{"node-a", "node-b"}, nodes); diff != "" {
		t.Errorf("nodes (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"pod-1", "pod-0", "pod-3"}, pods); diff != "" {
		t.Errorf("pods (-want,+got):\n%s", diff)
	}
	if len(tr.Events) != 6 {
		t.Errorf("%d events, want 6", len(tr.Events))
	}
}

func TestFindTraceDir(t *testing.T) {
	root := t.TempDir()
	trace := filepath.Join(root, DirFromRoot)
	deep := filepath.Join(root, "main", "cmd", "berth")
	for _, d := range []string{trace, deep} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got := FindDir(deep); got != "" {
		t.Errorf("found %q before the pod list exists", got)
	}
	if err := os.WriteFile(filepath.Join(trace, PodFile), []byte("name\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := FindDir(deep); got != trace {
		t.Errorf("FindDir = %q, want %q", got, trace)
	}
}
