package tainttoleration

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
	"github.com/berth-io/berth/scheduler/plugins/helper"
)

var ctx = context.Background()

func nodeWith(name string, taints ...framework.Taint) *framework.NodeInfo {
	n := fwtest.Node(name, 1000, 1000, 10)
	n.Taints = taints
	return fwtest.NodeInfo(n)
}

func podTolerating(tols ...framework.Toleration) *framework.PodInfo {
	p := fwtest.Pod("p", nil)
	p.Tolerations = tols
	return framework.NewPodInfo(p)
}

func TestFilter(t *testing.T) {
	noSched := framework.Taint{Key: "dedicated", Value: "gpu", Effect: framework.TaintEffectNoSchedule}
	noExec := framework.Taint{Key: "broken", Value: "", Effect: framework.TaintEffectNoExecute}
	prefer := framework.Taint{Key: "soft", Value: "x", Effect: framework.TaintEffectPreferNoSchedule}
	tests := []struct {
		name    string
		taints  []framework.Taint
		tols    []framework.Toleration
		wantMsg string // "": passes
	}{
		{name: "no taints"},
		{name: "untolerated NoSchedule", taints: []framework.Taint{noSched}, wantMsg: "node(s) had untolerated taint {dedicated: gpu}"},
		{name: "tolerated by Equal", taints: []framework.Taint{noSched}, tols: []framework.Toleration{{Key: "dedicated", Operator: framework.TolerationOpEqual, Value: "gpu", Effect: framework.TaintEffectNoSchedule}}},
		{name: "Equal with another value", taints: []framework.Taint{noSched}, tols: []framework.Toleration{{Key: "dedicated", Value: "cpu"}}, wantMsg: "node(s) had untolerated taint {dedicated: gpu}"},
		{name: "tolerated by Exists", taints: []framework.Taint{noSched}, tols: []framework.Toleration{{Key: "dedicated", Operator: framework.TolerationOpExists}}},
		{name: "toleration for another effect", taints: []framework.Taint{noSched}, tols: []framework.Toleration{{Key: "dedicated", Operator: framework.TolerationOpExists, Effect: framework.TaintEffectNoExecute}},
			wantMsg: "node(s) had untolerated taint {dedicated: gpu}"},
		{name: "untolerated NoExecute with empty value", taints: []framework.Taint{noExec}, wantMsg: "node(s) had untolerated taint {broken: }"},
		{name: "PreferNoSchedule does not filter", taints: []framework.Taint{prefer}},
		{name: "first untolerated taint in node order", taints: []framework.Taint{prefer, noExec, noSched}, wantMsg: "node(s) had untolerated taint {broken: }"},
		{name: "skips a tolerated taint", taints: []framework.Taint{noExec, noSched}, tols: []framework.Toleration{{Key: "broken", Operator: framework.TolerationOpExists}},
			wantMsg: "node(s) had untolerated taint {dedicated: gpu}"},
	}
	pl := &TaintToleration{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := pl.Filter(ctx, framework.NewCycleState(), podTolerating(tt.tols...), nodeWith("n", tt.taints...))
			if tt.wantMsg == "" {
				if !got.IsSuccess() {
					t.Errorf("Filter = %v", got)
				}
				return
			}
			if got.Code() != framework.UnschedulableAndUnresolvable || got.Message() != tt.wantMsg {
				t.Errorf("Filter = %v %q, want UnschedulableAndUnresolvable %q", got.Code(), got.Message(), tt.wantMsg)
			}
		})
	}
}

// Scores follow kube's TaintToleration: count untolerated
// PreferNoSchedule taints, then DefaultNormalizeScore(100, reverse):
// 100 - 100*count/max, integer division.
func TestScore(t *testing.T) {
	a := framework.Taint{Key: "a", Value: "1", Effect: framework.TaintEffectPreferNoSchedule}
	b := framework.Taint{Key: "b", Value: "2", Effect: framework.TaintEffectPreferNoSchedule}
	c := framework.Taint{Key: "c", Value: "3", Effect: framework.TaintEffectPreferNoSchedule}
	hard := framework.Taint{Key: "h", Effect: framework.TaintEffectNoSchedule}
	tests := []struct {
		name  string
		tols  []framework.Toleration
		nodes []*framework.NodeInfo
		want  []int64
	}{
		{
			name:  "counts 0,1,2,1 -> 100,50,0,50",
			tols:  []framework.Toleration{{Key: "b", Operator: framework.TolerationOpExists, Effect: framework.TaintEffectPreferNoSchedule}},
			nodes: []*framework.NodeInfo{nodeWith("n0"), nodeWith("n1", a), nodeWith("n2", a, c), nodeWith("n3", a, b)},
			want:  []int64{100, 50, 0, 50},
		},
		{
			// 100*1/3 = 33 -> 67.
			name:  "counts 0,1,3 -> 100,67,0",
			nodes: []*framework.NodeInfo{nodeWith("n0", hard), nodeWith("n1", a), nodeWith("n2", a, b, c)},
			want:  []int64{100, 67, 0},
		},
		{
			name:  "a toleration with no effect counts; one for NoSchedule does not",
			tols:  []framework.Toleration{{Key: "a", Operator: framework.TolerationOpExists}, {Key: "b", Operator: framework.TolerationOpExists, Effect: framework.TaintEffectNoSchedule}},
			nodes: []*framework.NodeInfo{nodeWith("n0", a), nodeWith("n1", b)},
			want:  []int64{100, 0},
		},
		{
			name:  "all zero -> all 100",
			nodes: []*framework.NodeInfo{nodeWith("n0"), nodeWith("n1", hard)},
			want:  []int64{100, 100},
		},
	}
	pl := &TaintToleration{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := podTolerating(tt.tols...)
			st := framework.NewCycleState()
			if s := pl.PreScore(ctx, st, pod, tt.nodes); !s.IsSuccess() {
				t.Fatal(s)
			}
			var scores framework.NodeScoreList
			for _, ni := range tt.nodes {
				s, status := pl.Score(ctx, st, pod, ni)
				if !status.IsSuccess() {
					t.Fatal(status)
				}
				scores = append(scores, framework.NodeScore{Name: ni.Node().Name, Score: s})
			}
			if s := pl.ScoreExtensions().NormalizeScore(ctx, st, pod, scores); !s.IsSuccess() {
				t.Fatal(s)
			}
			var got []int64
			for _, s := range scores {
				got = append(got, s.Score)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
	if _, s := pl.Score(ctx, framework.NewCycleState(), podTolerating(), nodeWith("n")); s.Code() != framework.Error {
		t.Errorf("Score without PreScore = %v, want Error", s.Code())
	}
}

func TestNodeChangeHint(t *testing.T) {
	taint := framework.Taint{Key: "k", Effect: framework.TaintEffectNoSchedule}
	tainted := &framework.Node{Name: "n", Taints: []framework.Taint{taint}}
	clean := &framework.Node{Name: "n"}
	pod := fwtest.Pod("p", nil)
	tests := []struct {
		name     string
		old, new *framework.Node
		want     framework.QueueingHint
	}{
		{name: "clean node added", new: clean, want: framework.Queue},
		{name: "tainted node added", new: tainted, want: framework.QueueSkip},
		{name: "taint removed", old: tainted, new: clean, want: framework.Queue},
		{name: "taint added", old: clean, new: tainted, want: framework.QueueSkip},
		{name: "clean stays clean", old: clean, new: clean, want: framework.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var old any
			if tt.old != nil {
				old = tt.old
			}
			if got, _ := isSchedulableAfterNodeChange(pod, old, tt.new); got != tt.want {
				t.Errorf("hint = %v, want %v", got, tt.want)
			}
		})
	}
}

// DefaultNormalizeScore itself, without reverse.
func TestDefaultNormalizeScore(t *testing.T) {
	s := framework.NodeScoreList{{Score: 3}, {Score: 1}, {Score: 0}}
	helper.DefaultNormalizeScore(100, false, s)
	if diff := cmp.Diff([]int64{100, 33, 0}, []int64{s[0].Score, s[1].Score, s[2].Score}); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}
