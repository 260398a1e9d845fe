package interpodaffinity

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
)

func TestNewArgs(t *testing.T) {
	tests := []struct {
		name       string
		args       any
		wantWeight int32
		wantIgnore bool
		wantErr    bool
	}{
		{name: "nil: defaults", wantWeight: 1},
		{name: "zero Args: defaults", args: Args{}, wantWeight: 1},
		{name: "nil *Args: defaults", args: (*Args)(nil), wantWeight: 1},
		{name: "weight 0 allowed", args: &Args{HardPodAffinityWeight: int32p(0)}, wantWeight: 0},
		{name: "weight 100 allowed", args: &Args{HardPodAffinityWeight: int32p(100), IgnorePreferredTermsOfExistingPods: true}, wantWeight: 100, wantIgnore: true},
		{name: "weight 101 refused", args: &Args{HardPodAffinityWeight: int32p(101)}, wantErr: true},
		{name: "negative weight refused", args: &Args{HardPodAffinityWeight: int32p(-1)}, wantErr: true},
		{name: "wrong args type", args: 3, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantErr {
				if _, err := New(ctx, tt.args, newPlugin(t, nil, 1).handle); err == nil {
					t.Fatal("New succeeded, want an error")
				}
				return
			}
			pl := newPlugin(t, tt.args, 1)
			if pl.hardPodAffinityWeight != tt.wantWeight || pl.ignorePreferredTermsOfExistingPods != tt.wantIgnore {
				t.Errorf("weight %d ignore %v, want %d %v", pl.hardPodAffinityWeight, pl.ignorePreferredTermsOfExistingPods, tt.wantWeight, tt.wantIgnore)
			}
		})
	}
	if _, err := New(ctx, nil, nil); err == nil {
		t.Error("New without a handle succeeded")
	}
}

func TestEventsToRegister(t *testing.T) {
	events, err := newPlugin(t, nil, 1).EventsToRegister(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []framework.ClusterEvent
	for _, e := range events {
		if e.QueueingHintFn == nil {
			t.Errorf("event %v has no hint", e.Event)
		}
		got = append(got, e.Event)
	}
	want := []framework.ClusterEvent{
		{Resource: framework.EventResourceAssigned, ActionType: framework.ActionAdd | framework.ActionUpdatePodLabel | framework.ActionDelete},
		{Resource: framework.EventResourceNode, ActionType: framework.ActionAdd | framework.ActionUpdateNodeLabel},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}

func TestIsSchedulableAfterPodChange(t *testing.T) {
	pending := pod("p").labels("app", "web").
		requiredAffinity(termIn("app", "zone", "db")).
		requiredAnti(termIn("app", "host", "cache"), termIn("app", "host", "queue")).obj()
	bound := func(kv ...string) *framework.Pod { return pod("x").on("n1").labels(kv...).obj() }
	tests := []struct {
		name     string
		old, new any
		want     framework.QueueingHint
		wantErr  bool
	}{
		{name: "added pod not bound", new: pod("x").labels("app", "db").obj(), want: framework.QueueSkip},
		{name: "added pod matching the affinity", new: bound("app", "db"), want: framework.Queue},
		{name: "added pod not matching the affinity", new: bound("app", "cache"), want: framework.QueueSkip},
		{name: "update that comes to match the affinity", old: bound("app", "x"), new: bound("app", "db"), want: framework.Queue},
		{name: "update of a pod already matching the affinity", old: bound("app", "db", "v", "1"), new: bound("app", "db", "v", "2"), want: framework.QueueSkip},
		{name: "update that stops matching one anti-affinity term", old: bound("app", "queue"), new: bound("app", "x"), want: framework.Queue},
		{name: "update that starts matching an anti-affinity term", old: bound("app", "x"), new: bound("app", "cache"), want: framework.QueueSkip},
		{name: "update of a pod not bound before", old: pod("x").labels("app", "x").obj(), new: bound("app", "db"), want: framework.QueueSkip},
		{name: "deleted pod matching one anti-affinity term", old: bound("app", "queue"), want: framework.Queue},
		{name: "deleted pod matching nothing", old: bound("app", "db"), want: framework.QueueSkip},
		{name: "deleted pod whose anti-affinity repelled the pod", old: pod("r").on("n1").requiredAnti(termIn("app", "zone", "web")).obj(), want: framework.Queue},
		{name: "deleted pod whose anti-affinity selects other pods", old: pod("r").on("n1").requiredAnti(termIn("app", "zone", "db")).obj(), want: framework.QueueSkip},
		{name: "deleted pod in another namespace whose anti-affinity names none", old: pod("r").ns("o").on("n1").requiredAnti(termIn("app", "zone", "web")).obj(), want: framework.QueueSkip},
		{name: "not a pod", new: node("n1"), want: framework.Queue, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := isSchedulableAfterPodChange(pending, tt.old, tt.new)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("= %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestIsSchedulableAfterNodeChange(t *testing.T) {
	withAffinity := pod("p").requiredAffinity(termIn("app", "zone", "db")).obj()
	withAnti := pod("p").requiredAnti(termIn("app", "zone", "db")).obj()
	plain := pod("p").obj()
	tests := []struct {
		name     string
		pod      *framework.Pod
		old, new any
		want     framework.QueueingHint
		wantErr  bool
	}{
		{name: "affinity: added node with the key", pod: withAffinity, new: node("n", "zone", "z1"), want: framework.Queue},
		{name: "affinity: added node without the key", pod: withAffinity, new: node("n", "host", "n"), want: framework.QueueSkip},
		{name: "affinity: node gains the key", pod: withAffinity, old: node("n"), new: node("n", "zone", "z1"), want: framework.Queue},
		{name: "affinity: node changes zone", pod: withAffinity, old: node("n", "zone", "z1"), new: node("n", "zone", "z2"), want: framework.Queue},
		{name: "affinity: node loses the key", pod: withAffinity, old: node("n", "zone", "z1"), new: node("n"), want: framework.QueueSkip},
		{name: "affinity: other label changes", pod: withAffinity, old: node("n", "zone", "z1"), new: node("n", "zone", "z1", "x", "y"), want: framework.QueueSkip},
		{name: "anti-affinity: any added node", pod: withAnti, new: node("n"), want: framework.Queue},
		{name: "anti-affinity: node loses the key", pod: withAnti, old: node("n", "zone", "z1"), new: node("n"), want: framework.Queue},
		{name: "anti-affinity: node changes zone", pod: withAnti, old: node("n", "zone", "z1"), new: node("n", "zone", "z2"), want: framework.Queue},
		{name: "anti-affinity: node gains the key", pod: withAnti, old: node("n"), new: node("n", "zone", "z1"), want: framework.QueueSkip},
		{name: "no required terms: added node", pod: plain, new: node("n", "zone", "z1"), want: framework.QueueSkip},
		{name: "not a node", pod: withAffinity, new: pod("x").obj(), want: framework.Queue, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := isSchedulableAfterNodeChange(tt.pod, tt.old, tt.new)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("= %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
