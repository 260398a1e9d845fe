package store

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// TestCreatePods runs every outcome of a create against pods stored first;
// long because the table's cases share them.
func TestCreatePods(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	orig := pendingPod("ns", "web", "uid-1")
	first := mustCreate(t, s, orig)[0]
	if first.Revision == 0 || first.Pod.Uid != "uid-1" {
		t.Fatalf("create: %+v", first)
	}
	declared := pendingPod("ns", "declared", "uid-d")
	declared.NodeName = "n1"
	declared.Status = nil

	tests := []struct {
		name    string
		pod     *berthv1.Pod
		wantErr error
		// wantUID and wantRev check the returned pod and revision.
		wantUID   string
		wantRev   int64
		wantPhase berthv1.PodPhase
		wantNode  string
	}{
		{name: "identical resubmission returns the stored pod", pod: pendingPod("ns", "web", "uid-1"),
			wantUID: "uid-1", wantRev: first.Revision, wantPhase: berthv1.PodPhase_POD_PHASE_PENDING},
		{name: "resubmission without uid is identical", pod: pendingPod("ns", "web", ""),
			wantUID: "uid-1", wantRev: first.Revision, wantPhase: berthv1.PodPhase_POD_PHASE_PENDING},
		{name: "status is ignored", pod: withPhase(pendingPod("ns", "web", "uid-1"), berthv1.PodPhase_POD_PHASE_FAILED),
			wantUID: "uid-1", wantRev: first.Revision, wantPhase: berthv1.PodPhase_POD_PHASE_PENDING},
		{name: "different uid", pod: pendingPod("ns", "web", "uid-2"), wantErr: ErrAlreadyExists},
		{name: "different spec", pod: func() *berthv1.Pod {
			p := pendingPod("ns", "web", "uid-1")
			p.Priority = 7
			return p
		}(), wantErr: ErrAlreadyExists},
		{name: "different node", pod: func() *berthv1.Pod {
			p := pendingPod("ns", "web", "uid-1")
			p.NodeName = "n9"
			return p
		}(), wantErr: ErrAlreadyExists},
		{name: "node_name given: stored bound", pod: declared,
			wantUID: "uid-d", wantPhase: berthv1.PodPhase_POD_PHASE_BOUND, wantNode: "n1"},
		{name: "uid assigned when empty", pod: pendingPod("ns", "fresh", ""),
			wantPhase: berthv1.PodPhase_POD_PHASE_PENDING},
		{name: "slash in name", pod: pendingPod("ns", "a/b", ""), wantErr: ErrInvalidArgument},
		{name: "nil pod", pod: nil, wantErr: ErrInvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before *berthv1.Pod
			if tt.pod != nil {
				before = clonePod(tt.pod)
			}
			r := s.CreatePods(ctx, []*berthv1.Pod{tt.pod})[0]
			if tt.wantErr != nil {
				if msg := errIs(r.Err, tt.wantErr); msg != "" {
					t.Fatal(msg)
				}
				return
			}
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if tt.pod != nil {
				if diff := cmp.Diff(before, tt.pod, protocmp.Transform()); diff != "" {
					t.Errorf("CreatePods modified its input (-before +after):\n%s", diff)
				}
			}
			if tt.wantUID != "" && r.Pod.Uid != tt.wantUID {
				t.Errorf("uid %q, want %q", r.Pod.Uid, tt.wantUID)
			}
			if r.Pod.Uid == "" {
				t.Error("stored pod has no uid")
			}
			if tt.wantRev != 0 && r.Revision != tt.wantRev {
				t.Errorf("revision %d, want %d", r.Revision, tt.wantRev)
			}
			if got := r.Pod.GetStatus().GetPhase(); got != tt.wantPhase {
				t.Errorf("phase %v, want %v", got, tt.wantPhase)
			}
			if r.Pod.NodeName != tt.wantNode {
				t.Errorf("node %q, want %q", r.Pod.NodeName, tt.wantNode)
			}
			stored, modRev, err := s.GetPod(ctx, r.Pod.Namespace, r.Pod.Name)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(r.Pod, stored, protocmp.Transform()); diff != "" {
				t.Errorf("returned pod differs from stored (-returned +stored):\n%s", diff)
			}
			if modRev < r.Revision {
				t.Errorf("mod revision %d before create revision %d", modRev, r.Revision)
			}
		})
	}
}

func TestCreatePodsBatchWithExisting(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	existing := mustCreate(t, s, pendingPod("ns", "p-05", "old"))[0]

	var batch []*berthv1.Pod
	for i := range 20 {
		batch = append(batch, pendingPod("ns", fmt.Sprintf("p-%02d", i), fmt.Sprintf("new-%d", i)))
	}
	res := s.CreatePods(ctx, batch)
	for i, r := range res {
		if i == 5 {
			if msg := errIs(r.Err, ErrAlreadyExists); msg != "" {
				t.Errorf("pod 5: %s", msg)
			}
			continue
		}
		if r.Err != nil {
			t.Errorf("pod %d: %v", i, r.Err)
			continue
		}
		if r.Pod.Uid != batch[i].Uid {
			t.Errorf("pod %d: uid %q", i, r.Pod.Uid)
		}
	}
	pods, _, err := s.ListPods(ctx, PodFilter{}, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 20 {
		t.Fatalf("%d pods stored, want 20", len(pods))
	}
	if pods[5].Uid != "old" {
		t.Errorf("existing pod overwritten: uid %q (created at %d)", pods[5].Uid, existing.Revision)
	}
}

func TestCreatePodsConcurrentDuplicates(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	const writers = 16
	for round := range 5 {
		name := fmt.Sprintf("dup-%d", round)
		results := make([]CreateResult, writers)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				// Half resubmit one pod (idempotent), half submit a rival.
				uid := "shared"
				if w%2 == 1 {
					uid = fmt.Sprintf("rival-%d", w)
				}
				results[w] = s.CreatePods(ctx, []*berthv1.Pod{pendingPod("ns", name, uid)})[0]
			})
		}
		wg.Wait()
		stored, _, err := s.GetPod(ctx, "ns", name)
		if err != nil {
			t.Fatal(err)
		}
		var createRevs = map[int64]bool{}
		for w, r := range results {
			switch {
			case r.Err == nil:
				if r.Pod.Uid != stored.Uid {
					t.Errorf("round %d writer %d: succeeded with uid %q but %q is stored", round, w, r.Pod.Uid, stored.Uid)
				}
				createRevs[r.Revision] = true
			case errIs(r.Err, ErrAlreadyExists) == "":
				if r.Pod != nil {
					t.Errorf("round %d writer %d: pod returned with error", round, w)
				}
			default:
				t.Errorf("round %d writer %d: %v", round, w, r.Err)
			}
		}
		// Every success reports the one creation.
		if len(createRevs) != 1 {
			t.Errorf("round %d: successes report create revisions %v, want exactly one", round, createRevs)
		}
	}
}

func TestUpdatePodsConflicts(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	created := mustCreate(t, s, pendingPod("ns", "a", "ua"), pendingPod("ns", "b", "ub"), pendingPod("ns", "c", "uc"))
	revA, revB, revC := created[0].Revision, created[1].Revision, created[2].Revision

	// b changes behind the scheduler's back; c is deleted.
	newRevB := mustUpdate(t, s, withPhase(created[1].Pod, berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE), revB)
	if _, err := s.DeletePod(ctx, "ns", "c", ""); err != nil {
		t.Fatal(err)
	}

	res := s.UpdatePods(ctx, []PodUpdate{
		{Pod: boundTo(created[0].Pod, "n1"), ExpectedModRevision: revA},
		{Pod: boundTo(created[1].Pod, "n1"), ExpectedModRevision: revB},
		{Pod: boundTo(created[2].Pod, "n1"), ExpectedModRevision: revC},
		{Pod: boundTo(pendingPod("ns", "never", "un"), "n1"), ExpectedModRevision: 42},
	})
	if res[0].Err != nil {
		t.Errorf("a: %v", res[0].Err)
	}
	for i, name := range []string{"b", "c", "never"} {
		if msg := errIs(res[i+1].Err, ErrConflict); msg != "" {
			t.Errorf("%s: %s", name, msg)
		}
	}
	a, modA, err := s.GetPod(ctx, "ns", "a")
	if err != nil {
		t.Fatal(err)
	}
	if a.NodeName != "n1" || modA != res[0].Revision {
		t.Errorf("a not bound at its update revision: node %q mod %d, update %d", a.NodeName, modA, res[0].Revision)
	}
	b, modB, _ := s.GetPod(ctx, "ns", "b")
	if b.NodeName != "" || modB != newRevB {
		t.Errorf("b overwritten by a stale update: %v at %d", b, modB)
	}
	if _, _, err := s.GetPod(ctx, "ns", "c"); errIs(err, ErrNotFound) != "" {
		t.Errorf("c recreated by a stale update: %v", err)
	}
	// A stale retry of a's own update conflicts too.
	if r := s.UpdatePods(ctx, []PodUpdate{{Pod: boundTo(created[0].Pod, "n2"), ExpectedModRevision: revA}})[0]; errIs(r.Err, ErrConflict) != "" {
		t.Errorf("stale retry: %s", errIs(r.Err, ErrConflict))
	}
}

func TestDeletePod(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	mustCreate(t, s, pendingPod("ns", "a", "ua"), pendingPod("ns", "b", "ub"))
	tests := []struct {
		name, pod, uid string
		wantErr        error
	}{
		{name: "absent", pod: "zz", wantErr: ErrNotFound},
		{name: "uid mismatch", pod: "a", uid: "other", wantErr: ErrConflict},
		{name: "uid match", pod: "a", uid: "ua"},
		{name: "already deleted", pod: "a", uid: "ua", wantErr: ErrNotFound},
		{name: "any uid", pod: "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rev, err := s.DeletePod(ctx, "ns", tt.pod, tt.uid)
			if tt.wantErr != nil {
				if msg := errIs(err, tt.wantErr); msg != "" {
					t.Fatal(msg)
				}
				return
			}
			if err != nil || rev == 0 {
				t.Fatalf("rev %d err %v", rev, err)
			}
			if _, _, err := s.GetPod(ctx, "ns", tt.pod); errIs(err, ErrNotFound) != "" {
				t.Errorf("still there: %v", err)
			}
		})
	}
}

// TestListPodsPagination pages one set of pods every way a caller can
// (sizes, filters, tokens); long because the cases share that set.
func TestListPodsPagination(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	s.chunk = 2 // force filtered pages to span several range reads
	ctx := testCtx(t)
	// 30 pods in two namespaces; every third bound to n1 or n2, some failed.
	var all []*berthv1.Pod
	for i := range 30 {
		ns := "alpha"
		if i%2 == 1 {
			ns = "beta"
		}
		p := pendingPod(ns, fmt.Sprintf("p-%02d", i), fmt.Sprintf("u-%d", i))
		switch i % 6 {
		case 0:
			p = boundTo(p, "n1")
		case 3:
			p = boundTo(p, "n2")
		case 5:
			p = withPhase(p, berthv1.PodPhase_POD_PHASE_FAILED)
		}
		all = append(all, p)
	}
	mustCreate(t, s, all...)

	names := func(f PodFilter) []string {
		var out []string
		for _, ns := range []string{"alpha", "beta"} {
			for _, p := range all {
				if p.Namespace == ns && (f.Namespace == "" || f.Namespace == ns) && f.matches(p) {
					out = append(out, p.Namespace+"/"+p.Name)
				}
			}
		}
		return out
	}
	filters := []PodFilter{
		{},
		{Namespace: "beta"},
		{Phase: berthv1.PodPhase_POD_PHASE_BOUND},
		{NodeName: "n2"},
		{Namespace: "alpha", Phase: berthv1.PodPhase_POD_PHASE_PENDING},
		{Phase: berthv1.PodPhase_POD_PHASE_FAILED},
		{Phase: berthv1.PodPhase_POD_PHASE_RUNNING},
	}
	for _, f := range filters {
		for _, pageSize := range []int{1, 4, 50} {
			t.Run(fmt.Sprintf("%+v/size=%d", f, pageSize), func(t *testing.T) {
				want := names(f)
				var got []string
				token := ""
				for pages := 0; ; pages++ {
					if pages > 40 {
						t.Fatal("pagination does not end")
					}
					pods, next, err := s.ListPods(ctx, f, pageSize, token)
					if err != nil {
						t.Fatal(err)
					}
					if len(pods) > pageSize || (next != "" && len(pods) != pageSize) {
						t.Fatalf("page of %d pods with next=%q, page size %d", len(pods), next, pageSize)
					}
					for _, p := range pods {
						got = append(got, p.Namespace+"/"+p.Name)
					}
					if next == "" {
						break
					}
					token = next
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			})
		}
	}
	// A token from one namespace is no good for another.
	_, next, err := s.ListPods(ctx, PodFilter{Namespace: "alpha"}, 1, "")
	if err != nil || next == "" {
		t.Fatalf("next %q err %v", next, err)
	}
	if _, _, err := s.ListPods(ctx, PodFilter{Namespace: "beta"}, 1, next); errIs(err, ErrInvalidArgument) != "" {
		t.Errorf("foreign token: %s", errIs(err, ErrInvalidArgument))
	}
}

// TestDeletePodJudgesTheValueThatBeatIt changes a pod between DeletePod's
// read and its compare-and-delete: the same incarnation is still deleted, a
// new incarnation (other uid) is not.
func TestDeletePodJudgesTheValueThatBeatIt(t *testing.T) {
	for _, tt := range []struct {
		name    string
		newUID  string
		wantErr error
	}{
		{name: "same uid changed", newUID: "u1"},
		{name: "replaced by a new incarnation", newUID: "u2", wantErr: ErrConflict},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, sharedEtcd(t))
			ctx := testCtx(t)
			created := mustCreate(t, s, pendingPod("ns", "p", "u1"))[0]
			s.groupCommit.close()
			rec := newRecordingKV(s.Client().KV, true)
			s.groupCommit = newGroupCommitter(rec, 1, 16, defaultMaxTxnBytes, 5*time.Second, nil)

			done := make(chan error, 1)
			go func() {
				_, err := s.DeletePod(ctx, "ns", "p", "u1")
				done <- err
			}()
			<-rec.commitsIn // the delete is on its way, compared against the old revision
			changed := boundTo(created.Pod, "n1")
			changed.Uid = tt.newUID
			val, err := marshalOpts.Marshal(changed)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := rec.KV.Put(ctx, s.keys.pod("ns", "p"), string(val)); err != nil {
				t.Fatal(err)
			}
			rec.release()
			err = <-done
			if tt.wantErr != nil {
				if msg := errIs(err, tt.wantErr); msg != "" {
					t.Fatal(msg)
				}
				if _, _, err := s.GetPod(ctx, "ns", "p"); err != nil {
					t.Errorf("new incarnation was deleted: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.GetPod(ctx, "ns", "p"); errIs(err, ErrNotFound) != "" {
				t.Errorf("pod still there: %v", err)
			}
			if n := len(rec.sent()); n != 2 {
				t.Errorf("%d Txns, want 2 (the failed compare, then the retry)", n)
			}
		})
	}
}

// TestCreatePodsUIDsAreUnique: a uid names one pod at most, whether the
// rival comes later or in the same batch; an identical resubmission is not
// a rival; deleting the pod frees its uid.
func TestCreatePodsUIDsAreUnique(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	first := mustCreate(t, s, pendingPod("ns", "first", "u1"))[0]

	res := s.CreatePods(ctx, []*berthv1.Pod{
		pendingPod("ns", "first", "u1"), // the same pod again
		pendingPod("ns", "rival", "u1"),
		pendingPod("ns", "twin-a", "u2"),
		pendingPod("ns", "twin-b", "u2"),
	})
	if res[0].Err != nil || res[0].Revision != first.Revision {
		t.Fatalf("resubmission: rev %d err %v, want rev %d", res[0].Revision, res[0].Err, first.Revision)
	}
	var taken *UIDTakenError
	if !errors.As(res[1].Err, &taken) || taken.UID != "u1" || taken.Holder != "ns/first" || !errors.Is(res[1].Err, ErrAlreadyExists) {
		t.Fatalf("rival: %v, want the uid u1 of ns/first taken", res[1].Err)
	}
	if (res[2].Err == nil) == (res[3].Err == nil) {
		t.Fatalf("twins: %v and %v, want exactly one created", res[2].Err, res[3].Err)
	}
	if _, _, err := s.GetPod(ctx, "ns", "rival"); errIs(err, ErrNotFound) != "" {
		t.Fatalf("the rival was stored: %v", err)
	}

	if _, err := s.DeletePod(ctx, "ns", "first", ""); err != nil {
		t.Fatal(err)
	}
	if res := s.CreatePods(ctx, []*berthv1.Pod{pendingPod("ns", "rival", "u1")}); res[0].Err != nil {
		t.Fatalf("the uid is free once its pod is deleted: %v", res[0].Err)
	}
}

// TestCreatePodsOverEtcdsLimit: a pod over etcd's request size limit is an
// invalid argument, not an internal error, and fails alone: a pod created
// with it is stored.
func TestCreatePodsOverEtcdsLimit(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	huge := pendingPod("ns", "huge", "u-huge")
	huge.Containers[0].Image = strings.Repeat("i", 8<<20+64<<10)
	res := s.CreatePods(testCtx(t), []*berthv1.Pod{huge, pendingPod("ns", "small", "u-small")})
	if msg := errIs(res[0].Err, ErrInvalidArgument); msg != "" {
		t.Fatalf("huge pod: %s", msg)
	}
	if res[1].Err != nil {
		t.Fatalf("small pod beside it: %v", res[1].Err)
	}
}
