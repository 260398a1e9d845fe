package algorithm

import (
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkPlaceDuringGC is BenchmarkPlace's basic pods at 100,000 nodes
// while the garbage collector marks a large heap without pause, as in a
// server holding a million pods: every pointer the cycle stores then
// pays a write barrier, and the collector competes for the cores.
func BenchmarkPlaceDuringGC(b *testing.B) {
	c := benchCache(b, 100000, 2)
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
