package framework

import (
	"context"
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
