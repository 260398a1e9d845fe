package server

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// Every RPC of the API, and of every service the front hosts, takes a
// request type that has a validation rule: a new RPC without one would be
// rejected at its first call.
func TestEveryRequestTypeHasARule(t *testing.T) {
	files := []protoreflect.FileDescriptor{
		berthv1.File_berth_v1_cluster_service_proto,
		berthv1.File_berth_v1_pod_service_proto,
		berthv1.File_berth_v1_scheduler_service_proto,
	}
	var services []protoreflect.ServiceDescriptor
	for _, f := range files {
		for i := range f.Services().Len() {
			services = append(services, f.Services().Get(i))
		}
	}
	front := New(Config{Registerer: prometheus.NewRegistry()})
	for name := range front.grpc.GetServiceInfo() {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			t.Errorf("service %s the front hosts: %v", name, err)
			continue
		}
		services = append(services, d.(protoreflect.ServiceDescriptor))
	}
	if len(services) < 4 {
		t.Fatalf("found only %d services", len(services))
	}
	for _, sd := range services {
		for i := range sd.Methods().Len() {
			m := sd.Methods().Get(i)
			if _, ok := requestRules[m.Input().FullName()]; !ok {
				t.Errorf("%s: request type %s has no validation rule", m.FullName(), m.Input().FullName())
			}
		}
	}
}

func TestRequestWithoutRuleIsRejected(t *testing.T) {
	for _, req := range []any{&berthv1.Pod{}, "not a message"} {
		if code := status.Code(validateRequest(req)); code != codes.Internal {
			t.Errorf("validateRequest(%T): code %v, want Internal", req, code)
		}
	}
}

// ListDisruptionBudgets' namespace filter is checked as ListPods' is.
func TestNamespaceFiltersAreChecked(t *testing.T) {
	for _, tc := range []struct {
		req  any
		want codes.Code
	}{
		{&berthv1.ListDisruptionBudgetsRequest{}, codes.OK},
		{&berthv1.ListDisruptionBudgetsRequest{Namespace: "ns"}, codes.OK},
		{&berthv1.ListDisruptionBudgetsRequest{Namespace: "Bad_NS"}, codes.InvalidArgument},
		{&berthv1.ListPodsRequest{Namespace: "Bad_NS"}, codes.InvalidArgument},
		{&berthv1.ListPodGroupsRequest{Namespace: "Bad_NS"}, codes.InvalidArgument},
	} {
		err := validateRequest(tc.req)
		if code := status.Code(err); code != tc.want {
			t.Errorf("%T %v: code %v (%v), want %v", tc.req, tc.req, code, err, tc.want)
		}
	}
}
