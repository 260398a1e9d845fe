package replica

import (
	"fmt"
	"slices"
	"testing"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/scheduler/framework"
)

// A listing brings many more pods than nodes; those on a node whose lease
// has lapsed are found whether or not any node is down.
func TestLostByNode(t *testing.T) {
	s := &bridge{}
	s.nodes.init()
	leased := &berthv1.Node{Name: "leased", LeaseTtlSeconds: 10}
	s.nodes.records["leased"] = nodeRecord{node: leased, rev: 1}
	s.nodes.records["plain"] = nodeRecord{node: &berthv1.Node{Name: "plain"}, rev: 2}
	s.nodes.leased["leased"] = true

	var pods []*framework.Pod
	for i := range 20 {
		node := []string{"leased", "plain", ""}[i%3]
		pods = append(pods, &framework.Pod{Namespace: "ns", Name: fmt.Sprint("p", i), NodeName: node})
	}
	if got := s.lostByNode(pods); len(got) != 0 {
		t.Fatalf("every lease held: lost %v, want none", got)
	}

	delete(s.nodes.leased, "leased")
	got := s.lostByNode(pods)
	var want []*framework.Pod
	for _, p := range pods {
		if p.NodeName == "leased" {
			want = append(want, p)
		}
	}
	if len(got) != 1 || !slices.Equal(got["leased"], want) {
		t.Fatalf("lease lapsed: lost %v, want the %d pods on leased", got, len(want))
	}
	if got := s.lostByNode(pods[:1]); len(got["leased"]) != 1 {
		t.Fatalf("one pod on the lapsed node: lost %v, want it", got)
	}
}
