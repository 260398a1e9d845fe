package framework

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStatus(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name        string
		s           *Status
		code        Code
		msg         string
		success     bool
		rejected    bool
		wantErr     string
		wantReasons []string
	}{
		{name: "nil is success", s: nil, code: Success, success: true},
		{name: "success", s: NewStatus(Success), code: Success, success: true},
		{name: "unschedulable", s: NewStatus(Unschedulable, "a", "b"), code: Unschedulable, msg: "a, b", rejected: true, wantErr: "a, b", wantReasons: []string{"a", "b"}},
		{name: "unresolvable", s: NewStatus(UnschedulableAndUnresolvable, "x"), code: UnschedulableAndUnresolvable, msg: "x", rejected: true, wantErr: "x", wantReasons: []string{"x"}},
		{name: "pending is rejected", s: NewStatus(Pending, "later"), code: Pending, msg: "later", rejected: true, wantErr: "later", wantReasons: []string{"later"}},
		{name: "wait has no error", s: NewStatus(Wait, "w"), code: Wait, msg: "w", wantReasons: []string{"w"}},
		{name: "skip has no error", s: NewStatus(Skip), code: Skip},
		{name: "error keeps the error first", s: AsStatus(boom).WithPlugin("P"), code: Error, msg: "boom", wantErr: "boom", wantReasons: []string{"boom"}},
		{name: "error with reasons", s: NewStatus(Error, "r").WithError(boom), code: Error, msg: "boom, r", wantErr: "boom", wantReasons: []string{"boom", "r"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.s.Code(); got != tt.code {
				t.Errorf("Code() = %v, want %v", got, tt.code)
			}
			if got := tt.s.Message(); got != tt.msg {
				t.Errorf("Message() = %q, want %q", got, tt.msg)
			}
			if got := tt.s.IsSuccess(); got != tt.success {
				t.Errorf("IsSuccess() = %v", got)
			}
			if got := tt.s.IsRejected(); got != tt.rejected {
				t.Errorf("IsRejected() = %v", got)
			}
			err := tt.s.AsError()
			if (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
				t.Errorf("AsError() = %v, want %q", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantReasons, tt.s.Reasons()); diff != "" {
				t.Errorf("Reasons() (-want,+got):\n%s", diff)
			}
		})
	}
	if AsStatus(nil) != nil {
		t.Error("AsStatus(nil) != nil")
	}
	if !errors.Is(AsStatus(boom).AsError(), boom) {
		t.Error("AsError does not return the wrapped error")
	}
	if got := Code(42).String(); got != "Code(42)" {
		t.Errorf("unknown code String() = %q", got)
	}
	if got := UnschedulableAndUnresolvable.String(); got != "UnschedulableAndUnresolvable" {
		t.Errorf("String() = %q", got)
	}
}

func TestStatusEqualAndClone(t *testing.T) {
	a := NewStatus(Unschedulable, "x").WithPlugin("P")
	c := a.Clone()
	if !a.Equal(c) {
		t.Fatal("clone not equal")
	}
	c.AppendReason("y")
	if a.Equal(c) || len(a.Reasons()) != 1 {
		t.Errorf("clone shares reasons: %v / %v", a.Reasons(), c.Reasons())
	}
	if !(*Status)(nil).Equal(NewStatus(Success)) {
		t.Error("nil should equal Success")
	}
	if a.Equal(NewStatus(Unschedulable, "x").WithPlugin("Q")) {
		t.Error("plugin ignored by Equal")
	}
}
