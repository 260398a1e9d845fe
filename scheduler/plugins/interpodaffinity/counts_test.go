package interpodaffinity

import (
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLayeredCountsCopiesAreIndependent changes copies of copies at random,
// settling some, and checks every copy still holds exactly what was added
// to it: a write to a shared base, or a fold that changed one, would show
// in the copies made before it.
func TestLayeredCountsCopiesAreIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	type held struct {
		counts layeredCounts
		want   map[topologyPair]int64
	}
	all := []*held{{want: map[topologyPair]int64{}}}
	domains := 200
	for step := range 20000 {
		h := all[rng.IntN(len(all))]
		switch r := rng.IntN(100); {
		case r < 2 && len(all) < 50:
			all = append(all, &held{counts: h.counts.copy(), want: maps.Clone(h.want)})
		case r < 4:
			h.counts.settle()
		default:
			p := topologyPair{key: []string{"host", "zone"}[rng.IntN(2)], value: string(rune('a' + rng.IntN(domains)))}
			delta := int64(rng.IntN(3) - 1)
			if delta == 0 || h.want[p]+delta < 0 {
				delta = 1
			}
			h.counts.add(p.key, p.value, delta)
			if h.want[p] += delta; h.want[p] == 0 {
				delete(h.want, p)
			}
		}
		check := []*held{h}
		if step%100 == 0 {
			check = all // every copy, now and then: a change may show in another
		}
		for i, o := range check {
			if got := o.counts.totals(); !maps.Equal(got, o.want) {
				t.Fatalf("step %d: copy %d (-want,+got):\n%s", step, i, cmp.Diff(o.want, got))
			}
			if o.counts.nonzero != len(o.want) || o.counts.empty() != (len(o.want) == 0) {
				t.Fatalf("step %d: copy %d counts %d domains, want %d", step, i, o.counts.nonzero, len(o.want))
			}
		}
	}
	folded := 0
	for _, o := range all {
		if len(o.counts.base) > 0 {
			folded++
		}
	}
	if len(all) < 10 || folded == 0 {
		t.Errorf("%d copies, %d with a base: the test exercised too little", len(all), folded)
	}
}
