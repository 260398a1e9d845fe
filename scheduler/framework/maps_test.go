package framework

import "testing"

func TestDeleteShrinking(t *testing.T) {
	m := map[int]int{}
	peak := 0
	for i := range 4 * shrinkFloor {
		m[i] = i
	}
	before := m
	for i := range 3 * shrinkFloor {
		m = DeleteShrinking(m, i, &peak)
	}
	// A quarter of the peak is left: still the same map.
	if len(m) != shrinkFloor || peak != 4*shrinkFloor {
		t.Fatalf("after 3/4 deleted: len %d peak %d, want %d and %d", len(m), peak, shrinkFloor, 4*shrinkFloor)
	}
	m = DeleteShrinking(m, 3*shrinkFloor, &peak)
	if len(m) != shrinkFloor-1 || peak != shrinkFloor-1 {
		t.Fatalf("below a quarter: len %d peak %d, want %d for both", len(m), peak, shrinkFloor-1)
	}
	if _, kept := before[3*shrinkFloor]; kept {
		t.Error("the key was not deleted from the old map")
	}
	for i := 3*shrinkFloor + 1; i < 4*shrinkFloor; i++ {
		if m[i] != i {
			t.Fatalf("copy lost %d", i)
		}
	}
	// Small maps are never copied.
	small, smallPeak := map[int]int{1: 1, 2: 2}, 0
	small = DeleteShrinking(small, 1, &smallPeak)
	small[3] = 3
	if len(small) != 2 || smallPeak != 2 {
		t.Errorf("small map: len %d peak %d", len(small), smallPeak)
	}
}
