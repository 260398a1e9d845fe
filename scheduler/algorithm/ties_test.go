package algorithm

import (
	"math/rand/v2"
	"testing"
)

// TestTieBreakerMatchesIntN: the same seed gives the same draws as
// rand.Rand.IntN(n), and leaves the source in the same place, for powers
// of two, small counts and counts whose rejections are likely.
func TestTieBreakerMatchesIntN(t *testing.T) {
	ns := []int{1, 2, 3, 4, 5, 7, 8, 100, 1000, 1 << 20, 1<<62 + 1, 3 << 61}
	want := rand.New(rand.NewPCG(1, 2))
	got := tieBreaker{rand.NewPCG(1, 2)}
	for i := range 200000 {
		n := ns[i%len(ns)]
		if g, w := got.intN(n), want.IntN(n); g != w {
			t.Fatalf("draw %d, n=%d: intN = %d, IntN = %d", i, n, g, w)
		}
	}
	if g, w := got.pcg.Uint64(), want.Uint64(); g != w {
		t.Fatalf("sources diverged: next %d, want %d", g, w)
	}
}
