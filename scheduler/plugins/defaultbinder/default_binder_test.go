package defaultbinder

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
)

type handle struct {
	framework.Handle
	binder framework.Binder
}

func (h handle) Binder() framework.Binder { return h.binder }

func TestBind(t *testing.T) {
	ctx := context.Background()
	rec := &fwtest.Binder{}
	p, _ := New(ctx, nil, handle{binder: rec})
	pod := fwtest.Pod("p", nil)
	if st := p.(framework.BindPlugin).Bind(ctx, framework.NewCycleState(), pod, "n1"); !st.IsSuccess() {
		t.Fatal(st)
	}
	if diff := cmp.Diff([]fwtest.Binding{{Pod: "default/p", Node: "n1"}}, rec.Bindings); diff != "" {
		t.Errorf("bindings (-want,+got):\n%s", diff)
	}

	boom := errors.New("store down")
	rec.Err = boom
	st := p.(framework.BindPlugin).Bind(ctx, framework.NewCycleState(), pod, "n1")
	if st.Code() != framework.Error || !errors.Is(st.AsError(), boom) {
		t.Errorf("Bind with failing binder = %v %v", st.Code(), st.AsError())
	}

	none, _ := New(ctx, nil, handle{})
	if st := none.(framework.BindPlugin).Bind(ctx, framework.NewCycleState(), pod, "n1"); st.Code() != framework.Error {
		t.Errorf("Bind without binder = %v", st.Code())
	}
}
