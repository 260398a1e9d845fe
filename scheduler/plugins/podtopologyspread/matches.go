package podtopologyspread

import (
	"maps"
	"math"
)

// domainMatches are one hard constraint's matching pods per eligible
// domain, and the fewest in any domain (the global minimum skew is
// measured from). They are held as a base that nothing writes once made,
// shared by every copy, and the changes made since, which each copy owns.
// The kept totals hand theirs to every cycle and a cycle's state is copied
// for each re-check of a placement; with a domain per node (a hostname
// key) rebuilding, scanning for the emptiest domains and copying a map of
// every domain was nearly all of a cycle's PreFilter, where now each costs
// the changes. The zero value holds no domain.
type domainMatches struct {
	base map[string]int
	// changes holds a domain's count, or gone for a domain no longer
	// eligible, over base.
	changes map[string]int
	domains int
	// perCount counts the domains with each number of matching pods, so
	// the minimum follows every change without a scan of the domains.
	perCount map[int]int
	min      int
}

// gone marks a domain in changes that base has and the copy has not.
const gone = math.MinInt

// noDomain is the minimum with no domain, as kube's critical paths start.
const noDomain = math.MaxInt32

// matchesOf makes m the base of new matches; m must not be written after.
func matchesOf(m map[string]int) domainMatches {
	d := domainMatches{base: m, domains: len(m), perCount: map[int]int{}, min: noDomain}
	for _, n := range m {
		d.perCount[n]++
		d.min = min(d.min, n)
	}
	return d
}

// get returns the matching pods of domain v, and whether v is eligible.
func (d *domainMatches) get(v string) (int, bool) {
	if len(d.changes) > 0 {
		if n, ok := d.changes[v]; ok {
			return n, n != gone
		}
	}
	n, ok := d.base[v]
	return n, ok
}

// set makes domain v eligible with n matching pods.
func (d *domainMatches) set(v string, n int) {
	if old, ok := d.get(v); ok {
		d.uncount(old)
	} else {
		d.domains++
	}
	d.count(n)
	d.write(v, n)
}

// remove makes domain v not eligible.
func (d *domainMatches) remove(v string) {
	old, ok := d.get(v)
	if !ok {
		return
	}
	d.uncount(old)
	d.domains--
	if _, inBase := d.base[v]; inBase {
		d.write(v, gone)
	} else {
		delete(d.changes, v)
	}
}

func (d *domainMatches) write(v string, n int) {
	if d.changes == nil {
		d.changes = map[string]int{}
	}
	d.changes[v] = n
}

func (d *domainMatches) count(n int) {
	if d.perCount == nil {
		d.perCount = map[int]int{}
		d.min = noDomain
	}
	d.perCount[n]++
	d.min = min(d.min, n)
}

func (d *domainMatches) uncount(n int) {
	if d.perCount[n]--; d.perCount[n] > 0 {
		return
	}
	delete(d.perCount, n)
	if n == d.min {
		// Few distinct counts, however many domains: a short scan.
		d.min = noDomain
		for c := range d.perCount {
			d.min = min(d.min, c)
		}
	}
}

// minimum is the fewest matching pods of any eligible domain; noDomain
// when there is none.
func (d *domainMatches) minimum() int {
	if d.perCount == nil {
		return noDomain
	}
	return d.min
}

// each calls f for every eligible domain.
func (d *domainMatches) each(f func(v string, n int)) {
	for v, n := range d.base {
		if _, changed := d.changes[v]; !changed {
			f(v, n)
		}
	}
	for v, n := range d.changes {
		if n != gone {
			f(v, n)
		}
	}
}

// copy returns matches equal to d that share its base.
func (d *domainMatches) copy() domainMatches {
	c := *d
	c.changes, c.perCount = maps.Clone(d.changes), maps.Clone(d.perCount)
	return c
}

// settle folds the changes into a new base once they pass a share of it:
// a copy costs the changes, a fold the whole base, and the share puts a
// fold about every len(base)/foldShare changed domains.
func (d *domainMatches) settle() {
	if len(d.changes) <= max(foldMin, len(d.base)/foldShare) {
		return
	}
	base := make(map[string]int, d.domains)
	d.each(func(v string, n int) { base[v] = n })
	d.base, d.changes = base, nil
}

const (
	foldMin   = 32
	foldShare = 64
)

// all returns the eligible domains' counts as one map (for tests).
func (d *domainMatches) all() map[string]int {
	out := map[string]int{}
	d.each(func(v string, n int) { out[v] = n })
	return out
}
