package store

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// lendingRecorder is a storedPodRecorder that gives the snapshot's files
// back from inside its Reset, once it has read the lent values, and
// checks that the file is mapped until then and not after.
type lendingRecorder struct {
	storedPodRecorder
	t        *testing.T
	path     string
	giveBack *func()
}

func (h lendingRecorder) Lend(giveBack func()) { *h.giveBack = giveBack }

func (h lendingRecorder) Reset(nodes []*berthv1.Node, pods []PodRecord, rev int64) {
	h.storedPodRecorder.Reset(nodes, pods, rev)
	if *h.giveBack == nil {
		h.t.Fatal("Reset before Lend")
	}
	if !mapped(h.t, h.path) {
		h.t.Errorf("%s not mapped while its values are lent", h.path)
	}
	(*h.giveBack)()
	if mapped(h.t, h.path) {
		h.t.Errorf("%s still mapped once given back", h.path)
	}
	(*h.giveBack)() // a second call must not unmap again
}

func mapped(t *testing.T, path string) bool {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(maps), path)
}

// A handler that lends the snapshot's values can give the files back in
// the middle of its Reset; Load, which gives them back after it in any
// case, then leaves them be.
func TestLendingHandlerGivesTheFilesBackEarly(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	if _, err := s.PutNode(testCtx(t), &berthv1.Node{Name: "n1"}); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, pendingPod("ns", "a", "ua"), pendingPod("ns", "b", "ub"))
	path := filepath.Join(t.TempDir(), "snap")
	w := writeSnapshot(t, s, path)

	sn := readSnapshot(t, s, path)
	var giveBack func()
	h := lendingRecorder{storedPodRecorder{catchUpRecorder{newRecordingHandler()}}, t, path, &giveBack}
	sn.Load(h)
	got := h.next(t, 1)[0]
	if want := []string{"node:n1", "pod:ns/a", "pod:ns/b"}; got.Kind != "Reset" || got.Rev != w.Revision || strings.Join(got.Names, ",") != strings.Join(want, ",") {
		t.Errorf("Reset %+v; want %v at %d", got, want, w.Revision)
	}
	if mapped(t, path) {
		t.Errorf("%s mapped after Load", path)
	}
}
