package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/framework/runtime"
)

func TestReserveAndUnreserveOrder(t *testing.T) {
	rec := &recorder{}
	a := &bindingPlugin{name: "A", rec: rec}
	b := &bindingPlugin{name: "B", rec: rec, reserve: framework.NewStatus(framework.Unschedulable, "full")}
	c := &bindingPlugin{name: "C", rec: rec}
	f := mustFramework(t, registryOf(a, b, c), &runtime.Profile{Plugins: runtime.Plugins{Reserve: runtime.PluginSet{Enabled: refs("A", "B", "C")}}})
	pod := fwtest.Pod("p", nil)
	st := f.RunReservePluginsReserve(ctx, framework.NewCycleState(), pod, "n")
	if st.Code() != framework.Unschedulable || st.Plugin() != "B" {
		t.Errorf("reserve = %v from %q", st, st.Plugin())
	}
	f.RunReservePluginsUnreserve(ctx, framework.NewCycleState(), pod, "n")
	want := []string{"Reserve/A", "Reserve/B", "Unreserve/C", "Unreserve/B", "Unreserve/A"}
	if diff := cmp.Diff(want, rec.get()); diff != "" {
		t.Errorf("calls (-want,+got):\n%s", diff)
	}

	b.reserve = framework.AsStatus(errors.New("disk"))
	st = f.RunReservePluginsReserve(ctx, framework.NewCycleState(), pod, "n")
	if st.Code() != framework.Error || st.Message() != `running Reserve plugin "B": disk` {
		t.Errorf("reserve error = %v %q", st.Code(), st.Message())
	}
}

func TestBindingCycle(t *testing.T) {
	skip := framework.NewStatus(framework.Skip)
	tests := []struct {
		name      string
		preBind   *framework.Status
		bindA     *framework.Status
		bindB     *framework.Status
		wantCode  framework.Code
		wantCalls []string
	}{
		{name: "first binder binds", wantCalls: []string{"PreBind/A", "PreBind/B", "Bind/A"}},
		{name: "skip passes to the next", bindA: skip, wantCalls: []string{"PreBind/A", "PreBind/B", "Bind/A", "Bind/B"}},
		{name: "all skip", bindA: skip, bindB: skip, wantCode: framework.Skip, wantCalls: []string{"PreBind/A", "PreBind/B", "Bind/A", "Bind/B"}},
		{name: "bind error", bindA: framework.AsStatus(errors.New("x")), wantCode: framework.Error, wantCalls: []string{"PreBind/A", "PreBind/B", "Bind/A"}},
		{name: "prebind rejects", preBind: framework.NewStatus(framework.Unschedulable, "no"), wantCode: framework.Unschedulable, wantCalls: []string{"PreBind/A"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			a := &bindingPlugin{name: "A", rec: rec, preBind: tt.preBind, bind: tt.bindA}
			b := &bindingPlugin{name: "B", rec: rec, bind: tt.bindB}
			f := mustFramework(t, registryOf(a, b), &runtime.Profile{Plugins: runtime.Plugins{
				PreBind: runtime.PluginSet{Enabled: refs("A", "B")},
				Bind:    runtime.PluginSet{Enabled: refs("A", "B")},
			}})
			pod := fwtest.Pod("p", nil)
			st := f.RunPreBindPlugins(ctx, framework.NewCycleState(), pod, "n")
			if st.IsSuccess() {
				st = f.RunBindPlugins(ctx, framework.NewCycleState(), pod, "n")
			}
			if st.Code() != tt.wantCode {
				t.Errorf("code = %v, want %v", st.Code(), tt.wantCode)
			}
			if diff := cmp.Diff(tt.wantCalls, rec.get()); diff != "" {
				t.Errorf("calls (-want,+got):\n%s", diff)
			}
		})
	}
	empty := mustFramework(t, framework.Registry{}, &runtime.Profile{})
	if st := empty.RunBindPlugins(ctx, framework.NewCycleState(), fwtest.Pod("p", nil), "n"); !st.IsSkip() {
		t.Errorf("no bind plugins = %v, want Skip", st.Code())
	}
}

// Long for its subtests, which share the helpers set up at the top.
func TestPermit(t *testing.T) {
	newFw := func(t *testing.T, clock framework.Clock, plugins ...*bindingPlugin) *runtime.Framework {
		var ps []framework.Plugin
		var names []string
		for _, p := range plugins {
			ps = append(ps, p)
			names = append(names, p.name)
		}
		return mustFramework(t, registryOf(ps...), &runtime.Profile{Plugins: runtime.Plugins{Permit: runtime.PluginSet{Enabled: refs(names...)}}},
			runtime.WithClock(clock))
	}
	wait := framework.NewStatus(framework.Wait)
	pod := fwtest.Pod("p", nil)

	t.Run("no wait", func(t *testing.T) {
		f := newFw(t, fwtest.NewFakeClock(time.Unix(0, 0)), &bindingPlugin{name: "A", rec: &recorder{}})
		if st := f.RunPermitPlugins(ctx, framework.NewCycleState(), pod, "n"); !st.IsSuccess() {
			t.Fatal(st)
		}
		if f.WillWaitOnPermit(pod) || !f.WaitOnPermit(ctx, pod).IsSuccess() {
			t.Error("pod waits without a Wait")
		}
	})

	t.Run("rejection stops", func(t *testing.T) {
		rec := &recorder{}
		f := newFw(t, fwtest.NewFakeClock(time.Unix(0, 0)),
			&bindingPlugin{name: "A", rec: rec, permit: framework.NewStatus(framework.Unschedulable, "no")}, &bindingPlugin{name: "B", rec: rec})
		st := f.RunPermitPlugins(ctx, framework.NewCycleState(), pod, "n")
		if st.Code() != framework.Unschedulable || st.Plugin() != "A" {
			t.Errorf("status = %v from %q", st.Code(), st.Plugin())
		}
		if diff := cmp.Diff([]string{"Permit/A"}, rec.get()); diff != "" {
			t.Errorf("calls (-want,+got):\n%s", diff)
		}
	})

	t.Run("allowed by every waiting plugin", func(t *testing.T) {
		clock := fwtest.NewFakeClock(time.Unix(0, 0))
		f := newFw(t, clock, &bindingPlugin{name: "A", rec: &recorder{}, permit: wait, wait: time.Minute},
			&bindingPlugin{name: "B", rec: &recorder{}, permit: wait, wait: time.Hour})
		st := f.RunPermitPlugins(ctx, framework.NewCycleState(), pod, "n")
		if !st.IsWait() || st.Message() != `one or more plugins asked to wait and no plugin rejected pod "p"` {
			t.Fatalf("status = %v %q", st.Code(), st.Message())
		}
		wp := f.GetWaitingPod(pod.UID)
		if wp == nil || !f.WillWaitOnPermit(pod) {
			t.Fatal("no waiting pod")
		}
		if diff := cmp.Diff([]string{"A", "B"}, sortedStrings(wp.GetPendingPlugins())); diff != "" {
			t.Errorf("pending (-want,+got):\n%s", diff)
		}
		done := make(chan *framework.Status)
		go func() { done <- f.WaitOnPermit(ctx, pod) }()
		wp.Allow("A")
		wp.Allow("B")
		if st := <-done; !st.IsSuccess() {
			t.Errorf("WaitOnPermit = %v", st)
		}
		if clock.Pending() != 0 {
			t.Errorf("%d timers left running", clock.Pending())
		}
		if f.WillWaitOnPermit(pod) {
			t.Error("pod still waiting")
		}
	})

	t.Run("rejected while waiting", func(t *testing.T) {
		f := newFw(t, fwtest.NewFakeClock(time.Unix(0, 0)), &bindingPlugin{name: "A", rec: &recorder{}, permit: wait, wait: time.Minute})
		f.RunPermitPlugins(ctx, framework.NewCycleState(), pod, "n")
		var seen int
		f.IterateOverWaitingPods(func(wp framework.WaitingPod) {
			seen++
			if !wp.Reject("A", "gang incomplete") {
				t.Error("first Reject not delivered")
			}
			if wp.Reject("A", "again") {
				t.Error("second Reject delivered")
			}
		})
		if seen != 1 {
			t.Fatalf("iterated %d waiting pods", seen)
		}
		st := f.WaitOnPermit(ctx, pod)
		if st.Code() != framework.Unschedulable || st.Message() != "gang incomplete" || st.Plugin() != "A" {
			t.Errorf("WaitOnPermit = %v %q %q", st.Code(), st.Message(), st.Plugin())
		}
	})

	t.Run("timeout rejects with the plugin's name", func(t *testing.T) {
		clock := fwtest.NewFakeClock(time.Unix(0, 0))
		f := newFw(t, clock, &bindingPlugin{name: "A", rec: &recorder{}, permit: wait, wait: 10 * time.Second},
			&bindingPlugin{name: "B", rec: &recorder{}, permit: wait, wait: time.Minute})
		f.RunPermitPlugins(ctx, framework.NewCycleState(), pod, "n")
		clock.Advance(9 * time.Second)
		if !f.WillWaitOnPermit(pod) {
			t.Fatal("released early")
		}
		clock.Advance(time.Second)
		st := f.WaitOnPermit(ctx, pod)
		if st.Code() != framework.Unschedulable || st.Plugin() != "A" || st.Message() != "rejected due to timeout after waiting 10s at plugin A" {
			t.Errorf("WaitOnPermit = %v %q %q", st.Code(), st.Message(), st.Plugin())
		}
		if clock.Pending() != 0 {
			t.Errorf("B's timer still pending")
		}
	})

	t.Run("timeout capped at 15 minutes", func(t *testing.T) {
		clock := fwtest.NewFakeClock(time.Unix(0, 0))
		f := newFw(t, clock, &bindingPlugin{name: "A", rec: &recorder{}, permit: wait, wait: 24 * time.Hour})
		f.RunPermitPlugins(ctx, framework.NewCycleState(), pod, "n")
		clock.Advance(15 * time.Minute)
		if st := f.WaitOnPermit(ctx, pod); st.Message() != "rejected due to timeout after waiting 15m0s at plugin A" {
			t.Errorf("WaitOnPermit = %q", st.Message())
		}
	})

	t.Run("context ends the wait", func(t *testing.T) {
		f := newFw(t, fwtest.NewFakeClock(time.Unix(0, 0)), &bindingPlugin{name: "A", rec: &recorder{}, permit: wait, wait: time.Minute})
		f.RunPermitPlugins(ctx, framework.NewCycleState(), pod, "n")
		wp := f.GetWaitingPod(pod.UID)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		st := f.WaitOnPermit(cctx, pod)
		if st.Code() != framework.Error || !errors.Is(st.AsError(), context.Canceled) {
			t.Errorf("WaitOnPermit = %v %v", st.Code(), st.AsError())
		}
		if wp.Reject("A", "late") {
			t.Error("pod could still be decided after the wait ended")
		}
		if f.GetWaitingPod(pod.UID) != nil {
			t.Error("waiting pod not removed")
		}
	})

	t.Run("RejectWaitingPod", func(t *testing.T) {
		f := newFw(t, fwtest.NewFakeClock(time.Unix(0, 0)), &bindingPlugin{name: "A", rec: &recorder{}, permit: wait, wait: time.Minute})
		if f.RejectWaitingPod(pod.UID) {
			t.Error("rejected a pod that is not waiting")
		}
		f.RunPermitPlugins(ctx, framework.NewCycleState(), pod, "n")
		if !f.RejectWaitingPod(pod.UID) {
			t.Error("RejectWaitingPod = false")
		}
		if st := f.WaitOnPermit(ctx, pod); st.Code() != framework.Unschedulable || st.Message() != "removed" {
			t.Errorf("WaitOnPermit = %v %q", st.Code(), st.Message())
		}
	})
}

func sortedStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
