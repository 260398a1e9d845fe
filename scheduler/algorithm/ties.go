package algorithm

import (
	"math/bits"
	"math/rand/v2"
)

// tieBreaker picks uniformly among the nodes tied for the best total. kube
// samples a reservoir, one coin per tie met; one draw over the number of
// ties picks from the same distribution, and at 100,000 nodes a basic pod
// ties on most of the 5,000 nodes it scores, where the coins were a third
// of a ranked cycle. It reads its PCG directly and consumes it exactly as
// rand.Rand.IntN would (TestTieBreakerMatchesIntN).
type tieBreaker struct{ pcg *rand.PCG }

// intN is a uniform draw from [0, n), for n > 0.
func (t tieBreaker) intN(n int) int {
	m := uint64(n)
	if m&(m-1) == 0 {
		return int(t.pcg.Uint64() & (m - 1))
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
	return int(hi)
}

// pick returns which of n tied nodes wins, counting from 0; a lone best
// node costs no draw.
func (t tieBreaker) pick(n int) int {
	if n <= 1 {
		return 0
	}
	return t.intN(n)
}
