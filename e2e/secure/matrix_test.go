package secure

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

var seq atomic.Int64

func uniq(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

// gatedPod never binds, so no state changes behind the test's back.
func gatedPod(ns, name string) *berthv1.Pod {
	return &berthv1.Pod{Namespace: ns, Name: name, SchedulingGates: []string{"hold"},
		Containers: []*berthv1.Container{{Name: "c", Image: "app:1", Requests: map[string]int64{"cpu": 100}}}}
}

// otherUID names no stored pod: feedback calls are answered, and change
// nothing even when let through.
const otherUID = "00000000-0000-4000-8000-000000000000"

// requests builds, for each RPC, a call touching namespace ns.
var requests = map[string]func(ns string) proto.Message{
	"ClusterService/UpsertNode": func(string) proto.Message {
		return &berthv1.UpsertNodeRequest{Node: &berthv1.Node{Name: uniq("node"), Allocatable: map[string]int64{"cpu": 1000, "pods": 10}}}
	},
	"ClusterService/DeleteNode":     func(string) proto.Message { return &berthv1.DeleteNodeRequest{Name: "absent"} },
	"ClusterService/GetNode":        func(string) proto.Message { return &berthv1.GetNodeRequest{Name: "seed"} },
	"ClusterService/ListNodes":      func(string) proto.Message { return &berthv1.ListNodesRequest{} },
	"ClusterService/RenewNodeLease": func(string) proto.Message { return &berthv1.RenewNodeLeaseRequest{Name: "absent"} },
	"ClusterService/UpsertDisruptionBudget": func(ns string) proto.Message {
		return &berthv1.UpsertDisruptionBudgetRequest{Budget: &berthv1.DisruptionBudget{Namespace: ns, Name: uniq("pdb"), AllowedDisruptions: 1,
			Selector: &berthv1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}}}
	},
	"ClusterService/DeleteDisruptionBudget": func(ns string) proto.Message {
		return &berthv1.DeleteDisruptionBudgetRequest{Namespace: ns, Name: "absent"}
	},
	"ClusterService/ListDisruptionBudgets": func(ns string) proto.Message { return &berthv1.ListDisruptionBudgetsRequest{Namespace: ns} },
	"PodService/SubmitPod":                 func(ns string) proto.Message { return &berthv1.SubmitPodRequest{Pod: gatedPod(ns, uniq("pod"))} },
	"PodService/SubmitPods": func(ns string) proto.Message {
		return &berthv1.SubmitPodsRequest{Pods: []*berthv1.Pod{gatedPod(ns, uniq("pod")), gatedPod(ns, uniq("pod"))}}
	},
	"PodService/DeletePod": func(ns string) proto.Message { return &berthv1.DeletePodRequest{Namespace: ns, Name: "absent"} },
	"PodService/GetPod":    func(ns string) proto.Message { return &berthv1.GetPodRequest{Namespace: ns, Name: "seed"} },
	"PodService/ListPods":  func(ns string) proto.Message { return &berthv1.ListPodsRequest{Namespace: ns} },
	"PodService/UpdatePod": func(ns string) proto.Message {
		p := int32(seq.Add(1))
		return &berthv1.UpdatePodRequest{Namespace: ns, Name: "seed", Priority: &p}
	},
	"PodService/ConfirmBinding": func(ns string) proto.Message {
		return &berthv1.ConfirmBindingRequest{Namespace: ns, Name: "seed", Uid: otherUID, NodeName: "seed"}
	},
	"PodService/RejectBinding": func(ns string) proto.Message {
		return &berthv1.RejectBindingRequest{Namespace: ns, Name: "seed", Uid: otherUID, NodeName: "seed", Reason: "test"}
	},
	"PodService/CompletePod": func(ns string) proto.Message {
		return &berthv1.CompletePodRequest{Namespace: ns, Name: "absent", Uid: otherUID, Phase: berthv1.PodPhase_POD_PHASE_SUCCEEDED, Message: "done"}
	},
	"PodService/UpsertPodGroup": func(ns string) proto.Message {
		return &berthv1.UpsertPodGroupRequest{PodGroup: &berthv1.PodGroup{Namespace: ns, Name: uniq("group"), MinMember: 1}}
	},
	"PodService/DeletePodGroup":      func(ns string) proto.Message { return &berthv1.DeletePodGroupRequest{Namespace: ns, Name: "absent"} },
	"PodService/GetPodGroup":         func(ns string) proto.Message { return &berthv1.GetPodGroupRequest{Namespace: ns, Name: "seed"} },
	"PodService/ListPodGroups":       func(ns string) proto.Message { return &berthv1.ListPodGroupsRequest{Namespace: ns} },
	"SchedulerService/WatchBindings": func(string) proto.Message { return &berthv1.WatchBindingsRequest{} },
	"SchedulerService/Schedule":      func(ns string) proto.Message { return &berthv1.ScheduleRequest{Pod: gatedPod(ns, uniq("sched"))} },
	"SchedulerService/Explain": func(ns string) proto.Message {
		return &berthv1.ExplainRequest{Target: &berthv1.ExplainRequest_Existing{Existing: &berthv1.PodReference{Namespace: ns, Name: "seed"}}}
	},
	"SchedulerService/ListReplicas": func(string) proto.Message { return &berthv1.ListReplicasRequest{} },
}

var (
	clusterScoped = []string{"ClusterService/UpsertNode", "ClusterService/DeleteNode", "ClusterService/GetNode",
		"ClusterService/ListNodes", "ClusterService/RenewNodeLease", "SchedulerService/ListReplicas"}
	reads = []string{"ClusterService/GetNode", "ClusterService/ListNodes", "ClusterService/ListDisruptionBudgets",
		"PodService/GetPod", "PodService/ListPods", "PodService/GetPodGroup", "PodService/ListPodGroups",
		"SchedulerService/WatchBindings", "SchedulerService/Explain", "SchedulerService/ListReplicas"}
)

// allowed is the outcome a call must have, short of the handler's own.
type expect int

const (
	allowed expect = iota
	unauthenticated
	denied
)

func (e expect) String() string {
	return [...]string{"allowed", "Unauthenticated", "PermissionDenied"}[e]
}

// expected is the policy of policyYAML, written out independently.
func expected(who, method, ns string) expect {
	switch who {
	case "none", "expired", "foreign", "unknown-token", "plaintext":
		return unauthenticated
	case "stranger":
		return denied
	case "admin", "admin-token":
		return allowed
	}
	scoped := slices.Contains(clusterScoped, method)
	watch := method == "SchedulerService/WatchBindings" // filtered, not refused
	if scoped || (ns != "a" && !watch) {
		return denied
	}
	if who == "obs-a" && !slices.Contains(reads, method) {
		return denied
	}
	return allowed
}

// methods lists every RPC of the three services from their descriptors, so
// a method added later fails the test until it has a request and a rule.
func methods() []protoreflect.MethodDescriptor {
	var out []protoreflect.MethodDescriptor
	for _, fd := range []protoreflect.FileDescriptor{berthv1.File_berth_v1_cluster_service_proto,
		berthv1.File_berth_v1_pod_service_proto, berthv1.File_berth_v1_scheduler_service_proto} {
		for i := range fd.Services().Len() {
			svc := fd.Services().Get(i)
			for j := range svc.Methods().Len() {
				out = append(out, svc.Methods().Get(j))
			}
		}
	}
	return out
}

// call invokes m with req and returns the status code: for a stream, that
// of its first message.
func call(ctx context.Context, conn *grpc.ClientConn, m protoreflect.MethodDescriptor, req proto.Message) codes.Code {
	full := fmt.Sprintf("/%s/%s", m.Parent().FullName(), m.Name())
	resp := dynamicpb.NewMessage(m.Output())
	if !m.IsStreamingServer() {
		return status.Code(conn.Invoke(ctx, full, req, resp))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, full)
	if err == nil {
		err = st.SendMsg(req)
	}
	if err == nil {
		err = st.CloseSend()
	}
	if err == nil {
		err = st.RecvMsg(resp)
	}
	return status.Code(err)
}

// snapshot is the state a denied call must not change: the objects and
// the fields calls set. Gated pods are never placed, so nothing else
// writes them meanwhile.
func snapshot(t *testing.T, conn *grpc.ClientConn) string {
	t.Helper()
	ctx := tctx(t, 10*time.Second)
	var b strings.Builder
	pods, err := berthv1.NewPodServiceClient(conn).ListPods(ctx, &berthv1.ListPodsRequest{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.GetPods() {
		fmt.Fprintf(&b, "pod %s/%s %s %d %v %s %v\n", p.GetNamespace(), p.GetName(), p.GetUid(), p.GetPriority(), p.GetSchedulingGates(), p.GetNodeName(), p.GetStatus().GetPhase())
	}
	nodes, err := berthv1.NewClusterServiceClient(conn).ListNodes(ctx, &berthv1.ListNodesRequest{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.GetNodes() {
		fmt.Fprintf(&b, "node %s\n", n.GetName())
	}
	groups, err := berthv1.NewPodServiceClient(conn).ListPodGroups(ctx, &berthv1.ListPodGroupsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups.GetPodGroups() {
		fmt.Fprintf(&b, "group %s/%s %d\n", g.GetNamespace(), g.GetName(), g.GetMinMember())
	}
	budgets, err := berthv1.NewClusterServiceClient(conn).ListDisruptionBudgets(ctx, &berthv1.ListDisruptionBudgetsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range budgets.GetBudgets() {
		fmt.Fprintf(&b, "budget %s/%s %d\n", d.GetNamespace(), d.GetName(), d.GetAllowedDisruptions())
	}
	return b.String()
}

func seed(t *testing.T, admin *grpc.ClientConn) {
	t.Helper()
	ctx := tctx(t, 10*time.Second)
	cs, ps := berthv1.NewClusterServiceClient(admin), berthv1.NewPodServiceClient(admin)
	if _, err := cs.UpsertNode(ctx, &berthv1.UpsertNodeRequest{Node: &berthv1.Node{Name: "seed", Allocatable: map[string]int64{"cpu": 1000, "pods": 10}}}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"a", "b"} {
		if _, err := ps.SubmitPod(ctx, &berthv1.SubmitPodRequest{Pod: gatedPod(ns, "seed")}); err != nil {
			t.Fatal(err)
		}
		if _, err := ps.UpsertPodGroup(ctx, &berthv1.UpsertPodGroupRequest{PodGroup: &berthv1.PodGroup{Namespace: ns, Name: "seed", MinMember: 1}}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAccessMatrix calls every RPC as every kind of caller, in a namespace
// the limited roles hold and one they do not, and checks the outcome; a
// refused call must leave the state as it was.
func TestAccessMatrix(t *testing.T) {
	e := startSecure(t)
	admin := e.conn(t, caller{cert: "admin"})
	seed(t, admin)
	callers := []caller{
		{name: "admin", cert: "admin"},
		{name: "admin-token", token: adminToken},
		{name: "orch-a", cert: "orch-a"},
		{name: "obs-a", cert: "obs-a"},
		{name: "stranger", cert: "stranger"},
		{name: "none"},
		{name: "expired", cert: "expired"},
		{name: "foreign", cert: "foreign"},
		{name: "unknown-token", token: "not-a-token"},
	}
	ms := methods()
	for _, m := range ms {
		key := fmt.Sprintf("%s/%s", m.Parent().Name(), m.Name())
		if requests[key] == nil {
			t.Fatalf("no request for %s: add one (and an authorization rule)", key)
		}
	}
	var table []string
	for _, c := range callers {
		conn := e.conn(t, c)
		for _, m := range ms {
			key := fmt.Sprintf("%s/%s", m.Parent().Name(), m.Name())
			for _, ns := range []string{"a", "b"} {
				want := expected(c.name, key, ns)
				var before string
				if want != allowed {
					before = snapshot(t, admin)
				}
				d := 10 * time.Second
				if strings.HasSuffix(key, "/Schedule") {
					d = 300 * time.Millisecond // a gated pod is never decided: the deadline ends an allowed call
				}
				got := call(tctx(t, d), conn, m, requests[key](ns))
				table = append(table, fmt.Sprintf("%-14s %-40s ns=%s %s", c.name, key, ns, got))
				switch want {
				case allowed:
					if got == codes.Unauthenticated || got == codes.PermissionDenied || got == codes.Unavailable {
						t.Errorf("%s %s in %s: got %s, want the call let through", c.name, key, ns, got)
					}
				case unauthenticated:
					if got != codes.Unauthenticated {
						t.Errorf("%s %s in %s: got %s, want Unauthenticated", c.name, key, ns, got)
					}
				case denied:
					if got != codes.PermissionDenied {
						t.Errorf("%s %s in %s: got %s, want PermissionDenied", c.name, key, ns, got)
					}
				}
				if want != allowed {
					if after := snapshot(t, admin); after != before {
						t.Errorf("%s %s in %s was refused but changed the state:\nbefore:\n%safter:\n%s", c.name, key, ns, before, after)
					}
				}
			}
		}
	}
	sort.Strings(table)
	t.Logf("access matrix:\n%s", strings.Join(table, "\n"))

	// A batch is refused whole when any pod is outside the caller's
	// namespaces.
	before := snapshot(t, admin)
	_, err := berthv1.NewPodServiceClient(e.conn(t, caller{cert: "orch-a"})).SubmitPods(tctx(t, 10*time.Second),
		&berthv1.SubmitPodsRequest{Pods: []*berthv1.Pod{gatedPod("a", uniq("mixed")), gatedPod("b", uniq("mixed"))}})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("orch-a SubmitPods in a and b: got %v, want PermissionDenied", err)
	}
	if after := snapshot(t, admin); after != before {
		t.Errorf("refused mixed batch changed the state")
	}
	// Health checks need no credentials.
	hc, err := healthpb.NewHealthClient(e.conn(t, caller{name: "none"})).Check(tctx(t, 5*time.Second), &healthpb.HealthCheckRequest{})
	if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health check without credentials: %v %v", hc, err)
	}
	// Plaintext to a TLS port never reaches a handler.
	if got := call(tctx(t, 5*time.Second), e.conn(t, caller{plain: true}), ms[0], requests["ClusterService/ListNodes"]("a")); got != codes.Unavailable {
		t.Errorf("plaintext call to the TLS port: got %s, want Unavailable", got)
	}
}
