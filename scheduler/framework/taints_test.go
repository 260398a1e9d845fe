package framework

import "testing"

func TestToleratesTaint(t *testing.T) {
	taint := Taint{Key: "k", Value: "v", Effect: TaintEffectNoSchedule}
	tests := []struct {
		name string
		tol  Toleration
		want bool
	}{
		{name: "equal key value effect", tol: Toleration{Key: "k", Operator: TolerationOpEqual, Value: "v", Effect: TaintEffectNoSchedule}, want: true},
		{name: "empty operator means Equal", tol: Toleration{Key: "k", Value: "v"}, want: true},
		{name: "empty operator, wrong value", tol: Toleration{Key: "k", Value: "w"}, want: false},
		{name: "exists on key", tol: Toleration{Key: "k", Operator: TolerationOpExists}, want: true},
		{name: "exists with empty key matches every key", tol: Toleration{Operator: TolerationOpExists}, want: true},
		// Kube validation forbids this, but ToleratesTaint itself then only
		// compares values.
		{name: "empty key with Equal compares value only", tol: Toleration{Value: "v"}, want: true},
		{name: "effect mismatch", tol: Toleration{Key: "k", Operator: TolerationOpExists, Effect: TaintEffectNoExecute}, want: false},
		{name: "empty effect matches all effects", tol: Toleration{Key: "k", Operator: TolerationOpExists}, want: true},
		{name: "other key", tol: Toleration{Key: "other", Operator: TolerationOpExists}, want: false},
		{name: "unknown operator", tol: Toleration{Key: "k", Operator: "Gt", Value: "v"}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.tol.ToleratesTaint(&taint); got != tt.want {
				t.Errorf("ToleratesTaint = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFindMatchingUntoleratedTaint(t *testing.T) {
	taints := []Taint{
		{Key: "soft", Effect: TaintEffectPreferNoSchedule},
		{Key: "a", Value: "1", Effect: TaintEffectNoSchedule},
		{Key: "b", Value: "2", Effect: TaintEffectNoExecute},
	}
	got, ok := FindMatchingUntoleratedTaint(taints, nil, DoNotScheduleTaint)
	if !ok || got.Key != "a" {
		t.Errorf("first untolerated = %v, %v; want a (PreferNoSchedule skipped)", got, ok)
	}
	got, ok = FindMatchingUntoleratedTaint(taints, []Toleration{{Key: "a", Operator: TolerationOpExists}}, DoNotScheduleTaint)
	if !ok || got.Key != "b" {
		t.Errorf("after tolerating a = %v, %v; want b", got, ok)
	}
	if _, ok := FindMatchingUntoleratedTaint(taints, []Toleration{{Operator: TolerationOpExists}}, DoNotScheduleTaint); ok {
		t.Error("tolerate-everything still untolerated")
	}
}
