package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func TestExplainTable(t *testing.T) {
	ex := &berthv1.ExplainResponse{
		ChosenNodeName: "b",
		TiedNodeNames:  []string{"b"},
		Nodes: []*berthv1.NodeExplanation{
			{NodeName: "a", Code: "Unschedulable", Plugin: "NodeResourcesFit", Reasons: []string{"Insufficient cpu"}},
			{NodeName: "b", Feasible: true, TotalScore: 390, Scores: []*berthv1.PluginScore{
				{Plugin: "TaintToleration", Score: 100, WeightedScore: 300},
				{Plugin: "NodeResourcesFit", Score: 90, WeightedScore: 90},
			}},
		},
	}
	var out strings.Builder
	if err := explainTable(&out, ex); err != nil {
		t.Fatal(err)
	}
	want := `NODE   RESULT                               NodeResourcesFit   TaintToleration   TOTAL
a      NodeResourcesFit: Insufficient cpu   -                  -                 -
b      fits (chosen)                        90                 100               390

Chosen: b
Scores are normalized (0-100) before weights; TOTAL is weighted.
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("table (-want,+got):\n%s", diff)
	}

	out.Reset()
	none := &berthv1.ExplainResponse{
		Message:    "0/1 nodes are available: 1 Insufficient cpu.",
		Preemption: &berthv1.PreemptionPlan{NodeName: "a", Victims: []*berthv1.PodReference{{Namespace: "ns", Name: "low"}}},
	}
	if err := explainTable(&out, none); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"No node fits: 0/1 nodes are available: 1 Insufficient cpu.", "Preemption would nominate a, evicting ns/low"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("output lacks %q:\n%s", line, out.String())
		}
	}
}
