package berth

import (
	"context"
	"net"
	"reflect"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// echoServer records the last request of each call and answers with a
// canned response, so a test can check that a typed method sends what its
// arguments say and unpacks what the server sent.
type echoServer struct {
	berthv1.UnimplementedClusterServiceServer
	berthv1.UnimplementedPodServiceServer
	berthv1.UnimplementedSchedulerServiceServer

	mu   sync.Mutex
	last proto.Message
}

func (s *echoServer) record(req proto.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = req
}

func (s *echoServer) lastRequest() proto.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

var (
	testGroup  = &berthv1.PodGroup{Namespace: "ns", Name: "gang", MinMember: 3}
	testBudget = &berthv1.DisruptionBudget{Namespace: "ns", Name: "pdb", AllowedDisruptions: 1}
	testPod    = &berthv1.Pod{Namespace: "ns", Name: "p", Uid: "u1", NodeName: "n1",
		Status: &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_BOUND}}
)

func (s *echoServer) Schedule(_ context.Context, r *berthv1.ScheduleRequest) (*berthv1.ScheduleResponse, error) {
	s.record(r)
	return &berthv1.ScheduleResponse{Pod: testPod, Revision: 7}, nil
}

func (s *echoServer) Explain(_ context.Context, r *berthv1.ExplainRequest) (*berthv1.ExplainResponse, error) {
	s.record(r)
	return &berthv1.ExplainResponse{ChosenNodeName: "n1"}, nil
}

func (s *echoServer) ListReplicas(_ context.Context, r *berthv1.ListReplicasRequest) (*berthv1.ListReplicasResponse, error) {
	s.record(r)
	return &berthv1.ListReplicasResponse{Replicas: []*berthv1.Replica{{Id: "r1", Shards: []int32{0, 1}}}, ShardCount: 2}, nil
}

func (s *echoServer) UpdatePod(_ context.Context, r *berthv1.UpdatePodRequest) (*berthv1.UpdatePodResponse, error) {
	s.record(r)
	return &berthv1.UpdatePodResponse{Pod: testPod, Revision: 8}, nil
}

func (s *echoServer) UpsertPodGroup(_ context.Context, r *berthv1.UpsertPodGroupRequest) (*berthv1.UpsertPodGroupResponse, error) {
	s.record(r)
	return &berthv1.UpsertPodGroupResponse{PodGroup: r.GetPodGroup(), Revision: 9}, nil
}

func (s *echoServer) DeletePodGroup(_ context.Context, r *berthv1.DeletePodGroupRequest) (*berthv1.DeletePodGroupResponse, error) {
	s.record(r)
	return &berthv1.DeletePodGroupResponse{Revision: 10}, nil
}

func (s *echoServer) GetPodGroup(_ context.Context, r *berthv1.GetPodGroupRequest) (*berthv1.GetPodGroupResponse, error) {
	s.record(r)
	return &berthv1.GetPodGroupResponse{PodGroup: testGroup, Members: 4, Bound: 3}, nil
}

func (s *echoServer) ListPodGroups(_ context.Context, r *berthv1.ListPodGroupsRequest) (*berthv1.ListPodGroupsResponse, error) {
	s.record(r)
	return &berthv1.ListPodGroupsResponse{PodGroups: []*berthv1.PodGroup{testGroup}}, nil
}

func (s *echoServer) UpsertDisruptionBudget(_ context.Context, r *berthv1.UpsertDisruptionBudgetRequest) (*berthv1.UpsertDisruptionBudgetResponse, error) {
	s.record(r)
	return &berthv1.UpsertDisruptionBudgetResponse{Budget: r.GetBudget(), Revision: 11}, nil
}

func (s *echoServer) DeleteDisruptionBudget(_ context.Context, r *berthv1.DeleteDisruptionBudgetRequest) (*berthv1.DeleteDisruptionBudgetResponse, error) {
	s.record(r)
	return &berthv1.DeleteDisruptionBudgetResponse{Revision: 12}, nil
}

func (s *echoServer) ListDisruptionBudgets(_ context.Context, r *berthv1.ListDisruptionBudgetsRequest) (*berthv1.ListDisruptionBudgetsResponse, error) {
	s.record(r)
	return &berthv1.ListDisruptionBudgetsResponse{Budgets: []*berthv1.DisruptionBudget{testBudget}}, nil
}

func startEcho(t *testing.T) (*echoServer, *Client) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{}
	g := grpc.NewServer()
	berthv1.RegisterClusterServiceServer(g, s)
	berthv1.RegisterPodServiceServer(g, s)
	berthv1.RegisterSchedulerServiceServer(g, s)
	served := make(chan struct{})
	go func() { defer close(served); _ = g.Serve(lis) }()
	t.Cleanup(func() { g.Stop(); <-served })
	c, err := Dial(t.Context(), lis.Addr().String(), WithBackoff(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return s, c
}

// Each typed call sends the request its arguments describe and returns the
// response's fields.
func TestTypedCalls(t *testing.T) {
	s, c := startEcho(t)
	ctx := t.Context()
	prio := int32(5)
	tests := []struct {
		name    string
		call    func() (any, error)
		wantReq proto.Message
		want    any
	}{
		{"Schedule", func() (any, error) { p, rev, err := c.Schedule(ctx, testPod); return []any{p, rev}, err },
			&berthv1.ScheduleRequest{Pod: testPod}, []any{testPod, int64(7)}},
		{"Explain", func() (any, error) { r, err := c.Explain(ctx, testPod); return r.GetChosenNodeName(), err },
			&berthv1.ExplainRequest{Target: &berthv1.ExplainRequest_Pod{Pod: testPod}}, "n1"},
		{"ExplainStored", func() (any, error) { r, err := c.ExplainStored(ctx, "ns", "p"); return r.GetChosenNodeName(), err },
			&berthv1.ExplainRequest{Target: &berthv1.ExplainRequest_Existing{Existing: &berthv1.PodReference{Namespace: "ns", Name: "p"}}}, "n1"},
		{"ListReplicas", func() (any, error) {
			rs, n, err := c.ListReplicas(ctx)
			return []any{len(rs), rs[0].GetId(), n}, err
		}, &berthv1.ListReplicasRequest{}, []any{1, "r1", int32(2)}},
		{"UpdatePod gates and priority", func() (any, error) {
			p, rev, err := c.UpdatePod(ctx, "ns", "p", PodUpdate{UID: "u1", SchedulingGates: []string{}, Priority: &prio})
			return []any{p, rev}, err
		}, &berthv1.UpdatePodRequest{Namespace: "ns", Name: "p", Uid: "u1", UpdateSchedulingGates: true, Priority: &prio}, []any{testPod, int64(8)}},
		{"UpdatePod leaves gates alone", func() (any, error) {
			_, rev, err := c.UpdatePod(ctx, "ns", "p", PodUpdate{Priority: &prio})
			return rev, err
		}, &berthv1.UpdatePodRequest{Namespace: "ns", Name: "p", Priority: &prio}, int64(8)},
		{"UpsertPodGroup", func() (any, error) { g, rev, err := c.UpsertPodGroup(ctx, testGroup); return []any{g, rev}, err },
			&berthv1.UpsertPodGroupRequest{PodGroup: testGroup}, []any{testGroup, int64(9)}},
		{"DeletePodGroup", func() (any, error) { return c.DeletePodGroup(ctx, "ns", "gang") },
			&berthv1.DeletePodGroupRequest{Namespace: "ns", Name: "gang"}, int64(10)},
		{"GetPodGroup", func() (any, error) { return c.GetPodGroup(ctx, "ns", "gang") },
			&berthv1.GetPodGroupRequest{Namespace: "ns", Name: "gang"}, PodGroupStatus{Group: testGroup, Members: 4, Bound: 3}},
		{"ListPodGroups", func() (any, error) { return c.ListPodGroups(ctx, "ns") },
			&berthv1.ListPodGroupsRequest{Namespace: "ns"}, []*berthv1.PodGroup{testGroup}},
		{"UpsertDisruptionBudget", func() (any, error) {
			b, rev, err := c.UpsertDisruptionBudget(ctx, testBudget)
			return []any{b, rev}, err
		}, &berthv1.UpsertDisruptionBudgetRequest{Budget: testBudget}, []any{testBudget, int64(11)}},
		{"DeleteDisruptionBudget", func() (any, error) { return c.DeleteDisruptionBudget(ctx, "ns", "pdb") },
			&berthv1.DeleteDisruptionBudgetRequest{Namespace: "ns", Name: "pdb"}, int64(12)},
		{"ListDisruptionBudgets", func() (any, error) { return c.ListDisruptionBudgets(ctx, "") },
			&berthv1.ListDisruptionBudgetsRequest{}, []*berthv1.DisruptionBudget{testBudget}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.call()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantReq, s.lastRequest(), protocmp.Transform()); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

// Every RPC of the API has a typed method of its name, so a new RPC
// without one fails here rather than in a user's hands.
func TestEveryRPCHasATypedMethod(t *testing.T) {
	client := reflect.TypeFor[*Client]()
	for _, sd := range []grpc.ServiceDesc{berthv1.ClusterService_ServiceDesc, berthv1.PodService_ServiceDesc, berthv1.SchedulerService_ServiceDesc} {
		for _, m := range sd.Methods {
			if _, ok := client.MethodByName(m.MethodName); !ok {
				t.Errorf("%s/%s has no typed method on Client", sd.ServiceName, m.MethodName)
			}
		}
		for _, st := range sd.Streams {
			if _, ok := client.MethodByName(st.StreamName); !ok {
				t.Errorf("%s/%s has no typed method on Client", sd.ServiceName, st.StreamName)
			}
		}
	}
}
