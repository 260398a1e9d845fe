package server

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Health is per service: storage alone serves the cluster and pod APIs;
// scheduling and the replica as a whole need membership too; nothing
// serves before the replica reports.
func TestHealthPerService(t *testing.T) {
	front := New(Config{Store: &budgetStore{}, Registerer: prometheus.NewRegistry(), Logger: zaptest.NewLogger(t)})
	conn := serveFront(t, front)
	hc := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const (
		on  = healthpb.HealthCheckResponse_SERVING
		off = healthpb.HealthCheckResponse_NOT_SERVING
	)
	check := func(when string, want map[string]healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		for svc, w := range want {
			resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
			if err != nil || resp.GetStatus() != w {
				t.Errorf("%s: %q is %v (%v), want %v", when, svc, resp.GetStatus(), err, w)
			}
		}
	}
	all := func(s healthpb.HealthCheckResponse_ServingStatus) map[string]healthpb.HealthCheckResponse_ServingStatus {
		return map[string]healthpb.HealthCheckResponse_ServingStatus{
			"": s, HealthClusterService: s, HealthPodService: s, HealthSchedulerService: s,
		}
	}
	check("before any report", all(off))
	front.SetHealth(Health{Storage: true})
	check("storage only", map[string]healthpb.HealthCheckResponse_ServingStatus{
		"": off, HealthClusterService: on, HealthPodService: on, HealthSchedulerService: off,
	})
	front.SetServing()
	check("whole", all(on))
	front.SetHealth(Health{Scheduling: true})
	check("storage lost", all(off))

}
