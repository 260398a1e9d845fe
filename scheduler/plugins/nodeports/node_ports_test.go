package nodeports

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
)

var ctx = context.Background()

func port(ip string, proto framework.Protocol, hostPort int32) framework.ContainerPort {
	return framework.ContainerPort{ContainerPort: 80, HostPort: hostPort, Protocol: proto, HostIP: ip}
}

func podWithPorts(name string, ports ...framework.ContainerPort) *framework.Pod {
	p := fwtest.Pod(name, nil)
	p.Containers[0].Ports = ports
	return p
}

// nodeUsing returns a node running one pod per port given.
func nodeUsing(ports ...framework.ContainerPort) *framework.NodeInfo {
	var pods []*framework.Pod
	for i, pt := range ports {
		p := podWithPorts("running-"+string(rune('a'+i)), pt)
		p.NodeName = "n"
		pods = append(pods, p)
	}
	return fwtest.NodeInfo(fwtest.Node("n", 1000, 1000, 10), pods...)
}

func TestPreFilter(t *testing.T) {
	withInit := podWithPorts("p", port("", "", 0))
	withInit.EditExtras().InitContainers = []framework.Container{{Name: "init", Ports: []framework.ContainerPort{port("", framework.ProtocolTCP, 8080)}}}
	tests := []struct {
		name string
		pod  *framework.Pod
		want preFilterState // nil: Skip
	}{
		{name: "no ports", pod: podWithPorts("p")},
		{name: "container ports only", pod: podWithPorts("p", port("", "", 0), port("10.0.0.1", framework.ProtocolUDP, 0))},
		{name: "init container host ports do not count", pod: withInit},
		{name: "host ports kept in order, others dropped", pod: podWithPorts("p", port("", "", 8080), port("", "", 0), port("10.0.0.1", framework.ProtocolUDP, 53)),
			want: preFilterState{port("", "", 8080), port("10.0.0.1", framework.ProtocolUDP, 53)}},
	}
	pl := &NodePorts{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state := framework.NewCycleState()
			res, st := pl.PreFilter(ctx, state, framework.NewPodInfo(tt.pod), nil)
			if res != nil {
				t.Errorf("PreFilterResult = %v, want nil", res)
			}
			if tt.want == nil {
				if !st.IsSkip() {
					t.Errorf("status = %v, want Skip", st)
				}
				return
			}
			if !st.IsSuccess() {
				t.Fatal(st)
			}
			got, err := framework.ReadState[preFilterState](state, preFilterStateKey)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}

// Conflicts follow HostPortInfo.CheckConflict: "" is the wildcard address
// 0.0.0.0, which clashes with every address; "" protocol is TCP.
func TestFilter(t *testing.T) {
	tests := []struct {
		name     string
		used     []framework.ContainerPort
		want     []framework.ContainerPort
		conflict bool
	}{
		{name: "free node", want: []framework.ContainerPort{port("", "", 8080)}},
		{name: "same port, same address", used: []framework.ContainerPort{port("10.0.0.1", framework.ProtocolTCP, 8080)},
			want: []framework.ContainerPort{port("10.0.0.1", framework.ProtocolTCP, 8080)}, conflict: true},
		{name: "other port", used: []framework.ContainerPort{port("", framework.ProtocolTCP, 8080)},
			want: []framework.ContainerPort{port("", framework.ProtocolTCP, 8081)}},
		{name: "other protocol", used: []framework.ContainerPort{port("", framework.ProtocolUDP, 8080)},
			want: []framework.ContainerPort{port("", framework.ProtocolTCP, 8080)}},
		{name: "SCTP against SCTP", used: []framework.ContainerPort{port("", framework.ProtocolSCTP, 9000)},
			want: []framework.ContainerPort{port("", framework.ProtocolSCTP, 9000)}, conflict: true},
		{name: "empty protocol is TCP", used: []framework.ContainerPort{port("", "", 8080)},
			want: []framework.ContainerPort{port("", framework.ProtocolTCP, 8080)}, conflict: true},
		{name: "other specific addresses", used: []framework.ContainerPort{port("10.0.0.1", framework.ProtocolTCP, 8080)},
			want: []framework.ContainerPort{port("10.0.0.2", framework.ProtocolTCP, 8080)}},
		{name: "wildcard in use blocks a specific address", used: []framework.ContainerPort{port("", framework.ProtocolTCP, 8080)},
			want: []framework.ContainerPort{port("10.0.0.2", framework.ProtocolTCP, 8080)}, conflict: true},
		{name: "explicit 0.0.0.0 in use blocks a specific address", used: []framework.ContainerPort{port("0.0.0.0", framework.ProtocolTCP, 8080)},
			want: []framework.ContainerPort{port("10.0.0.2", framework.ProtocolTCP, 8080)}, conflict: true},
		{name: "wildcard wanted is blocked by a specific address", used: []framework.ContainerPort{port("10.0.0.1", framework.ProtocolTCP, 8080)},
			want: []framework.ContainerPort{port("", framework.ProtocolTCP, 8080)}, conflict: true},
		{name: "wildcard wanted, other protocol in use", used: []framework.ContainerPort{port("10.0.0.1", framework.ProtocolUDP, 8080)},
			want: []framework.ContainerPort{port("", framework.ProtocolTCP, 8080)}},
		{name: "one of several conflicts", used: []framework.ContainerPort{port("", framework.ProtocolUDP, 53)},
			want: []framework.ContainerPort{port("", framework.ProtocolTCP, 80), port("", framework.ProtocolUDP, 53)}, conflict: true},
	}
	pl := &NodePorts{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := framework.NewPodInfo(podWithPorts("p", tt.want...))
			ni := nodeUsing(tt.used...)
			state := framework.NewCycleState()
			if _, st := pl.PreFilter(ctx, state, pod, nil); !st.IsSuccess() {
				t.Fatal(st)
			}
			got := pl.Filter(ctx, state, pod, ni)
			if !tt.conflict {
				if !got.IsSuccess() {
					t.Errorf("Filter = %v", got)
				}
			} else if got.Code() != framework.Unschedulable || got.Message() != ErrReason {
				t.Errorf("Filter = %v %q, want Unschedulable %q", got.Code(), got.Message(), ErrReason)
			}
			if fits := Fits(pod.Pod, ni); fits == tt.conflict {
				t.Errorf("Fits = %v, want %v", fits, !tt.conflict)
			}
		})
	}
	pod := framework.NewPodInfo(podWithPorts("p", port("", "", 80)))
	if st := pl.Filter(ctx, framework.NewCycleState(), pod, nodeUsing()); st.Code() != framework.Error {
		t.Errorf("Filter without PreFilter = %v, want Error", st.Code())
	}
}

func TestPodDeletedHint(t *testing.T) {
	want := podWithPorts("p", port("", framework.ProtocolTCP, 8080))
	bound := func(ports ...framework.ContainerPort) *framework.Pod {
		p := podWithPorts("d", ports...)
		p.NodeName = "n"
		return p
	}
	nominated := podWithPorts("d", port("", framework.ProtocolTCP, 8080))
	nominated.EditExtras().NominatedNodeName = "n"
	tests := []struct {
		name    string
		deleted any
		want    framework.QueueingHint
	}{
		{name: "unknown object", deleted: "x", want: framework.Queue},
		{name: "unscheduled pod", deleted: podWithPorts("d", port("", framework.ProtocolTCP, 8080)), want: framework.QueueSkip},
		{name: "nominated pod with the port", deleted: nominated, want: framework.Queue},
		{name: "bound pod without host ports", deleted: bound(port("", "", 0)), want: framework.QueueSkip},
		{name: "bound pod with the port", deleted: bound(port("", framework.ProtocolTCP, 8080)), want: framework.Queue},
		{name: "bound pod with the port on an address", deleted: bound(port("10.0.0.1", framework.ProtocolTCP, 8080)), want: framework.Queue},
		{name: "bound pod with other ports", deleted: bound(port("", framework.ProtocolTCP, 8081), port("", framework.ProtocolUDP, 8080)), want: framework.QueueSkip},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, _ := isSchedulableAfterPodDeleted(want, tt.deleted, nil); got != tt.want {
				t.Errorf("hint = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEventsToRegister(t *testing.T) {
	evs, err := (&NodePorts{}).EventsToRegister(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []framework.ClusterEvent
	for _, e := range evs {
		got = append(got, e.Event)
	}
	want := []framework.ClusterEvent{
		{Resource: framework.EventResourceAssigned, ActionType: framework.ActionDelete},
		{Resource: framework.EventResourceNode, ActionType: framework.ActionAdd},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
	if evs[0].QueueingHintFn == nil || evs[1].QueueingHintFn != nil {
		t.Error("want a hint for pod deletion only")
	}
}

func BenchmarkFilter(b *testing.B) {
	pl := &NodePorts{}
	pod := framework.NewPodInfo(podWithPorts("p", port("", framework.ProtocolTCP, 8080), port("10.0.0.1", framework.ProtocolUDP, 53)))
	ni := nodeUsing(port("", framework.ProtocolTCP, 9090), port("10.0.0.2", framework.ProtocolUDP, 53))
	state := framework.NewCycleState()
	pl.PreFilter(ctx, state, pod, nil)
	b.ReportAllocs()
	for b.Loop() {
		if st := pl.Filter(ctx, state, pod, ni); !st.IsSuccess() {
			b.Fatal(st)
		}
	}
}
