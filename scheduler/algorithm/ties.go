package algorithm

import (
	"math/bits"
	"math/rand/v2"
)

// tieBreaker draws the coin of kube's reservoir sampling among equal
// scores: a pod with a hundred tied nodes draws a hundred times, and
// rand.Rand reached the generator through an interface and two calls per
// draw. It reads its PCG directly and consumes it exactly as
// rand.Rand.IntN would, so placements for a seed do not change
// (TestTieBreakerMatchesIntN).
type tieBreaker struct{ pcg *rand.PCG }

// oneIn reports whether a uniform draw from [0, n) is 0, for n > 0.
func (t tieBreaker) oneIn(n int) bool {
	m := uint64(n)
	if m&(m-1) == 0 {
		return t.pcg.Uint64()&(m-1) == 0
	}
	// The high word of x*m is uniform on [0, m) once the low word is
	// kept out of the 2⁶⁴ mod m values that would bias it (Lemire); the
	// modulo is needed only when the low word is below m at all.
	hi, lo := bits.Mul64(t.pcg.Uint64(), m)
	if lo < m {
		for thresh := -m % m; lo < thresh; {
			hi, lo = bits.Mul64(t.pcg.Uint64(), m)
		}
	}
	return hi == 0
}
