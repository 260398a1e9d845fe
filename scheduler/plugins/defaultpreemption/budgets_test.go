package defaultpreemption

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
)

// Long for its table: one case per behaviour, kept together so they
// read side by side.
func TestFilterPodsWithPDBViolation(t *testing.T) {
	sel := func(reqs ...framework.LabelSelectorRequirement) *framework.LabelSelector {
		return &framework.LabelSelector{MatchExpressions: reqs}
	}
	req := func(key string, op framework.LabelSelectorOperator, values ...string) framework.LabelSelectorRequirement {
		return framework.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	inNS := func(p *framework.Pod, ns string) *framework.Pod { p.Namespace = ns; return p }
	tests := []struct {
		name          string
		pods          []*framework.Pod
		budgets       []framework.DisruptionBudget
		wantViolating []string
		wantFine      []string
	}{
		{
			name:          "each covered pod uses one allowed disruption, in order",
			pods:          []*framework.Pod{labeled(pod("a", 0, 0), "app", "db"), labeled(pod("b", 0, 0), "app", "db"), labeled(pod("c", 0, 0), "app", "db")},
			budgets:       []framework.DisruptionBudget{appBudget("db", 1)},
			wantViolating: []string{"b", "c"},
			wantFine:      []string{"a"},
		},
		{
			name:     "other namespace is not covered",
			pods:     []*framework.Pod{inNS(labeled(pod("a", 0, 0), "app", "db"), "prod")},
			budgets:  []framework.DisruptionBudget{appBudget("db", 0)},
			wantFine: []string{"a"},
		},
		{
			name: "pods without labels match nothing, even DoesNotExist",
			pods: []*framework.Pod{pod("bare", 0, 0), labeled(pod("tagged", 0, 0), "tier", "x")},
			budgets: []framework.DisruptionBudget{{Namespace: "default",
				Selector: sel(req("app", framework.LabelSelectorOpDoesNotExist))}},
			wantViolating: []string{"tagged"},
			wantFine:      []string{"bare"},
		},
		{
			name: "nil, empty and invalid selectors match nothing",
			pods: []*framework.Pod{labeled(pod("a", 0, 0), "app", "db")},
			budgets: []framework.DisruptionBudget{
				{Namespace: "default"},
				{Namespace: "default", Selector: &framework.LabelSelector{}},
				{Namespace: "default", Selector: sel(req("app", framework.LabelSelectorOpIn))},
				{Namespace: "default", Selector: sel(req("app", framework.LabelSelectorOpExists, "db"))},
				{Namespace: "default", Selector: sel(req("app", "Like", "db"))},
			},
			wantFine: []string{"a"},
		},
		{
			name: "expressions: In, NotIn, Exists",
			pods: []*framework.Pod{
				labeled(pod("in", 0, 0), "app", "db", "env", "prod"),
				labeled(pod("notin", 0, 0), "app", "db", "env", "dev"),
				labeled(pod("missing", 0, 0), "env", "prod"),
			},
			budgets: []framework.DisruptionBudget{{Namespace: "default", Selector: sel(
				req("env", framework.LabelSelectorOpIn, "prod", "stage"),
				req("tier", framework.LabelSelectorOpNotIn, "cache"),
				req("app", framework.LabelSelectorOpExists))}},
			wantViolating: []string{"in"},
			wantFine:      []string{"notin", "missing"},
		},
		{
			name: "any exhausted budget makes a pod violating; every covering budget is charged",
			pods: []*framework.Pod{labeled(pod("a", 0, 0), "app", "db", "team", "x"), labeled(pod("b", 0, 0), "team", "x")},
			budgets: []framework.DisruptionBudget{appBudget("db", 5), {Namespace: "default", DisruptionsAllowed: 1,
				Selector: &framework.LabelSelector{MatchLabels: map[string]string{"team": "x"}}}},
			wantViolating: []string{"b"},
			wantFine:      []string{"a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			infos := make([]*framework.PodInfo, len(tt.pods))
			for i, p := range tt.pods {
				infos[i] = framework.NewPodInfo(p)
			}
			violating, fine := filterPodsWithPDBViolation(infos, compileBudgets(tt.budgets))
			if diff := cmp.Diff(tt.wantViolating, infoNames(violating)); diff != "" {
				t.Errorf("violating (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantFine, infoNames(fine)); diff != "" {
				t.Errorf("non-violating (-want,+got):\n%s", diff)
			}
		})
	}
}
