package algorithm

import (
	"math/rand/v2"
	"testing"
)

// TestRankTreeQueries checks every rankTree query against a plain scan of
// the leaves, over random trees with many ties and updates.
func TestRankTreeQueries(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for _, n := range []int{1, 2, 3, 7, 64, 100, 257} {
		var tr rankTree
		tr.reset(n, 2)
		totals := make([]int64, n)
		raws := make([][2]int64, n)
		set := func(pos int, fix bool) {
			total, raw := int64(noTotal), []int64(nil)
			if rng.IntN(4) != 0 {
				total = int64(rng.IntN(5))
				raws[pos] = [2]int64{int64(rng.IntN(9)), int64(rng.IntN(3))}
				raw = raws[pos][:]
			}
			totals[pos] = total
			tr.setLeaf(pos, total != noTotal, total, raw)
			if fix {
				tr.fix(pos)
			}
		}
		for pos := range n {
			set(pos, false)
		}
		tr.rebuild()
		for round := range 200 {
			if round > 0 {
				set(rng.IntN(n), true)
			}
			checkRankTree(t, &tr, totals, raws, rng)
		}
	}
}

func checkRankTree(t *testing.T, tr *rankTree, totals []int64, raws [][2]int64, rng *rand.Rand) {
	t.Helper()
	n := len(totals)
	var feasible []int
	for pos, v := range totals {
		if v != noTotal {
			feasible = append(feasible, pos)
		}
	}
	if got := tr.numFeasible(); got != len(feasible) {
		t.Fatalf("n=%d: numFeasible %d, want %d", n, got, len(feasible))
	}
	for k := 1; k <= len(feasible); k++ {
		if got := tr.kthFeasible(k); got != feasible[k-1] {
			t.Fatalf("n=%d: kthFeasible(%d) = %d, want %d", n, k, got, feasible[k-1])
		}
	}
	lo := rng.IntN(n + 1)
	hi := lo + rng.IntN(n-lo+1)
	before := 0
	for _, p := range feasible {
		if p < lo {
			before++
		}
	}
	if got := tr.feasibleBefore(lo); got != before {
		t.Fatalf("n=%d: feasibleBefore(%d) = %d, want %d", n, lo, got, before)
	}
	m := int64(rng.IntN(6)) - 1
	first, top := -1, int64(noTotal)
	high := [2]int64{noTotal, noTotal}
	for pos := lo; pos < hi; pos++ {
		if totals[pos] > m && first < 0 {
			first = pos
		}
		if totals[pos] != noTotal {
			top = max(top, totals[pos])
			high[0], high[1] = max(high[0], raws[pos][0]), max(high[1], raws[pos][1])
		}
	}
	if got := tr.firstAbove(lo, hi, m); got != first {
		t.Fatalf("n=%d: firstAbove(%d, %d, %d) = %d, want %d", n, lo, hi, m, got, first)
	}
	for j := range 2 {
		if got := tr.highestIn(j, lo, hi); got != high[j] {
			t.Fatalf("n=%d: highestIn(%d, %d, %d) = %d, want %d", n, j, lo, hi, got, high[j])
		}
	}
	if top == noTotal {
		return
	}
	var at []int
	for pos := lo; pos < hi; pos++ {
		if totals[pos] == top {
			at = append(at, pos)
		}
	}
	if got := tr.countAt(lo, hi, top); got != len(at) {
		t.Fatalf("n=%d: countAt(%d, %d, %d) = %d, want %d", n, lo, hi, top, got, len(at))
	}
	for k := 1; k <= len(at); k++ {
		if got := tr.kthAt(lo, hi, top, k); got != at[k-1] {
			t.Fatalf("n=%d: kthAt(%d, %d, %d, %d) = %d, want %d", n, lo, hi, top, k, got, at[k-1])
		}
	}
}

// TestSelectRankedDrawsAsSelectHost checks that selectRanked picks the
// node selectHost picks from the window's feasible totals in window order,
// and leaves the random source where selectHost leaves it, over windows
// that wrap around the list and totals that tie at several levels.
func TestSelectRankedDrawsAsSelectHost(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for round := range 2000 {
		n := 1 + rng.IntN(300)
		var tr rankTree
		tr.reset(n, 0)
		totals := make([]int64, n)
		levels := 1 + rng.IntN(6)
		for pos := range n {
			totals[pos] = noTotal
			if rng.IntN(5) != 0 {
				totals[pos] = int64(rng.IntN(levels))
			}
			tr.setLeaf(pos, totals[pos] != noTotal, totals[pos], nil)
		}
		tr.rebuild()
		w := window{t: &tr, start: rng.IntN(n), length: 1 + rng.IntN(n), n: n}
		var inWindow []int64
		var positions []int
		for off := range w.length {
			if pos := w.pos(off); totals[pos] != noTotal {
				inWindow = append(inWindow, totals[pos])
				positions = append(positions, pos)
			}
		}
		if len(inWindow) == 0 {
			continue
		}
		seed := uint64(round)
		walk, ranked := New(0, WithRandSeed(seed, 1)), New(0, WithRandSeed(seed, 1))
		want := positions[selectHost(inWindow, walk.ties)]
		got := w.pos(ranked.selectRanked(w))
		if got != want {
			t.Fatalf("round %d: selectRanked chose %d, selectHost %d (totals %v)", round, got, want, inWindow)
		}
		if a, b := walk.pcg.Uint64(), ranked.pcg.Uint64(); a != b {
			t.Fatalf("round %d: the random source moved differently", round)
		}
	}
}
