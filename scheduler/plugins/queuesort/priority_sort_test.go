package queuesort

import (
	"testing"
	"time"

	"github.com/berth-io/berth/scheduler/framework"
)

func TestLess(t *testing.T) {
	qpi := func(prio int32, ts int64) *framework.QueuedPodInfo {
		return &framework.QueuedPodInfo{PodInfo: framework.NewPodInfo(&framework.Pod{Name: "p", Priority: prio}), Timestamp: time.Unix(ts, 0)}
	}
	tests := []struct {
		name string
		a, b *framework.QueuedPodInfo
		want bool
	}{
		{name: "higher priority first", a: qpi(10, 5), b: qpi(1, 1), want: true},
		{name: "lower priority later", a: qpi(1, 1), b: qpi(10, 5), want: false},
		{name: "same priority, earlier first", a: qpi(5, 1), b: qpi(5, 2), want: true},
		{name: "same priority, later second", a: qpi(5, 2), b: qpi(5, 1), want: false},
		{name: "identical is not less", a: qpi(5, 1), b: qpi(5, 1), want: false},
		{name: "negative priorities", a: qpi(-1, 9), b: qpi(-5, 1), want: true},
	}
	pl := &PrioritySort{}
	for _, tt := range tests {
		if got := pl.Less(tt.a, tt.b); got != tt.want {
			t.Errorf("%s: Less = %v, want %v", tt.name, got, tt.want)
		}
	}
}
