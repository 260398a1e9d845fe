package cache

import (
	"fmt"
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
)

// A bulk load numbers its pods as placements one by one, as AddPod would:
// a shard that saw the cache before it learns exactly which landed last.
func TestAddPodInfosRecordsPlacements(t *testing.T) {
	c := New()
	c.AddNode(stdNode("a"))
	if err := c.AddPod(pod("before", "a", 1)); err != nil {
		t.Fatal(err)
	}
	const n = recentPlacements + 10
	pis := make([]*framework.PodInfo, n)
	for i := range pis {
		pis[i] = framework.NewPodInfo(pod(fmt.Sprint("p", i), "a", 1))
	}
	seen := c.Placements()
	if err := c.AddPodInfos(pis); err != nil {
		t.Fatal(err)
	}
	if got := c.Placements(); got != seen+n {
		t.Fatalf("Placements = %d after a bulk load of %d onto %d, want %d", got, n, seen, seen+n)
	}
	last, complete := c.PlacedSince(seen + n - 3)
	if !complete || len(last) != 3 || last[0] != pis[n-3] || last[2] != pis[n-1] {
		t.Errorf("PlacedSince(the last three) = %d pods, complete %v; want the last three, in order", len(last), complete)
	}
	if _, complete := c.PlacedSince(seen); complete {
		t.Error("PlacedSince(before the load) says complete, but the load placed more than the log remembers")
	}
	// A pod loaded again on the same node is no new placement.
	if err := c.AddPodInfos(pis[:1]); err != nil {
		t.Fatal(err)
	}
	if got := c.Placements(); got != seen+n {
		t.Errorf("Placements = %d after reloading a pod in place, want %d", got, seen+n)
	}
}
