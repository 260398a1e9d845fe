package admission

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func wantShed(t *testing.T, err error) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("want ResourceExhausted, got %v", err)
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().AsDuration() > 0 {
			return
		}
	}
	t.Fatalf("want a RetryInfo detail, got %v", st.Details())
}

func TestUnarySheds(t *testing.T) {
	var shed []string
	c := New(Config{MaxInFlight: 2, MaxWaiting: 1, MaxWait: time.Hour}, func(_, reason string) { shed = append(shed, reason) })
	info := &grpc.UnaryServerInfo{FullMethod: "/berth.v1.PodService/SubmitPod"}
	release := make(chan struct{})
	started := make(chan struct{}, 3)
	blocking := func(context.Context, any) (any, error) {
		started <- struct{}{}
		<-release
		return "ok", nil
	}
	results := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := c.Unary(context.Background(), nil, info, blocking)
			results <- err
		}()
	}
	<-started
	<-started
	waitFor(t, "the third call to wait", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.waiting == 1
	})
	called := false
	_, err := c.Unary(context.Background(), nil, info, func(context.Context, any) (any, error) {
		called = true
		return nil, nil
	})
	wantShed(t, err)
	if called {
		t.Fatal("a shed call reached its handler")
	}
	if len(shed) != 1 || shed[0] != "in_flight" {
		t.Fatalf("observer saw %v, want [in_flight]", shed)
	}
	close(release)
	for range 3 {
		if err := <-results; err != nil {
			t.Fatalf("an admitted call failed: %v", err)
		}
	}
}

func TestUnaryShedsAfterMaxWait(t *testing.T) {
	c := New(Config{MaxInFlight: 1, MaxWait: time.Millisecond}, nil)
	c.slots <- struct{}{} // the only slot is taken
	_, err := c.Unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/m"}, func(context.Context, any) (any, error) {
		t.Fatal("handler ran without a slot")
		return nil, nil
	})
	wantShed(t, err)
}

func TestExemptMethodsAreNeverShed(t *testing.T) {
	c := New(Config{MaxInFlight: 1, MaxWaiting: 1, MaxWait: time.Millisecond, Exempt: map[string]bool{"/grpc.health.v1.Health/Check": true}}, nil)
	c.slots <- struct{}{}
	got, err := c.Unary(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"}, func(context.Context, any) (any, error) {
		return "serving", nil
	})
	if err != nil || got != "serving" {
		t.Fatalf("exempt call: got %v, %v", got, err)
	}
}

type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s fakeStream) Context() context.Context { return s.ctx }

func streamFrom(ip string) fakeStream {
	addr := &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}
	return fakeStream{ctx: peer.NewContext(context.Background(), &peer.Peer{Addr: addr})}
}

func TestStreamBounds(t *testing.T) {
	c := New(Config{MaxStreams: 3, MaxStreamsPerPeer: 2}, nil)
	info := &grpc.StreamServerInfo{FullMethod: "/berth.v1.SchedulerService/WatchBindings"}
	release := make(chan struct{})
	opened := make(chan struct{}, 3)
	hold := func(any, grpc.ServerStream) error {
		opened <- struct{}{}
		<-release
		return nil
	}
	done := make(chan error, 3)
	open := func(ip string) {
		go func() { done <- c.Stream(nil, streamFrom(ip), info, hold) }()
		<-opened
	}
	open("127.0.0.1")
	open("127.0.0.1")
	wantShed(t, c.Stream(nil, streamFrom("127.0.0.1"), info, hold))
	open("127.0.0.2")
	wantShed(t, c.Stream(nil, streamFrom("127.0.0.3"), info, hold))
	close(release)
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := c.OpenStreams(); n != 0 {
		t.Fatalf("%d streams still counted after all ended", n)
	}
	if len(c.peerStreams) != 0 {
		t.Fatalf("per-peer counts kept after all ended: %v", c.peerStreams)
	}
}
