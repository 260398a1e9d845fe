package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func TestParseRetention(t *testing.T) {
	tests := []struct {
		in      string
		want    retention
		wantErr bool
	}{
		{in: "5m", want: retention{age: 5 * time.Minute}},
		{in: "100000", want: retention{revisions: 100000}},
		{in: " 1h ", want: retention{age: time.Hour}},
		{in: "0", want: retention{}},
		{in: "-5m", wantErr: true},
		{in: "soon", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseRetention(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseRetention(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("parseRetention(%q): %v is not ErrInvalidArgument", tt.in, err)
		}
	}
}

func TestRetentionTarget(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	byAge := &maintainer{keep: retention{age: 5 * time.Minute}}
	steps := []struct {
		after time.Duration
		rev   int64
		want  int64
	}{
		{after: 0, rev: 100, want: 0},
		{after: time.Minute, rev: 200, want: 0},
		{after: 5 * time.Minute, rev: 300, want: 100}, // 100 was seen exactly 5m ago
		{after: 5*time.Minute + 30*time.Second, rev: 350, want: 0},
		{after: 6 * time.Minute, rev: 400, want: 200},
		{after: 30 * time.Minute, rev: 900, want: 400}, // newest older than 5m
	}
	for _, s := range steps {
		if got := byAge.retentionTarget(s.rev, t0.Add(s.after)); got != s.want {
			t.Errorf("at +%v rev %d: target %d, want %d", s.after, s.rev, got, s.want)
		}
	}
	byRevs := &maintainer{keep: retention{revisions: 1000}}
	if got := byRevs.retentionTarget(5000, t0); got != 4000 {
		t.Errorf("revision retention: target %d, want 4000", got)
	}
	keepAll := &maintainer{}
	if got := keepAll.retentionTarget(5000, t0); got != 0 {
		t.Errorf("retention 0: target %d, want 0 (keep everything)", got)
	}
}

// bulkyPod carries a large label so that a few hundred fill a small quota.
func bulkyPod(i int) *berthv1.Pod {
	p := pendingPod("fill", fmt.Sprintf("p%05d", i), "")
	p.Labels["padding"] = strings.Repeat("x", 48<<10)
	return p
}

// A full database refuses writes with ErrNoSpace (not Unavailable, which
// clients retry at once), keeps serving reads, and takes writes again once
// the data is gone and maintenance has compacted, defragmented and
// disarmed the alarm, with no restart.
func TestNoSpaceRecoversWithoutRestart(t *testing.T) {
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const quota = 16 << 20
	e, err := StartEmbedded(ctx, EmbeddedConfig{
		Dir:               t.TempDir(),
		QuotaBackendBytes: quota,
		// Passes are run by the test, not the clock.
		Maintenance: MaintenanceConfig{Interval: time.Hour, Registerer: reg},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	s := openStore(t, e)

	var created []*berthv1.Pod
	var noSpace error
	for batch := 0; noSpace == nil; batch++ {
		if batch == 100 { // 100 batches of 16 are 75 MiB
			t.Fatalf("no ErrNoSpace after %d pods in a %d-byte quota", len(created), quota)
		}
		pods := make([]*berthv1.Pod, 16)
		for i := range pods {
			pods[i] = bulkyPod(batch*len(pods) + i)
		}
		for i, r := range s.CreatePods(ctx, pods) {
			switch {
			case r.Err == nil:
				created = append(created, pods[i])
			case errors.Is(r.Err, ErrNoSpace):
				noSpace = r.Err
			default:
				t.Fatalf("create pod: %v", r.Err)
			}
		}
	}
	if errors.Is(noSpace, ErrUnavailable) {
		t.Errorf("full database reported as unavailable: %v", noSpace)
	}
	if st, ok := status.FromError(noSpace); ok && st.Code() != codes.ResourceExhausted {
		t.Errorf("store error carries gRPC code %v", st.Code())
	}
	t.Logf("database full after %d pods: %v", len(created), noSpace)

	// Reads keep working under the alarm.
	if _, _, err := s.GetPod(ctx, "fill", created[0].Name); err != nil {
		t.Errorf("get under the alarm: %v", err)
	}
	if pods, _, err := s.ListPods(ctx, PodFilter{Namespace: "fill"}, 10, ""); err != nil || len(pods) != 10 {
		t.Errorf("list under the alarm: %d pods, %v", len(pods), err)
	}
	// Deleting is how space is made: etcd allows it under the alarm.
	for _, p := range created {
		if _, err := s.DeletePod(ctx, p.Namespace, p.Name, ""); err != nil {
			t.Fatalf("delete under the alarm: %v", err)
		}
	}
	// The alarm holds until maintenance disarms it: deleting is not enough.
	if r := s.CreatePods(ctx, []*berthv1.Pod{pendingPod("after", "early", "")})[0]; !errors.Is(r.Err, ErrNoSpace) {
		t.Fatalf("write before maintenance: %v, want ErrNoSpace", r.Err)
	}

	for attempt := 1; ; attempt++ {
		if err := e.Maintain(ctx); err != nil {
			t.Fatalf("maintenance pass %d: %v", attempt, err)
		}
		r := s.CreatePods(ctx, []*berthv1.Pod{pendingPod("after", fmt.Sprintf("p%d", attempt), "")})[0]
		if r.Err == nil {
			break
		}
		if !errors.Is(r.Err, ErrNoSpace) || ctx.Err() != nil {
			t.Fatalf("write after %d maintenance passes: %v", attempt, r.Err)
		}
	}

	m := e.maintainer.metrics
	for name, c := range map[string]prometheus.Metric{
		"nospace compactions": m.compactions.WithLabelValues(reasonNoSpace),
		"nospace defrags":     m.defrags.WithLabelValues(reasonNoSpace),
		"disarms":             m.disarms,
	} {
		if got := metricValue(t, c); got < 1 {
			t.Errorf("%s = %v, want at least 1", name, got)
		}
	}
	if got := metricValue(t, m.alarm); got != 0 {
		t.Errorf("alarm gauge = %v after disarming", got)
	}
	if got := metricValue(t, m.dbSize); got <= 0 || got > quota*disarmNumerator/disarmDenominator {
		t.Errorf("db size gauge = %v, want within the disarm limit", got)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	registered := map[string]bool{}
	for _, f := range families {
		registered[f.GetName()] = true
	}
	for _, name := range []string{"berth_store_etcd_db_size_bytes", "berth_store_etcd_compactions_total", "berth_store_etcd_defrags_total"} {
		if !registered[name] {
			t.Errorf("metric %s not registered", name)
		}
	}
}

func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if c := out.GetCounter(); c != nil {
		return c.GetValue()
	}
	return out.GetGauge().GetValue()
}

// Periodic compaction keeps the configured history: a watch resuming
// within it works, one resuming from before it gets the compacted
// revision (DESIGN rule 4, FailedPrecondition at the edge) and re-lists.
func TestMaintenanceCompactsToRetention(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const keep = 20
	e, s := maintainedStore(ctx, t, fmt.Sprint(keep))
	revs := createOneByOne(ctx, t, s, "keep", 2*keep)
	if err := e.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	head := revs[len(revs)-1]
	if got := metricValue(t, e.maintainer.metrics.compactions.WithLabelValues(reasonRetention)); got != 1 {
		t.Errorf("retention compactions = %v, want 1", got)
	}

	// The retention's history is still readable; before it, it is gone.
	if _, err := s.Client().Get(ctx, "/", clientv3.WithRev(head-keep)); err != nil {
		t.Errorf("read at the oldest kept revision %d: %v", head-keep, err)
	}
	if _, err := s.Client().Get(ctx, "/", clientv3.WithRev(head-keep-1)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("read before the retention: %v, want compacted", err)
	}
	resume := func(from int64) error {
		return s.WatchBindings(ctx, from, func(*berthv1.BindingEvent) error { return errors.New("no event expected") })
	}
	var compacted *CompactedError
	if err := resume(revs[0]); !errors.As(err, &compacted) || compacted.CompactRevision != head-keep {
		t.Errorf("resume from before the retention: %v, want CompactedError at %d", err, head-keep)
	}
}

// A revision seen before the start (a start-up snapshot's) counts toward
// the retention from when it was seen, but only on the member that had
// it: compaction after a restart need not wait a whole retention again.
func TestMaintenanceCompactsHistorySeenBeforeStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, s := maintainedStore(ctx, t, "5m")
	revs := createOneByOne(ctx, t, s, "seen", 10)
	resp, err := s.Client().Get(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	cluster, member, head := resp.Header.ClusterId, resp.Header.MemberId, resp.Header.Revision
	longAgo, lately := time.Now().Add(-6*time.Minute), time.Now().Add(-time.Minute)
	readable := func(rev int64) bool {
		_, err := s.Client().Get(ctx, "/", clientv3.WithRev(rev))
		if err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
			t.Fatal(err)
		}
		return err == nil
	}
	pass := func() {
		t.Helper()
		if err := e.Maintain(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Another member's history, and a revision this member has not
	// reached (a data dir restored from an older backup), say nothing.
	e.RevisionSeen(cluster+1, member, revs[4], longAgo)
	e.RevisionSeen(cluster, member+1, revs[4], longAgo)
	e.RevisionSeen(cluster, member, head+100, longAgo)
	pass()
	if !readable(revs[0]) {
		t.Fatalf("compacted on a revision that is not this member's")
	}
	// Seen within the retention: kept.
	e.RevisionSeen(cluster, member, revs[8], lately)
	pass()
	if !readable(revs[0]) {
		t.Fatalf("compacted within the retention")
	}
	// Seen longer ago than the retention: compacted to it, and no further.
	e.RevisionSeen(cluster, member, revs[4], longAgo)
	pass()
	if readable(revs[4]-1) || !readable(revs[4]) {
		t.Errorf("after a revision seen %v ago: want history before %d compacted, from it kept", time.Since(longAgo).Round(time.Minute), revs[4])
	}
	if got := metricValue(t, e.maintainer.metrics.compactions.WithLabelValues(reasonRetention)); got != 1 {
		t.Errorf("retention compactions = %v, want 1", got)
	}
}

// maintainedStore is an embedded member keeping retention of history,
// whose maintenance passes the test runs (not the clock), and a store on
// it.
func maintainedStore(ctx context.Context, t *testing.T, retention string) (*Embedded, *Store) {
	t.Helper()
	e, err := StartEmbedded(ctx, EmbeddedConfig{
		Dir:                     t.TempDir(),
		AutoCompactionRetention: retention,
		Maintenance:             MaintenanceConfig{Interval: time.Hour},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e, openStore(t, e)
}

// createOneByOne creates n pending pods in namespace, each in a revision
// of its own, and returns those revisions.
func createOneByOne(ctx context.Context, t *testing.T, s *Store, namespace string, n int) []int64 {
	t.Helper()
	revs := make([]int64, 0, n)
	for i := range n {
		r := s.CreatePods(ctx, []*berthv1.Pod{pendingPod(namespace, fmt.Sprintf("p%d", i), "")})[0]
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		revs = append(revs, r.Revision)
	}
	return revs
}
