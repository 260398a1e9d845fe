package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// catchUpRecorder is a recordingHandler that also records how a
// snapshot's catch-up ended.
type catchUpRecorder struct{ *recordingHandler }

func (h catchUpRecorder) SnapshotRejected(err error) {
	h.calls <- call{Kind: "SnapshotRejected", Names: []string{err.Error()}}
}

func (h catchUpRecorder) CaughtUp(rev int64) { h.calls <- call{Kind: "CaughtUp", Rev: rev} }

// runSyncFrom runs SyncFrom until the test ends and checks how it ended.
func runSyncFrom(t *testing.T, s *Store, h SyncHandler, sn *Snapshot) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.SyncFrom(ctx, h, sn) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("SyncFrom ended with %v, want context.Canceled", err)
		}
	})
}

func writeSnapshot(t *testing.T, s *Store, path string) SnapshotWrite {
	t.Helper()
	w, err := s.WriteSnapshot(testCtx(t), path)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func readSnapshot(t *testing.T, s *Store, path string) *Snapshot {
	t.Helper()
	sn, err := ReadSnapshot(path, s.cfg.Prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sn
}

// A snapshot loads what a listing at its revision would, and SyncFrom
// delivers exactly the changes made after it, then says it caught up.
func TestSnapshotResumesWithChangesMadeAfterIt(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	s.chunk = 2 // the snapshot spans several range reads
	ctx := testCtx(t)
	for _, n := range []string{"n1", "n2", "n3"} {
		if _, err := s.PutNode(ctx, &berthv1.Node{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	c := mustCreate(t, s, pendingPod("ns", "a", "ua"), pendingPod("ns", "b", "ub"), pendingPod("other", "c", "uc"))
	path := filepath.Join(t.TempDir(), "snap")
	w := writeSnapshot(t, s, path)
	if w.Revision < c[2].Revision || w.Keys != 6 || w.Bytes == 0 {
		t.Fatalf("snapshot %+v, want revision >= %d with 6 keys", w, c[2].Revision)
	}

	// Written after the snapshot, before the "restart".
	rn4, _ := s.PutNode(ctx, &berthv1.Node{Name: "n4"})
	rn1, _ := s.DeleteNode(ctx, "n1")
	cd := mustCreate(t, s, pendingPod("ns", "d", "ud"))[0]
	ra := mustUpdate(t, s, boundTo(c[0].Pod, "n2"), c[0].Revision)
	rb, err := s.DeletePod(ctx, "ns", "b", "ub")
	if err != nil {
		t.Fatal(err)
	}

	sn := readSnapshot(t, s, path)
	if sn.Revision != w.Revision || sn.Nodes != 3 || sn.Pods != 3 {
		t.Fatalf("read %+v, want revision %d, 3 nodes, 3 pods", sn, w.Revision)
	}
	h := catchUpRecorder{newRecordingHandler()}
	sn.Load(h)
	reset := h.next(t, 1)[0]
	want := call{Kind: "Reset", Rev: w.Revision, Names: []string{"node:n1", "node:n2", "node:n3", "pod:ns/a", "pod:ns/b", "pod:other/c"}}
	if diff := cmp.Diff(want, reset); diff != "" {
		t.Errorf("Reset from the snapshot (-want +got):\n%s", diff)
	}

	runSyncFrom(t, s, h, sn)
	wantEvents := []call{
		{Kind: "NodePut", Rev: rn4, Names: []string{"n4"}},
		{Kind: "NodeDeleted", Rev: rn1, Names: []string{"n1"}},
		{Kind: "PodPut", Rev: cd.Revision, Names: []string{"ns/d"}, State: "ud/POD_PHASE_PENDING/"},
		{Kind: "PodPut", Rev: ra, Names: []string{"ns/a"}, Prev: "ua/POD_PHASE_PENDING", State: "ua/POD_PHASE_BOUND/n2"},
		{Kind: "PodDeleted", Rev: rb, Names: []string{"ns/b"}, Prev: "ub/POD_PHASE_PENDING"},
		{Kind: "CaughtUp", Rev: rb},
	}
	if diff := cmp.Diff(wantEvents, h.next(t, len(wantEvents))); diff != "" {
		t.Errorf("after the snapshot (-want +got):\n%s", diff)
	}
	// And the watch goes on.
	re := mustCreate(t, s, pendingPod("ns", "e", "ue"))[0].Revision
	if got := h.next(t, 1)[0]; got.Kind != "PodPut" || got.Rev != re {
		t.Errorf("after catching up got %+v, want PodPut at %d", got, re)
	}
}

// noPrevCatchUp is a catchUpRecorder that reads no previous values, as
// the replica's bridge does.
type noPrevCatchUp struct{ catchUpRecorder }

func (noPrevCatchUp) IgnoresPrev() {}

// A handler that reads no previous values catches up on each pod's last
// change only: a pod created and bound since the snapshot arrives once,
// bound; one created and deleted, as a deletion. Other keys' changes come
// as they happened, and the watch goes on change by change afterwards.
func TestCatchUpDeliversEachPodOnce(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	for _, n := range []string{"n1", "n2"} {
		if _, err := s.PutNode(ctx, &berthv1.Node{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	c := mustCreate(t, s, pendingPod("ns", "a", "ua"), pendingPod("ns", "b", "ub"))
	path := filepath.Join(t.TempDir(), "snap")
	writeSnapshot(t, s, path)

	// Written after the snapshot, before the "restart".
	d := mustCreate(t, s, pendingPod("ns", "d", "ud"))[0]
	rd := mustUpdate(t, s, boundTo(d.Pod, "n1"), d.Revision)
	mustCreate(t, s, pendingPod("ns", "e", "ue"))
	re, err := s.DeletePod(ctx, "ns", "e", "ue")
	if err != nil {
		t.Fatal(err)
	}
	ra := mustUpdate(t, s, boundTo(c[0].Pod, "n2"), c[0].Revision)
	rn3, _ := s.PutNode(ctx, &berthv1.Node{Name: "n3"})
	rb, err := s.DeletePod(ctx, "ns", "b", "ub")
	if err != nil {
		t.Fatal(err)
	}
	f := mustCreate(t, s, pendingPod("ns", "f", "uf"))[0]

	sn := readSnapshot(t, s, path)
	h := noPrevCatchUp{catchUpRecorder{newRecordingHandler()}}
	sn.Load(h)
	if reset := h.next(t, 1)[0]; reset.Kind != "Reset" {
		t.Fatalf("first call %+v, want Reset", reset)
	}
	runSyncFrom(t, s, h, sn)
	want := []call{
		{Kind: "NodePut", Rev: rn3, Names: []string{"n3"}},
		{Kind: "PodPut", Rev: rd, Names: []string{"ns/d"}, State: "ud/POD_PHASE_BOUND/n1"},
		{Kind: "PodDeleted", Rev: re, Names: []string{"ns/e"}, Prev: "/POD_PHASE_UNSPECIFIED"},
		{Kind: "PodPut", Rev: ra, Names: []string{"ns/a"}, State: "ua/POD_PHASE_BOUND/n2"},
		{Kind: "PodDeleted", Rev: rb, Names: []string{"ns/b"}, Prev: "/POD_PHASE_UNSPECIFIED"},
		{Kind: "PodPut", Rev: f.Revision, Names: []string{"ns/f"}, State: "uf/POD_PHASE_PENDING/"},
		{Kind: "CaughtUp", Rev: f.Revision},
	}
	if diff := cmp.Diff(want, h.next(t, len(want))); diff != "" {
		t.Errorf("catching up (-want +got):\n%s", diff)
	}
	g := mustCreate(t, s, pendingPod("ns", "g", "ug"))[0]
	rg := mustUpdate(t, s, boundTo(g.Pod, "n1"), g.Revision)
	after := []call{
		{Kind: "PodPut", Rev: g.Revision, Names: []string{"ns/g"}, State: "ug/POD_PHASE_PENDING/"},
		{Kind: "PodPut", Rev: rg, Names: []string{"ns/g"}, State: "ug/POD_PHASE_BOUND/n1"},
	}
	if diff := cmp.Diff(after, h.next(t, len(after))); diff != "" {
		t.Errorf("after catching up (-want +got):\n%s", diff)
	}
}

// When etcd's revision moved only through keys the replica does not cache,
// no event says the watch caught up: a progress notification does.
func TestSnapshotCatchUpWithoutCachedChanges(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	mustCreate(t, s, pendingPod("ns", "a", "ua"))
	path := filepath.Join(t.TempDir(), "snap")
	w := writeSnapshot(t, s, path)
	resp, err := s.Client().Put(ctx, s.keys.alloc+"elsewhere", "x")
	if err != nil {
		t.Fatal(err)
	}
	if resp.Header.Revision <= w.Revision {
		t.Fatalf("put at %d, snapshot at %d", resp.Header.Revision, w.Revision)
	}
	sn := readSnapshot(t, s, path)
	h := catchUpRecorder{newRecordingHandler()}
	sn.Load(h)
	runSyncFrom(t, s, h, sn)
	got := h.next(t, 2)
	if got[0].Kind != "Reset" || got[1].Kind != "CaughtUp" || got[1].Rev < resp.Header.Revision {
		t.Errorf("got %+v, want Reset then CaughtUp at >= %d", got, resp.Header.Revision)
	}
}

// A torn or damaged file is refused on reading, before anything is loaded.
func TestSnapshotDamagedFileIsRefused(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	mustCreate(t, s, pendingPod("ns", "a", "ua"), pendingPod("ns", "b", "ub"))
	path := filepath.Join(t.TempDir(), "snap")
	writeSnapshot(t, s, path)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damaged := map[string][]byte{
		"torn":        good[:len(good)/2],
		"flipped bit": append(append([]byte{}, good[:len(good)/2]...), append([]byte{good[len(good)/2] ^ 1}, good[len(good)/2+1:]...)...),
		"empty":       nil,
		"not ours":    []byte("some other file entirely"),
	}
	for name, data := range damaged {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadSnapshot(path, s.cfg.Prefix, nil); !errors.Is(err, ErrSnapshotInvalid) {
			t.Errorf("%s file: got %v, want ErrSnapshotInvalid", name, err)
		}
	}
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSnapshot(path, "/another/prefix", nil); !errors.Is(err, ErrSnapshotInvalid) {
		t.Errorf("another prefix: got %v, want ErrSnapshotInvalid", err)
	}
}

// A snapshot that does not match etcd (another cluster's, or older than
// the compaction point) is rejected and the handler reset with a full
// listing.
func TestSnapshotMismatchFallsBackToListing(t *testing.T) {
	const prefix = "/snapshot-fallback"
	samePrefix := func(c *Config) { c.Prefix = prefix }
	cases := map[string]func(t *testing.T, s *Store, path string){
		"another cluster": func(t *testing.T, _ *Store, path string) {
			other := openStore(t, ownEtcd(t, t.TempDir(), ""), samePrefix)
			mustCreate(t, other, pendingPod("ns", "a", "ua"), pendingPod("ns", "elsewhere", "ux"))
			writeSnapshot(t, other, path)
		},
		"compacted": func(t *testing.T, s *Store, path string) {
			writeSnapshot(t, s, path)
			last := mustCreate(t, s, pendingPod("ns", "later-1", ""), pendingPod("ns", "later-2", ""))[1].Revision
			if _, err := s.Client().Compact(testCtx(t), last); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, prepare := range cases {
		t.Run(name, func(t *testing.T) {
			s := openStore(t, ownEtcd(t, t.TempDir(), ""), samePrefix)
			mustCreate(t, s, pendingPod("ns", "a", "ua"))
			path := filepath.Join(t.TempDir(), "snap")
			prepare(t, s, path)
			listedAfter, err := s.CurrentRevision(testCtx(t))
			if err != nil {
				t.Fatal(err)
			}
			sn := readSnapshot(t, s, path)
			h := catchUpRecorder{newRecordingHandler()}
			sn.Load(h)
			runSyncFrom(t, s, h, sn)
			got := h.next(t, 3)
			if got[1].Kind != "SnapshotRejected" {
				t.Fatalf("got %+v, want the snapshot rejected", got)
			}
			var wantNames []string
			resp, err := s.Client().Get(testCtx(t), s.keys.pods, clientv3.WithPrefix())
			if err != nil {
				t.Fatal(err)
			}
			for _, kv := range resp.Kvs {
				wantNames = append(wantNames, "pod:"+string(kv.Key[len(s.keys.pods):]))
			}
			if got[2].Kind != "Reset" || got[2].Rev < listedAfter {
				t.Fatalf("after rejection got %+v, want a Reset at >= %d", got[2], listedAfter)
			}
			if diff := cmp.Diff(wantNames, got[2].Names); diff != "" {
				t.Errorf("listing after rejection (-want +got):\n%s", diff)
			}
		})
	}
}

// storedPodRecorder is a recordingHandler that converts pods from their
// stored values itself: it must get no decoded pod, and values that
// decode to the pods written. In a snapshot's Reset the values are lent,
// so it checks them during the call.
type storedPodRecorder struct{ catchUpRecorder }

func (h storedPodRecorder) ConvertsStoredPods() {}

func (h storedPodRecorder) decoded(p PodRecord) PodRecord {
	if p.Pod != nil {
		return PodRecord{Pod: &berthv1.Pod{Namespace: "GOT-DECODED-POD"}, ModRevision: p.ModRevision, Value: p.Value}
	}
	pod, err := decodePod(p.Value)
	if err != nil {
		pod = &berthv1.Pod{Namespace: "UNDECODABLE"}
	}
	return PodRecord{Pod: pod, ModRevision: p.ModRevision, Value: p.Value}
}

func (h storedPodRecorder) Reset(nodes []*berthv1.Node, pods []PodRecord, rev int64) {
	out := make([]PodRecord, len(pods))
	for i, p := range pods {
		out[i] = h.decoded(p)
	}
	h.recordingHandler.Reset(nodes, out, rev)
}

func (h storedPodRecorder) PodPut(p PodRecord, prev PrevPod) {
	h.recordingHandler.PodPut(h.decoded(p), prev)
}

// A handler that converts stored pods itself gets their values, from a
// snapshot, a listing and the watch alike, and the same calls otherwise.
func TestStoredPodHandlerGetsValues(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	if _, err := s.PutNode(ctx, &berthv1.Node{Name: "n1"}); err != nil {
		t.Fatal(err)
	}
	c := mustCreate(t, s, pendingPod("ns", "a", "ua"), pendingPod("ns", "b", "ub"))
	path := filepath.Join(t.TempDir(), "snap")
	w := writeSnapshot(t, s, path)
	ra := mustUpdate(t, s, boundTo(c[0].Pod, "n1"), c[0].Revision)

	sn := readSnapshot(t, s, path)
	h := storedPodRecorder{catchUpRecorder{newRecordingHandler()}}
	sn.Load(h)
	want := call{Kind: "Reset", Rev: w.Revision, Names: []string{"node:n1", "pod:ns/a", "pod:ns/b"}}
	if diff := cmp.Diff(want, h.next(t, 1)[0]); diff != "" {
		t.Errorf("Reset from the snapshot (-want +got):\n%s", diff)
	}
	runSyncFrom(t, s, h, sn)
	wantEvents := []call{
		{Kind: "PodPut", Rev: ra, Names: []string{"ns/a"}, Prev: "ua/POD_PHASE_PENDING", State: "ua/POD_PHASE_BOUND/n1"},
		{Kind: "CaughtUp", Rev: ra},
	}
	if diff := cmp.Diff(wantEvents, h.next(t, len(wantEvents))); diff != "" {
		t.Errorf("after the snapshot (-want +got):\n%s", diff)
	}

	listed := storedPodRecorder{catchUpRecorder{newRecordingHandler()}}
	runSync(t, s, listed)
	reset := listed.next(t, 1)[0]
	if diff := cmp.Diff([]string{"node:n1", "pod:ns/a", "pod:ns/b"}, reset.Names); reset.Kind != "Reset" || diff != "" {
		t.Errorf("Reset from a listing: %+v (-want +got names):\n%s", reset, diff)
	}
}
