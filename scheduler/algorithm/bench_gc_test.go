package algorithm

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/berth-io/berth/scheduler/cache"
)

// BenchmarkPlaceDuringGC is BenchmarkPlace's basic pods at 100,000 nodes
// while the garbage collector marks a large heap without pause, as in a
// server holding a million pods: every pointer the cycle stores then
// pays a write barrier, and the collector competes for the cores.
func BenchmarkPlaceDuringGC(b *testing.B) {
	c := cache.New()
	for _, ni := range benchCluster(100000, 2) {
		c.AddNode(ni.Node())
		for _, pi := range ni.Pods {
			p := *pi.Pod
			p.NodeName = ni.Node().Name
			if err := c.AddPod(&p); err != nil {
				b.Fatal(err)
			}
		}
	}
	// A live heap of small linked objects, slow to mark.
	type link struct {
		next *link
		pad  [2]int64
	}
	var ballast *link
	for range 4 << 20 {
		ballast = &link{next: ballast}
	}
	for _, batching := range []bool{true, false} {
		b.Run(fmt.Sprintf("nodes=100000/basic/batching=%v", batching), func(b *testing.B) {
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					select {
					case <-stop:
						return
					default:
						runtime.GC()
					}
				}
			}()
			benchPlace(b, c, "basic", batching)
			close(stop)
			<-done
		})
	}
	runtime.KeepAlive(ballast)
}
