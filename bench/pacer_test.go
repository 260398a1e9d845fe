package bench

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// paced runs a pacer over the given tick times and records each call's size.
func paced(t *testing.T, rate float64, batch, n int, ticks []time.Duration) (sizes []int, err error) {
	t.Helper()
	start := time.Unix(1000, 0)
	ch := make(chan time.Time, len(ticks))
	for _, d := range ticks {
		ch <- start.Add(d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if len(ticks) == 0 {
		cancel() // nothing more will tick: a pacer that waits must end
	}
	next := 0
	p := &pacer{rate: rate, batch: batch}
	err = p.run(ctx, start, ch, n, func(lo, hi int) {
		if lo != next || hi <= lo {
			t.Errorf("send(%d, %d) after %d sent: want contiguous ranges", lo, hi, next)
		}
		next = hi
		sizes = append(sizes, hi-lo)
	})
	return sizes, err
}

func TestPacerSendsOnSchedule(t *testing.T) {
	// 1,000 pods/s ticked every 10ms: the first pod at once, then ten a tick.
	var ticks []time.Duration
	for i := 1; i <= 10; i++ {
		ticks = append(ticks, time.Duration(i)*10*time.Millisecond)
	}
	sizes, err := paced(t, 1000, 100, 100, ticks)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{1, 10, 10, 10, 10, 10, 10, 10, 10, 10, 9}
	if !slices.Equal(sizes, want) {
		t.Errorf("calls %v; want %v", sizes, want)
	}
}

func TestPacerCatchesUpInBatches(t *testing.T) {
	// A tick half a second late (the submitter was blocked) owes 500 pods:
	// they go out at once, in calls of at most --batch.
	sizes, err := paced(t, 1000, 100, 2000, []time.Duration{500 * time.Millisecond, 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := []int{1, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 99}
	if !slices.Equal(sizes, want) {
		t.Errorf("calls %v; want %v", sizes, want)
	}
}

func TestPacerStopsAtItsCount(t *testing.T) {
	// Ticks well past the end send nothing beyond n, and the pacer returns
	// without waiting for more ticks.
	sizes, err := paced(t, 10, 100, 5, []time.Duration{time.Second, 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sizes, []int{1, 4}) {
		t.Errorf("calls %v; want [1 4]", sizes)
	}
}

func TestPacerEndsWithContext(t *testing.T) {
	sizes, err := paced(t, 10, 100, 5, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err %v; want context.Canceled", err)
	}
	if !slices.Equal(sizes, []int{1}) {
		t.Errorf("calls %v; want [1]: the first pod goes at start", sizes)
	}
}

func TestPacerTick(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		want time.Duration
	}{{1000, 10 * time.Millisecond}, {1e6, 10 * time.Millisecond}, {50, 20 * time.Millisecond}, {0.5, 2 * time.Second}} {
		if got := pacerTick(tc.rate); got != tc.want {
			t.Errorf("pacerTick(%v) = %v; want %v", tc.rate, got, tc.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	lat := make([]time.Duration, 2000)
	for i := range lat {
		lat[i] = time.Duration(i+1) * time.Millisecond
	}
	r := runResult{latencies: lat}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{0.50, 1000 * time.Millisecond}, {0.99, 1980 * time.Millisecond}, {0.999, 1998 * time.Millisecond}, {1, 2000 * time.Millisecond}} {
		if got := r.percentile(tc.p); got != tc.want {
			t.Errorf("percentile(%v) of 1..2000ms = %v; want %v", tc.p, got, tc.want)
		}
	}
	if got := (runResult{}).percentile(0.999); got != 0 {
		t.Errorf("percentile of none = %v; want 0", got)
	}
}
