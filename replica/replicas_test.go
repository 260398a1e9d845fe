package replica_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/replica"
	"github.com/berth-io/berth/scheduler"
	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/store"
)

type member struct {
	srv  *replica.Replica
	pods berthv1.PodServiceClient
	node berthv1.ClusterServiceClient
	sch  berthv1.SchedulerServiceClient
}

// startReplicas runs n replicas, with distinct ids, on one embedded etcd.
func startReplicas(t *testing.T, n int) (*store.Embedded, []*member) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	etcd, err := store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(etcd.Close)
	var out []*member
	for i := range n {
		out = append(out, startReplica(t, etcd, fmt.Sprintf("r%d", i)))
	}
	return etcd, out
}

// startReplica runs one replica named id on etcd until the test ends.
func startReplica(t *testing.T, etcd *store.Embedded, id string) *member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := replica.Config{
		Listen: "127.0.0.1:0", MetricsListen: "-", EtcdEndpoints: etcd.Endpoints(),
		ReplicaID: id, Logger: zaptest.NewLogger(t).Named(id),
	}
	cfg.Store.MaxTxnOps = store.EmbeddedMaxTxnOps
	srv, err := replica.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop %s: %v", id, err)
		}
	})
	if err := srv.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &member{srv: srv, pods: berthv1.NewPodServiceClient(conn),
		node: berthv1.NewClusterServiceClient(conn), sch: berthv1.NewSchedulerServiceClient(conn)}
}

// decided waits until count pods of ns are bound and the rest
// unschedulable, and returns them all.
func decided(t *testing.T, m *member, bound, unschedulable int) []*berthv1.Pod {
	t.Helper()
	var list []*berthv1.Pod
	eventually(t, 20*time.Second, "every pod decided", func() error {
		resp, err := m.pods.ListPods(tctx(t), &berthv1.ListPodsRequest{Namespace: "ns", PageSize: 1000})
		if err != nil {
			return err
		}
		list = resp.Pods
		b, u := 0, 0
		for _, p := range list {
			switch p.GetStatus().GetPhase() {
			case berthv1.PodPhase_POD_PHASE_BOUND:
				b++
			case berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE:
				u++
			}
		}
		if b != bound || u != unschedulable {
			return fmt.Errorf("%d bound, %d unschedulable", b, u)
		}
		return nil
	})
	return list
}

// submitAll submits pods named prefix000.. from the members in turn, all
// at once.
func submitAll(t *testing.T, prefix string, n int, from ...*member) {
	t.Helper()
	var g errgroup.Group
	for i := range n {
		g.Go(func() error {
			_, err := from[i%len(from)].pods.SubmitPod(tctx(t), &berthv1.SubmitPodRequest{Pod: pod(fmt.Sprintf("%s%03d", prefix, i))})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// boundWithinRoom checks that no node holds more than perNode of the pods
// and counts the bound ones by the replica that bound them.
func boundWithinRoom(t *testing.T, pods []*berthv1.Pod, perNode int) (byReplica map[string]int) {
	t.Helper()
	perNodeCount := map[string]int{}
	byReplica = map[string]int{}
	for _, p := range pods {
		if p.NodeName != "" {
			perNodeCount[p.NodeName]++
			byReplica[p.GetStatus().GetScheduledBy()]++
		}
	}
	for n, c := range perNodeCount {
		if c > perNode {
			t.Errorf("node %s holds %d pods, room for %d", n, c, perNode)
		}
	}
	return byReplica
}

// A replica alone binds without bumping the nodes' allocation keys
// (store/solo.go). Once a second one joins, the two fill the same nodes
// from then on and still never put more on a node than it holds.
func TestReplicaJoiningALoneOneDoesNotOvercommit(t *testing.T) {
	etcd, rs := startReplicas(t, 1)
	const nodes, perNode, extra = 4, 10, 15
	for i := range nodes {
		n := &berthv1.Node{Name: fmt.Sprintf("n%d", i), Allocatable: map[string]int64{"cpu": 100 * perNode, "pods": 100}}
		if _, err := rs[0].node.UpsertNode(tctx(t), &berthv1.UpsertNodeRequest{Node: n}); err != nil {
			t.Fatal(err)
		}
	}
	alone := nodes * perNode / 2
	submitAll(t, "alone", alone, rs[0])
	decided(t, rs[0], alone, 0)

	rs = append(rs, startReplica(t, etcd, "r1"))
	eventually(t, 10*time.Second, "two replicas own all shards", func() error {
		resp, err := rs[1].sch.ListReplicas(tctx(t), &berthv1.ListReplicasRequest{})
		if err != nil {
			return err
		}
		return settled(resp, 2)
	})
	submitAll(t, "pair", nodes*perNode-alone+extra, rs...)
	list := decided(t, rs[1], nodes*perNode, extra)

	byReplica := boundWithinRoom(t, list, perNode)
	if byReplica["r1"] == 0 {
		t.Errorf("bindings by replica %v: the joining replica bound nothing", byReplica)
	}
}

// settled reports whether n replicas are live and every shard is owned by
// the replica membership settles it on.
func settled(resp *berthv1.ListReplicasResponse, n int) error {
	if len(resp.Replicas) != n {
		return fmt.Errorf("%d of %d replicas live", len(resp.Replicas), n)
	}
	var ids []string
	owner := map[int32]string{}
	for _, r := range resp.Replicas {
		ids = append(ids, r.Id)
		for _, sh := range r.Shards {
			owner[sh] = r.Id
		}
	}
	for i := range resp.ShardCount {
		if want := store.PreferredOwner(ids, int(i)); owner[i] != want {
			return fmt.Errorf("shard %d owned by %q, settles on %q", i, owner[i], want)
		}
	}
	return nil
}

// Three replicas share the shards, each schedules its own, and together
// they never put more on a node than it holds: nodes have room for exactly
// the pods that should bind, so any overcommit or double count shows.
// Long on purpose: one scenario, read top to bottom.
func TestReplicasShareWorkWithoutOvercommit(t *testing.T) {
	_, rs := startReplicas(t, 3)
	ctx := tctx(t)
	eventually(t, 10*time.Second, "three replicas own all shards", func() error {
		resp, err := rs[0].sch.ListReplicas(ctx, &berthv1.ListReplicasRequest{})
		if err != nil {
			return err
		}
		return settled(resp, 3)
	})

	const nodes, perNode, extra = 4, 10, 15
	for i := range nodes {
		n := &berthv1.Node{Name: fmt.Sprintf("n%d", i), Allocatable: map[string]int64{"cpu": 100 * perNode, "pods": 100}}
		if _, err := rs[i%3].node.UpsertNode(ctx, &berthv1.UpsertNodeRequest{Node: n}); err != nil {
			t.Fatal(err)
		}
	}
	// Submit from every replica at once, more pods than fit.
	submitAll(t, "p", nodes*perNode+extra, rs...)
	list := decided(t, rs[1], nodes*perNode, extra)
	byReplica := boundWithinRoom(t, list, perNode)
	// Each pod was bound by the owner of its shard, and more than one
	// replica did the binding (which pods lose the race for room varies).
	replicas, err := rs[2].sch.ListReplicas(ctx, &berthv1.ListReplicasRequest{})
	if err != nil {
		t.Fatal(err)
	}
	owner := map[int]string{}
	for _, r := range replicas.Replicas {
		for _, sh := range r.Shards {
			owner[int(sh)] = r.Id
		}
	}
	for _, p := range list {
		if p.NodeName == "" {
			continue
		}
		shard := scheduler.ShardOf(&framework.Pod{Namespace: p.Namespace, Name: p.Name}, int(replicas.ShardCount))
		if by := p.GetStatus().GetScheduledBy(); by != owner[shard] {
			t.Errorf("%s (shard %d, owned by %s) was bound by %q", p.Name, shard, owner[shard], by)
		}
	}
	if len(byReplica) < 2 {
		t.Errorf("bindings by replica %v: want several replicas to schedule", byReplica)
	}
	t.Logf("bindings by replica: %v", byReplica)
}

// When a replica stops, the others take its shards and schedule its pods.
func TestReplicaStopHandsShardsOver(t *testing.T) {
	_, rs := startReplicas(t, 2)
	ctx := tctx(t)
	if _, err := rs[0].node.UpsertNode(ctx, &berthv1.UpsertNodeRequest{Node: node("n1")}); err != nil {
		t.Fatal(err)
	}
	if err := rs[1].srv.Stop(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the survivor owns every shard", func() error {
		resp, err := rs[0].sch.ListReplicas(ctx, &berthv1.ListReplicasRequest{})
		if err != nil {
			return err
		}
		if len(resp.Replicas) != 1 || len(resp.Replicas[0].Shards) != int(resp.ShardCount) {
			return fmt.Errorf("replicas %v", resp.Replicas)
		}
		return nil
	})
	for i := range 8 {
		if _, err := rs[0].pods.SubmitPod(ctx, &berthv1.SubmitPodRequest{Pod: pod(fmt.Sprintf("after-%d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "pods of every shard bind", func() error {
		resp, err := rs[0].pods.ListPods(ctx, &berthv1.ListPodsRequest{Namespace: "ns", Phase: berthv1.PodPhase_POD_PHASE_BOUND})
		if err != nil {
			return err
		}
		if len(resp.Pods) != 8 {
			return fmt.Errorf("%d of 8 bound", len(resp.Pods))
		}
		return nil
	})
}
