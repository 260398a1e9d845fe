package scheduler

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
)

// resetListing is a listing with bound, pending, finished and node-less
// pods, enough of them for the parallel paths to split the work.
func resetListing() ([]*framework.Node, []*framework.Pod) {
	var nodes []*framework.Node
	for i := range 50 {
		nodes = append(nodes, feedbackNode(fmt.Sprintf("n%d", i), int64(i+1)))
	}
	var pods []*framework.Pod
	for i := range 3000 {
		var p *framework.Pod
		switch i % 4 {
		case 0, 1:
			p = cpuPod(fmt.Sprintf("bound-%d", i), 0, 10, fmt.Sprintf("n%d", i%50))
		case 2:
			p = cpuPod(fmt.Sprintf("pending-%d", i), int32(i%3), 10, "")
		default:
			p = cpuPod(fmt.Sprintf("done-%d", i), 0, 10, fmt.Sprintf("n%d", i%50))
			p.Phase = framework.PodSucceeded
		}
		pods = append(pods, p)
	}
	pods = append(pods, cpuPod("on-unknown-node", 0, 10, "gone"))
	return nodes, pods
}

// The first listing, loaded in bulk into an empty scheduler, leaves what
// the event-at-a-time path leaves: the same nodes and charges in the cache,
// the same pods pending and queued in each shard.
func TestBulkLoadMatchesEventPath(t *testing.T) {
	nodes, pods := resetListing()
	bulk, err := New(context.Background(), Config{Shards: 3}, nopCommitter{})
	if err != nil {
		t.Fatal(err)
	}
	bulk.Reset(nodes, pods)

	events, err := New(context.Background(), Config{Shards: 3}, nopCommitter{})
	if err != nil {
		t.Fatal(err)
	}
	events.UpsertNode(feedbackNode("stale", 1)) // not empty: Reset takes the event path
	if events.isEmpty() {
		t.Fatal("a scheduler holding a node says it is empty")
	}
	events.Reset(nodes, pods)

	got := loadedState(bulk)
	queued := 0
	for _, q := range got.Queued {
		queued += len(q)
	}
	if queued != 750 || len(got.Nodes) != 51 {
		t.Errorf("bulk load queued %d pods on %d NodeInfos, want 750 on 51", queued, len(got.Nodes))
	}
	if diff := cmp.Diff(loadedState(events), got); diff != "" {
		t.Errorf("bulk load differs from the event path (-events,+bulk):\n%s", diff)
	}
}

// loadedState is what a load leaves, in comparable form.
type loaded struct {
	// Nodes maps each NodeInfo (node-less ones included) to its pods and
	// requested CPU.
	Nodes map[string]string
	// Pending and Queued per shard, sorted.
	Pending, Queued [][]string
	Active          []int
}

func loadedState(s *Scheduler) loaded {
	out := loaded{Nodes: map[string]string{}}
	for name, ni := range s.cache.Dump().Nodes {
		var keys []string
		for _, pi := range ni.Pods {
			keys = append(keys, pi.Pod.Key())
		}
		slices.Sort(keys)
		out.Nodes[name] = fmt.Sprintf("node=%v cpu=%d pods=%v", ni.Node() != nil, ni.Requested.MilliCPU, keys)
	}
	for _, sh := range s.shards {
		var pending, queued []string
		sh.mu.Lock()
		for key := range sh.pending {
			pending = append(pending, key)
		}
		sh.mu.Unlock()
		for _, p := range sh.queue.PendingPods() {
			queued = append(queued, p.Key())
		}
		slices.Sort(pending)
		slices.Sort(queued)
		active, _, _ := sh.queue.Len()
		out.Pending, out.Queued, out.Active = append(out.Pending, pending), append(out.Queued, queued), append(out.Active, active)
	}
	return out
}
