package framework

import "testing"

func TestNodePositionsRefuseAListWithATwin(t *testing.T) {
	a, b := &NodeInfo{}, &NodeInfo{}
	var p NodePositions
	twin := []*NodeInfo{a, b, a}
	for try := range 2 {
		// Asked again for the same list, it must not take the half-built
		// index as valid.
		if p.Index(twin) {
			t.Fatalf("try %d: a list holding a NodeInfo twice was indexed", try)
		}
	}
	list := []*NodeInfo{b, a}
	if !p.Index(list) {
		t.Fatal("a list of distinct NodeInfos was refused")
	}
	if i, ok := p.Of(a); !ok || i != 1 {
		t.Errorf("Of(a) = %d, %v; want 1, true", i, ok)
	}
	if _, ok := p.Of(&NodeInfo{}); ok {
		t.Error("a NodeInfo outside the list has a position")
	}
}

type fakeLog struct {
	gen     int64
	changed []*NodeInfo
}

func (l *fakeLog) Generation() int64 { return l.gen }
func (l *fakeLog) NodesChangedSince(int64) ([]*NodeInfo, bool) {
	return l.changed, true
}

func TestKeptAtFollowsOneLogAndList(t *testing.T) {
	a, b := &NodeInfo{}, &NodeInfo{}
	log := &fakeLog{gen: 5, changed: []*NodeInfo{b}}
	all := []*NodeInfo{a, b}
	var k KeptAt
	if _, ok := k.Changed(log, all); ok {
		t.Fatal("state never marked offered a catch-up")
	}
	k.Mark(log, all, 5)
	if !k.Current(log, all, 5) {
		t.Error("state marked at 5 is not current at 5")
	}
	if k.Current(log, all, 6) {
		t.Error("state marked at 5 is current at 6")
	}
	if got, ok := k.Changed(log, all); !ok || len(got) != 1 || got[0] != b {
		t.Errorf("Changed = %v, %v; want the log's nodes", got, ok)
	}
	if _, ok := k.Changed(log, []*NodeInfo{b, a}); ok {
		t.Error("a rebuilt list offered a catch-up")
	}
	if _, ok := k.Changed(&fakeLog{gen: 5}, all); ok {
		t.Error("another log offered a catch-up")
	}
}
