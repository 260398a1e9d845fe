package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"
	clientv3 "go.etcd.io/etcd/client/v3"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// Assigned uids are valid version-8 UUIDs, differ from pod to pod and from
// one incarnation of a name to the next, and name their own pod only.
func TestAssignedUIDs(t *testing.T) {
	seen := map[string]bool{}
	for i := range 2000 {
		ns, name := fmt.Sprint("ns", i%3), fmt.Sprint("p", i%500) // each name 4 times or so
		uid := assignUID(ns, name)
		if seen[uid] {
			t.Fatalf("uid %s assigned twice", uid)
		}
		seen[uid] = true
		u, err := uuid.Parse(uid)
		if err != nil || u.Version() != 8 || u.Variant() != uuid.RFC4122 || u.String() != uid {
			t.Fatalf("uid %q: version %v variant %v err %v, want a canonical version-8 UUID", uid, u.Version(), u.Variant(), err)
		}
		if got := classifyUID(uid, ns, name); got != uidBound {
			t.Fatalf("uid %s of %s/%s: class %v for its own pod, want uidBound", uid, ns, name, got)
		}
		if got := classifyUID(strings.ToUpper(uid), ns, name); got != uidBound {
			t.Fatalf("upper-case %s: class %v, want uidBound (UUIDs compare without case)", uid, got)
		}
		for _, other := range [][2]string{{ns, name + "x"}, {ns + "x", name}, {ns + "/" + name[:1], name[1:]}} {
			if got := classifyUID(uid, other[0], other[1]); got != uidBoundElsewhere {
				t.Fatalf("uid %s of %s/%s: class %v for %s/%s, want uidBoundElsewhere", uid, ns, name, got, other[0], other[1])
			}
		}
	}

	// Every bit but version and variant is checked: random bits through the
	// tag they feed, tag bits directly.
	uid := assignUID("ns", "p")
	u := uuid.MustParse(uid)
	for bit := range 128 {
		if bit>>3 == 6 && bit&7 < 4 || bit>>3 == 8 && bit&7 < 2 {
			continue // version nibble and variant bits (most significant first)
		}
		flipped := u
		flipped[bit>>3] ^= 0x80 >> (bit & 7)
		if got := classifyUID(flipped.String(), "ns", "p"); got != uidBoundElsewhere {
			t.Errorf("bit %d flipped: class %v, want uidBoundElsewhere", bit, got)
		}
	}

	for _, client := range []string{
		"", "u1", "free text", uuid.NewString(), uuid.Must(uuid.NewV7()).String(),
		"urn:uuid:" + uid, "{" + uid + "}", strings.ReplaceAll(uid, "-", ""), // other spellings
		uid[:19] + "c" + uid[20:], // variant 0b110
	} {
		if got := classifyUID(client, "ns", "p"); got != uidIndexed {
			t.Errorf("client uid %q: class %v, want uidIndexed", client, got)
		}
	}
}

// keysWrittenAt returns the keys under the store's prefix that revision
// rev wrote and that still hold that write.
func keysWrittenAt(t *testing.T, s *Store, rev int64) []string {
	t.Helper()
	root := strings.TrimSuffix(s.keys.pods, "pods/")
	resp, err := s.Client().Get(testCtx(t), root, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range resp.Kvs {
		if kv.ModRevision == rev {
			keys = append(keys, strings.TrimPrefix(string(kv.Key), root))
		}
	}
	return keys
}

func countPrefix(t *testing.T, s *Store, prefix string) int64 {
	t.Helper()
	resp, err := s.Client().Get(testCtx(t), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// A pod created with a uid Berth assigns is one key in etcd; with a uid of
// the client's, two (the pod and its uid index key), as before.
func TestCreatePodsAssignedUIDWritesOneKey(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	assigned := mustCreate(t, s, pendingPod("ns", "assigned", ""))[0]
	if got := classifyUID(assigned.Pod.Uid, "ns", "assigned"); got != uidBound {
		t.Fatalf("stored uid %q: class %v, want uidBound", assigned.Pod.Uid, got)
	}
	if diff := cmp.Diff([]string{"pods/ns/assigned"}, keysWrittenAt(t, s, assigned.Revision)); diff != "" {
		t.Errorf("keys written by a create with an assigned uid (-want +got):\n%s", diff)
	}
	client := mustCreate(t, s, pendingPod("ns", "client", "u-client"))[0]
	if diff := cmp.Diff([]string{"pods/ns/client", "uids/u-client"}, keysWrittenAt(t, s, client.Revision)); diff != "" {
		t.Errorf("keys written by a create with a client's uid (-want +got):\n%s", diff)
	}
	if n := countPrefix(t, s, s.keys.uids); n != 1 {
		t.Errorf("%d uid index keys, want 1 (the client's)", n)
	}
}

// A pod Berth gave a uid may be resubmitted with it (or without a uid) and
// is then the same pod; no other pod can take that uid, and trying changes
// nothing; once the pod is gone its name may come back with it.
func TestCreatePodsAssignedUIDNamesOnePod(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	first := mustCreate(t, s, pendingPod("ns", "first", ""))[0]
	uid := first.Pod.Uid
	revBefore, err := s.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}

	res := s.CreatePods(ctx, []*berthv1.Pod{
		pendingPod("ns", "first", uid), // resubmitted with the uid it was given
		pendingPod("ns", "first", ""),  // resubmitted without
		pendingPod("ns", "rival", uid),
		pendingPod("other", "first", uid),
		pendingPod("ns", "first", strings.ToUpper(uid)), // the same UUID, a different string
	})
	for i := range 2 {
		if res[i].Err != nil || res[i].Revision != first.Revision || res[i].Pod.Uid != uid {
			t.Errorf("resubmission %d: rev %d uid %q err %v, want rev %d uid %s", i, res[i].Revision, res[i].Pod.GetUid(), res[i].Err, first.Revision, uid)
		}
	}
	for i := 2; i < 4; i++ {
		var taken *UIDTakenError
		if !errors.As(res[i].Err, &taken) || taken.UID != uid || taken.Holder != "" || !errors.Is(res[i].Err, ErrAlreadyExists) {
			t.Errorf("rival %d: %v, want the uid %s taken, holder unknown", i, res[i].Err, uid)
		} else if !strings.Contains(res[i].Err.Error(), UIDAssignedElsewhere) {
			t.Errorf("rival %d: message %q does not say the uid was assigned to another pod", i, res[i].Err)
		}
	}
	if errIs(res[4].Err, ErrAlreadyExists) != "" || errors.As(res[4].Err, new(*UIDTakenError)) {
		t.Errorf("upper-case uid on the stored name: %v, want the name taken by a different pod", res[4].Err)
	}
	if revAfter, err := s.CurrentRevision(ctx); err != nil || revAfter != revBefore {
		t.Errorf("revision %d after the resubmissions and rivals (err %v), want %d: nothing written", revAfter, err, revBefore)
	}

	if _, err := s.DeletePod(ctx, "ns", "first", uid); err != nil {
		t.Fatal(err)
	}
	again := mustCreate(t, s, pendingPod("ns", "first", uid))[0]
	if again.Pod.Uid != uid || again.Revision <= first.Revision {
		t.Errorf("recreated: uid %q rev %d, want uid %s after rev %d", again.Pod.Uid, again.Revision, uid, first.Revision)
	}
	if res := s.CreatePods(ctx, []*berthv1.Pod{pendingPod("ns", "rival", uid)}); !errors.As(res[0].Err, new(*UIDTakenError)) {
		t.Errorf("rival after the name came back: %v, want the uid refused", res[0].Err)
	}
}

// Pods stored before assigned uids were bound to their names have a uid
// index key: it still guards the uid, and deleting the pod deletes it.
func TestDeletePodOfOldDataDeletesItsUIDKey(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	old := pendingPod("ns", "old", uuid.NewString()) // what Berth assigned then
	val, err := marshalOpts.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	key := s.keys.pod("ns", "old")
	if _, err := s.Client().Txn(ctx).Then(clientv3.OpPut(key, string(val)), clientv3.OpPut(s.keys.uid(old.Uid), key)).Commit(); err != nil {
		t.Fatal(err)
	}
	res := s.CreatePods(ctx, []*berthv1.Pod{pendingPod("ns", "rival", old.Uid)})
	var taken *UIDTakenError
	if !errors.As(res[0].Err, &taken) || taken.Holder != "ns/old" {
		t.Fatalf("rival of an old pod: %v, want the uid held by ns/old", res[0].Err)
	}
	if _, err := s.DeletePod(ctx, "ns", "old", old.Uid); err != nil {
		t.Fatal(err)
	}
	if n := countPrefix(t, s, s.keys.uids); n != 0 {
		t.Errorf("%d uid index keys after the delete, want 0", n)
	}
	mustCreate(t, s, pendingPod("ns", "rival", old.Uid))
}

// A client that chose a version-8 uid before such uids were Berth's has
// its pod stored with an index key: resubmitting that pod is still
// idempotent, and no other pod gets the uid.
func TestCreatePodsOldVersion8ClientUID(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	clientUID := uuid.NewSHA1(uuid.NameSpaceURL, []byte("x")).String() // some scheme's own
	u := uuid.MustParse(clientUID)
	u[6] = 0x80 | u[6]&0x0f // made version 8
	clientUID = u.String()
	if classifyUID(clientUID, "ns", "old") != uidBoundElsewhere {
		t.Fatalf("%s is not refused to ns/old: test needs another uid", clientUID)
	}
	old := pendingPod("ns", "old", clientUID)
	val, err := marshalOpts.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	key := s.keys.pod("ns", "old")
	resp, err := s.Client().Txn(ctx).Then(clientv3.OpPut(key, string(val)), clientv3.OpPut(s.keys.uid(clientUID), key)).Commit()
	if err != nil {
		t.Fatal(err)
	}
	changed := clonePod(old)
	changed.Priority = 7
	res := s.CreatePods(ctx, []*berthv1.Pod{old, pendingPod("ns", "rival", clientUID), changed})
	if res[0].Err != nil || res[0].Revision != resp.Header.Revision || res[0].Pod.Uid != clientUID {
		t.Errorf("resubmission: rev %d err %v, want the stored pod at rev %d", res[0].Revision, res[0].Err, resp.Header.Revision)
	}
	for i := 1; i < 3; i++ {
		if !errors.As(res[i].Err, new(*UIDTakenError)) {
			t.Errorf("pod %d: %v, want the uid refused", i, res[i].Err)
		}
	}
	if _, _, err := s.GetPod(ctx, "ns", "rival"); errIs(err, ErrNotFound) != "" {
		t.Errorf("the rival was stored: %v", err)
	}
}

// With one key per pod, a batch of 1,000 pods with assigned uids fits one
// Txn under etcd's 1,024 ops; with the client's uids it takes two.
func TestCreatePodsAssignedUIDsFillATxn(t *testing.T) {
	for _, tt := range []struct {
		name      string
		uid       func(i int) string
		wantSizes []int // keys written per Txn
	}{
		{name: "assigned", uid: func(int) string { return "" }, wantSizes: []int{1000}},
		{name: "client's", uid: func(i int) string { return fmt.Sprint("u", i) }, wantSizes: []int{2 * 512, 2 * 488}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, sharedEtcd(t))
			s.groupCommit.close()
			rec := newRecordingKV(s.Client().KV, false)
			// One worker: all 1,000 units are queued at once, so the batches
			// are as large as the limits allow.
			s.groupCommit = newGroupCommitter(rec, 1, EmbeddedMaxTxnOps, defaultMaxTxnBytes, 5*time.Second, nil)
			pods := make([]*berthv1.Pod, 1000)
			for i := range pods {
				pods[i] = pendingPod("ns", fmt.Sprint("p", i), tt.uid(i))
			}
			mustCreate(t, s, pods...)
			var sizes []int
			for _, keys := range rec.sent() {
				sizes = append(sizes, len(keys))
			}
			if diff := cmp.Diff(tt.wantSizes, sizes); diff != "" {
				t.Errorf("keys per Txn (-want +got):\n%s", diff)
			}
		})
	}
}
