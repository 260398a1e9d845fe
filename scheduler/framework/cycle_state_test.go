package framework

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

type intState struct{ v int }

func (s *intState) Clone() StateData { return &intState{v: s.v} }

type otherState struct{}

func (otherState) Clone() StateData { return otherState{} }

func TestCycleState(t *testing.T) {
	cs := NewCycleState()
	if _, err := cs.Read("k"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Read of missing key: %v", err)
	}
	cs.Write("k", &intState{v: 1})
	cs.SetSkipFilterPlugins(0b101)
	cs.SetSkipScorePlugins(0b10)

	got, err := ReadState[*intState](cs, "k")
	if err != nil || got.v != 1 {
		t.Fatalf("ReadState = %v, %v", got, err)
	}

	clone := cs.Clone()
	got.v = 2 // the original's data changes...
	c, _ := ReadState[*intState](clone, "k")
	if c.v != 1 { // ...but not the clone's
		t.Errorf("clone shares data: v = %d", c.v)
	}
	if clone.SkipFilterPlugins() != 0b101 || clone.SkipScorePlugins() != 0b10 {
		t.Errorf("clone lost skip masks")
	}

	if _, err := ReadState[otherState](cs, "k"); err == nil || !strings.Contains(err.Error(), "holds *framework.intState") {
		t.Errorf("type mismatch error = %v", err)
	}
	if _, err := ReadState[*intState](cs, "missing"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"missing"`) {
		t.Errorf("missing key error = %v", err)
	}
	cs.Delete("k")
	if _, err := cs.Read("k"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delete did not delete")
	}
	if (*CycleState)(nil).Clone() != nil {
		t.Error("nil Clone")
	}
}

// TestCycleStateOverwriteAndSpill covers the paths that leave the inline
// entries: a key written twice, and more keys than they hold.
func TestCycleStateOverwriteAndSpill(t *testing.T) {
	cs := NewCycleState()
	cs.Write("a", &intState{v: 1})
	cs.Write("b", &intState{v: 2})
	cs.Write("a", &intState{v: 3})
	if got, _ := ReadState[*intState](cs, "a"); got == nil || got.v != 3 {
		t.Fatalf("overwritten a = %v", got)
	}
	if got, _ := ReadState[*intState](cs, "b"); got == nil || got.v != 2 {
		t.Fatalf("b after overwrite = %v", got)
	}
	many := NewCycleState()
	for i := range 2 * inlineStateEntries {
		many.Write(StateKey(strconv.Itoa(i)), &intState{v: i})
	}
	clone := many.Clone()
	for i := range 2 * inlineStateEntries {
		for _, s := range []*CycleState{many, clone} {
			if got, err := ReadState[*intState](s, StateKey(strconv.Itoa(i))); err != nil || got.v != i {
				t.Fatalf("key %d = %v, %v", i, got, err)
			}
		}
	}
}
