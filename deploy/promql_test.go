package deploy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSeriesNames(t *testing.T) {
	cases := []struct {
		expr string
		want []string
	}{
		{`berth_replicas_live`, []string{"berth_replicas_live"}},
		{`sum by (queue) (berth_scheduler_pending_pods{job=~"$job", queue!="a{b}"})`, []string{"berth_scheduler_pending_pods"}},
		{`histogram_quantile(0.99, sum by (le, instance) (rate(berth_store_txn_duration_seconds_bucket{job="x"}[$__rate_interval])))`,
			[]string{"berth_store_txn_duration_seconds_bucket"}},
		{`sum(rate(a_total[5m])) by (grpc_method) / ignoring(code) group_left sum(rate(b_total[5m:1m] offset 1h))`, []string{"a_total", "b_total"}},
		{`(sum(rate(x_total[5m])) or vector(0)) == 0 and on() sum(y) > 1e-3`, []string{"x_total", "y"}},
		{`process_resident_memory_bytes / go_gc_gomemlimit_bytes > 0.9 and go_gc_gomemlimit_bytes < 9e+18`,
			[]string{"go_gc_gomemlimit_bytes", "process_resident_memory_bytes"}},
		{`label_replace(up, "host", "$1", "instance", "(.*):.*") == bool 0 # why`, []string{"up"}},
		{`topk(5, sum without (instance) (rate(grpc_server_handled_total{grpc_code!="OK"}[5m])))`, []string{"grpc_server_handled_total"}},
	}
	for _, c := range cases {
		got, err := seriesNames(c.expr)
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s (-want,+got):\n%s", c.expr, diff)
		}
	}
}

func TestSeriesNamesRejects(t *testing.T) {
	for _, expr := range []string{
		`sum(rate(x[5m])`,
		`rate(x[5m]))`,
		`x{job="a"`,
		`x{job="a}`,
		`rat(x[5m])`,
		`x[5m`,
	} {
		if got, err := seriesNames(expr); err == nil {
			t.Errorf("%s accepted as %q", expr, got)
		}
	}
}
