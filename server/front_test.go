package server

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// budgetStore serves ListBudgets only; any other call panics, which the
// front's recovery turns into Internal.
type budgetStore struct {
	Store
	calls atomic.Int32
}

func (s *budgetStore) ListBudgets(_ context.Context, namespace string) ([]*berthv1.DisruptionBudget, error) {
	s.calls.Add(1)
	return []*berthv1.DisruptionBudget{{Namespace: namespace, Name: "b"}}, nil
}

// The front over real gRPC: validation stops a bad request before the
// store sees it, a good one reaches it, health checks pass the strict
// validation, and Shutdown ends Serve.
func TestFrontValidatesBeforeTheStore(t *testing.T) {
	st := &budgetStore{}
	front := New(Config{Store: st, Registerer: prometheus.NewRegistry(), Logger: zaptest.NewLogger(t)})
	conn := serveFront(t, front)
	front.SetServing()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cluster := berthv1.NewClusterServiceClient(conn)
	_, err := cluster.ListDisruptionBudgets(ctx, &berthv1.ListDisruptionBudgetsRequest{Namespace: "Bad_NS"})
	if status.Code(err) != codes.InvalidArgument || st.calls.Load() != 0 {
		t.Errorf("bad namespace: %v after %d store calls; want InvalidArgument before the store", err, st.calls.Load())
	}
	resp, err := cluster.ListDisruptionBudgets(ctx, &berthv1.ListDisruptionBudgetsRequest{Namespace: "ns"})
	if err != nil || len(resp.GetBudgets()) != 1 || st.calls.Load() != 1 {
		t.Errorf("good namespace: %v, %v after %d store calls", resp, err, st.calls.Load())
	}
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health: %v, %v", h, err)
	}

}

// serveFront serves front on a loopback port and returns a connection to
// it. At cleanup the connection closes and Shutdown must end Serve cleanly.
func serveFront(t *testing.T, front *Server) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- front.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		front.Shutdown(time.Minute)
		if err := <-served; err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			t.Errorf("serve: %v", err)
		}
	})
	return conn
}
