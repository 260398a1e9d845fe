package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func TestQuantitiesInFiles(t *testing.T) {
	main := func(req map[string]int64) []*berthv1.Container {
		return []*berthv1.Container{{Name: "main", Requests: req}}
	}
	tests := []struct {
		name, file, in string
		want           []*berthv1.Pod
		wantErr        []string // all must appear in the error
	}{
		{
			name: "yaml", file: "pods.yaml",
			in: "name: a\ncontainers: [{name: main, requests: {cpu: 500m, memory: 256Mi}}]\noverhead: {cpu: \"1.5\", memory: 2e3}\n",
			want: []*berthv1.Pod{{Name: "a", Containers: main(map[string]int64{"cpu": 500, "memory": 256 << 20}),
				Overhead: map[string]int64{"cpu": 1500, "memory": 2000}}},
		},
		{
			name: "json with wire integers", file: "pods.json",
			in:   `{"name": "a", "containers": [{"name": "main", "requests": {"cpu": "2e3", "memory": 1024, "example.com/gpu": "2"}}]}`,
			want: []*berthv1.Pod{{Name: "a", Containers: main(map[string]int64{"cpu": 2_000_000, "memory": 1024, "example.com/gpu": 2})}},
		},
		{
			name: "init containers and snake case", file: "pods.yaml",
			in:   "name: a\ninit_containers: [{name: i, requests: {memory: 1Gi}}]\n",
			want: []*berthv1.Pod{{Name: "a", InitContainers: []*berthv1.Container{{Name: "i", Requests: map[string]int64{"memory": 1 << 30}}}}},
		},
		{
			name: "yaml error names file, document and field", file: "pods.yaml",
			in:      "name: a\n---\nname: b\ncontainers: [{name: x}, {name: main, requests: {memory: 256MB}}]\n",
			wantErr: []string{"pods.yaml: document 2, item 1: containers[1].requests.memory: invalid quantity \"256MB\""},
		},
		{
			name: "json error names the item of a list", file: "pods.json",
			in:      `[{"name": "a"}, {"name": "b", "overhead": {"cpu": "-1"}}]`,
			wantErr: []string{"pods.json: document 1, item 2: overhead.cpu: invalid quantity \"-1\"", "negative"},
		},
		{
			name: "no internal JSON positions", file: "pods.yaml",
			in:      "name: a\ncontainers: [{name: main, requests: {cpu: true}}, {nme: x}]\n",
			wantErr: []string{"pods.yaml: document 1, item 1: containers[0].requests.cpu: true is not an amount"},
		},
		{
			name: "unknown field", file: "pods.yaml",
			in:      "name: a\ncontainers: [{nme: x}]\n",
			wantErr: []string{"pods.yaml: document 1, item 1: proto: unknown field \"nme\""},
		},
		{
			name: "a fractional number is not guessed at", file: "pods.yaml",
			in:      "name: a\ncontainers: [{name: main, requests: {cpu: 1.5}}]\n",
			wantErr: []string{"containers[0].requests.cpu: number 1.5 is not a whole amount in millicores", `"1.5"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tt.file)
			if err := os.WriteFile(path, []byte(tt.in), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readMessages(path, nil, newPod)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("no error; got %v", got)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q lacks %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("pods (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestNodeFileQuantities(t *testing.T) {
	got, err := decodeMessages([]byte("name: n\nallocatable: {cpu: \"64\", memory: 1.5Gi, pods: \"110\"}\n"), newNode)
	if err != nil {
		t.Fatal(err)
	}
	want := []*berthv1.Node{{Name: "n", Allocatable: map[string]int64{"cpu": 64000, "memory": 3 << 29, "pods": 110}}}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("nodes (-want,+got):\n%s", diff)
	}
}
