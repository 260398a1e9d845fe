package podtopologyspread

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDomainMatchesCopiesAreIndependent sets, removes and settles copies of
// copies at random and holds each to a plain map and its minimum: a write
// into a shared base, a fold that changed one, or a minimum not kept would
// show in a copy.
func TestDomainMatchesCopiesAreIndependent(t *testing.T) {
	// Few domains, so that the emptiest fill up and the minimum moves
	// often; and many, so that changes pass foldMin and fold.
	for _, domains := range []int{8, 100} {
		t.Run(fmt.Sprint("domains=", domains), func(t *testing.T) { checkMatchesCopies(t, domains) })
	}
}

func checkMatchesCopies(t *testing.T, domains int) {
	rng := rand.New(rand.NewPCG(3, uint64(domains)))
	type held struct {
		matches domainMatches
		want    map[string]int
	}
	start := map[string]int{}
	for d := range domains {
		start[string(rune('a'+d))] = rng.IntN(4)
	}
	all := []*held{{matches: matchesOf(maps.Clone(start)), want: maps.Clone(start)}}
	folds := 0
	for step := range 20000 {
		h := all[rng.IntN(len(all))]
		v := string(rune('a' + rng.IntN(domains+domains/4+2)))
		switch r := rng.IntN(100); {
		case r < 2 && len(all) < 40:
			all = append(all, &held{matches: h.matches.copy(), want: maps.Clone(h.want)})
		case r < 4:
			before := len(h.matches.changes)
			if h.matches.settle(); before > 0 && h.matches.changes == nil {
				folds++
			}
		case r < 14:
			h.matches.remove(v)
			delete(h.want, v)
		default:
			n := max(h.want[v]+rng.IntN(3)-1, 0)
			h.matches.set(v, n)
			h.want[v] = n
		}
		check := []*held{h}
		if step%100 == 0 {
			check = all
		}
		for i, o := range check {
			if got := o.matches.all(); !maps.Equal(got, o.want) {
				t.Fatalf("step %d: copy %d (-want,+got):\n%s", step, i, cmp.Diff(o.want, got))
			}
			wantMin := noDomain
			for _, n := range o.want {
				wantMin = min(wantMin, n)
			}
			if o.matches.minimum() != wantMin || o.matches.domains != len(o.want) {
				t.Fatalf("step %d: copy %d has minimum %d over %d domains, want %d over %d",
					step, i, o.matches.minimum(), o.matches.domains, wantMin, len(o.want))
			}
			for v, n := range o.want {
				if got, ok := o.matches.get(v); !ok || got != n {
					t.Fatalf("step %d: copy %d get(%q) = %d, %v; want %d", step, i, v, got, ok, n)
				}
			}
		}
	}
	if len(all) < 10 || (domains > 2*foldMin && folds == 0) {
		t.Errorf("%d copies, %d folds: the test exercised too little", len(all), folds)
	}
}
