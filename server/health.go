package server

import (
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// Health is what a replica can do at the moment, as health checks report
// it. The zero value is a replica that can do nothing.
type Health struct {
	// Storage: etcd answers, so reads and writes can succeed. ClusterService
	// and PodService serve on it alone.
	Storage bool
	// Scheduling: the replica is a live member (its session holds, so every
	// shard is owned rightly, by it or by another) and its cache holds the
	// cluster. SchedulerService, and the replica as a whole (service ""),
	// also need this.
	Scheduling bool
}

// Health check service names, as grpc.health.v1.Health/Check takes them.
var (
	HealthClusterService   = berthv1.ClusterService_ServiceDesc.ServiceName
	HealthPodService       = berthv1.PodService_ServiceDesc.ServiceName
	HealthSchedulerService = berthv1.SchedulerService_ServiceDesc.ServiceName
)

// SetHealth reports h to health checks, per service and overall. After
// Shutdown every service stays NOT_SERVING whatever is set.
func (s *Server) SetHealth(h Health) {
	all := h.Storage && h.Scheduling
	s.health.SetServingStatus(HealthClusterService, servingStatus(h.Storage))
	s.health.SetServingStatus(HealthPodService, servingStatus(h.Storage))
	s.health.SetServingStatus(HealthSchedulerService, servingStatus(all))
	s.health.SetServingStatus("", servingStatus(all))
}

// SetServing reports the replica wholly healthy.
func (s *Server) SetServing() { s.SetHealth(Health{Storage: true, Scheduling: true}) }

func servingStatus(ok bool) healthpb.HealthCheckResponse_ServingStatus {
	if ok {
		return healthpb.HealthCheckResponse_SERVING
	}
	return healthpb.HealthCheckResponse_NOT_SERVING
}
