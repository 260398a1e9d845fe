package algorithm

import "math"

// noTotal is the total of a leaf that is not feasible (or not yet
// scored): below every real total, so it never wins nor ties.
const noTotal = math.MinInt64

// rankTree is a segment tree over the positions of the snapshot's node
// list, for one signature: per subtree the number of feasible nodes, the
// highest weighted total and how many nodes have it, and per normalizing
// Score plugin the highest raw score. It answers what selectHost and the
// filter window need (the k-th feasible node from a position, the first
// node above a total, the nodes at a total) in O(log n), with no pointer
// in it for the garbage collector to scan or a write barrier to guard.
// Leaves live at size+pos; node i's children are 2i and 2i+1.
type rankTree struct {
	size     int
	feasible []int32
	best     []int64
	atBest   []int32
	// highest holds, per normalizer j, 2*size values from j*2*size.
	highest []int64
	norms   int
}

// reset sizes t for n positions and norms normalizing plugins, every
// leaf not feasible.
func (t *rankTree) reset(n, norms int) {
	size := 1
	for size < n {
		size *= 2
	}
	t.size, t.norms = size, norms
	t.feasible = resize(t.feasible, 2*size)
	t.best = resize(t.best, 2*size)
	t.atBest = resize(t.atBest, 2*size)
	t.highest = resize(t.highest, 2*size*norms)
	clear(t.feasible)
	clear(t.atBest)
	for i := range t.best {
		t.best[i] = noTotal
	}
	for i := range t.highest {
		t.highest[i] = noTotal
	}
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// setLeaf records pos without fixing the subtrees above it (see fix and
// rebuild): whether it is feasible, its total (noTotal while not known)
// and the normalizers' raw scores (nil while not known).
func (t *rankTree) setLeaf(pos int, feasible bool, total int64, raw []int64) {
	i := t.size + pos
	t.feasible[i], t.atBest[i], t.best[i] = 0, 0, total
	if feasible {
		t.feasible[i] = 1
	}
	if total != noTotal {
		t.atBest[i] = 1
	}
	for j := range t.norms {
		h := int64(noTotal)
		if raw != nil {
			h = raw[j]
		}
		t.highest[j*2*t.size+i] = h
	}
}

// leafTotal is pos's total, noTotal if it is not feasible.
func (t *rankTree) leafTotal(pos int) int64 { return t.best[t.size+pos] }

// leafFeasible says whether pos is feasible.
func (t *rankTree) leafFeasible(pos int) bool { return t.feasible[t.size+pos] != 0 }

func (t *rankTree) pull(i int) {
	l, r := 2*i, 2*i+1
	t.feasible[i] = t.feasible[l] + t.feasible[r]
	switch bl, br := t.best[l], t.best[r]; {
	case bl > br:
		t.best[i], t.atBest[i] = bl, t.atBest[l]
	case bl < br:
		t.best[i], t.atBest[i] = br, t.atBest[r]
	default:
		t.best[i], t.atBest[i] = bl, t.atBest[l]+t.atBest[r]
	}
	for j := range t.norms {
		h := t.highest[j*2*t.size:]
		h[i] = max(h[l], h[r])
	}
}

// fix recomputes the subtrees above leaf pos.
func (t *rankTree) fix(pos int) {
	for i := (t.size + pos) / 2; i >= 1; i /= 2 {
		t.pull(i)
	}
}

// rebuild recomputes every subtree from the leaves.
func (t *rankTree) rebuild() {
	for i := t.size - 1; i >= 1; i-- {
		t.pull(i)
	}
}

// numFeasible is the number of feasible positions.
func (t *rankTree) numFeasible() int { return int(t.feasible[1]) }

// feasibleBefore counts the feasible positions below pos.
func (t *rankTree) feasibleBefore(pos int) int {
	n := 0
	for lo, hi := t.size, t.size+pos; lo < hi; lo, hi = lo/2, hi/2 {
		if lo&1 == 1 {
			n += int(t.feasible[lo])
			lo++
		}
		if hi&1 == 1 {
			hi--
			n += int(t.feasible[hi])
		}
	}
	return n
}

// kthFeasible is the position of the k-th feasible position (from 1),
// k at most numFeasible.
func (t *rankTree) kthFeasible(k int) int {
	i := 1
	for i < t.size {
		if l := int(t.feasible[2*i]); l >= k {
			i = 2 * i
		} else {
			k -= l
			i = 2*i + 1
		}
	}
	return i - t.size
}

// firstAbove is the first position in [lo, hi) whose total is above m,
// -1 if none.
func (t *rankTree) firstAbove(lo, hi int, m int64) int {
	return t.firstAboveIn(1, 0, t.size, lo, hi, m)
}

func (t *rankTree) firstAboveIn(i, nl, nr, lo, hi int, m int64) int {
	if nr <= lo || hi <= nl || t.best[i] <= m {
		return -1
	}
	if i >= t.size {
		return i - t.size
	}
	mid := (nl + nr) / 2
	if p := t.firstAboveIn(2*i, nl, mid, lo, hi, m); p >= 0 {
		return p
	}
	return t.firstAboveIn(2*i+1, mid, nr, lo, hi, m)
}

// countAt counts the positions in [lo, hi) whose total is m, which no
// total there may exceed.
func (t *rankTree) countAt(lo, hi int, m int64) int { return t.countAtIn(1, 0, t.size, lo, hi, m) }

func (t *rankTree) countAtIn(i, nl, nr, lo, hi int, m int64) int {
	if nr <= lo || hi <= nl || t.best[i] < m {
		return 0
	}
	if lo <= nl && nr <= hi {
		return int(t.atBest[i])
	}
	mid := (nl + nr) / 2
	return t.countAtIn(2*i, nl, mid, lo, hi, m) + t.countAtIn(2*i+1, mid, nr, lo, hi, m)
}

// kthAt is the k-th position (from 1) in [lo, hi) whose total is m, which
// no total there may exceed; -1 if there are fewer.
func (t *rankTree) kthAt(lo, hi int, m int64, k int) int {
	return t.kthAtIn(1, 0, t.size, lo, hi, m, &k)
}

func (t *rankTree) kthAtIn(i, nl, nr, lo, hi int, m int64, k *int) int {
	if nr <= lo || hi <= nl || t.best[i] < m {
		return -1
	}
	if lo <= nl && nr <= hi && int(t.atBest[i]) < *k {
		*k -= int(t.atBest[i])
		return -1
	}
	if i >= t.size {
		// A leaf in range at m with *k == 1.
		return i - t.size
	}
	mid := (nl + nr) / 2
	if p := t.kthAtIn(2*i, nl, mid, lo, hi, m, k); p >= 0 {
		return p
	}
	return t.kthAtIn(2*i+1, mid, nr, lo, hi, m, k)
}

// highestIn is normalizer j's highest raw score over the feasible
// positions in [lo, hi), noTotal if none.
func (t *rankTree) highestIn(j, lo, hi int) int64 {
	h := t.highest[j*2*t.size : (j+1)*2*t.size]
	out := int64(noTotal)
	for lo, hi = lo+t.size, hi+t.size; lo < hi; lo, hi = lo/2, hi/2 {
		if lo&1 == 1 {
			out = max(out, h[lo])
			lo++
		}
		if hi&1 == 1 {
			hi--
			out = max(out, h[hi])
		}
	}
	return out
}
