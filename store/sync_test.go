package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// call is one SyncHandler call, flattened for comparison.
type call struct {
	Kind string
	Rev  int64
	// Names of the nodes and pods in a Reset, or the object of an event.
	Names []string
	// Prev describes the previous pod of PodPut/PodDeleted: "uid/phase", or
	// "" when there was none.
	Prev string
	// State describes a put pod: "uid/phase/node".
	State string
}

type recordingHandler struct {
	calls chan call
	// blockReset, if set, is waited on in the first Reset.
	blockReset chan struct{}
	resets     int
}

func newRecordingHandler() *recordingHandler {
	return &recordingHandler{calls: make(chan call, 1024)}
}

func podDesc(p *berthv1.Pod) string {
	if p == nil {
		return ""
	}
	return p.Uid + "/" + p.GetStatus().GetPhase().String()
}

func (h *recordingHandler) Reset(nodes []*berthv1.Node, pods []PodRecord, rev int64) {
	var names []string
	for _, n := range nodes {
		names = append(names, "node:"+n.Name)
	}
	for _, p := range pods {
		if p.ModRevision > rev || p.ModRevision == 0 {
			names = append(names, "BAD-REVISION")
		}
		if !valueIsPod(p) {
			names = append(names, "BAD-VALUE")
		}
		names = append(names, "pod:"+p.Pod.Namespace+"/"+p.Pod.Name)
	}
	h.calls <- call{Kind: "Reset", Rev: rev, Names: names}
	h.resets++
	if h.resets == 1 && h.blockReset != nil {
		<-h.blockReset
	}
}

func (h *recordingHandler) NodePut(n *berthv1.Node, rev int64) {
	h.calls <- call{Kind: "NodePut", Rev: rev, Names: []string{n.Name}}
}

func (h *recordingHandler) NodeDeleted(name string, rev int64) {
	h.calls <- call{Kind: "NodeDeleted", Rev: rev, Names: []string{name}}
}

func (h *recordingHandler) PodPut(p PodRecord, prev PrevPod) {
	name := p.Pod.Namespace + "/" + p.Pod.Name
	if !valueIsPod(p) {
		name = "BAD-VALUE " + name
	}
	h.calls <- call{Kind: "PodPut", Rev: p.ModRevision, Names: []string{name},
		Prev: podDesc(prev.Pod()), State: podDesc(p.Pod) + "/" + p.Pod.NodeName}
}

// valueIsPod tells whether a delivered record's Value is its Pod as
// stored, which handlers keep instead of the decoded pod.
func valueIsPod(p PodRecord) bool {
	got, err := decodePod(p.Value)
	return err == nil && proto.Equal(got, p.Pod)
}

func (h *recordingHandler) PodDeleted(prev *berthv1.Pod, rev int64) {
	h.calls <- call{Kind: "PodDeleted", Rev: rev, Names: []string{prev.Namespace + "/" + prev.Name}, Prev: podDesc(prev)}
}

func (h *recordingHandler) next(t *testing.T, n int) []call {
	t.Helper()
	var out []call
	timeout := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case c := <-h.calls:
			out = append(out, c)
		case <-timeout:
			t.Fatalf("got %d of %d handler calls: %+v", len(out), n, out)
		}
	}
	return out
}

// runSync runs Sync until the test ends and checks how it ended.
func runSync(t *testing.T, s *Store, h SyncHandler) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Sync(ctx, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Sync ended with %v, want context.Canceled", err)
		}
	})
}

func TestSyncDeliversResetThenEvents(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	s.chunk = 2 // the listing spans several range reads
	ctx := testCtx(t)
	for _, n := range []string{"n1", "n2", "n3"} {
		if _, err := s.PutNode(ctx, &berthv1.Node{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	c := mustCreate(t, s, pendingPod("ns", "a", "ua"), pendingPod("ns", "b", "ub"), pendingPod("other", "c", "uc"))
	listedAt, err := s.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}

	h := newRecordingHandler()
	runSync(t, s, h)
	reset := h.next(t, 1)[0]
	if reset.Kind != "Reset" || reset.Rev < listedAt {
		t.Fatalf("first call %+v, want Reset at revision >= %d", reset, listedAt)
	}
	wantNames := []string{"node:n1", "node:n2", "node:n3", "pod:ns/a", "pod:ns/b", "pod:other/c"}
	if diff := cmp.Diff(wantNames, reset.Names); diff != "" {
		t.Errorf("Reset contents (-want +got):\n%s", diff)
	}

	rn4, _ := s.PutNode(ctx, &berthv1.Node{Name: "n4"})
	rn1, _ := s.DeleteNode(ctx, "n1")
	cd := mustCreate(t, s, pendingPod("ns", "d", "ud"))[0]
	ra := mustUpdate(t, s, boundTo(c[0].Pod, "n2"), c[0].Revision)
	rb, err := s.DeletePod(ctx, "ns", "b", "ub")
	if err != nil {
		t.Fatal(err)
	}
	want := []call{
		{Kind: "NodePut", Rev: rn4, Names: []string{"n4"}},
		{Kind: "NodeDeleted", Rev: rn1, Names: []string{"n1"}},
		{Kind: "PodPut", Rev: cd.Revision, Names: []string{"ns/d"}, State: "ud/POD_PHASE_PENDING/"},
		{Kind: "PodPut", Rev: ra, Names: []string{"ns/a"}, Prev: "ua/POD_PHASE_PENDING", State: "ua/POD_PHASE_BOUND/n2"},
		{Kind: "PodDeleted", Rev: rb, Names: []string{"ns/b"}, Prev: "ub/POD_PHASE_PENDING"},
	}
	if diff := cmp.Diff(want, h.next(t, len(want))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// noPrevHandler records as recordingHandler does, and says it never reads
// previous values.
type noPrevHandler struct{ *recordingHandler }

func (noPrevHandler) IgnoresPrev() {}

// A handler that ignores previous values gets none: its watch does not ask
// etcd for them. A put's PrevPod is empty; a delete names the pod only.
func TestSyncWithoutPrevValues(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	c := mustCreate(t, s, pendingPod("ns", "a", "ua"), pendingPod("ns", "b", "ub"))

	h := noPrevHandler{newRecordingHandler()}
	runSync(t, s, h)
	if reset := h.next(t, 1)[0]; reset.Kind != "Reset" {
		t.Fatalf("first call %+v, want Reset", reset)
	}
	ra := mustUpdate(t, s, boundTo(c[0].Pod, "n2"), c[0].Revision)
	rb, err := s.DeletePod(ctx, "ns", "b", "ub")
	if err != nil {
		t.Fatal(err)
	}
	want := []call{
		{Kind: "PodPut", Rev: ra, Names: []string{"ns/a"}, State: "ua/POD_PHASE_BOUND/n2"},
		{Kind: "PodDeleted", Rev: rb, Names: []string{"ns/b"}, Prev: "/POD_PHASE_UNSPECIFIED"},
	}
	if diff := cmp.Diff(want, h.next(t, len(want))); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestSyncRelistsAfterFallingBehindCompaction(t *testing.T) {
	e := ownEtcd(t, t.TempDir(), "")
	m := NewMetrics(prometheus.NewRegistry())
	s := openStore(t, e, func(c *Config) { c.Metrics = m })
	ctx := testCtx(t)
	mustCreate(t, s, pendingPod("ns", "a", "ua"))

	h := newRecordingHandler()
	h.blockReset = make(chan struct{})
	runSync(t, s, h)
	first := h.next(t, 1)[0]
	// While the handler is busy with the first Reset, the world moves on and
	// history is compacted past the revision Sync will watch from.
	var last int64
	for i := range 3 {
		last = mustCreate(t, s, pendingPod("ns", fmt.Sprintf("new-%d", i), ""))[0].Revision
	}
	if _, err := s.Client().Compact(ctx, last); err != nil {
		t.Fatal(err)
	}
	close(h.blockReset)

	second := h.next(t, 1)[0]
	if second.Kind != "Reset" || second.Rev < last {
		t.Fatalf("after compaction got %+v, want a Reset at revision >= %d", second, last)
	}
	want := []string{"pod:ns/a", "pod:ns/new-0", "pod:ns/new-1", "pod:ns/new-2"}
	if diff := cmp.Diff(want, second.Names); diff != "" {
		t.Errorf("second Reset (-want +got):\n%s (first was %+v)", diff, first)
	}
	var relists dto.Metric
	if err := m.relists.Write(&relists); err != nil {
		t.Fatal(err)
	}
	if got := relists.GetCounter().GetValue(); got != 1 {
		t.Errorf("relists metric %v, want 1", got)
	}
	// And the watch goes on from there.
	rev := mustCreate(t, s, pendingPod("ns", "after", "uz"))[0].Revision
	got := h.next(t, 1)[0]
	if got.Kind != "PodPut" || got.Rev != rev || !slices.Equal(got.Names, []string{"ns/after"}) {
		t.Errorf("after relist got %+v, want PodPut of ns/after at %d", got, rev)
	}
}
