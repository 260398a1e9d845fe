package store

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func TestMetricsCountCommits(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := openStore(t, sharedEtcd(t), func(c *Config) { c.Metrics = NewMetrics(reg) })
	mustCreate(t, s, pendingPod("ns", "a", "ua"))
	res := s.CreatePods(testCtx(t), []*berthv1.Pod{pendingPod("ns", "a", "other"), pendingPod("ns", "b", "ub")})
	if errIs(res[0].Err, ErrAlreadyExists) != "" || res[1].Err != nil {
		t.Fatalf("results %+v", res)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.Metric {
			name := f.GetName()
			for _, l := range m.Label {
				name += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			switch {
			case m.Counter != nil:
				got[name] = m.Counter.GetValue()
			case m.Histogram != nil:
				got[name+"_count"] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	// a alone; then a' and b together, whose compare fails; then b resent.
	want := map[string]float64{
		"berth_store_commit_units_total{result=committed}":      2,
		"berth_store_commit_units_total{result=compare_failed}": 1,
		"berth_store_txn_compare_failures_total":                1,
		"berth_store_txn_batch_units_count":                     3,
		"berth_store_txn_duration_seconds_count":                3,
		"berth_store_commit_wait_seconds_count":                 3,
		"berth_store_sync_relists_total":                        0,
		"berth_store_solo_fence_failures_total":                 0,
		"berth_sessions_started_total":                          0,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want +got):\n%s", diff)
	}
}
