package e2e

import (
	"fmt"
	"testing"
	"time"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// TestE2EPreemption drives preemption as an orchestrator sees it: Explain
// predicts the victim; submitting the preemptor streams EVICT naming it; the
// orchestrator deletes the victim; the preemptor binds where nominated.
func TestE2EPreemption(t *testing.T) {
	p := startBerth(t, t.TempDir())
	c := newClients(t, p.addr)
	for _, n := range []string{"n1", "n2"} {
		if _, err := c.cluster.UpsertNode(ctxT(t, 5*time.Second), &berthv1.UpsertNodeRequest{Node: testNode(n, 1000)}); err != nil {
			t.Fatal(err)
		}
	}
	w := watch(t, c, 0)
	low := func(name string, prio int32) *berthv1.Pod {
		pod := testPod(name, 800)
		pod.Priority = prio
		return pod
	}
	// n1's victim has lower priority than n2's, so preemption picks n1.
	for _, pod := range []*berthv1.Pod{low("low-1", 1), low("low-2", 5)} {
		if _, err := c.pods.SubmitPod(ctxT(t, 5*time.Second), &berthv1.SubmitPodRequest{Pod: pod}); err != nil {
			t.Fatal(err)
		}
	}
	evs := w.waitFor(t, 30*time.Second, "both low pods bound", func(evs []*berthv1.BindingEvent) bool { return len(boundCount(evs)) == 2 })
	victimNode := map[string]string{}
	for _, ev := range evs {
		victimNode[ev.GetName()] = ev.GetNodeName()
	}
	if victimNode["low-1"] == victimNode["low-2"] {
		t.Fatalf("both low pods on %s; want one per node", victimNode["low-1"])
	}

	high := testPod("high", 500)
	high.Priority = 100
	ex, err := c.sched.Explain(ctxT(t, 10*time.Second), &berthv1.ExplainRequest{Target: &berthv1.ExplainRequest_Pod{Pod: high}})
	if err != nil {
		t.Fatal(err)
	}
	plan := ex.GetPreemption()
	if ex.GetChosenNodeName() != "" || plan.GetNodeName() != victimNode["low-1"] || len(plan.GetVictims()) != 1 || plan.GetVictims()[0].GetName() != "low-1" {
		t.Fatalf("explain: chosen %q, preemption %v; want no fit and low-1 evicted from %s", ex.GetChosenNodeName(), plan, victimNode["low-1"])
	}

	if _, err := c.pods.SubmitPod(ctxT(t, 5*time.Second), &berthv1.SubmitPodRequest{Pod: high}); err != nil {
		t.Fatal(err)
	}
	evs = w.waitFor(t, 30*time.Second, "EVICT of low-1", func(evs []*berthv1.BindingEvent) bool {
		for _, ev := range evs {
			if ev.GetType() == berthv1.BindingEventType_BINDING_EVENT_TYPE_EVICT {
				return true
			}
		}
		return false
	})
	var evict *berthv1.BindingEvent
	for _, ev := range evs {
		if ev.GetType() == berthv1.BindingEventType_BINDING_EVENT_TYPE_EVICT {
			if evict != nil {
				t.Fatalf("second EVICT %v after %v", ev, evict)
			}
			evict = ev
		}
	}
	if evict.GetName() != "low-1" || evict.GetPreemptor() != "e2e/high" || evict.GetNodeName() != plan.GetNodeName() {
		t.Fatalf("EVICT %v; want low-1 on %s for e2e/high", evict, plan.GetNodeName())
	}
	pollUntil(t, 10*time.Second, "high nominated", func() error {
		got, err := c.pods.GetPod(ctxT(t, 5*time.Second), &berthv1.GetPodRequest{Namespace: "e2e", Name: "high"})
		if err != nil {
			return err
		}
		if n := got.GetPod().GetStatus().GetNominatedNodeName(); n != plan.GetNodeName() {
			return fmt.Errorf("nominated %q", n)
		}
		return nil
	})

	// The orchestrator stops the victim and deletes it.
	if _, err := c.pods.DeletePod(ctxT(t, 5*time.Second), &berthv1.DeletePodRequest{Namespace: "e2e", Name: "low-1", Uid: evict.GetUid()}); err != nil {
		t.Fatal(err)
	}
	evs = w.waitFor(t, 30*time.Second, "high bound", func(evs []*berthv1.BindingEvent) bool { return boundCount(evs)["e2e/high"] == 1 })
	for _, ev := range evs {
		if ev.GetName() == "high" && ev.GetType() == berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND && ev.GetNodeName() != plan.GetNodeName() {
			t.Fatalf("high bound to %s, nominated %s", ev.GetNodeName(), plan.GetNodeName())
		}
		if ev.GetName() == "low-2" && ev.GetType() != berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND {
			t.Fatalf("low-2 was disturbed: %v", ev)
		}
	}
}
