package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func sampleNode() *berthv1.Node {
	return &berthv1.Node{
		Name:        "n1",
		Allocatable: map[string]int64{"cpu": 4000, "memory": 8 << 30, "pods": 110, "example.com/gpu": 2},
		Labels:      map[string]string{"zone": "a", "disk": "ssd"},
		Taints:      []*berthv1.Taint{{Key: "dedicated", Value: "gpu", Effect: berthv1.TaintEffect_TAINT_EFFECT_NO_SCHEDULE}},
	}
}

func samplePod() *berthv1.Pod {
	return &berthv1.Pod{
		Namespace: "team-a", Name: "web", Uid: "uid-1", Priority: 10,
		Labels: map[string]string{"app": "web"},
		Containers: []*berthv1.Container{
			{Name: "main", Image: "nginx", Requests: map[string]int64{"cpu": 500, "memory": 1 << 30}},
			{Name: "sidecar", Requests: map[string]int64{"cpu": 250}},
		},
		InitContainers: []*berthv1.Container{{Name: "init", Requests: map[string]int64{"cpu": 1000}}},
		Overhead:       map[string]int64{"memory": 64 << 20},
		Tolerations: []*berthv1.Toleration{
			{Key: "dedicated", Operator: berthv1.TolerationOperator_TOLERATION_OPERATOR_EQUAL, Value: "gpu", Effect: berthv1.TaintEffect_TAINT_EFFECT_NO_SCHEDULE},
			{Operator: berthv1.TolerationOperator_TOLERATION_OPERATOR_EXISTS},
		},
		Status: &berthv1.PodStatus{
			Phase:   berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE,
			Message: "no node fits",
			Diagnosis: &berthv1.SchedulingDiagnosis{
				NodesEvaluated: 3,
				Reasons: []*berthv1.ReasonCount{
					{Plugin: "NodeResourcesFit", Reason: "Insufficient cpu", NodeCount: 2},
					{Plugin: "TaintToleration", Reason: "node(s) had untolerated taint", NodeCount: 1},
				},
				Time: timestamppb.New(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)),
			},
		},
	}
}

func TestNodeTables(t *testing.T) {
	cordoned := &berthv1.Node{Name: "n2", Allocatable: map[string]int64{"cpu": 1500, "memory": 1000}, Unschedulable: true}
	var buf bytes.Buffer
	if err := nodeTable(&buf, []*berthv1.Node{sampleNode(), cordoned}); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME   CPU     MEMORY   PODS   TAINTS   STATUS\n" +
		"n1     4       8Gi      110    1        Schedulable\n" +
		"n2     1500m   1000     0      0        Cordoned\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("node table (-want,+got):\n%s", diff)
	}

	buf.Reset()
	usage := &berthv1.NodeUsage{Requested: map[string]int64{"cpu": 1000, "memory": 3 << 30}, PodCount: 11}
	if err := nodeDetail(&buf, sampleNode(), usage); err != nil {
		t.Fatal(err)
	}
	want = "" +
		"Name:            n1\n" +
		"Labels:          disk=ssd,zone=a\n" +
		"Taints:          dedicated=gpu:NoSchedule\n" +
		"Unschedulable:   false\n" +
		"Images:          0\n" +
		"Pods:            11\n" +
		"\n" +
		"RESOURCE          ALLOCATABLE   REQUESTED   PERCENT\n" +
		"cpu               4             1           25%\n" +
		"memory            8Gi           3Gi         37%\n" +
		"pods              110           11          10%\n" +
		"example.com/gpu   2             0           0%\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("node detail (-want,+got):\n%s", diff)
	}
}

func TestPodTables(t *testing.T) {
	var buf bytes.Buffer
	bound := &berthv1.Pod{Namespace: "b", Name: "p", NodeName: "n1", Status: &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_BOUND}}
	if err := podTable(&buf, []*berthv1.Pod{samplePod(), bound}); err != nil {
		t.Fatal(err)
	}
	// cpu: max(500+250, init 1000) = 1; memory: 1Gi + 64Mi overhead.
	want := "" +
		"NAMESPACE   NAME   PHASE           NODE     PRIORITY   CPU   MEMORY\n" +
		"team-a      web    Unschedulable   <none>   10         1     1088Mi\n" +
		"b           p      Bound           n1       0          0     0\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("pod table (-want,+got):\n%s", diff)
	}

	buf.Reset()
	if err := podDetail(&buf, samplePod()); err != nil {
		t.Fatal(err)
	}
	want = "" +
		"Namespace:       team-a\n" +
		"Name:            web\n" +
		"UID:             uid-1\n" +
		"Phase:           Unschedulable\n" +
		"Message:         no node fits\n" +
		"Node:            <none>\n" +
		"Priority:        10\n" +
		"Labels:          app=web\n" +
		"Node Selector:   <none>\n" +
		"Tolerations:     dedicated=gpu:NoSchedule, *\n" +
		"Requests:        cpu=1, memory=1088Mi\n" +
		"Containers:      main (nginx), sidecar (<none>)\n" +
		"Diagnosis:       0/3 nodes are available: 2 Insufficient cpu (NodeResourcesFit), 1 node(s) had untolerated taint (TaintToleration).\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("pod detail (-want,+got):\n%s", diff)
	}
}

func TestStructuredOutput(t *testing.T) {
	t.Run("json object", func(t *testing.T) {
		var buf bytes.Buffer
		p := printer{format: formatJSON, w: &buf}
		if err := p.object(&berthv1.Node{Name: "n1", Allocatable: map[string]int64{"memory": 1024, "cpu": 500}, Unschedulable: true}); err != nil {
			t.Fatal(err)
		}
		want := `{
  "name": "n1",
  "allocatable": {
    "cpu": "500m",
    "memory": "1Ki"
  },
  "unschedulable": true
}
`
		if diff := cmp.Diff(want, buf.String()); diff != "" {
			t.Errorf("json (-want,+got):\n%s", diff)
		}
	})
	t.Run("yaml object", func(t *testing.T) {
		var buf bytes.Buffer
		p := printer{format: formatYAML, w: &buf}
		if err := p.object(&berthv1.Node{Name: "n1", Allocatable: map[string]int64{"cpu": 500}, Labels: map[string]string{"version": "1.0"}}); err != nil {
			t.Fatal(err)
		}
		// Strings that YAML would read as numbers or booleans stay quoted;
		// amounts are quantities, as the table shows them.
		want := "name: n1\nallocatable:\n  cpu: 500m\nlabels:\n  version: \"1.0\"\n"
		if diff := cmp.Diff(want, buf.String()); diff != "" {
			t.Errorf("yaml (-want,+got):\n%s", diff)
		}
	})

	// Lists print as one JSON array or YAML sequence that -f reads back.
	for _, format := range []string{formatJSON, formatYAML} {
		t.Run(format+" list round trip", func(t *testing.T) {
			for _, msgs := range [][]*berthv1.Pod{{samplePod(), {Namespace: "x", Name: "y"}}, {}} {
				var buf bytes.Buffer
				if err := list(printer{format: format, w: &buf}, msgs); err != nil {
					t.Fatal(err)
				}
				if len(msgs) == 0 {
					if got := buf.String(); got != "[]\n" {
						t.Errorf("empty list printed %q, want []", got)
					}
					continue
				}
				back, err := decodeMessages(buf.Bytes(), newPod)
				if err != nil {
					t.Fatalf("reading back %s: %v\n%s", format, err, buf.String())
				}
				if diff := cmp.Diff(msgs, back, protocmp.Transform()); diff != "" {
					t.Errorf("round trip (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

func TestNewPrinterRejectsUnknownFormat(t *testing.T) {
	if _, err := newPrinter("xml", nil); err == nil {
		t.Error("newPrinter(xml) succeeded")
	}
}
