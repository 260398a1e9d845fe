package bench

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// loopbackConn serves srv on a loopback port and dials it; both end with
// the test.
func loopbackConn(t *testing.T, srv *grpc.Server) *grpc.ClientConn {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// countingHealth answers every check and closes third on the third: by
// then the probe has returned from (and recorded) the first two.
type countingHealth struct {
	healthpb.UnimplementedHealthServer
	calls atomic.Int32
	third chan struct{}
}

func (h *countingHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if h.calls.Add(1) == 3 {
		close(h.third)
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func TestFloorProbeTimesTrivialCalls(t *testing.T) {
	srv := grpc.NewServer()
	h := &countingHealth{third: make(chan struct{})}
	healthpb.RegisterHealthServer(srv, h)
	f := &floorProbe{health: healthpb.NewHealthClient(loopbackConn(t, srv))}
	f.start(context.Background())
	select {
	case <-h.third:
	case <-time.After(10 * time.Second):
		f.finish()
		t.Fatalf("%d checks within 10s, want 3", h.calls.Load())
	}
	lat := f.finish()
	if len(lat) < 2 {
		t.Fatalf("finish returned %d latencies, want at least 2", len(lat))
	}
	for i := 1; i < len(lat); i++ {
		if lat[i] < lat[i-1] {
			t.Fatalf("latencies not sorted: %v", lat)
		}
	}
}

// A server without the health service gives no floor, and the probe ends
// by itself.
func TestFloorProbeWithoutHealthService(t *testing.T) {
	f := &floorProbe{health: healthpb.NewHealthClient(loopbackConn(t, grpc.NewServer()))}
	f.start(context.Background())
	<-f.done
	if lat := f.finish(); len(lat) != 0 {
		t.Errorf("got %d latencies from a server without health, want none", len(lat))
	}
}

// finish without start (no --rate) is empty.
func TestFloorProbeNotStarted(t *testing.T) {
	if lat := (&floorProbe{}).finish(); lat != nil {
		t.Errorf("got %v, want nil", lat)
	}
}
