package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// shared is one embedded etcd for the tests that do not stop or compact it;
// each test uses its own key prefix.
var shared struct {
	once sync.Once
	dir  string
	etcd *Embedded
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.etcd != nil {
		shared.etcd.Close()
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func sharedEtcd(t testing.TB) *Embedded {
	t.Helper()
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "berth-store-test-")
		if shared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shared.etcd, shared.err = StartEmbedded(ctx, EmbeddedConfig{Dir: shared.dir})
	})
	if shared.err != nil {
		t.Fatalf("start shared etcd: %v", shared.err)
	}
	return shared.etcd
}

// ownEtcd starts an etcd for one test, for tests that compact or stop it.
// It is closed after the test's stores (cleanups run last-in first-out), so
// no watch stream holds up its shutdown.
func ownEtcd(t testing.TB, dir, clientAddr string) *Embedded {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := StartEmbedded(ctx, EmbeddedConfig{Dir: dir, ClientAddr: clientAddr})
	if err != nil {
		t.Fatalf("start etcd: %v", err)
	}
	t.Cleanup(e.Close)
	return e
}

// prefixSeq keeps prefixes unique when tests run more than once (-count).
var prefixSeq atomic.Int64

// openStore opens a store on e under a prefix unique to the test.
func openStore(t testing.TB, e *Embedded, adjust ...func(*Config)) *Store {
	t.Helper()
	// The in-process client, as berth serve uses with its embedded etcd;
	// a test of the network path sets Client to nil.
	cfg := Config{
		Endpoints: e.Endpoints(),
		Client:    e.Client(),
		KVClient:  e.KVClient(),
		Prefix:    fmt.Sprintf("/test/%s/%d", strings.ReplaceAll(t.Name(), "/", "_"), prefixSeq.Add(1)),
		MaxTxnOps: EmbeddedMaxTxnOps,
	}
	inProcess := cfg.Client
	for _, f := range adjust {
		f(&cfg)
	}
	if cfg.Client != inProcess {
		// Writes go the same way as the rest.
		inProcess.Close()
		cfg.KVClient = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func pendingPod(ns, name, uid string) *berthv1.Pod {
	return &berthv1.Pod{
		Namespace: ns,
		Name:      name,
		Uid:       uid,
		Labels:    map[string]string{"app": name},
		Containers: []*berthv1.Container{{
			Name:     "main",
			Image:    "example/app:1",
			Requests: map[string]int64{"cpu": 100, "memory": 1 << 20},
		}},
		Status: &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_PENDING},
	}
}

// bound returns a copy of p bound to node, as the scheduler would write it.
func boundTo(p *berthv1.Pod, node string) *berthv1.Pod {
	c := clonePod(p)
	c.NodeName = node
	c.Status = &berthv1.PodStatus{
		Phase:     berthv1.PodPhase_POD_PHASE_BOUND,
		StartTime: timestamppb.New(time.Unix(1700000000, 0)),
	}
	return c
}

func withPhase(p *berthv1.Pod, phase berthv1.PodPhase) *berthv1.Pod {
	c := clonePod(p)
	c.Status.Phase = phase
	return c
}

func mustCreate(t testing.TB, s *Store, pods ...*berthv1.Pod) []CreateResult {
	t.Helper()
	res := s.CreatePods(testCtx(t), pods)
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("create %s/%s: %v", pods[i].Namespace, pods[i].Name, r.Err)
		}
	}
	return res
}

// mustUpdate writes p over the revision it was read at and returns the new
// revision.
func mustUpdate(t testing.TB, s *Store, p *berthv1.Pod, expected int64) int64 {
	t.Helper()
	res := s.UpdatePods(testCtx(t), []PodUpdate{{Pod: p, ExpectedModRevision: expected}})
	if res[0].Err != nil {
		t.Fatalf("update %s/%s: %v", p.Namespace, p.Name, res[0].Err)
	}
	return res[0].Revision
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// collect runs WatchBindings in the background, sending its events to a
// channel; stop cancels it and returns its error.
func collect(t testing.TB, s *Store, from int64) (events <-chan *berthv1.BindingEvent, stop func() error) {
	ch := make(chan *berthv1.BindingEvent, 1024)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- s.WatchBindings(ctx, from, func(ev *berthv1.BindingEvent) error {
			select {
			case ch <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return ch, stop
}

// next receives n events or fails.
func next(t testing.TB, ch <-chan *berthv1.BindingEvent, n int) []*berthv1.BindingEvent {
	t.Helper()
	var out []*berthv1.BindingEvent
	timeout := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case ev := <-ch:
			out = append(out, ev)
		case <-timeout:
			t.Fatalf("got %d of %d binding events: %v", len(out), n, out)
		}
	}
	return out
}

func ev(t berthv1.BindingEventType, p *berthv1.Pod, node string, rev int64) *berthv1.BindingEvent {
	return &berthv1.BindingEvent{Type: t, Namespace: p.Namespace, Name: p.Name, Uid: p.Uid, NodeName: node, Revision: rev}
}

const (
	evBound   = berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND
	evUnbound = berthv1.BindingEventType_BINDING_EVENT_TYPE_UNBOUND
)

func errIs(err, target error) string {
	if !errors.Is(err, target) {
		return fmt.Sprintf("error %v, want %v", err, target)
	}
	return ""
}

func clonePod(p *berthv1.Pod) *berthv1.Pod { return proto.Clone(p).(*berthv1.Pod) }

// PutNode creates or replaces a node and returns the revision that wrote
// it: PutNodeWithLease without the lease key, for tests that need only the
// record.
func (s *Store) PutNode(ctx context.Context, n *berthv1.Node) (int64, error) {
	if n == nil {
		return 0, fmt.Errorf("%w: nil node", ErrInvalidArgument)
	}
	if err := validName("node name", n.Name); err != nil {
		return 0, err
	}
	val, err := marshalOpts.Marshal(n)
	if err != nil {
		return 0, fmt.Errorf("store: encode node: %w", err)
	}
	u := &commitUnit{ops: []*pb.RequestOp{putOp(s.keys.node(n.Name), val)}}
	res, err := s.commitOne(ctx, "put node", u)
	if err != nil {
		return 0, err
	}
	return res.rev, nil
}

// DeleteNode removes a node, leaving any lease key alone; ErrNotFound if it
// does not exist. Tests only, like PutNode.
func (s *Store) DeleteNode(ctx context.Context, name string) (int64, error) {
	if err := validName("node name", name); err != nil {
		return 0, err
	}
	key := s.keys.node(name)
	u := &commitUnit{
		cmps: []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), ">", 0)},
		ops:  []*pb.RequestOp{deleteOp(key)},
	}
	res, err := s.commitOne(ctx, "delete node", u)
	if err != nil {
		return 0, err
	}
	if res.err == errCompareFailed {
		return 0, fmt.Errorf("%w: node %q", ErrNotFound, name)
	}
	return res.rev, nil
}
