package main

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func newNode() *berthv1.Node { return new(berthv1.Node) }
func newPod() *berthv1.Pod   { return new(berthv1.Pod) }

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDecodeNodesYAMLMultiDoc(t *testing.T) {
	got, err := decodeMessages(readTestdata(t, "nodes.yaml"), newNode)
	if err != nil {
		t.Fatal(err)
	}
	want := []*berthv1.Node{
		{
			Name:        "n1",
			Allocatable: map[string]int64{"cpu": 4000, "memory": 8 << 30, "pods": 110},
			Labels:      map[string]string{"zone": "a", "1": "one"},
			Taints:      []*berthv1.Taint{{Key: "dedicated", Value: "gpu", Effect: berthv1.TaintEffect_TAINT_EFFECT_NO_SCHEDULE}},
		},
		{
			Name:          "n2",
			Unschedulable: true,
			Images:        []*berthv1.ContainerImage{{Names: []string{"registry.example/app:v1"}, SizeBytes: 1 << 20}},
		},
		{Name: "n3", Allocatable: map[string]int64{"cpu": 2000}},
		{Name: "n4"},
	}
	if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
		t.Errorf("nodes (-want,+got):\n%s", diff)
	}
}

func TestDecodePodsJSON(t *testing.T) {
	tests := []struct {
		file string
		want []*berthv1.Pod
	}{
		{
			file: "pods.json", // an array, tab-indented, snake_case and lowerCamel mixed
			want: []*berthv1.Pod{
				{
					Namespace: "team-a", Name: "web", Priority: 10,
					Containers: []*berthv1.Container{{Name: "main", Image: "nginx", Requests: map[string]int64{"cpu": 500, "memory": 1 << 30}}},
					Tolerations: []*berthv1.Toleration{{
						Key: "dedicated", Operator: berthv1.TolerationOperator_TOLERATION_OPERATOR_EQUAL,
						Value: "gpu", Effect: berthv1.TaintEffect_TAINT_EFFECT_NO_SCHEDULE,
					}},
				},
				{
					Name: "batch", Containers: []*berthv1.Container{{Name: "main"}},
					NodeSelector:     map[string]string{"zone": "a"},
					PreemptionPolicy: berthv1.PreemptionPolicy_PREEMPTION_POLICY_NEVER,
				},
			},
		},
		{
			file: "pods.jsonl", // one object per line
			want: []*berthv1.Pod{
				{Namespace: "a", Name: "p1", Containers: []*berthv1.Container{{Name: "main"}}},
				{Namespace: "a", Name: "p2", Containers: []*berthv1.Container{{Name: "main"}}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := decodeMessages(readTestdata(t, tt.file), newPod)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("pods (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestDecodeSingleAndInvalid(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []*berthv1.Node
		wantErr bool
	}{
		{name: "single yaml object", in: "name: a\nallocatable: {cpu: 1000}\n", want: []*berthv1.Node{{Name: "a", Allocatable: map[string]int64{"cpu": 1000}}}},
		{name: "single json object", in: `{"name": "a"}`, want: []*berthv1.Node{{Name: "a"}}},
		{name: "short enum names are not proto json", in: "name: a\ntaints: [{key: k, effect: NoSchedule}]\n", wantErr: true},
		{name: "unknown field", in: "name: a\ncpu: 4\n", wantErr: true},
		{name: "quantities", in: "name: a\nallocatable: {memory: 8Gi, cpu: \"1.5\"}\n", want: []*berthv1.Node{{Name: "a", Allocatable: map[string]int64{"cpu": 1500, "memory": 8 << 30}}}},
		{name: "bad quantity", in: "name: a\nallocatable: {memory: 8GB}\n", wantErr: true},
		{name: "empty", in: "---\n", wantErr: true},
		{name: "broken yaml", in: "name: [a\n", wantErr: true},
		{name: "broken json", in: `{"name": `, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeMessages([]byte(tt.in), newNode)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("nodes (-want,+got):\n%s", diff)
			}
		})
	}
}
