package framework

import "testing"

func TestSignatureEncodingIsUnambiguous(t *testing.T) {
	pair := func(a, b string) string { return string(AppendSigString(AppendSigString(nil, a), b)) }
	if pair("a", "bc") == pair("ab", "c") {
		t.Error(`("a","bc") and ("ab","c") encode alike`)
	}
	ints := func(a, b int64) string { return string(AppendSigInt(AppendSigInt(nil, a), b)) }
	if ints(1, 23) == ints(12, 3) {
		t.Error("(1,23) and (12,3) encode alike")
	}
	m1 := string(AppendSigStringMap(nil, map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}))
	for range 20 {
		if m2 := string(AppendSigStringMap(nil, map[string]string{"d": "4", "c": "3", "b": "2", "a": "1"})); m2 != m1 {
			t.Fatalf("one map encodes as %q and %q", m1, m2)
		}
	}
	r1 := Resource{MilliCPU: 1, Scalar: map[string]int64{"x/gpu": 1, "y/fpga": 2}}
	r2 := Resource{MilliCPU: 1, Scalar: map[string]int64{"y/fpga": 2, "x/gpu": 1}}
	if a, b := string(AppendSigResource(nil, &r1)), string(AppendSigResource(nil, &r2)); a != b {
		t.Errorf("equal resources encode as %q and %q", a, b)
	}
	r2.Scalar["x/gpu"] = 2
	if a, b := string(AppendSigResource(nil, &r1)), string(AppendSigResource(nil, &r2)); a == b {
		t.Errorf("different resources both encode as %q", a)
	}
	sec := int64(30)
	t1 := []Toleration{{Key: "k", Operator: TolerationOpExists}}
	t2 := []Toleration{{Key: "k", Operator: TolerationOpExists, TolerationSeconds: &sec}}
	if a, b := string(AppendSigTolerations(nil, t1)), string(AppendSigTolerations(nil, t2)); a == b {
		t.Errorf("tolerations with and without seconds both encode as %q", a)
	}
}
