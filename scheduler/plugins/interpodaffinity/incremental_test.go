package interpodaffinity

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/cache"
	"github.com/berth-io/berth/scheduler/framework"
)

// TestKeptCountsMatchRecount drives a plugin over a real cache snapshot,
// whose change log lets it keep the incoming pods' term counts, and the
// counts of existing pods' anti-affinity against them, across cycles,
// through random cluster changes, and checks every cycle's PreFilter state
// against a fresh plugin's over a plain lister (which counts every pod).
func TestKeptCountsMatchRecount(t *testing.T) {
	keyed := termIn("app", "zone", "a")
	keyed.MatchLabelKeys = []string{"team"}
	incoming := []*framework.Pod{
		pod("p").labels("app", "x").requiredAnti(termIn("app", framework.LabelHostname, "a")).obj(),
		pod("p").labels("app", "a").requiredAffinity(termIn("app", "zone", "a")).obj(),
		pod("p").labels("app", "a").requiredAffinity(termIn("app", "zone", "a"), termExists("team", "rack")).requiredAnti(termIn("app", "rack", "b"), termIn("app", "zone", "c")).obj(),
		pod("p").ns("other").labels("app", "b").requiredAnti(termExists("app", "zone")).obj(),
		pod("p").labels("app", "a", "team", "t1").requiredAffinity(keyed).obj(),
		pod("p").labels("app", "a", "team", "t2").requiredAffinity(keyed).obj(),
	}
	// Terms existing pods repel with.
	byTeam := termExists("app", "zone")
	byTeam.MatchLabelKeys = []string{"team"}
	anywhere := termIn("app", "rack", "x")
	anywhere.AllNamespaces = true
	repelling := [][]framework.PodAffinityTerm{
		{termIn("app", framework.LabelHostname, "x")},
		{termIn("app", "zone", "a", "x"), termExists("team", "rack")},
		{byTeam},
		{anywhere},
	}
	for seed := range uint64(10) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			c := cache.New()
			snap := cache.NewEmptySnapshot()
			update := func() {
				if err := c.UpdateSnapshot(snap); err != nil {
					t.Fatal(err)
				}
			}
			var placed []*framework.Pod
			nextNode, nextPod := 0, 0
			addNode := func() {
				name := fmt.Sprintf("n%d", nextNode)
				nextNode++
				kv := []string{framework.LabelHostname, name}
				if rng.IntN(8) > 0 {
					kv = append(kv, "zone", fmt.Sprint("z", rng.IntN(3)))
				}
				if rng.IntN(6) > 0 {
					kv = append(kv, "rack", fmt.Sprint("r", rng.IntN(5)))
				}
				c.AddNode(node(name, kv...))
			}
			randomNode := func() string {
				update()
				list := snap.List()
				return list[rng.IntN(len(list))].Node().Name
			}
			addPod := func() {
				kv := []string{"app", []string{"a", "b", "c"}[rng.IntN(3)]}
				if rng.IntN(2) == 0 {
					kv = append(kv, "team", fmt.Sprint("t", rng.IntN(3)))
				}
				p := pod(fmt.Sprint("e", nextPod)).on(randomNode()).labels(kv...)
				nextPod++
				if rng.IntN(4) == 0 {
					p = p.ns("other")
				}
				if rng.IntN(3) == 0 {
					p = p.requiredAnti(repelling[rng.IntN(len(repelling))]...)
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
			pl := newPluginOver(t, nil, 4, snap)
			for step := range 60 {
				// Now and then another cycle holds the index: count
				// from every pod.
				held := step%13 == 12
				if held {
					pl.terms.mu.Lock()
				}
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
						np.Labels = labels("app", []string{"a", "b", "c"}[rng.IntN(3)], "team", "t0")
						if err := c.UpdatePod(placed[i], &np); err != nil {
							t.Fatal(err)
						}
						placed[i] = &np
					case k < 8:
						name := randomNode()
						c.AddNode(node(name, framework.LabelHostname, name, "zone", fmt.Sprint("z", rng.IntN(4))))
					case k < 9:
						addNode()
					default:
						c.RemoveNode(randomNode())
					}
				}
				update()
				infos := snap.List()
				p := framework.NewPodInfo(incoming[rng.IntN(len(incoming))])
				fresh := newPlugin(t, nil, 1, infos...)
				gotState, wantState := framework.NewCycleState(), framework.NewCycleState()
				_, st1 := pl.PreFilter(ctx, gotState, p, infos)
				_, st2 := fresh.PreFilter(ctx, wantState, p, infos)
				if held {
					pl.terms.mu.Unlock()
				}
				if st1.Code() != st2.Code() {
					t.Fatalf("step %d: PreFilter %v vs fresh %v", step, st1, st2)
				}
				if !st1.IsSuccess() {
					continue
				}
				got, _ := framework.ReadState[*preFilterState](gotState, preFilterStateKey)
				want, _ := framework.ReadState[*preFilterState](wantState, preFilterStateKey)
				if diff := cmp.Diff(countsOf(want), countsOf(got)); diff != "" {
					t.Fatalf("step %d: counts (-fresh,+kept):\n%s", step, diff)
				}
			}
			if pl.terms.catchUps == 0 {
				t.Errorf("no counts were caught up from the change log (%d recounts)", pl.terms.recounts)
			}
			if pl.terms.repelCatchUps == 0 {
				t.Errorf("no existing pods' counts were caught up from the change log (%d recounts)", pl.terms.repelRecounts)
			}
		})
	}
}

func countsOf(s *preFilterState) map[string]map[topologyPair]int64 {
	keys := map[topologyPair]int64{}
	for _, k := range s.existingAntiAffinityKeys {
		keys[topologyPair{key: k.Name}]++
	}
	return map[string]map[topologyPair]int64{"affinity": s.affinityCounts, "anti": s.antiAffinityCounts,
		"existing": s.existingAntiAffinityCounts, "existing keys": keys}
}
