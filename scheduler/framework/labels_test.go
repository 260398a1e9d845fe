package framework

import "testing"

func TestLabelSelectorMatches(t *testing.T) {
	labels := map[string]string{"app": "web", "tier": "front"}
	tests := []struct {
		name string
		sel  *LabelSelector
		want bool
	}{
		{name: "nil matches nothing", sel: nil, want: false},
		{name: "empty matches everything", sel: &LabelSelector{}, want: true},
		{name: "match labels equal", sel: &LabelSelector{MatchLabels: map[string]string{"app": "web"}}, want: true},
		{name: "match labels other value", sel: &LabelSelector{MatchLabels: map[string]string{"app": "db"}}, want: false},
		{name: "match labels missing key", sel: &LabelSelector{MatchLabels: map[string]string{"zone": "a"}}, want: false},
		{name: "in", sel: exprSelector("app", LabelSelectorOpIn, "db", "web"), want: true},
		{name: "in, value absent", sel: exprSelector("app", LabelSelectorOpIn, "db"), want: false},
		{name: "in, key absent", sel: exprSelector("zone", LabelSelectorOpIn, "a"), want: false},
		{name: "in with no values never matches", sel: exprSelector("app", LabelSelectorOpIn), want: false},
		{name: "notin, other value", sel: exprSelector("app", LabelSelectorOpNotIn, "db"), want: true},
		{name: "notin, value listed", sel: exprSelector("app", LabelSelectorOpNotIn, "web"), want: false},
		{name: "notin matches a missing key", sel: exprSelector("zone", LabelSelectorOpNotIn, "a"), want: true},
		{name: "exists", sel: exprSelector("tier", LabelSelectorOpExists), want: true},
		{name: "exists, missing", sel: exprSelector("zone", LabelSelectorOpExists), want: false},
		{name: "does not exist", sel: exprSelector("zone", LabelSelectorOpDoesNotExist), want: true},
		{name: "does not exist, present", sel: exprSelector("app", LabelSelectorOpDoesNotExist), want: false},
		{name: "unknown operator matches nothing", sel: exprSelector("app", "Gt", "1"), want: false},
		{name: "parts are ANDed", sel: &LabelSelector{
			MatchLabels:      map[string]string{"app": "web"},
			MatchExpressions: []LabelSelectorRequirement{{Key: "tier", Operator: LabelSelectorOpIn, Values: []string{"back"}}},
		}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.sel.Matches(labels); got != tt.want {
				t.Errorf("Matches = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLabelSelectorEmptyAndValidate(t *testing.T) {
	if (*LabelSelector)(nil).Empty() || !(&LabelSelector{}).Empty() || exprSelector("a", LabelSelectorOpExists).Empty() {
		t.Error("Empty: want only a non-nil selector without parts to be empty")
	}
	tests := []struct {
		name    string
		sel     *LabelSelector
		wantErr bool
	}{
		{name: "nil", sel: nil},
		{name: "valid", sel: exprSelector("a", LabelSelectorOpIn, "x")},
		{name: "in without values", sel: exprSelector("a", LabelSelectorOpIn), wantErr: true},
		{name: "notin without values", sel: exprSelector("a", LabelSelectorOpNotIn), wantErr: true},
		{name: "exists with values", sel: exprSelector("a", LabelSelectorOpExists, "x"), wantErr: true},
		{name: "does not exist with values", sel: exprSelector("a", LabelSelectorOpDoesNotExist, "x"), wantErr: true},
		{name: "unknown operator", sel: exprSelector("a", "Gt", "1"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.sel.Validate(); (err != nil) != tt.wantErr {
				t.Errorf("Validate = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func exprSelector(key string, op LabelSelectorOperator, values ...string) *LabelSelector {
	return &LabelSelector{MatchExpressions: []LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}
