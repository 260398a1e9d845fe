package podtopologyspread

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
)

// Filter reads zone and region counts by the address of each node's
// canonical value; through any run of AddPod and RemovePod on clones those
// counts must stay the map's, and Filter's verdicts those the map gives.
func TestSharedCountsFollowTheMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var nodes []*framework.Node
	for i := range 40 {
		b := mkNode(fmt.Sprintf("n%d", i))
		if i%13 != 12 { // a few nodes without a zone
			// Cloned: each node's labels own their bytes, as decoded ones do.
			b = b.label(framework.LabelTopologyZone, strings.Clone(fmt.Sprintf("zone-%d", i%6)))
		}
		b = b.label(framework.LabelTopologyRegion, strings.Clone(fmt.Sprintf("region-%d", i%2)))
		nodes = append(nodes, b.obj())
	}
	var pods []*framework.Pod
	for i := range 60 {
		pods = append(pods, mkPod(fmt.Sprintf("p%d", i)).node(nodes[rng.IntN(len(nodes))].Name).label("foo", "").obj())
	}
	infos := place(nodes, pods)
	pl, _ := newPlugin(t, listArgs, infos...)
	pod := mkPod("in").label("foo", "").
		spread(1, framework.LabelTopologyZone, hard, exists("foo")).
		spread(3, framework.LabelTopologyRegion, hard, exists("foo")).info()
	state := framework.NewCycleState()
	if _, st := pl.PreFilter(ctx, state, pod, infos); !st.IsSuccess() {
		t.Fatal(st)
	}
	orig, _ := framework.ReadState[*preFilterState](state, preFilterStateKey)
	for i := range orig.constraints {
		if orig.shared == nil || len(orig.shared[i]) != orig.matches[i].domains {
			t.Fatalf("constraint %d: shared counts %v, want one per domain of %v", i, orig.shared, orig.matches[i].all())
		}
	}
	before := summarize(orig)

	clone := state.Clone()
	s, _ := framework.ReadState[*preFilterState](clone, preFilterStateKey)
	byMap := func(ni *framework.NodeInfo) verdict {
		plain := *s
		plain.shared = nil
		return plain.verdict(ni)
	}
	var added []*framework.PodInfo
	var addedOn []*framework.NodeInfo
	for step := range 300 {
		if len(added) > 0 && rng.IntN(3) == 0 {
			j := rng.IntN(len(added))
			if st := pl.RemovePod(ctx, clone, pod, added[j], addedOn[j]); !st.IsSuccess() {
				t.Fatal(st)
			}
			added, addedOn = slices.Delete(added, j, j+1), slices.Delete(addedOn, j, j+1)
		} else {
			ni := infos[rng.IntN(len(infos))]
			pi := mkPod(fmt.Sprintf("s%d", step)).node(ni.Node().Name).label("foo", "").info()
			if st := pl.AddPod(ctx, clone, pod, pi, ni); !st.IsSuccess() {
				t.Fatal(st)
			}
			added, addedOn = append(added, pi), append(addedOn, ni)
		}
		for _, ni := range infos {
			for i := range s.constraints {
				if v, ok := ni.Label(s.constraints[i].label); ok && s.matchNum(i, v) != s.matches[i].all()[v] {
					t.Fatalf("step %d, node %s: constraint %d counts %d in %q, the map %d",
						step, ni.Node().Name, i, s.matchNum(i, v), v, s.matches[i].all()[v])
				}
			}
			if got, want := s.verdict(ni), byMap(ni); got != want {
				t.Fatalf("step %d, node %s: verdict %d, by the map %d", step, ni.Node().Name, got, want)
			}
		}
	}
	if diff := cmp.Diff(before, summarize(orig)); diff != "" {
		t.Errorf("the clone's updates changed the original (-before,+after):\n%s", diff)
	}
	for i, t0 := range orig.shared {
		for _, d := range t0 {
			if n, _ := orig.matches[i].get(d.value); d.num != n {
				t.Errorf("original constraint %d: shared %q = %d, map %d", i, d.value, d.num, n)
			}
		}
	}
}

// A constraint whose domains outgrow the shared list is counted by the map
// alone from then on.
func TestSetSharedDropsALongList(t *testing.T) {
	s := &preFilterState{
		constraints: []constraint{{label: framework.NewLabelKey(framework.LabelTopologyZone)}},
		matches:     make([]domainMatches, 1),
	}
	for d := range maxSharedDomains {
		s.matches[0].set(fmt.Sprintf("z%d", d), d)
	}
	s.indexShared()
	if len(s.shared[0]) != maxSharedDomains {
		t.Fatalf("shared = %v, want %d domains", s.shared[0], maxSharedDomains)
	}
	s.matches[0].set("one-more", 5)
	s.setShared(0, "one-more", 5)
	if s.shared[0] != nil {
		t.Fatalf("shared after one domain too many = %v, want nil", s.shared[0])
	}
	if got := s.matchNum(0, "one-more"); got != 5 {
		t.Errorf("matchNum = %d, want 5 from the map", got)
	}
}
