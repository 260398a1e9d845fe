package server

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/server/admission"
)

// blockingStore holds ListBudgets until released, keeping its slot taken.
type blockingStore struct {
	Store
	entered chan struct{}
	release chan struct{}
}

func (s *blockingStore) ListBudgets(context.Context, string) ([]*berthv1.DisruptionBudget, error) {
	s.entered <- struct{}{}
	<-s.release
	return nil, nil
}

// With the one slot taken, the next call is shed with a RetryInfo and
// counted by method and reason, while health checks still answer.
func TestFrontShedsPastItsLimitButNotHealthChecks(t *testing.T) {
	st := &blockingStore{entered: make(chan struct{}), release: make(chan struct{})}
	reg := prometheus.NewRegistry()
	front := New(Config{Store: st, Registerer: reg, Logger: zaptest.NewLogger(t),
		Admission: admission.Config{MaxInFlight: 1, MaxWait: time.Nanosecond}})
	conn := serveFront(t, front)
	front.SetServing()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cluster := berthv1.NewClusterServiceClient(conn)

	first := make(chan error, 1)
	go func() {
		_, err := cluster.ListDisruptionBudgets(ctx, &berthv1.ListDisruptionBudgetsRequest{Namespace: "ns"})
		first <- err
	}()
	<-st.entered

	_, err := cluster.ListDisruptionBudgets(ctx, &berthv1.ListDisruptionBudgetsRequest{Namespace: "ns"})
	st2 := status.Convert(err)
	var retry *errdetails.RetryInfo
	for _, d := range st2.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			retry = ri
		}
	}
	if st2.Code() != codes.ResourceExhausted || retry.GetRetryDelay().AsDuration() <= 0 {
		t.Errorf("second call: %v with RetryInfo %v; want ResourceExhausted with a delay", err, retry)
	}
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health check while saturated: %v, %v", h, err)
	}
	close(st.release)
	if err := <-first; err != nil {
		t.Errorf("first call: %v", err)
	}
	const method = "/berth.v1.ClusterService/ListDisruptionBudgets"
	if got := shedCount(t, reg, method, "wait"); got != 1 {
		t.Errorf("berth_admission_shed_total{method=%q,reason=\"wait\"} = %v, want 1", method, got)
	}

}

func shedCount(t *testing.T, reg *prometheus.Registry, method, reason string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "berth_admission_shed_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["method"] == method && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func TestHandlersIdle(t *testing.T) {
	var h handlers
	select {
	case <-h.idle():
	default:
		t.Fatal("no handler running, yet not idle")
	}
	h.enter()
	h.enter()
	idle := h.idle()
	h.exit()
	select {
	case <-idle:
		t.Fatal("idle with a handler still running")
	default:
	}
	h.exit()
	select {
	case <-idle:
	default:
		t.Fatal("not idle once every handler returned")
	}
}
