package replica_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/replica"
	"github.com/berth-io/berth/replica/replicatest"
	"github.com/berth-io/berth/store"
)

type env struct {
	cluster berthv1.ClusterServiceClient
	pods    berthv1.PodServiceClient
	sched   berthv1.SchedulerServiceClient
	etcd    *store.Embedded
	srv     *replica.Replica
}

// newEnv runs a real server on loopback against a real embedded etcd that
// the test can also reach directly.
func newEnv(t *testing.T) *env {
	t.Helper()
	srv, etcd := replicatest.Start(t, func(c *replica.Config) { c.MetricsListen = "127.0.0.1:0" })
	conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &env{
		cluster: berthv1.NewClusterServiceClient(conn), pods: berthv1.NewPodServiceClient(conn),
		sched: berthv1.NewSchedulerServiceClient(conn), etcd: etcd, srv: srv,
	}
}

func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func pod(name string) *berthv1.Pod {
	return &berthv1.Pod{Namespace: "ns", Name: name, Containers: []*berthv1.Container{{Name: "c", Requests: map[string]int64{"cpu": 100}}}}
}

func node(name string) *berthv1.Node {
	return &berthv1.Node{Name: name, Allocatable: map[string]int64{"cpu": 1000, "memory": 1 << 30, "pods": 10}}
}

// badFields returns the field names of an InvalidArgument's BadRequest.
func badFields(t *testing.T, err error) []string {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		t.Fatalf("got %v, want InvalidArgument", err)
	}
	var fields []string
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, fv := range br.GetFieldViolations() {
				fields = append(fields, fv.GetField())
			}
		}
	}
	if len(fields) == 0 {
		t.Fatalf("InvalidArgument without BadRequest details: %v", err)
	}
	return fields
}

// Long on purpose: one table holding a case per rule, read top to bottom.
func TestBadInputNamesTheField(t *testing.T) {
	e := newEnv(t)
	mutPod := func(f func(p *berthv1.Pod)) *berthv1.Pod { p := pod("ok"); f(p); return p }
	mutNode := func(f func(n *berthv1.Node)) *berthv1.Node { n := node("ok"); f(n); return n }
	cases := []struct {
		name  string
		call  func() error
		field string
	}{
		{"empty node name", func() error {
			_, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: mutNode(func(n *berthv1.Node) { n.Name = "" })})
			return err
		}, "node.name"},
		{"over-long node name", func() error {
			_, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: mutNode(func(n *berthv1.Node) { n.Name = strings.Repeat("a", 254) })})
			return err
		}, "node.name"},
		{"upper-case node name", func() error {
			_, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: mutNode(func(n *berthv1.Node) { n.Name = "Node_1" })})
			return err
		}, "node.name"},
		{"negative allocatable", func() error {
			_, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: mutNode(func(n *berthv1.Node) { n.Allocatable["cpu"] = -1 })})
			return err
		}, "node.allocatable[cpu]"},
		{"unknown resource", func() error {
			_, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: mutNode(func(n *berthv1.Node) { n.Allocatable["cpus"] = 4 })})
			return err
		}, "node.allocatable[cpus]"},
		{"taint without effect", func() error {
			_, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: mutNode(func(n *berthv1.Node) {
				n.Taints = []*berthv1.Taint{{Key: "dedicated", Value: "gpu"}}
			})})
			return err
		}, "node.taints[0].effect"},
		{"missing node", func() error {
			_, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{})
			return err
		}, "node"},
		{"pod without containers", func() error {
			_, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: mutPod(func(p *berthv1.Pod) { p.Containers = nil })})
			return err
		}, "pod.containers"},
		{"duplicate container names", func() error {
			_, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: mutPod(func(p *berthv1.Pod) {
				p.InitContainers = []*berthv1.Container{{Name: "c"}}
			})})
			return err
		}, "pod.init_containers[0].name"},
		{"negative request", func() error {
			_, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: mutPod(func(p *berthv1.Pod) { p.Containers[0].Requests["memory"] = -5 })})
			return err
		}, "pod.containers[0].requests[memory]"},
		{"bad namespace", func() error {
			_, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: mutPod(func(p *berthv1.Pod) { p.Namespace = "a.b" })})
			return err
		}, "pod.namespace"},
		{"negative watch revision", func() error {
			s, err := e.sched.WatchBindings(tctx(t), &berthv1.WatchBindingsRequest{FromRevision: -1})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, "from_revision"},
		{"future watch revision", func() error {
			s, err := e.sched.WatchBindings(tctx(t), &berthv1.WatchBindingsRequest{FromRevision: 1 << 40})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}, "from_revision"},
		{"Gt with a non-integer", func() error {
			_, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: mutPod(func(p *berthv1.Pod) {
				p.Affinity = &berthv1.Affinity{NodeAffinity: &berthv1.NodeAffinity{Required: &berthv1.NodeSelector{
					NodeSelectorTerms: []*berthv1.NodeSelectorTerm{{MatchExpressions: []*berthv1.NodeSelectorRequirement{
						{Key: "gen", Operator: berthv1.NodeSelectorOperator_NODE_SELECTOR_OPERATOR_GT, Values: []string{"five"}},
					}}},
				}}}
			})})
			return err
		}, "pod.affinity.node_affinity.required.node_selector_terms[0].match_expressions[0].values"},
		{"In without values", func() error {
			_, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: mutPod(func(p *berthv1.Pod) {
				p.TopologySpreadConstraints = []*berthv1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone",
					LabelSelector: &berthv1.LabelSelector{MatchExpressions: []*berthv1.LabelSelectorRequirement{
						{Key: "app", Operator: berthv1.LabelSelectorOperator_LABEL_SELECTOR_OPERATOR_IN},
					}}}}
			})})
			return err
		}, "pod.topology_spread_constraints[0].label_selector.match_expressions[0].values"},
		{"page size too large", func() error {
			_, err := e.pods.ListPods(tctx(t), &berthv1.ListPodsRequest{PageSize: 100000})
			return err
		}, "page_size"},
		{"bad budget namespace filter", func() error {
			_, err := e.cluster.ListDisruptionBudgets(tctx(t), &berthv1.ListDisruptionBudgetsRequest{Namespace: "Bad_NS"})
			return err
		}, "namespace"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fields := badFields(t, tc.call())
			found := false
			for _, f := range fields {
				found = found || f == tc.field
			}
			if !found {
				t.Fatalf("violations %v do not name %q", fields, tc.field)
			}
		})
	}
	// Nothing was written by any of them.
	nodes, err := e.cluster.ListNodes(tctx(t), &berthv1.ListNodesRequest{})
	if err != nil || len(nodes.GetNodes()) != 0 {
		t.Fatalf("nodes after bad input: %v, %v", nodes.GetNodes(), err)
	}
	pods, err := e.pods.ListPods(tctx(t), &berthv1.ListPodsRequest{})
	if err != nil || len(pods.GetPods()) != 0 {
		t.Fatalf("pods after bad input: %v, %v", pods.GetPods(), err)
	}
}

func TestSubmitPodsReportsEachPod(t *testing.T) {
	e := newEnv(t)
	bad := pod("bad")
	bad.Containers = nil
	resp, err := e.pods.SubmitPods(tctx(t), &berthv1.SubmitPodsRequest{Pods: []*berthv1.Pod{pod("a"), bad, pod("b")}})
	if err != nil {
		t.Fatal(err)
	}
	codesGot := []codes.Code{}
	for _, r := range resp.GetResults() {
		codesGot = append(codesGot, codes.Code(r.GetCode()))
	}
	if fmt.Sprint(codesGot) != fmt.Sprint([]codes.Code{codes.OK, codes.InvalidArgument, codes.OK}) {
		t.Fatalf("codes %v", codesGot)
	}
	if !strings.Contains(resp.GetResults()[1].GetMessage(), "pod.containers") {
		t.Fatalf("message does not name the field: %q", resp.GetResults()[1].GetMessage())
	}
	for _, name := range []string{"a", "b"} {
		if _, err := e.pods.GetPod(tctx(t), &berthv1.GetPodRequest{Namespace: "ns", Name: name}); err != nil {
			t.Fatalf("pod %s: %v", name, err)
		}
	}
	if _, err := e.pods.GetPod(tctx(t), &berthv1.GetPodRequest{Namespace: "ns", Name: "bad"}); status.Code(err) != codes.NotFound {
		t.Fatalf("bad pod: got %v, want NotFound", err)
	}
}

func TestSubmitIsIdempotentAndDetectsConflicts(t *testing.T) {
	e := newEnv(t)
	first, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: pod("p")})
	if err != nil {
		t.Fatal(err)
	}
	if first.GetPod().GetUid() == "" {
		t.Fatal("no uid assigned")
	}
	again, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: pod("p")})
	if err != nil {
		t.Fatalf("identical resubmit: %v", err)
	}
	if again.GetPod().GetUid() != first.GetPod().GetUid() {
		t.Fatalf("resubmit uid %q, first %q", again.GetPod().GetUid(), first.GetPod().GetUid())
	}
	changed := pod("p")
	changed.Containers[0].Requests["cpu"] = 200
	if _, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: changed}); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("different spec: got %v, want AlreadyExists", err)
	}
	got, err := e.pods.GetPod(tctx(t), &berthv1.GetPodRequest{Namespace: "ns", Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetPod().GetContainers()[0].GetRequests()["cpu"] != 100 {
		t.Fatal("conflicting submit changed the stored pod")
	}
}

func TestNotFound(t *testing.T) {
	e := newEnv(t)
	if _, err := e.pods.GetPod(tctx(t), &berthv1.GetPodRequest{Namespace: "ns", Name: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetPod: %v", err)
	}
	if _, err := e.pods.DeletePod(tctx(t), &berthv1.DeletePodRequest{Namespace: "ns", Name: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("DeletePod: %v", err)
	}
	if _, err := e.cluster.GetNode(tctx(t), &berthv1.GetNodeRequest{Name: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("GetNode: %v", err)
	}
	if _, err := e.cluster.DeleteNode(tctx(t), &berthv1.DeleteNodeRequest{Name: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("DeleteNode: %v", err)
	}
}

func TestListPodsPagesAndFilters(t *testing.T) {
	e := newEnv(t)
	var pods []*berthv1.Pod
	for i := range 25 {
		p := pod(fmt.Sprintf("p%02d", i))
		if i%5 == 0 {
			p.Namespace = "other"
		}
		pods = append(pods, p)
	}
	if _, err := e.pods.SubmitPods(tctx(t), &berthv1.SubmitPodsRequest{Pods: pods}); err != nil {
		t.Fatal(err)
	}
	var names []string
	token := ""
	for pages := 0; ; pages++ {
		resp, err := e.pods.ListPods(tctx(t), &berthv1.ListPodsRequest{Namespace: "ns", PageSize: 7, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.GetPods()) > 7 {
			t.Fatalf("page of %d > page_size 7", len(resp.GetPods()))
		}
		for _, p := range resp.GetPods() {
			names = append(names, p.GetName())
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
		if pages > 10 {
			t.Fatal("pagination does not end")
		}
	}
	if len(names) != 20 {
		t.Fatalf("listed %d pods in ns, want 20: %v", len(names), names)
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Fatalf("not in name order or duplicated: %v", names)
		}
	}
	if _, err := e.pods.ListPods(tctx(t), &berthv1.ListPodsRequest{PageToken: "!!not-a-token"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("garbage page token: got %v, want InvalidArgument", err)
	}
}

func TestWatchFromCompactedRevision(t *testing.T) {
	e := newEnv(t)
	if _, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: node("n1")}); err != nil {
		t.Fatal(err)
	}
	var last int64
	for i := range 5 {
		resp, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: pod(fmt.Sprintf("c%d", i))})
		if err != nil {
			t.Fatal(err)
		}
		last = resp.GetRevision()
	}
	cli, err := store.Open(tctx(t), store.Config{Endpoints: e.etcd.Endpoints()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Client().Compact(tctx(t), last); err != nil {
		t.Fatal(err)
	}
	s, err := e.sched.WatchBindings(tctx(t), &berthv1.WatchBindingsRequest{FromRevision: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Recv()
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition {
		t.Fatalf("got %v, want FailedPrecondition", err)
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if info == nil || info.GetMetadata()["compact_revision"] != fmt.Sprint(last) {
		t.Fatalf("error info %v, want compact_revision %d", info, last)
	}
}

// TestUnschedulableKeepsDiagnosis: a pod that fits nowhere shows why.
func TestUnschedulableKeepsDiagnosis(t *testing.T) {
	e := newEnv(t)
	if _, err := e.cluster.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: node("small")}); err != nil {
		t.Fatal(err)
	}
	big := pod("big")
	big.Containers[0].Requests["cpu"] = 5000
	if _, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: big}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "pod marked unschedulable with its diagnosis", func() error {
		got, err := e.pods.GetPod(tctx(t), &berthv1.GetPodRequest{Namespace: "ns", Name: "big"})
		if err != nil {
			return err
		}
		st := got.GetPod().GetStatus()
		if st.GetPhase() != berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE {
			return fmt.Errorf("phase %v", st.GetPhase())
		}
		if !strings.Contains(st.GetMessage(), "Insufficient cpu") {
			return fmt.Errorf("message %q lacks the reason", st.GetMessage())
		}
		want := &berthv1.ReasonCount{Plugin: "NodeResourcesFit", Reason: "Insufficient cpu", NodeCount: 1}
		if len(st.GetDiagnosis().GetReasons()) != 1 || !proto.Equal(st.GetDiagnosis().GetReasons()[0], want) {
			return fmt.Errorf("diagnosis %v, want %v", st.GetDiagnosis().GetReasons(), want)
		}
		return nil
	})
}

// eventually polls fn on a ticker until it succeeds or d passes.
func eventually(t *testing.T, d time.Duration, what string, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not true after %s: %v", what, d, err)
		}
		<-tick.C
	}
}

// TestWatchFromZeroMarksTheListing: a from-0 watch sends the bound pods,
// then a progress marker at the listing's revision to resume from.
func TestWatchFromZeroMarksTheListing(t *testing.T) {
	e := newEnv(t)
	declared := pod("running")
	declared.NodeName = "n1" // declared running: bound without a cycle
	resp, err := e.pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: declared})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.sched.WatchBindings(tctx(t), &berthv1.WatchBindingsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if ev := first.GetEvent(); ev.GetName() != "running" || ev.GetType() != berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND || ev.GetNodeName() != "n1" {
		t.Fatalf("first message %v, want the declared pod bound to n1", first)
	}
	marker, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if marker.GetEvent() != nil || marker.GetProgressRevision() < resp.GetRevision() {
		t.Fatalf("second message %v, want a progress marker at revision >= %d", marker, resp.GetRevision())
	}
}
