package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/replica"
	"github.com/berth-io/berth/store"
)

// benchFleet is --replicas N: N in-process replicas sharing one embedded
// etcd, each with its own listener, as separate berth serve processes
// against one etcd cluster would be.
type benchFleet struct {
	etcd    *store.Embedded
	servers []*replica.Replica
	conns   []*grpc.ClientConn
	dir     string
	cleanup func()
}

func startBenchFleet(ctx context.Context, bc Config, workload string) (_ *benchFleet, err error) {
	f := &benchFleet{dir: filepath.Join(bc.DataDir, workload), cleanup: func() {}}
	if bc.DataDir == "" {
		tmp, err := os.MkdirTemp("", "berth-bench-")
		if err != nil {
			return nil, err
		}
		f.dir, f.cleanup = tmp, func() { os.RemoveAll(tmp) }
	}
	defer func() {
		if err != nil {
			f.stop()
		}
	}()
	f.etcd, err = store.StartEmbedded(ctx, store.EmbeddedConfig{Dir: f.dir})
	if err != nil {
		return nil, err
	}
	for i := range bc.Replicas {
		srv, err := replica.Start(ctx, replica.Config{
			Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0",
			EtcdEndpoints: f.etcd.Endpoints(),
			Store:         store.Config{MaxTxnOps: store.EmbeddedMaxTxnOps},
			Scheduler:     bc.schedulerConfig(),
			ReplicaID:     fmt.Sprintf("bench-%d", i),
			Logger:        zap.NewNop(),
		})
		if err != nil {
			return nil, fmt.Errorf("replica %d: %w", i, err)
		}
		f.servers = append(f.servers, srv)
		conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, err
		}
		f.conns = append(f.conns, conn)
	}
	return f, f.waitBalanced(ctx)
}

// waitBalanced waits until every replica owns a shard, so the measurement
// does not include the start-up rebalancing.
func (f *benchFleet) waitBalanced(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	sched := berthv1.NewSchedulerServiceClient(f.conns[0])
	for {
		resp, err := sched.ListReplicas(ctx, &berthv1.ListReplicasRequest{})
		if err == nil {
			owning := 0
			for _, r := range resp.GetReplicas() {
				if len(r.GetShards()) > 0 {
					owning++
				}
			}
			if owning >= len(f.servers) {
				return nil
			}
			err = fmt.Errorf("%d of %d replicas own shards", owning, len(f.servers))
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("replicas not balanced: %w", err)
		}
	}
}

func (f *benchFleet) stop() {
	for _, c := range f.conns {
		c.Close()
	}
	for _, s := range f.servers {
		_ = s.Stop()
	}
	if f.etcd != nil {
		f.etcd.Close()
	}
	f.cleanup()
}

// conn spreads calls over the replicas, one after the other.
func (f *benchFleet) conn() grpc.ClientConnInterface {
	return &roundRobinConn{conns: f.conns}
}

// roundRobinConn sends each call (and each stream) to the next of several
// connections.
type roundRobinConn struct {
	conns []*grpc.ClientConn
	next  atomic.Uint64
}

func (c *roundRobinConn) pick() *grpc.ClientConn {
	return c.conns[(c.next.Add(1)-1)%uint64(len(c.conns))]
}

func (c *roundRobinConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return c.pick().Invoke(ctx, method, args, reply, opts...)
}

func (c *roundRobinConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.pick().NewStream(ctx, desc, method, opts...)
}

// replicaStat is one replica's part in a --replicas run.
type replicaStat struct {
	id    string
	bound int // pods of the run whose status names it as scheduled_by
	// From its /metrics: group-committed writes that landed and that
	// failed their compares, Txns with a failed compare, placements lost
	// at assume to another shard, binding cycles lost to a conflict.
	committedUnits, conflictUnits, conflictTxns, assumeConflicts, bindConflicts float64
}

// report counts the run's bound pods per replica and reads each replica's
// conflict counters.
func (f *benchFleet) report(ctx context.Context, run string) ([]replicaStat, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	stats := make([]replicaStat, len(f.servers))
	byID := map[string]*replicaStat{}
	sched := berthv1.NewSchedulerServiceClient(f.conns[0])
	replicas, err := sched.ListReplicas(ctx, &berthv1.ListReplicasRequest{})
	if err != nil {
		return nil, err
	}
	for i, s := range f.servers {
		for _, r := range replicas.GetReplicas() {
			if r.GetAddress() == s.Addr() {
				stats[i].id = r.GetId()
			}
		}
		if stats[i].id == "" {
			stats[i].id = fmt.Sprintf("bench-%d", i)
		}
		byID[stats[i].id] = &stats[i]
		m, err := scrapeCounters(ctx, s.MetricsAddr())
		if err != nil {
			return nil, err
		}
		stats[i].committedUnits = m[`berth_store_commit_units_total{result="committed"}`]
		stats[i].conflictUnits = m[`berth_store_commit_units_total{result="compare_failed"}`]
		stats[i].conflictTxns = m["berth_store_txn_compare_failures_total"]
		stats[i].assumeConflicts = m["berth_scheduler_assume_conflicts_total"]
		stats[i].bindConflicts = m[`berth_scheduler_bind_errors_total{reason="conflict"}`]
	}
	pods := berthv1.NewPodServiceClient(f.conns[0])
	req := &berthv1.ListPodsRequest{Phase: berthv1.PodPhase_POD_PHASE_BOUND, PageSize: 1000}
	for {
		resp, err := pods.ListPods(ctx, req)
		if err != nil {
			return nil, err
		}
		for _, p := range resp.GetPods() {
			if !strings.HasPrefix(p.GetName(), run+"-") {
				continue
			}
			if st := byID[p.GetStatus().GetScheduledBy()]; st != nil {
				st.bound++
			}
		}
		if req.PageToken = resp.GetNextPageToken(); req.PageToken == "" {
			return stats, nil
		}
	}
}

// scrapeCounters reads a Prometheus text exposition into
// "name{labels}" -> value; enough for the unlabelled and one-label
// counters the report needs.
func scrapeCounters(ctx context.Context, addr string) (map[string]float64, error) {
	if addr == "" {
		return nil, errors.New("replica has no metrics listener")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics of %s: %s", addr, resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// printReplicas prints each replica's share and the conflict rates.
func printReplicas(out io.Writer, stats []replicaStat) {
	var bound int
	var committed, conflicts, txns, assume, bind float64
	for _, s := range stats {
		bound += s.bound
		committed += s.committedUnits
		conflicts += s.conflictUnits
		txns += s.conflictTxns
		assume += s.assumeConflicts
		bind += s.bindConflicts
	}
	sort.Slice(stats, func(i, j int) bool { return stats[i].id < stats[j].id })
	fmt.Fprintf(out, "\n%d replicas sharing one etcd:\n", len(stats))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  replica\tbound\tshare\tcommitted writes\tcompare failures\tassume conflicts\tbind conflicts")
	for _, s := range stats {
		fmt.Fprintf(tw, "  %s\t%d\t%.1f%%\t%.0f\t%.0f\t%.0f\t%.0f\n", s.id, s.bound, percent(float64(s.bound), float64(bound)),
			s.committedUnits, s.conflictUnits, s.assumeConflicts, s.bindConflicts)
	}
	tw.Flush()
	fmt.Fprintf(out, "conflict rate:    %.2f%% of group-committed writes failed their compare (%.0f of %.0f, in %.0f Txns); %.0f bind and %.0f assume conflicts for %d bound pods\n",
		percent(conflicts, committed+conflicts), conflicts, committed+conflicts, txns, bind, assume, bound)
}

func percent(part, whole float64) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * part / whole
}
