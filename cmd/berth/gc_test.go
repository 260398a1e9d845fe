package main

import (
	"os"
	"runtime/debug"
	"testing"
)

func TestSetGCPercentLeavesGOGCAlone(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })

	t.Setenv("GOGC", "50") // restored after the test
	setGCPercent(300)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, the target became %d; want it left at 100", got)
	}

	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	setGCPercent(300)
	if got := debug.SetGCPercent(100); got != 300 {
		t.Errorf("without GOGC, the target is %d; want 300", got)
	}
}
