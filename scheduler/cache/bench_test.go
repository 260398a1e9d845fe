package cache

import (
	"fmt"
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
)

// benchCache returns a cache of nodes, each with podsPerNode bound pods.
func benchCache(b *testing.B, nodes, podsPerNode int) *Cache {
	c := New()
	for i := range nodes {
		name := fmt.Sprint("node-", i)
		n := node(name, framework.ResourceList{"cpu": 64000, "memory": 256 << 30, "pods": 110})
		n.Labels = map[string]string{labelZone: fmt.Sprint("z", i%3)}
		c.AddNode(n)
		for j := range podsPerNode {
			if err := c.AddPod(pod(fmt.Sprint(name, "-", j), name, 100)); err != nil {
				b.Fatal(err)
			}
		}
	}
	return c
}

// BenchmarkUpdateSnapshotOneChanged measures a cycle's snapshot refresh at
// 5,000 nodes when one node changed since the last one (the change itself,
// an assume or forget, is included).
func BenchmarkUpdateSnapshotOneChanged(b *testing.B) {
	c := benchCache(b, 5000, 10)
	snap := NewEmptySnapshot()
	mustUpdate(b, c, snap)
	pi := framework.NewPodInfo(pod("bench", "node-42", 100))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			if err := c.AssumePod(pi); err != nil {
				b.Fatal(err)
			}
		} else if err := c.ForgetPod(pi.Pod); err != nil {
			b.Fatal(err)
		}
		if err := c.UpdateSnapshot(snap); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdateSnapshotFull is the cost incrementality avoids: a full
// copy of 5,000 nodes.
func BenchmarkUpdateSnapshotFull(b *testing.B) {
	c := benchCache(b, 5000, 10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.UpdateSnapshot(NewEmptySnapshot()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAssumeForget measures AssumePod (live re-check and charge)
// followed by ForgetPod, spread over 5,000 nodes.
func BenchmarkAssumeForget(b *testing.B) {
	c := benchCache(b, 5000, 10)
	pis := make([]*framework.PodInfo, 5000)
	for i := range pis {
		p := pod(fmt.Sprint("bench-", i), fmt.Sprint("node-", i), 100)
		p.Containers[0].Requests["memory"] = 1 << 20
		pis[i] = framework.NewPodInfo(p)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pi := pis[i%len(pis)]
		if err := c.AssumePod(pi); err != nil {
			b.Fatal(err)
		}
		if err := c.ForgetPod(pi.Pod); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAssumeConfirm is what the cache does, under its write lock, for
// every pod a shard binds: the assumption, then its confirmation by the
// bound record (then a removal, so the nodes do not fill up).
func BenchmarkAssumeConfirm(b *testing.B) {
	c := benchCache(b, 5000, 10)
	pis := make([]*framework.PodInfo, 5000)
	bound := make([]*framework.Pod, len(pis))
	for i := range pis {
		p := pod(fmt.Sprint("bench-", i), fmt.Sprint("node-", i), 100)
		pis[i] = framework.NewPodInfo(p)
		confirmed := *p
		confirmed.Phase = framework.PodRunning
		bound[i] = &confirmed
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		j := i % len(pis)
		if err := c.AssumePod(pis[j]); err != nil {
			b.Fatal(err)
		}
		if err := c.AddPod(bound[j]); err != nil {
			b.Fatal(err)
		}
		if err := c.RemovePod(bound[j]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad fills an empty cache as a restart does: 100,000 nodes, then
// ten bound pods on each, in one call each.
func BenchmarkLoad(b *testing.B) {
	const nodes, perNode = 100_000, 10
	ns := make([]*framework.Node, nodes)
	for i := range ns {
		ns[i] = stdNode(fmt.Sprintf("node-%06d", i))
	}
	pis := make([]*framework.PodInfo, 0, nodes*perNode)
	for i := range nodes * perNode {
		pis = append(pis, framework.NewPodInfo(pod(fmt.Sprintf("p%d", i), ns[(i*7919)%nodes].Name, 10)))
	}
	for b.Loop() {
		c := New()
		c.AddNodes(ns)
		if err := c.AddPodInfos(pis); err != nil {
			b.Fatal(err)
		}
	}
}
