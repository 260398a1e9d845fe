package podtopologyspread

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/cache"
	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
)

// TestIncrementalCountsMatchRecount drives a plugin over a real cache
// snapshot, whose change log lets it keep per-domain totals across
// cycles, through random cluster changes (pods added, removed and
// relabelled, nodes added, removed, relabelled and tainted), and checks
// after every change that its PreFilter and PreScore states equal those
// of a fresh plugin counting every node.
func TestIncrementalCountsMatchRecount(t *testing.T) {
	sel := func(app string) *framework.LabelSelector {
		return &framework.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	pods := []*framework.Pod{
		mkPod("p").label("app", "a").spread(1, "zone", hard, sel("a")).obj(),
		mkPod("p").label("app", "b").spread(1, "zone", soft, sel("b")).spread(2, "rack", soft, sel("b")).obj(),
		mkPod("p").label("app", "a").spread(1, "zone", hard, sel("a")).spread(1, LabelHostname, hard, sel("a")).obj(),
		mkPod("p").ns("other").label("app", "a").spread(1, "rack", hard, exists("app")).obj(),
		mkPod("p").label("app", "c").toleration("dedicated").spread(1, "zone", hard, sel("c"), taintsPolicy(framework.NodeInclusionPolicyHonor)).obj(),
		mkPod("p").label("app", "c").spread(1, "zone", soft, sel("c"), taintsPolicy(framework.NodeInclusionPolicyHonor)).obj(),
		// Node affinity restricts the domains: counted node by node.
		mkPod("p").label("app", "a").nodeSelector("rack", "r0").spread(1, "zone", hard, sel("a")).obj(),
		mkPod("p").label("app", "a").spread(1, "zone", hard, sel("a"), matchLabelKeys("app")).obj(),
	}
	for seed := range uint64(10) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			c := cache.New()
			snap := cache.NewEmptySnapshot()
			var placed []*framework.Pod
			nextNode, nextPod := 0, 0
			addNode := func() {
				name := fmt.Sprintf("n%d", nextNode)
				nextNode++
				b := mkNode(name).label(LabelHostname, name)
				if rng.IntN(8) > 0 {
					b = b.label("zone", fmt.Sprint("z", rng.IntN(3)))
				}
				if rng.IntN(6) > 0 {
					b = b.label("rack", fmt.Sprint("r", rng.IntN(5)))
				}
				if rng.IntN(5) == 0 {
					b = b.taint("dedicated", framework.TaintEffectNoSchedule)
				}
				c.AddNode(b.obj())
			}
			nodeNames := func() []string {
				if err := c.UpdateSnapshot(snap); err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, ni := range snap.List() {
					names = append(names, ni.Node().Name)
				}
				return names
			}
			addPod := func() {
				names := nodeNames()
				if len(names) == 0 {
					return
				}
				p := mkPod(fmt.Sprint("e", nextPod)).node(names[rng.IntN(len(names))]).label("app", []string{"a", "b", "c"}[rng.IntN(3)])
				nextPod++
				if rng.IntN(4) == 0 {
					p = p.ns("other")
				}
				if err := c.AddPod(p.obj()); err != nil {
					t.Fatal(err)
				}
				placed = append(placed, p.obj())
			}
			for range 30 {
				addNode()
			}
			for range 120 {
				addPod()
			}

			pl, _ := newPluginOn(t, listArgs, snap)
			for step := range 60 {
				// A few changes between cycles, sometimes none.
				for range rng.IntN(4) {
					switch k := rng.IntN(10); {
					case k < 4:
						addPod()
					case k < 6 && len(placed) > 0:
						i := rng.IntN(len(placed))
						if err := c.RemovePod(placed[i]); err != nil {
							t.Fatal(err)
						}
						placed = append(placed[:i], placed[i+1:]...)
					case k < 7 && len(placed) > 0:
						i := rng.IntN(len(placed))
						np := *placed[i]
						np.Labels = map[string]string{"app": []string{"a", "b", "c"}[rng.IntN(3)]}
						if err := c.UpdatePod(placed[i], &np); err != nil {
							t.Fatal(err)
						}
						placed[i] = &np
					case k < 8:
						// Relabel or retaint an existing node.
						names := nodeNames()
						ni, _ := snap.Get(names[rng.IntN(len(names))])
						n := *ni.Node()
						n.Labels = map[string]string{LabelHostname: n.Name, "zone": fmt.Sprint("z", rng.IntN(4))}
						if rng.IntN(2) == 0 {
							n.Labels["rack"] = fmt.Sprint("r", rng.IntN(5))
						}
						n.Taints = nil
						if rng.IntN(3) == 0 {
							n.Taints = []framework.Taint{{Key: "dedicated", Effect: framework.TaintEffectNoSchedule}}
						}
						c.AddNode(&n)
					case k < 9:
						addNode()
					default:
						names := nodeNames()
						c.RemoveNode(names[rng.IntN(len(names))])
					}
				}
				if err := c.UpdateSnapshot(snap); err != nil {
					t.Fatal(err)
				}
				pod := pods[rng.IntN(len(pods))]
				compareWithFresh(t, fmt.Sprint("step ", step), pl, pod, snap.List())
			}
			// With the index held by another cycle, it counts node by node.
			pl.counts.mu.Lock()
			compareWithFresh(t, "index held", pl, pods[0], snap.List())
			pl.counts.mu.Unlock()
			if pl.counts.catchUps == 0 {
				t.Errorf("no totals were caught up from the change log (%d recounts)", pl.counts.recounts)
			}
		})
	}
}

// compareWithFresh runs PreFilter and PreScore for pod with pl and with a
// fresh plugin over a plain lister (which counts every node), and
// compares their states.
func compareWithFresh(t *testing.T, step string, pl *PodTopologySpread, pod *framework.Pod, infos []*framework.NodeInfo) {
	t.Helper()
	fresh, _ := newPluginOn(t, listArgs, fwtest.NewLister(infos...))
	pi := framework.NewPodInfo(pod)
	gotState, wantState := framework.NewCycleState(), framework.NewCycleState()
	_, st1 := pl.PreFilter(ctx, gotState, pi, infos)
	_, st2 := fresh.PreFilter(ctx, wantState, pi, infos)
	if st1.Code() != st2.Code() {
		t.Fatalf("%s: PreFilter %v vs fresh %v", step, st1, st2)
	}
	filtered := infos
	if st1.IsSuccess() {
		got, _ := framework.ReadState[*preFilterState](gotState, preFilterStateKey)
		want, _ := framework.ReadState[*preFilterState](wantState, preFilterStateKey)
		if diff := cmp.Diff(summarize(want), summarize(got)); diff != "" {
			t.Fatalf("%s: PreFilter state (-fresh,+incremental):\n%s", step, diff)
		}
		filtered = nil
		for _, ni := range infos {
			if fresh.Filter(ctx, wantState, pi, ni).IsSuccess() {
				filtered = append(filtered, ni)
			}
		}
	}
	st1 = pl.PreScore(ctx, gotState, pi, filtered)
	st2 = fresh.PreScore(ctx, wantState, pi, filtered)
	if st1.Code() != st2.Code() {
		t.Fatalf("%s: PreScore %v vs fresh %v", step, st1, st2)
	}
	if st1.IsSuccess() {
		got, _ := framework.ReadState[*preScoreState](gotState, preScoreStateKey)
		want, _ := framework.ReadState[*preScoreState](wantState, preScoreStateKey)
		if diff := cmp.Diff(scoreCounts(want), scoreCounts(got)); diff != "" {
			t.Fatalf("%s: PreScore counts (-fresh,+incremental):\n%s", step, diff)
		}
	}
}

// TestCountsDoNotThrash: with more rules in turn than slots, the rules
// kept stay kept (the others count without the index) rather than each
// taking over a slot, to be recounted, every time.
func TestCountsDoNotThrash(t *testing.T) {
	c := cache.New()
	for i := range 10 {
		name := fmt.Sprintf("n%d", i)
		c.AddNode(mkNode(name).label(LabelHostname, name).label("zone", fmt.Sprint("z", i%3)).obj())
	}
	snap := cache.NewEmptySnapshot()
	if err := c.UpdateSnapshot(snap); err != nil {
		t.Fatal(err)
	}
	pl, _ := newPluginOn(t, listArgs, snap)
	const rules = maxCounters + 4
	for round := range 10 {
		for r := range rules {
			app := fmt.Sprint("app-", r)
			pod := mkPod("p").label("app", app).spread(1, "zone", hard, &framework.LabelSelector{MatchLabels: map[string]string{"app": app}}).obj()
			compareWithFresh(t, fmt.Sprintf("round %d, rule %d", round, r), pl, pod, snap.List())
		}
	}
	if pl.counts.recounts > maxCounters {
		t.Errorf("%d recounts for %d rules in turn over %d slots, want at most one per slot", pl.counts.recounts, rules, maxCounters)
	}
}
