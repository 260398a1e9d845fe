package main

import (
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"google.golang.org/protobuf/testing/protocmp"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// parseInto registers flags with register, parses args like the CLI does
// and returns the positional arguments.
func parseInto(t *testing.T, register func(*pflag.FlagSet), args ...string) []string {
	t.Helper()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return fs.Args()
}

func TestNodeFromFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    *berthv1.Node
		wantErr bool
	}{
		{
			name: "everything",
			args: []string{"n1", "--cpu", "4", "--memory", "8Gi", "--pods", "64", "--ephemeral-storage", "100Gi",
				"--label", "zone=a", "--label", "disk=ssd", "--taint", "dedicated=gpu:NoSchedule", "--taint", "spot:PreferNoSchedule",
				"--resource", "example.com/gpu=2", "--unschedulable"},
			want: &berthv1.Node{
				Name: "n1",
				Allocatable: map[string]int64{
					"cpu": 4000, "memory": 8 << 30, "pods": 64, "ephemeral-storage": 100 << 30, "example.com/gpu": 2,
				},
				Labels: map[string]string{"zone": "a", "disk": "ssd"},
				Taints: []*berthv1.Taint{
					{Key: "dedicated", Value: "gpu", Effect: berthv1.TaintEffect_TAINT_EFFECT_NO_SCHEDULE},
					{Key: "spot", Effect: berthv1.TaintEffect_TAINT_EFFECT_PREFER_NO_SCHEDULE},
				},
				Unschedulable: true,
			},
		},
		{
			name: "flags before the name, millicores, default pods, proto effect name",
			args: []string{"--cpu", "3500m", "--taint", "k=v:TAINT_EFFECT_NO_EXECUTE", "n2"},
			want: &berthv1.Node{
				Name:        "n2",
				Allocatable: map[string]int64{"cpu": 3500, "pods": 110},
				Taints:      []*berthv1.Taint{{Key: "k", Value: "v", Effect: berthv1.TaintEffect_TAINT_EFFECT_NO_EXECUTE}},
			},
		},
		{name: "bad cpu", args: []string{"n", "--cpu", "four"}, wantErr: true},
		{name: "taint without effect", args: []string{"n", "--taint", "k=v"}, wantErr: true},
		{name: "taint with unknown effect", args: []string{"n", "--taint", "k=v:Sometimes"}, wantErr: true},
		{name: "label without value", args: []string{"n", "--label", "zone"}, wantErr: true},
		{name: "resource without quantity", args: []string{"n", "--resource", "example.com/gpu"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f nodeSpecFlags
			pos := parseInto(t, f.register, tt.args...)
			got, err := f.build(pos[0])
			if (err != nil) != tt.wantErr {
				t.Fatalf("build error = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("node (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestPodFromFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    *berthv1.Pod
		wantErr bool
	}{
		{
			name: "everything",
			args: []string{"web", "--cpu", "500m", "--memory", "1Gi", "--image", "nginx:1.27", "--priority", "100",
				"--label", "app=web", "--node-selector", "zone=a", "--resource", "example.com/gpu=1",
				"--toleration", "dedicated=gpu:NoSchedule", "--toleration", "spot:PreferNoSchedule",
				"--toleration", "maintenance", "--toleration", "team=", "--pod-group", "g1"},
			want: &berthv1.Pod{
				Namespace: "ns", Name: "web", Priority: 100, PodGroup: "g1",
				Labels:       map[string]string{"app": "web"},
				NodeSelector: map[string]string{"zone": "a"},
				Containers: []*berthv1.Container{{
					Name: "main", Image: "nginx:1.27",
					Requests: map[string]int64{"cpu": 500, "memory": 1 << 30, "example.com/gpu": 1},
				}},
				Tolerations: []*berthv1.Toleration{
					{Key: "dedicated", Operator: berthv1.TolerationOperator_TOLERATION_OPERATOR_EQUAL, Value: "gpu", Effect: berthv1.TaintEffect_TAINT_EFFECT_NO_SCHEDULE},
					{Key: "spot", Operator: berthv1.TolerationOperator_TOLERATION_OPERATOR_EXISTS, Effect: berthv1.TaintEffect_TAINT_EFFECT_PREFER_NO_SCHEDULE},
					{Key: "maintenance", Operator: berthv1.TolerationOperator_TOLERATION_OPERATOR_EXISTS},
					{Key: "team", Operator: berthv1.TolerationOperator_TOLERATION_OPERATOR_EQUAL},
				},
			},
		},
		{
			name: "minimal pod declared on a node",
			args: []string{"--node", "n1", "p"},
			want: &berthv1.Pod{Namespace: "ns", Name: "p", NodeName: "n1", Containers: []*berthv1.Container{{Name: "main"}}},
		},
		{name: "bad memory", args: []string{"p", "--memory", "1GB"}, wantErr: true},
		{name: "priority out of range", args: []string{"p", "--priority", "3000000000"}, wantErr: true},
		{name: "toleration with bad effect", args: []string{"p", "--toleration", "k=v:Never"}, wantErr: true},
		{name: "toleration without key", args: []string{"p", "--toleration", "=v"}, wantErr: true},
		{name: "node selector without value", args: []string{"p", "--node-selector", "zone"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f podSpecFlags
			pos := parseInto(t, f.register, tt.args...)
			got, err := f.build("ns", pos[0])
			if (err != nil) != tt.wantErr {
				t.Fatalf("build error = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("pod (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestParseArgsInterspersed(t *testing.T) {
	var verbose bool
	var labels listFlag
	register := func(fs *pflag.FlagSet) {
		fs.BoolVarP(&verbose, "verbose", "v", false, "") // pflag: one letter is a shorthand
		fs.Var(&labels, "label", "")
	}
	pos := parseInto(t, register, "a", "--label", "x=1", "b", "-v", "--label=y=2", "--", "-c", "--label")
	if diff := cmp.Diff([]string{"a", "b", "-c", "--label"}, pos); diff != "" {
		t.Errorf("positional (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(listFlag{"x=1", "y=2"}, labels); diff != "" {
		t.Errorf("labels (-want,+got):\n%s", diff)
	}
	if !verbose {
		t.Error("-v after a positional argument was not parsed")
	}
}

func TestParsePhase(t *testing.T) {
	tests := map[string]berthv1.PodPhase{
		"":                 berthv1.PodPhase_POD_PHASE_UNSPECIFIED,
		"pending":          berthv1.PodPhase_POD_PHASE_PENDING,
		"Bound":            berthv1.PodPhase_POD_PHASE_BOUND,
		"UNSCHEDULABLE":    berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE,
		"running":          berthv1.PodPhase_POD_PHASE_RUNNING,
		"succeeded":        berthv1.PodPhase_POD_PHASE_SUCCEEDED,
		"POD_PHASE_FAILED": berthv1.PodPhase_POD_PHASE_FAILED,
	}
	for in, want := range tests {
		if got, err := parsePhase(in); err != nil || got != want {
			t.Errorf("parsePhase(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := parsePhase("done"); err == nil {
		t.Error("parsePhase(done) succeeded")
	}
}
