// Package deploy holds no code: its tests check the operations artefacts
// beside them (the Grafana dashboard, the Prometheus rules) against a real
// replica, so a renamed metric breaks the build instead of a dashboard.
package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/replica"
)

const (
	dashboardPath = "grafana/berth-dashboard.json"
	alertsPath    = "prometheus/alerts.yaml"
)

// notFromBerth are series Prometheus makes itself for every target.
var notFromBerth = set("up")

// TestReferencedSeriesExist starts a replica with embedded etcd, makes it
// schedule a pod and stream the binding, and requires every series the
// dashboard and the alert rules read to be on its /metrics.
func TestReferencedSeriesExist(t *testing.T) {
	wanted := map[string][]string{} // series -> where it is used
	dash, err := dashboardExprs(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := loadRules(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	exprs := dash
	for _, r := range rules {
		exprs = append(exprs, labelled{alertsPath + " " + r.Alert, r.Expr})
	}
	for _, e := range exprs {
		names, err := seriesNames(e.expr)
		if err != nil {
			t.Errorf("%s: %v", e.where, err)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s reads no series: %q", e.where, e.expr)
		}
		for _, n := range names {
			if !notFromBerth[n] {
				wanted[n] = append(wanted[n], e.where)
			}
		}
	}

	metricsURL := exercisedReplica(t)
	// Some series appear only once their first sample is taken (the watch
	// fan-out, the membership gauges): scrape until all are there.
	var missing []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		have, err := scrapeNames(metricsURL)
		if err != nil {
			t.Fatal(err)
		}
		missing = missing[:0]
		for n := range wanted {
			if !have[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	sort.Strings(missing)
	for _, n := range missing {
		t.Errorf("series %s is not on a replica's /metrics; used by %s", n, strings.Join(wanted[n], "; "))
	}
}

// exercisedReplica starts a replica, registers a node, schedules a pod and
// watches its binding, so the series of every path an operator graphs have
// samples. It returns the /metrics URL.
func exercisedReplica(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	srv, err := replica.Start(ctx, replica.Config{
		Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", DataDir: t.TempDir(), Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stop: %v", err)
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

	cluster, pods, sched := berthv1.NewClusterServiceClient(conn), berthv1.NewPodServiceClient(conn), berthv1.NewSchedulerServiceClient(conn)
	watch, err := sched.WatchBindings(ctx, &berthv1.WatchBindingsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.UpsertNode(ctx, &berthv1.UpsertNodeRequest{Node: &berthv1.Node{
		Name: "n1", Allocatable: map[string]int64{"cpu": 4000, "memory": 8 << 30, "pods": 110},
	}}); err != nil {
		t.Fatal(err)
	}
	pod := func(name string) *berthv1.Pod {
		return &berthv1.Pod{Namespace: "ops", Name: name, Containers: []*berthv1.Container{{Name: "c", Requests: map[string]int64{"cpu": 100}}}}
	}
	if _, err := sched.Schedule(ctx, &berthv1.ScheduleRequest{Pod: pod("scheduled")}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.SubmitPod(ctx, &berthv1.SubmitPodRequest{Pod: pod("submitted")}); err != nil {
		t.Fatal(err)
	}
	// Both bindings reach the subscriber through the fan-out.
	bound := map[string]bool{}
	for len(bound) < 2 {
		ev, err := watch.Recv()
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		if e := ev.GetEvent(); e.GetType() == berthv1.BindingEventType_BINDING_EVENT_TYPE_BOUND {
			bound[e.GetName()] = true
		}
	}
	return "http://" + srv.MetricsAddr() + "/metrics"
}

// scrapeNames returns the sample names on a /metrics page (a histogram's
// _bucket, _sum and _count each), as PromQL would name them.
func scrapeNames(url string) (map[string]bool, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names, sc.Err()
}

type labelled struct{ where, expr string }

// labelValuesArg is the series argument of a Grafana label_values() query.
var labelValuesArg = regexp.MustCompile(`label_values\(\s*([^,]+),`)

// dashboardExprs returns every PromQL expression of the dashboard: the
// panels' targets wherever they nest, and the series of the template
// variables' label_values queries.
func dashboardExprs(path string) ([]labelled, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var root any
	if err := json.Unmarshal(b, &root); err != nil {
		return nil, err
	}
	var out []labelled
	var walk func(v any, where string)
	walk = func(v any, where string) {
		switch v := v.(type) {
		case map[string]any:
			if title, ok := v["title"].(string); ok {
				where = path + " panel " + title
			}
			if name, ok := v["name"].(string); ok {
				where = path + " variable " + name
			}
			for k, child := range v {
				s, isString := child.(string)
				switch {
				case k == "expr" && isString:
					out = append(out, labelled{where, s})
				case (k == "definition" || k == "query") && isString:
					if m := labelValuesArg.FindStringSubmatch(s); m != nil {
						out = append(out, labelled{where, m[1]})
					}
				default:
					walk(child, where)
				}
			}
		case []any:
			for _, child := range v {
				walk(child, where)
			}
		}
	}
	walk(root, path)
	return out, nil
}
