package server

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// heldStore holds every ListBudgets call until released, saying when each
// comes in.
type heldStore struct {
	Store
	entered chan struct{}
	release chan struct{}
}

func (s *heldStore) ListBudgets(ctx context.Context, _ string) ([]*berthv1.DisruptionBudget, error) {
	s.entered <- struct{}{}
	select {
	case <-s.release:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// The stream workers spare calls a goroutine each and bound nothing: with
// more calls in handlers than there are workers, yet another call (a
// health check) is answered, and every held call finishes once let go.
func TestCallsPastTheStreamWorkersAreServed(t *testing.T) {
	st := &heldStore{entered: make(chan struct{}), release: make(chan struct{})}
	front := New(Config{Store: st, Registerer: prometheus.NewRegistry(), Logger: zaptest.NewLogger(t)})
	conn := serveFront(t, front)
	front.SetServing()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	held := int(streamWorkers()) + 2
	cluster := berthv1.NewClusterServiceClient(conn)
	errs := make(chan error, held)
	for range held {
		go func() {
			_, err := cluster.ListDisruptionBudgets(ctx, &berthv1.ListDisruptionBudgetsRequest{Namespace: "ns"})
			errs <- err
		}()
	}
	for i := range held {
		select {
		case <-st.entered:
		case <-ctx.Done():
			t.Fatalf("only %d of %d calls reached their handler with %d stream workers", i, held, streamWorkers())
		}
	}
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health check while %d calls are held: %v, %v", held, h, err)
	}
	close(st.release)
	for range held {
		if err := <-errs; err != nil {
			t.Errorf("held call: %v", err)
		}
	}
}
