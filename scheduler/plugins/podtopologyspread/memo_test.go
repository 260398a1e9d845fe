package podtopologyspread

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
)

// TestMemoStaysExact runs one long-lived plugin (whose memos carry over
// between cycles) and checks every cycle against a fresh plugin, while
// the cluster changes underneath: pods come and go, the node list is
// reordered and shrinks, and pods alternate between more selectors than
// there are memos.
//
// Long because it is one scenario: each step builds on the state the
// last one left.
func TestMemoStaysExact(t *testing.T) {
	nodes := place(fourNodes(), concat(podsOn("a", 2, "app", "web"), podsOn("b", 1, "app", "db"), podsOn("x", 1, "app", "web")))
	lister := fwtest.NewLister(nodes...)
	longLived, _ := newPluginOn(t, listArgs, lister)

	hardPod := func(app string) *framework.Pod {
		return mkPod("p").label("app", app).
			spread(1, "zone", hard, &framework.LabelSelector{MatchLabels: map[string]string{"app": app}}).
			spread(1, "node", hard, &framework.LabelSelector{MatchLabels: map[string]string{"app": app}}).obj()
	}
	softPod := func(app string) *framework.Pod {
		return mkPod("p").label("app", app).
			spread(1, "zone", soft, &framework.LabelSelector{MatchLabels: map[string]string{"app": app}}).obj()
	}
	// Six selectors in one cycle, more than maxMemos, alternating between
	// web and db so a memo wrongly shared would give wrong counts.
	manyPod := mkPod("p").label("app", "web")
	for i := range maxMemos + 2 {
		app := []string{"web", "db"}[i%2]
		manyPod = manyPod.spread(int32(i+1), "zone", hard, &framework.LabelSelector{MatchLabels: map[string]string{"app": app},
			MatchExpressions: []framework.LabelSelectorRequirement{{Key: "v", Operator: framework.LabelSelectorOpNotIn, Values: []string{fmt.Sprint(i)}}}})
	}

	check := func(step string, pod *framework.Pod, infos []*framework.NodeInfo) {
		t.Helper()
		lister.Set(infos...)
		fresh, _ := newPlugin(t, listArgs, infos...)
		pi := framework.NewPodInfo(pod)
		gotState, wantState := framework.NewCycleState(), framework.NewCycleState()
		_, st1 := longLived.PreFilter(ctx, gotState, pi, infos)
		_, st2 := fresh.PreFilter(ctx, wantState, pi, infos)
		if st1.Code() != st2.Code() {
			t.Fatalf("%s: PreFilter %v vs fresh %v", step, st1, st2)
		}
		if st1.IsSuccess() {
			got, _ := framework.ReadState[*preFilterState](gotState, preFilterStateKey)
			want, _ := framework.ReadState[*preFilterState](wantState, preFilterStateKey)
			if diff := cmp.Diff(summarize(want), summarize(got)); diff != "" {
				t.Errorf("%s: PreFilter state (-fresh,+memo):\n%s", step, diff)
			}
		}
		st1 = longLived.PreScore(ctx, gotState, pi, infos)
		st2 = fresh.PreScore(ctx, wantState, pi, infos)
		if st1.Code() != st2.Code() {
			t.Fatalf("%s: PreScore %v vs fresh %v", step, st1, st2)
		}
		if st1.IsSuccess() {
			got, _ := framework.ReadState[*preScoreState](gotState, preScoreStateKey)
			want, _ := framework.ReadState[*preScoreState](wantState, preScoreStateKey)
			if diff := cmp.Diff(scoreCounts(want), scoreCounts(got)); diff != "" {
				t.Errorf("%s: PreScore counts (-fresh,+memo):\n%s", step, diff)
			}
		}
	}

	check("first web", hardPod("web"), nodes)
	check("web again", hardPod("web"), nodes)
	check("soft web shares the memo", softPod("web"), nodes)
	nodes[1].AddPodInfo(framework.NewPodInfo(mkPod("new").node("b").label("app", "web").obj()))
	check("a pod joined b", hardPod("web"), nodes)
	if err := nodes[0].RemovePod(mkPod("a-p0").obj()); err != nil {
		t.Fatal(err)
	}
	check("a pod left a", softPod("web"), nodes)
	check("db", hardPod("db"), nodes)
	check("more selectors than memos", manyPod.obj(), nodes)
	check("web after eviction", hardPod("web"), nodes)
	reordered := []*framework.NodeInfo{nodes[3], nodes[2], nodes[1], nodes[0]}
	check("reordered list", hardPod("web"), reordered)
	check("shorter list", hardPod("web"), nodes[:2])
	check("longer list again", hardPod("web"), nodes)
	// A NodeInfo struct overwritten in place, as snapshots do: same
	// pointer, new generation.
	updated := nodes[2].Clone()
	updated.AddPodInfo(framework.NewPodInfo(mkPod("new2").node("x").label("app", "web").obj()))
	*nodes[2] = *updated
	check("node overwritten in place", hardPod("web"), nodes)

	t.Run("a held lock counts without memos", func(t *testing.T) {
		longLived.memos.mu.Lock()
		defer longLived.memos.mu.Unlock()
		check("locked", hardPod("web"), nodes)
	})
}

// scoreCounts flattens PreScore's counts per domain.
func scoreCounts(s *preScoreState) []map[string]int64 {
	out := make([]map[string]int64, len(s.constraints))
	for i := range s.constraints {
		out[i] = map[string]int64{}
		for v, slot := range s.index[i] {
			out[i][v] = s.counts[i][slot]
		}
	}
	return out
}

func TestSelectorSignature(t *testing.T) {
	sel := func(reqs ...requirement) *selector { return &selector{reqs: reqs} }
	eq := func(k, v string) requirement { return requirement{key: k, op: opEquals, values: []string{v}} }
	in := func(k string, vs ...string) requirement {
		return requirement{key: k, op: framework.LabelSelectorOpIn, values: vs}
	}
	distinct := []struct {
		sel *selector
		ns  string
	}{
		{sel(eq("a", "b")), "ns"},
		{sel(eq("a", "b")), "ns2"},
		{sel(eq("a", "bc")), "ns"},
		{sel(eq("ab", "c")), "ns"},
		{sel(eq("a", "b"), eq("c", "d")), "ns"},
		{sel(in("a", "b", "c")), "ns"},
		{sel(in("a", "b"), in("c")), "ns"},
		{sel(in("a", "b:c")), "ns"},
		{sel(in("a", "1:b")), "ns"},
	}
	seen := map[string]int{}
	for i, d := range distinct {
		sig := d.sel.signature(d.ns)
		if j, ok := seen[sig]; ok {
			t.Errorf("selectors %d and %d share signature %q", j, i, sig)
		}
		seen[sig] = i
	}
	if a, b := sel(eq("a", "b")).signature("ns"), sel(eq("a", "b")).signature("ns"); a != b {
		t.Errorf("equal selectors differ: %q vs %q", a, b)
	}
}

func TestForSelectorNeverSharesAMemoWithinACycle(t *testing.T) {
	var m countMemos
	sels := make([]selector, maxMemos+2)
	for i := range sels {
		sels[i] = selectorFromSet(map[string]string{"app": fmt.Sprint(i)})
	}
	for cycle := range 3 {
		memos := m.acquire()
		got := map[*countMemo]int{}
		for i := range sels {
			// Rotate the order so eviction sees every recency pattern.
			s := &sels[(i+cycle)%len(sels)]
			c := memos.forSelector(s, "ns", 10)
			if i >= maxMemos {
				if c != nil {
					t.Errorf("cycle %d: selector %d got a memo although all are in use", cycle, i)
				}
				continue
			}
			if c == nil {
				t.Fatalf("cycle %d: selector %d got no memo", cycle, i)
			}
			if j, ok := got[c]; ok {
				t.Errorf("cycle %d: selectors %d and %d share a memo", cycle, j, i)
			}
			got[c] = i
			if len(c.entries) != 10 {
				t.Errorf("cycle %d: %d entries, want 10", cycle, len(c.entries))
			}
		}
		if again := memos.forSelector(&sels[cycle%len(sels)], "ns", 10); again == nil {
			t.Errorf("cycle %d: the first selector lost its memo", cycle)
		}
		memos.release()
	}
	if c := (*countMemos)(nil).forSelector(&sels[0], "ns", 1); c != nil {
		t.Error("nil memos returned a memo")
	}
	var nothing, empty selector
	nothing.nothing = true
	if m.acquire().forSelector(&nothing, "ns", 1) != nil || m.forSelector(&empty, "ns", 1) != nil {
		t.Error("nil or empty selector got a memo")
	}
	m.release()
	m.mu.Lock()
	if m.acquire() != nil {
		t.Error("acquire succeeded while another cycle holds the memos")
	}
	m.mu.Unlock()
}
