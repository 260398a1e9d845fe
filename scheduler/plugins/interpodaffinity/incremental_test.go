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
// counts of existing pods' anti-affinity against them, and PreScore's
// sums, across cycles, through random cluster changes, and checks every
// cycle's PreFilter and PreScore states against a fresh plugin's over a
// plain lister (which counts every pod).
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
		pod("p").labels("app", "a").preferredAffinity(5, termIn("app", framework.LabelHostname, "a")).obj(),
		pod("p").labels("app", "b", "team", "t1").preferredAnti(3, termIn("app", "zone", "a", "b")).preferredAffinity(2, keyed).obj(),
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
	// In some seeds few cycles use kept results (node changes rebuild the
	// list, and with more keys in turn than slots new keys are not kept),
	// so catch-ups are counted over all seeds.
	termCatchUps, repelCatchUps, scoreCatchUps := 0, 0, 0
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
				switch rng.IntN(6) {
				case 0, 1:
					p = p.requiredAnti(repelling[rng.IntN(len(repelling))]...)
				case 2:
					p = p.preferredAffinity(4, termIn("app", "zone", "a")).preferredAnti(1, termIn("app", "rack", "b"))
				case 3:
					p = p.requiredAffinity(termIn("app", "rack", "a", "b"))
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
					pl.kept.mu.Lock()
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
					pl.kept.mu.Unlock()
				}
				if st1.Code() != st2.Code() {
					t.Fatalf("step %d: PreFilter %v vs fresh %v", step, st1, st2)
				}
				if st1.IsSuccess() {
					got, _ := framework.ReadState[*preFilterState](gotState, preFilterStateKey)
					want, _ := framework.ReadState[*preFilterState](wantState, preFilterStateKey)
					if diff := cmp.Diff(countsOf(want), countsOf(got)); diff != "" {
						t.Fatalf("step %d: counts (-fresh,+kept):\n%s", step, diff)
					}
				}
				if held {
					pl.kept.mu.Lock()
				}
				st1 = pl.PreScore(ctx, gotState, p, infos)
				st2 = fresh.PreScore(ctx, wantState, p, infos)
				if held {
					pl.kept.mu.Unlock()
				}
				if st1.Code() != st2.Code() {
					t.Fatalf("step %d: PreScore %v vs fresh %v", step, st1, st2)
				}
				if st1.IsSuccess() {
					got, _ := framework.ReadState[*preScoreState](gotState, preScoreStateKey)
					want, _ := framework.ReadState[*preScoreState](wantState, preScoreStateKey)
					if diff := cmp.Diff(want.scores(), got.scores()); diff != "" {
						t.Fatalf("step %d: scores (-fresh,+kept):\n%s", step, diff)
					}
				}
			}
			termCatchUps += pl.kept.terms.catchUps
			repelCatchUps += pl.kept.repel.catchUps
			scoreCatchUps += pl.kept.scores.catchUps
		})
	}
	if termCatchUps == 0 || repelCatchUps == 0 || scoreCatchUps == 0 {
		t.Errorf("catch-ups from the change log: %d of term counts, %d of existing pods' counts, %d of scores; want some of each",
			termCatchUps, repelCatchUps, scoreCatchUps)
	}
}

func countsOf(s *preFilterState) map[string]map[topologyPair]int64 {
	keys := map[topologyPair]int64{}
	for _, k := range s.existingAntiAffinityKeys {
		keys[topologyPair{key: k.Name}]++
	}
	// The domains each kind says it counts, which its empty() answers from.
	nonzero := map[topologyPair]int64{{key: "affinity"}: int64(s.affinityCounts.nonzero),
		{key: "anti"}: int64(s.antiAffinityCounts.nonzero), {key: "existing"}: int64(s.existingAntiAffinityCounts.nonzero)}
	return map[string]map[topologyPair]int64{"affinity": s.affinityCounts.totals(), "anti": s.antiAffinityCounts.totals(),
		"existing": s.existingAntiAffinityCounts.totals(), "existing keys": keys, "domains counted": nonzero}
}

// TestKeptScoresDropDomainsNoPodAddsTo: once the last pod a preferred term
// selects is gone, kept sums must skip Score as a recount does, not keep
// its domain at zero.
func TestKeptScoresDropDomainsNoPodAddsTo(t *testing.T) {
	c := cache.New()
	c.AddNode(node("n1", framework.LabelHostname, "n1"))
	c.AddNode(node("n2", framework.LabelHostname, "n2"))
	selected := pod("e").on("n1").labels("app", "a").obj()
	if err := c.AddPod(selected); err != nil {
		t.Fatal(err)
	}
	snap := cache.NewEmptySnapshot()
	pl := newPluginOver(t, nil, 1, snap)
	incoming := framework.NewPodInfo(pod("p").labels("app", "b").preferredAffinity(5, termIn("app", framework.LabelHostname, "a")).obj())
	preScore := func() *framework.Status {
		t.Helper()
		if err := c.UpdateSnapshot(snap); err != nil {
			t.Fatal(err)
		}
		return pl.PreScore(ctx, framework.NewCycleState(), incoming, snap.List())
	}
	// The second cycle keeps the sums, the third finds them current.
	for range 3 {
		if st := preScore(); !st.IsSuccess() {
			t.Fatalf("with a selected pod: %v", st)
		}
	}
	if err := c.RemovePod(selected); err != nil {
		t.Fatal(err)
	}
	if st := preScore(); !st.IsSkip() {
		t.Errorf("without a selected pod: %v, want skip", st)
	}
	if pl.kept.scores.catchUps == 0 {
		t.Errorf("the removal was not caught up (%d recounts)", pl.kept.scores.recounts)
	}
}

// TestKeptScoresOverFewAffinityNodes: a pod without preferred terms is
// scored against the few nodes running pods with affinity, and its kept
// sums must track changes on those nodes, wherever they sit in the list.
func TestKeptScoresOverFewAffinityNodes(t *testing.T) {
	c := cache.New()
	for i := range 20 {
		name := fmt.Sprintf("n%02d", i)
		c.AddNode(node(name, framework.LabelHostname, name, "zone", fmt.Sprint("z", i%3)))
	}
	prefers := func(name, on string, weight int32) *framework.Pod {
		return pod(name).on(on).labels("app", "db").preferredAffinity(weight, termIn("app", "zone", "web")).obj()
	}
	for _, p := range []*framework.Pod{prefers("a", "n03", 5), prefers("b", "n11", 7), pod("plain").on("n05").labels("app", "web").obj()} {
		if err := c.AddPod(p); err != nil {
			t.Fatal(err)
		}
	}
	snap := cache.NewEmptySnapshot()
	pl := newPluginOver(t, nil, 1, snap)
	incoming := framework.NewPodInfo(pod("p").labels("app", "web").obj())
	check := func(when string) {
		t.Helper()
		if err := c.UpdateSnapshot(snap); err != nil {
			t.Fatal(err)
		}
		gotState, wantState := framework.NewCycleState(), framework.NewCycleState()
		st1 := pl.PreScore(ctx, gotState, incoming, snap.List())
		st2 := newPlugin(t, nil, 1, snap.List()...).PreScore(ctx, wantState, incoming, snap.List())
		if st1.Code() != st2.Code() {
			t.Fatalf("%s: PreScore %v, fresh %v", when, st1, st2)
		}
		if !st1.IsSuccess() {
			return
		}
		got, _ := framework.ReadState[*preScoreState](gotState, preScoreStateKey)
		want, _ := framework.ReadState[*preScoreState](wantState, preScoreStateKey)
		if diff := cmp.Diff(want.scores(), got.scores()); diff != "" {
			t.Fatalf("%s: scores (-fresh,+kept):\n%s", when, diff)
		}
	}
	for i := range 3 {
		check(fmt.Sprint("cycle ", i))
	}
	if err := c.AddPod(prefers("c", "n17", 2)); err != nil {
		t.Fatal(err)
	}
	check("after a pod with affinity joined n17")
	if err := c.RemovePod(prefers("a", "n03", 5)); err != nil {
		t.Fatal(err)
	}
	check("after n03's pod left")
	if err := c.RemovePod(prefers("b", "n11", 7)); err != nil {
		t.Fatal(err)
	}
	check("after n11's pod left")
	if pl.kept.scores.catchUps == 0 {
		t.Errorf("no catch-ups (%d recounts)", pl.kept.scores.recounts)
	}
}

// TestKeptSlotsDoNotThrash: with more keys in turn than slots, the keys
// kept stay kept and the others are refused (their cycles walk) rather
// than each taking over a slot, to be recounted, every time; once a slot
// goes unused, a new key takes it.
func TestKeptSlotsDoNotThrash(t *testing.T) {
	var s keptSlots[int]
	admitted := map[string]bool{}
	for round := range 20 {
		for k := range maxKept + 2 {
			key := fmt.Sprint("k", k)
			e, _ := s.slot(key)
			if e == nil {
				continue
			}
			if !e.valid {
				if round > 0 && admitted[key] {
					t.Fatalf("round %d: %s was taken over and admitted again", round, key)
				}
				admitted[key] = true
				e.valid = true
			}
		}
	}
	if len(admitted) != maxKept {
		t.Errorf("%d keys admitted, want %d: %v", len(admitted), maxKept, admitted)
	}
	// k0 alone from now on: the other slots go stale, and a new key
	// takes one of them.
	for range staleAfter + 1 {
		s.slot("k0")
	}
	if e, _ := s.slot("new"); e == nil || e.valid {
		t.Errorf("a new key was not given a stale slot: %v", e)
	}
}
