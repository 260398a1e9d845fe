package framework

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
)

func TestParallelizerRunsEveryPieceOnce(t *testing.T) {
	for _, par := range []int{0, 1, 2, 16} {
		for _, pieces := range []int{0, 1, 7, 100, 1001} {
			counts := make([]atomic.Int32, pieces)
			NewParallelizer(par).Until(context.Background(), pieces, func(i int) { counts[i].Add(1) })
			for i := range counts {
				if c := counts[i].Load(); c != 1 {
					t.Fatalf("parallelism %d, pieces %d: piece %d ran %d times", par, pieces, i, c)
				}
			}
		}
	}
}

func TestParallelizerStops(t *testing.T) {
	// Inline, a stop is exact: no piece after the one that stopped.
	var ran atomic.Int32
	NewParallelizer(1).UntilStopped(context.Background(), 1000, func(i int) bool {
		ran.Add(1)
		return i == 41
	})
	if got := ran.Load(); got != 42 {
		t.Errorf("inline stop ran %d pieces, want 42", got)
	}

	// In parallel, no new chunk starts after a stop: far fewer than all run.
	ran.Store(0)
	NewParallelizer(4).UntilStopped(context.Background(), 10000, func(int) bool {
		return ran.Add(1) >= 10
	})
	if got := ran.Load(); got >= 10000/2 {
		t.Errorf("parallel stop ran %d of 10000 pieces", got)
	}

	// A cancelled context runs nothing.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran.Store(0)
	NewParallelizer(1).Until(ctx, 100, func(int) { ran.Add(1) })
	NewParallelizer(4).Until(ctx, 100, func(int) { ran.Add(1) })
	if got := ran.Load(); got != 0 {
		t.Errorf("cancelled context ran %d pieces", got)
	}
}

func TestChunkSize(t *testing.T) {
	tests := []struct{ pieces, par, want int }{
		{1, 16, 1},
		{100, 1, 10},    // sqrt
		{100, 16, 7},    // n/par+1
		{5000, 2, 70},   // sqrt(5000)=70.7
		{5000, 100, 51}, // 5000/100+1
	}
	for _, tt := range tests {
		if got := chunkSize(tt.pieces, tt.par); got != tt.want {
			t.Errorf("chunkSize(%d, %d) = %d, want %d", tt.pieces, tt.par, got, tt.want)
		}
	}
}

// TestParallelizerCoversAPrefix: whatever the parallelism, the pieces run
// are exactly [0, covered), each once, so callers may trust the prefix
// and ignore the rest.
func TestParallelizerCoversAPrefix(t *testing.T) {
	for _, par := range []int{1, 2, 4} {
		for _, pieces := range []int{1, 50, 1000, 5000} {
			counts := make([]atomic.Int32, pieces)
			covered := NewParallelizer(par).UntilStopped(context.Background(), pieces, func(i int) bool {
				counts[i].Add(1)
				return i == pieces/3
			})
			if covered <= pieces/3 || covered > pieces {
				t.Fatalf("parallelism %d, pieces %d: covered %d, want past the stop at %d", par, pieces, covered, pieces/3)
			}
			for i := range counts {
				if want := int32(min(1, max(0, covered-i))); counts[i].Load() != want {
					t.Fatalf("parallelism %d, pieces %d, covered %d: piece %d ran %d times", par, pieces, covered, i, counts[i].Load())
				}
			}
		}
	}
}

func TestUntilFound(t *testing.T) {
	// Every third piece is a hit.
	hit := func(i int) bool { return i%3 == 2 }
	for _, par := range []int{1, 2, 4} {
		for _, tc := range []struct{ pieces, want int }{{1, 1}, {10, 2}, {10, 100}, {5000, 1}, {5000, 500}, {5000, 1666}, {5000, 1667}} {
			counts := make([]atomic.Int32, tc.pieces)
			covered := NewParallelizer(par).UntilFound(context.Background(), tc.pieces, tc.want, func(i int) (bool, bool) {
				counts[i].Add(1)
				return hit(i), false
			})
			hits := 0
			for i := range counts {
				want := int32(min(1, max(0, covered-i)))
				if counts[i].Load() != want {
					t.Fatalf("parallelism %d, %+v, covered %d: piece %d ran %d times", par, tc, covered, i, counts[i].Load())
				}
				if i < covered && hit(i) {
					hits++
				}
			}
			if all := tc.pieces / 3; hits < min(tc.want, all) {
				t.Errorf("parallelism %d, %+v: %d hits in the %d pieces covered", par, tc, hits, covered)
			}
			// Inline the walk ends at the want-th hit.
			if par == 1 && tc.want <= tc.pieces/3 && covered != 3*tc.want {
				t.Errorf("inline, %+v: covered %d, want %d", tc, covered, 3*tc.want)
			}
		}
	}

	// A stop ends the walk; pieces after it in its chunk are skipped.
	for _, par := range []int{1, 2} {
		var ran atomic.Int32
		covered := NewParallelizer(par).UntilFound(context.Background(), 10000, 10000, func(i int) (bool, bool) {
			ran.Add(1)
			return true, i == 10
		})
		if covered < 11 || ran.Load() >= 10000/2 {
			t.Errorf("parallelism %d: stop at 10 covered %d and ran %d pieces", par, covered, ran.Load())
		}
	}
}

// BenchmarkParallelizer is the shape of a cycle's score pass at 5,000
// nodes: 500 pieces of about a fifth of a microsecond each.
func BenchmarkParallelizer(b *testing.B) {
	out := make([]uint64, 500)
	work := func(i int) {
		x := uint64(i) + 1
		for range 64 {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		out[i] = x
	}
	for _, par := range []int{1, 2} {
		b.Run(fmt.Sprintf("pieces=500/parallelism=%d", par), func(b *testing.B) {
			p := NewParallelizer(par)
			b.ReportAllocs()
			for b.Loop() {
				p.Until(context.Background(), len(out), work)
			}
		})
	}
}
