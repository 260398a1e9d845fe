package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/store"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func listAllPods(t *testing.T, c clients) map[string]*berthv1.Pod {
	t.Helper()
	out := map[string]*berthv1.Pod{}
	token := ""
	for {
		resp, err := c.pods.ListPods(ctxT(t, 10*time.Second), &berthv1.ListPodsRequest{PageSize: 1000, PageToken: token})
		if err != nil {
			t.Fatalf("list pods: %v", err)
		}
		for _, p := range resp.GetPods() {
			out[p.GetNamespace()+"/"+p.GetName()] = p
		}
		if token = resp.GetNextPageToken(); token == "" {
			return out
		}
	}
}

// TestE2EBindAndRestart: 3 nodes, 100 pods, every pod bound exactly once and
// seen on the watch; then a restart on the same data dir keeps everything.
func TestE2EBindAndRestart(t *testing.T) {
	dataDir := t.TempDir()
	p := startBerth(t, dataDir)
	c := newClients(t, p.addr)
	for i := range 3 {
		if _, err := c.cluster.UpsertNode(ctxT(t, 5*time.Second), &berthv1.UpsertNodeRequest{Node: testNode(fmt.Sprintf("node-%d", i), 4000)}); err != nil {
			t.Fatal(err)
		}
	}
	w := watch(t, c, 0)
	const pods = 100
	for i := range pods {
		if _, err := c.pods.SubmitPod(ctxT(t, 5*time.Second), &berthv1.SubmitPodRequest{Pod: testPod(fmt.Sprintf("pod-%03d", i), 100)}); err != nil {
			t.Fatalf("submit pod-%03d: %v", i, err)
		}
	}
	evs := w.waitFor(t, 60*time.Second, "100 bindings", func(evs []*berthv1.BindingEvent) bool { return len(boundCount(evs)) == pods })
	nodeOf := map[string]string{}
	var lastRev int64
	for _, ev := range evs {
		// Bindings group-committed in one Txn share its revision; the
		// order must never go back.
		if ev.GetRevision() < lastRev {
			t.Fatalf("watch revisions go back: %d after %d", ev.GetRevision(), lastRev)
		}
		lastRev = ev.GetRevision()
		nodeOf[ev.GetNamespace()+"/"+ev.GetName()] = ev.GetNodeName()
	}
	for key, n := range boundCount(evs) {
		if n != 1 {
			t.Errorf("%s bound %d times", key, n)
		}
	}
	perNode := map[string]int64{}
	for key, node := range nodeOf {
		perNode[node]++
		got := listAllPods(t, c)[key]
		if got.GetStatus().GetPhase() != berthv1.PodPhase_POD_PHASE_BOUND || got.GetNodeName() != node {
			t.Fatalf("%s: stored phase %v node %q, watch said %q", key, got.GetStatus().GetPhase(), got.GetNodeName(), node)
		}
	}
	checkUsage := func(c clients) {
		t.Helper()
		for i := range 3 {
			name := fmt.Sprintf("node-%d", i)
			pollUntil(t, 10*time.Second, "usage of "+name, func() error {
				resp, err := c.cluster.GetNode(ctxT(t, 5*time.Second), &berthv1.GetNodeRequest{Name: name})
				if err != nil {
					return err
				}
				if got, want := resp.GetUsage().GetPodCount(), perNode[name]; got != want {
					return fmt.Errorf("pod count %d, want %d", got, want)
				}
				if got, want := resp.GetUsage().GetRequested()["cpu"], perNode[name]*100; got != want {
					return fmt.Errorf("cpu requested %d, want %d", got, want)
				}
				return nil
			})
		}
	}
	checkUsage(c)

	p.stop()
	p = startBerth(t, dataDir)
	c = newClients(t, p.addr)
	all := listAllPods(t, c)
	if len(all) != pods {
		t.Fatalf("after restart: %d pods stored, want %d", len(all), pods)
	}
	for key, pod := range all {
		if pod.GetNodeName() != nodeOf[key] || pod.GetStatus().GetPhase() != berthv1.PodPhase_POD_PHASE_BOUND {
			t.Fatalf("after restart %s is on %q (%v), was on %q", key, pod.GetNodeName(), pod.GetStatus().GetPhase(), nodeOf[key])
		}
	}
	checkUsage(c)
	w2 := watch(t, c, 0)
	w2.waitFor(t, 30*time.Second, "replay of 100 bindings", func(evs []*berthv1.BindingEvent) bool { return len(boundCount(evs)) == pods })
	// The restarted replica schedules new work too.
	if _, err := c.pods.SubmitPod(ctxT(t, 5*time.Second), &berthv1.SubmitPodRequest{Pod: testPod("after-restart", 100)}); err != nil {
		t.Fatal(err)
	}
	evs = w2.waitFor(t, 30*time.Second, "binding after restart", func(evs []*berthv1.BindingEvent) bool { return boundCount(evs)["e2e/after-restart"] == 1 })
	for key, n := range boundCount(evs) {
		if n != 1 {
			t.Errorf("after restart %s bound %d times", key, n)
		}
	}
}

// TestE2EKill9LosesNothing crashes the server under a load of submissions
// and checks that every acknowledged pod survives and none binds twice.
func TestE2EKill9LosesNothing(t *testing.T) {
	dataDir := t.TempDir()
	p := startBerth(t, dataDir)
	c := newClients(t, p.addr)
	for i := range 5 {
		n := testNode(fmt.Sprintf("node-%d", i), 1_000_000)
		n.Allocatable["pods"] = 100_000
		if _, err := c.cluster.UpsertNode(ctxT(t, 5*time.Second), &berthv1.UpsertNodeRequest{Node: n}); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu    sync.Mutex
		acked []string
		count atomic.Int64
		wg    sync.WaitGroup
	)
	killAt := int64(1500)
	crashed := make(chan struct{})
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				name := fmt.Sprintf("w%02d-%05d", g, i)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := c.pods.SubmitPod(ctx, &berthv1.SubmitPodRequest{Pod: testPod(name, 10)})
				cancel()
				if err != nil {
					select {
					case <-crashed:
						return // expected: the server is gone
					default:
						t.Errorf("submit %s before the crash: %v", name, err)
						return
					}
				}
				mu.Lock()
				acked = append(acked, "e2e/"+name)
				mu.Unlock()
				if count.Add(1) == killAt {
					close(crashed)
					p.kill9()
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d pods acknowledged before kill -9", len(acked))

	p = startBerth(t, dataDir)
	c = newClients(t, p.addr)
	stored := listAllPods(t, c)
	for _, key := range acked {
		if _, ok := stored[key]; !ok {
			t.Errorf("acknowledged pod %s lost after kill -9", key)
		}
	}
	// Every stored pod ends up bound exactly once, across both lives:
	// from_revision 1 replays the whole binding history.
	w := watch(t, c, 1)
	evs := w.waitFor(t, 120*time.Second, "every stored pod bound", func(evs []*berthv1.BindingEvent) bool { return len(boundCount(evs)) >= len(stored) })
	for key, n := range boundCount(evs) {
		if n != 1 {
			t.Errorf("%s bound %d times", key, n)
		}
		if _, ok := stored[key]; !ok {
			t.Errorf("binding for unknown pod %s", key)
		}
	}
}

// TestE2EEtcdOutage: with etcd down, RPCs fail with Unavailable inside their
// deadline; when etcd returns the server recovers without a restart.
func TestE2EEtcdOutage(t *testing.T) {
	etcdDir := t.TempDir()
	etcdAddr := freeAddr(t)
	startEtcd := func() *store.Embedded {
		e, err := store.StartEmbedded(ctxT(t, 30*time.Second), store.EmbeddedConfig{Dir: etcdDir, ClientAddr: etcdAddr})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	etcd := startEtcd()
	defer func() { etcd.Close() }()
	p := startBerth(t, t.TempDir(), "--etcd-endpoints", "http://"+etcdAddr, "--etcd-request-timeout", "2s")
	c := newClients(t, p.addr)
	if _, err := c.cluster.UpsertNode(ctxT(t, 5*time.Second), &berthv1.UpsertNodeRequest{Node: testNode("node-0", 4000)}); err != nil {
		t.Fatal(err)
	}

	etcd.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	_, err := c.cluster.UpsertNode(ctx, &berthv1.UpsertNodeRequest{Node: testNode("node-1", 4000)})
	deadlineHit := errors.Is(ctx.Err(), context.DeadlineExceeded)
	cancel()
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("with etcd down: got %v, want Unavailable", err)
	}
	if deadlineHit {
		t.Fatalf("Unavailable arrived only after the caller's deadline")
	}

	etcd = startEtcd()
	pollUntil(t, 60*time.Second, "upsert after etcd returns", func() error {
		_, err := c.cluster.UpsertNode(ctxT(t, 3*time.Second), &berthv1.UpsertNodeRequest{Node: testNode("node-1", 4000)})
		return err
	})
	w := watch(t, c, 0)
	if _, err := c.pods.SubmitPod(ctxT(t, 5*time.Second), &berthv1.SubmitPodRequest{Pod: testPod("after-outage", 100)}); err != nil {
		t.Fatal(err)
	}
	w.waitFor(t, 30*time.Second, "binding after the outage", func(evs []*berthv1.BindingEvent) bool { return boundCount(evs)["e2e/after-outage"] == 1 })
	names := []string{}
	for _, n := range []string{"node-0", "node-1"} {
		if _, err := c.cluster.GetNode(ctxT(t, 5*time.Second), &berthv1.GetNodeRequest{Name: n}); err == nil {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	if len(names) != 2 {
		t.Fatalf("nodes after outage: %v", names)
	}
}
