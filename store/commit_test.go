package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// recordingKV records the keys each Txn writes, can hold Txns at Commit
// until released, and checks that no key is in two Txns in flight at once.
type recordingKV struct {
	clientv3.KV
	hold chan struct{} // while open (not closed), Commit waits on it

	mu        sync.Mutex
	txns      [][]string
	active    map[string]int
	overlaps  []string
	commitsIn chan struct{} // receives once per Commit entered
}

func newRecordingKV(kv clientv3.KV, held bool) *recordingKV {
	r := &recordingKV{KV: kv, hold: make(chan struct{}), active: map[string]int{}, commitsIn: make(chan struct{}, 1024)}
	if !held {
		close(r.hold)
	}
	return r
}

func (r *recordingKV) release() { close(r.hold) }

func (r *recordingKV) Txn(ctx context.Context) clientv3.Txn {
	return &recordingTxn{Txn: r.KV.Txn(ctx), kv: r}
}

func (r *recordingKV) sent() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]string(nil), r.txns...)
}

// wantSent fails the test unless r saw exactly the Txns in want, each
// given as the keys it put, in order.
func (r *recordingKV) wantSent(t *testing.T, want [][]string) {
	t.Helper()
	if diff := cmp.Diff(want, r.sent()); diff != "" {
		t.Errorf("Txns (-want +got):\n%s", diff)
	}
}

type recordingTxn struct {
	clientv3.Txn
	kv   *recordingKV
	keys []string
}

func (t *recordingTxn) If(c ...clientv3.Cmp) clientv3.Txn  { t.Txn = t.Txn.If(c...); return t }
func (t *recordingTxn) Else(o ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(o...); return t }
func (t *recordingTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	for _, op := range ops {
		t.keys = append(t.keys, string(op.KeyBytes()))
	}
	t.Txn = t.Txn.Then(ops...)
	return t
}

func (t *recordingTxn) Commit() (*clientv3.TxnResponse, error) {
	r := t.kv
	r.mu.Lock()
	r.txns = append(r.txns, t.keys)
	for _, k := range t.keys {
		if r.active[k] > 0 {
			r.overlaps = append(r.overlaps, k)
		}
		r.active[k]++
	}
	r.mu.Unlock()
	r.commitsIn <- struct{}{}
	<-r.hold
	resp, err := t.Txn.Commit()
	r.mu.Lock()
	for _, k := range t.keys {
		r.active[k]--
	}
	r.mu.Unlock()
	return resp, err
}

func putUnit(ctx context.Context, key, val string) *commitUnit {
	return &commitUnit{ctx: ctx, ops: []*pb.RequestOp{putString(key, val)}}
}

// putUnits is n put units, on keys prefix+name+"0", prefix+name+"1" and on.
func putUnits(ctx context.Context, prefix, name string, n int) []*commitUnit {
	units := make([]*commitUnit, n)
	for i := range units {
		units[i] = putUnit(ctx, fmt.Sprintf("%s%s%d", prefix, name, i), "v")
	}
	return units
}

// settleAll waits for every unit and fails the test if one failed.
func settleAll(ctx context.Context, t *testing.T, c *groupCommitter, units []*commitUnit) {
	t.Helper()
	for i, u := range units {
		if res := c.wait(ctx, u); res.err != nil {
			t.Fatalf("unit %d: %v", i, res.err)
		}
	}
}

func createUnit(ctx context.Context, key, val string) *commitUnit {
	return &commitUnit{
		ctx:        ctx,
		cmps:       []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
		ops:        []*pb.RequestOp{putString(key, val)},
		readValues: true,
	}
}

// keyPrefix is unique to one run of one test.
func keyPrefix(t *testing.T) string {
	p, _ := keyPrefixes.LoadOrStore(t, fmt.Sprintf("/committer-test/%s/%d/", t.Name(), prefixSeq.Add(1)))
	return p.(string)
}

var keyPrefixes sync.Map // *testing.T -> string

// stalled starts a committer whose first Txn (one put) is held at Commit, so
// that units submitted next wait in the queue.
func stalled(t *testing.T, workers, maxOps int) (*groupCommitter, *recordingKV) {
	t.Helper()
	s := openStore(t, sharedEtcd(t))
	rec := newRecordingKV(s.Client().KV, true)
	c := newGroupCommitter(rec, workers, maxOps, defaultMaxTxnBytes, 5*time.Second, nil)
	t.Cleanup(func() {
		select {
		case <-rec.hold:
		default:
			rec.release()
		}
		c.close()
	})
	if err := c.submit(putUnit(testCtx(t), keyPrefix(t)+"first", "v")); err != nil {
		t.Fatal(err)
	}
	<-rec.commitsIn
	return c, rec
}

func TestCommitterFailedCompareSettlesOnlyTheOffender(t *testing.T) {
	c, rec := stalled(t, 1, 1024)
	ctx := testCtx(t)
	p := keyPrefix(t)
	if _, err := rec.KV.Put(ctx, p+"taken", "old"); err != nil {
		t.Fatal(err)
	}
	var units []*commitUnit
	for i := range 10 {
		key := fmt.Sprintf("%sfree-%d", p, i)
		if i == 4 {
			key = p + "taken"
		}
		units = append(units, createUnit(ctx, key, "new"))
	}
	if err := c.submit(units...); err != nil {
		t.Fatal(err)
	}
	rec.release()
	for i, u := range units {
		res := c.wait(ctx, u)
		if i == 4 {
			if res.err != errCompareFailed || string(u.currentKV(p+"taken").Value) != "old" {
				t.Errorf("taken: %v", res.err)
			}
			continue
		}
		if res.err != nil {
			t.Errorf("unit %d: %v", i, res.err)
		}
	}
	// first, the failed batch of 10, then the 9 resent.
	var sizes []int
	for _, keys := range rec.sent() {
		sizes = append(sizes, len(keys))
	}
	if diff := cmp.Diff([]int{1, 10, 9}, sizes); diff != "" {
		t.Errorf("Txn sizes (-want +got):\n%s", diff)
	}
}

func TestCommitterDropsUnitsWhoseWriterLeft(t *testing.T) {
	c, rec := stalled(t, 1, 1024)
	ctx := testCtx(t)
	p := keyPrefix(t)
	gone, cancel := context.WithCancel(ctx)
	cancel()
	dropped := putUnit(gone, p+"dropped", "v")
	kept := putUnit(ctx, p+"kept", "v")
	if err := c.submit(dropped, kept); err != nil {
		t.Fatal(err)
	}
	rec.release()
	if res := c.wait(ctx, kept); res.err != nil {
		t.Fatal(res.err)
	}
	<-dropped.done
	if dropped.res.err != context.Canceled {
		t.Errorf("dropped unit: %v", dropped.res.err)
	}
	resp, err := rec.KV.Get(ctx, p+"dropped")
	if err != nil || len(resp.Kvs) != 0 {
		t.Errorf("dropped unit was written: %v %v", resp, err)
	}
}

func TestCommitterNeverHasAKeyInTwoTxns(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	rec := newRecordingKV(s.Client().KV, false)
	c := newGroupCommitter(rec, 4, 16, defaultMaxTxnBytes, 5*time.Second, nil)
	defer c.close()
	ctx := testCtx(t)
	p := keyPrefix(t)
	const writers, perWriter, keys = 16, 20, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				u := putUnit(ctx, fmt.Sprintf("%sk%d", p, (w+i)%keys), fmt.Sprint(w, i))
				if err := c.submit(u); err != nil {
					errs <- err
					return
				}
				if res := c.wait(ctx, u); res.err != nil {
					errs <- res.err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.overlaps) > 0 {
		t.Errorf("keys in two Txns at once: %v", rec.overlaps)
	}
	for _, txn := range rec.txns {
		seen := map[string]bool{}
		for _, k := range txn {
			if seen[k] {
				t.Errorf("key %s twice in one Txn %v", k, txn)
			}
			seen[k] = true
		}
	}
}

func TestCmpHoldsMatchesEtcd(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	key := keyPrefix(t) + "k"
	absent := keyPrefix(t) + "absent"
	put, err := s.Client().Put(ctx, key, "b")
	if err != nil {
		t.Fatal(err)
	}
	rev := put.Header.Revision
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(key), "=", rev),
		clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(absent), "=", 0),
		clientv3.Compare(clientv3.ModRevision(key), ">", rev-1),
		clientv3.Compare(clientv3.ModRevision(key), "<", rev),
		clientv3.Compare(clientv3.ModRevision(absent), "=", 0),
		clientv3.Compare(clientv3.Version(key), "!=", 1),
		clientv3.Compare(clientv3.Value(key), "=", "b"),
		clientv3.Compare(clientv3.Value(key), ">", "a"),
		clientv3.Compare(clientv3.Value(absent), "=", ""),
		clientv3.Compare(clientv3.Value(absent), "!=", "x"),
		clientv3.Compare(clientv3.LeaseValue(key), "=", clientv3.NoLease),
	}
	kvs := map[string]*mvccpb.KeyValue{}
	for _, k := range []string{key, absent} {
		resp, err := s.Client().Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) > 0 {
			kvs[k] = resp.Kvs[0]
		}
	}
	for i, c := range cmps {
		resp, err := s.Client().Txn(ctx).If(c).Commit()
		if err != nil {
			t.Fatal(err)
		}
		if got := cmpHolds(&cmps[i], kvs[string(c.KeyBytes())]); got != resp.Succeeded {
			t.Errorf("compare %d (%v): local %v, etcd %v", i, c, got, resp.Succeeded)
		}
	}
}

func TestCloseFlushesQueuedWrites(t *testing.T) {
	e := sharedEtcd(t)
	s := openStore(t, e)
	// Hold the Txns so that writes pile up in the queue before Close.
	s.groupCommit.close()
	rec := newRecordingKV(s.Client().KV, true)
	s.groupCommit = newGroupCommitter(rec, 2, 16, defaultMaxTxnBytes, 5*time.Second, nil)

	ctx := testCtx(t)
	const writers = 40
	results := make([]CreateResult, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			results[w] = s.CreatePods(ctx, []*berthv1.Pod{pendingPod("ns", fmt.Sprintf("p%d", w), "")})[0]
		})
	}
	// Two Txns held in flight, the rest queued.
	<-rec.commitsIn
	<-rec.commitsIn
	eventually(t, "writes queued", func() bool {
		s.groupCommit.mu.Lock()
		defer s.groupCommit.mu.Unlock()
		n := len(s.groupCommit.queue)
		// A create holds its pod key and its uid key: count units by the
		// former.
		for k := range s.groupCommit.inflight {
			if strings.HasPrefix(k, s.keys.pods) {
				n++
			}
		}
		return n == writers
	})
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	eventually(t, "close to stop accepting", func() bool {
		s.groupCommit.mu.Lock()
		defer s.groupCommit.mu.Unlock()
		return s.groupCommit.closed
	})
	rec.release()
	wg.Wait()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	for w, r := range results {
		if r.Err != nil {
			t.Errorf("writer %d: %v", w, r.Err)
		}
	}
	if r := s.CreatePods(ctx, []*berthv1.Pod{pendingPod("ns", "late", "")})[0]; errIs(r.Err, ErrClosed) != "" {
		t.Errorf("write after close: %s", errIs(r.Err, ErrClosed))
	}
	if _, err := s.PutNode(ctx, &berthv1.Node{Name: "late"}); errIs(err, ErrClosed) != "" {
		t.Errorf("put node after close: %s", errIs(err, ErrClosed))
	}

	// Everything acknowledged is in etcd.
	s2 := openStore(t, e, func(c *Config) { c.Prefix = s.cfg.Prefix })
	pods, _, err := s2.ListPods(ctx, PodFilter{}, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != writers {
		t.Errorf("%d pods stored, want %d", len(pods), writers)
	}
	for _, p := range pods {
		if !strings.HasPrefix(p.Name, "p") || !proto.Equal(p.Status, &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_PENDING}) {
			t.Errorf("unexpected pod %v", p)
		}
	}
}

// Compares that units share go into a Txn once, and of the charges on one
// allocation key only the strictest compare: the conjunction is the same.
func TestBuildTxnSharesCompares(t *testing.T) {
	c := &groupCommitter{writer: func() string { return "me" }}
	unit := func(pod string, epoch, view int64, node string) *commitUnit {
		return &commitUnit{
			cmps:    []clientv3.Cmp{modRevIs(pod, 7)},
			ops:     []*pb.RequestOp{putString(pod, "v")},
			fences:  []clientv3.Cmp{createRevIs("/shard/0", epoch)},
			charges: []allocCharge{{key: "/alloc/" + node, view: view}},
		}
	}
	units := []*commitUnit{
		unit("/p/a", 5, 30, "n1"),
		unit("/p/b", 5, 20, "n1"), // same fence; n1's strictest view
		unit("/p/c", 6, 40, "n1"), // another epoch: a different fence
		unit("/p/d", 5, 10, "n2"),
		unit("/p/e", 5, 0, "n2"), // declared: bumps n2, no compare of its own
	}
	cmps, ops, _ := c.buildTxn(units, map[string]allocTip{}, 0)
	type cmpKey struct {
		Key string
		Rev int64
	}
	var got []cmpKey
	for i := range cmps {
		pc := cmps[i].GetCompare()
		got = append(got, cmpKey{string(pc.Key), pc.GetModRevision() + pc.GetCreateRevision()})
	}
	want := []cmpKey{
		{"/p/a", 7}, {"/shard/0", 5}, {"/alloc/n1", 21},
		{"/p/b", 7},
		{"/p/c", 7}, {"/shard/0", 6},
		{"/p/d", 7}, {"/alloc/n2", 11},
		{"/p/e", 7},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("compares (-want,+got):\n%s", diff)
	}
	var puts []string
	for _, op := range ops {
		puts = append(puts, string(opKey(op)))
	}
	if diff := cmp.Diff([]string{"/p/a", "/alloc/n1", "/p/b", "/p/c", "/p/d", "/alloc/n2", "/p/e"}, puts); diff != "" {
		t.Errorf("puts (-want,+got):\n%s", diff)
	}
}

// A solo Txn compares charged nodes without bumping them, under one fence
// on the replica registrations; a declared pod still bumps its node. A
// batch with no room left for the fence's compare bumps, as it was sized
// for.
func TestBuildTxnSolo(t *testing.T) {
	c := &groupCommitter{writer: func() string { return "me" }, solo: newSoloFence(newKeyspace("/b"), nil), maxOps: 1024}
	unit := func(pod string, view int64, node string) *commitUnit {
		return &commitUnit{
			cmps:    []clientv3.Cmp{modRevIs(pod, 7)},
			ops:     []*pb.RequestOp{putString(pod, "v")},
			charges: []allocCharge{{key: "/alloc/" + node, view: view}},
		}
	}
	units := []*commitUnit{unit("/p/a", 30, "n1"), unit("/p/b", 20, "n2"), unit("/p/c", 0, "n2")}
	keys := func(cmps []clientv3.Cmp, ops []*pb.RequestOp) (cs, ps []string) {
		for i := range cmps {
			cs = append(cs, string(cmps[i].KeyBytes()))
		}
		for _, op := range ops {
			ps = append(ps, string(opKey(op)))
		}
		return cs, ps
	}

	cmps, ops, solo := c.buildTxn(units, map[string]allocTip{}, 42)
	gotCmps, gotPuts := keys(cmps, ops)
	if !solo {
		t.Fatal("not solo with a lease")
	}
	if diff := cmp.Diff([]string{"/p/a", "/alloc/n1", "/p/b", "/alloc/n2", "/p/c", "/b/v1/replicas/"}, gotCmps); diff != "" {
		t.Errorf("compares (-want,+got):\n%s", diff)
	}
	if fence := cmps[len(cmps)-1].GetCompare(); fence.GetLease() != 42 || string(fence.RangeEnd) != "/b/v1/replicas0" {
		t.Errorf("fence %v: want every registration in the range held with lease 42", fence)
	}
	if diff := cmp.Diff([]string{"/p/a", "/p/b", "/p/c", "/alloc/n2"}, gotPuts); diff != "" {
		t.Errorf("puts (-want,+got):\n%s", diff)
	}

	c.maxOps = 5 // the five compares above leave no room for the fence
	cmps, ops, solo = c.buildTxn(units, map[string]allocTip{}, 42)
	gotCmps, gotPuts = keys(cmps, ops)
	if solo || len(cmps) > c.maxOps {
		t.Fatalf("solo %v with %d compares for at most %d", solo, len(cmps), c.maxOps)
	}
	if diff := cmp.Diff([]string{"/p/a", "/alloc/n1", "/p/b", "/alloc/n2", "/p/c"}, gotPuts); diff != "" {
		t.Errorf("puts without room for the fence (-want,+got):\n%s", diff)
	}
}

// meddlingKV writes one key right after any Txn whose compares failed, so
// the key has changed by the time the committer reads why.
type meddlingKV struct {
	clientv3.KV
	key, value string
}

func (m *meddlingKV) Txn(ctx context.Context) clientv3.Txn {
	return &meddlingTxn{Txn: m.KV.Txn(ctx), kv: m, ctx: ctx}
}

type meddlingTxn struct {
	clientv3.Txn
	kv  *meddlingKV
	ctx context.Context
}

func (t *meddlingTxn) If(c ...clientv3.Cmp) clientv3.Txn  { t.Txn = t.Txn.If(c...); return t }
func (t *meddlingTxn) Then(o ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(o...); return t }
func (t *meddlingTxn) Commit() (*clientv3.TxnResponse, error) {
	resp, err := t.Txn.Commit()
	if err == nil && !resp.Succeeded {
		if _, perr := t.kv.KV.Put(t.ctx, t.kv.key, t.kv.value); perr != nil {
			return nil, perr
		}
	}
	return resp, err
}

// A failed Txn's keys are read at the revision its compares failed at, not
// later: the writer judges the value its compare saw.
func TestCommitterReadsAFailedTxnAtItsRevision(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx := testCtx(t)
	p := keyPrefix(t)
	put, err := s.Client().Put(ctx, p+"taken", "old")
	if err != nil {
		t.Fatal(err)
	}
	kv := &meddlingKV{KV: s.Client().KV, key: p + "taken", value: "newer"}
	c := newGroupCommitter(kv, 1, 1024, defaultMaxTxnBytes, 5*time.Second, nil)
	defer c.close()
	taken, free := createUnit(ctx, p+"taken", "mine"), createUnit(ctx, p+"free", "mine")
	if err := c.submit(taken, free); err != nil {
		t.Fatal(err)
	}
	if res := c.wait(ctx, free); res.err != nil {
		t.Fatalf("free key: %v", res.err)
	}
	res := c.wait(ctx, taken)
	if res.err != errCompareFailed {
		t.Fatalf("taken key: %v, want a compare failure", res.err)
	}
	got := taken.currentKV(p + "taken")
	if got == nil || string(got.Value) != "old" || got.ModRevision != put.Header.Revision {
		t.Errorf("the failed create sees %v, want %q written at %d", got, "old", put.Header.Revision)
	}
	if now, err := s.Client().Get(ctx, p+"taken"); err != nil || string(now.Kvs[0].Value) != "newer" {
		t.Fatalf("the meddling write did not land: %v, %v", now, err)
	}
}

// A unit too large for etcd fails alone, whichever way Txns are sent: etcd
// refuses the Txn it shares, and the committer sends each unit again by
// itself. The error must reach the committer in the form it recognizes.
func TestOversizedUnitFailsAloneOnBothPaths(t *testing.T) {
	ctx := testCtx(t)
	e, err := StartEmbedded(ctx, EmbeddedConfig{Dir: t.TempDir(), MaxRequestBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	client := e.Client()
	t.Cleanup(func() { client.Close() })
	for _, path := range []string{"direct", "clientv3"} {
		t.Run(path, func(t *testing.T) {
			c := newGroupCommitter(client.KV, 1, 1024, 1<<20, 5*time.Second, nil)
			defer c.close()
			if path == "direct" {
				c.direct = e.KVClient()
			}
			p := keyPrefix(t)
			units := []*commitUnit{putUnit(ctx, p+"a", "1"), putUnit(ctx, p+"big", strings.Repeat("x", 100<<10)), putUnit(ctx, p+"b", "2")}
			for _, u := range units {
				u.prepare()
			}
			c.commit(units)
			for i, u := range units {
				if refused := errors.Is(u.res.err, ErrInvalidArgument); refused != (i == 1) || (!refused && u.res.err != nil) {
					t.Errorf("unit %d: err %v", i, u.res.err)
				}
			}
			resp, err := client.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithKeysOnly())
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Kvs) != 2 {
				t.Fatalf("stored %v, want the two small units' keys", resp.Kvs)
			}
		})
	}
}
