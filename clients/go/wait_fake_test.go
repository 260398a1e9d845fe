package berth

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/clients/go/berthtest"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// onlyTheWatch makes WaitForBinding's reads of the pod wait an hour, so a
// test that finishes learned of the binding from the watch.
func onlyTheWatch(t *testing.T) {
	saved := pollBackoff
	pollBackoff = backoff{base: time.Hour, max: time.Hour}
	t.Cleanup(func() { pollBackoff = saved })
}

// waitForWatches polls until the server has seen n watch requests.
func waitForWatches(t *testing.T, srv *berthtest.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(srv.WatchRequests()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("watch requests %v, want %d", srv.WatchRequests(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func waitAsync(c *Client, t *testing.T, stored *berthv1.Pod, rev int64) <-chan *berthv1.Pod {
	got := make(chan *berthv1.Pod, 1)
	go func() {
		p, err := c.WaitForBinding(t.Context(), stored, rev)
		if err != nil {
			t.Errorf("WaitForBinding: %v", err)
		}
		got <- p
	}()
	return got
}

func TestWaitForBindingWakesOnTheWatch(t *testing.T) {
	onlyTheWatch(t)
	srv := berthtest.Start(t)
	c := dialTest(t, srv)
	stored, rev, err := c.SubmitPod(t.Context(), waitPod("web", 100))
	if err != nil {
		t.Fatal(err)
	}
	got := waitAsync(c, t, stored, rev)
	waitForWatches(t, srv, 1)
	if err := srv.Bind("ns", "web", "n1"); err != nil {
		t.Fatal(err)
	}
	if p := <-got; p.GetNodeName() != "n1" {
		t.Errorf("bound to %q, want n1", p.GetNodeName())
	}
}

// A pod stored long ago, whose submit revision was compacted: the wait
// reads it again and watches from the oldest revision left.
func TestWaitForBindingAfterCompaction(t *testing.T) {
	onlyTheWatch(t)
	srv := berthtest.Start(t)
	c := dialTest(t, srv)
	stored, rev, err := c.SubmitPod(t.Context(), waitPod("web", 100))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.SubmitPod(t.Context(), waitPod("other", 100)); err != nil {
		t.Fatal(err)
	}
	if err := srv.Bind("ns", "other", "n2"); err != nil { // the log moves past rev
		t.Fatal(err)
	}
	oldest := rev + 2
	srv.Compact(oldest)
	got := waitAsync(c, t, stored, rev)
	waitForWatches(t, srv, 2)
	if err := srv.Bind("ns", "web", "n1"); err != nil {
		t.Fatal(err)
	}
	if p := <-got; p.GetNodeName() != "n1" {
		t.Errorf("bound to %q, want n1", p.GetNodeName())
	}
	if diff := cmp.Diff([]int64{rev, oldest}, srv.WatchRequests()); diff != "" {
		t.Errorf("watch requests (-want +got):\n%s", diff)
	}
}

// Cancelling the wait returns at once and leaves no goroutine behind
// (TestMain's goleak checks the latter).
func TestWaitForBindingCancelled(t *testing.T) {
	onlyTheWatch(t)
	srv := berthtest.Start(t)
	c := dialTest(t, srv)
	stored, rev, err := c.SubmitPod(t.Context(), waitPod("web", 100))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, err := c.WaitForBinding(ctx, stored, rev); done <- err }()
	waitForWatches(t, srv, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("WaitForBinding after cancel = %v, want context.Canceled", err)
	}
}
