package imagelocality

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/framework/fwtest"
)

var ctx = context.Background()

// handle serves a snapshot; the other Handle methods are not used.
type handle struct {
	framework.Handle
	lister framework.SharedLister
}

func (h handle) SnapshotSharedLister() framework.SharedLister { return h.lister }

// image is one image on a node: its size in MiB and how many nodes of the
// cluster hold it.
type image struct {
	sizeMiB  int64
	numNodes int
}

func nodeWithImages(name string, images map[string]image) *framework.NodeInfo {
	ni := fwtest.NodeInfo(fwtest.Node(name, 1000, 1000, 10))
	for n, img := range images {
		ni.ImageStates[n] = &framework.ImageStateSummary{Size: img.sizeMiB * mb, NumNodes: img.numNodes}
	}
	return ni
}

func podWithImages(initImages []string, images ...string) *framework.PodInfo {
	p := &framework.Pod{Namespace: "default", Name: "p"}
	for i, img := range initImages {
		p.EditExtras().InitContainers = append(p.InitContainers(), framework.Container{Name: fmt.Sprintf("i%d", i), Image: img})
	}
	for i, img := range images {
		p.Containers = append(p.Containers, framework.Container{Name: fmt.Sprintf("c%d", i), Image: img})
	}
	return framework.NewPodInfo(p)
}

// Every expected score is worked by hand from kube's formula, in MiB:
// scaled = size * numNodes / totalNodes; sum over containers; clamp to
// [23, 1000 * containers]; score = 100 * (sum - 23) / (max - 23),
// truncated.
//
// Long for its table: one case per behaviour, kept together so they
// read side by side.
func TestScore(t *testing.T) {
	const totalNodes = 4
	tests := []struct {
		name   string
		pod    *framework.PodInfo
		images map[string]image
		want   int64
	}{
		{
			// 500 * 1/4 = 125: 100 * 102 / 977 = 10.44.
			name:   "image on one node in four",
			pod:    podWithImages(nil, "app:v1"),
			images: map[string]image{"app:v1": {500, 1}},
			want:   10,
		},
		{
			// 500 * 4/4 = 500: 100 * 477 / 977 = 48.82.
			name:   "image on every node counts fully",
			pod:    podWithImages(nil, "app:v1"),
			images: map[string]image{"app:v1": {500, 4}},
			want:   48,
		},
		{
			// 80 * 1/4 = 20 < 23: clamped to 23, score 0.
			name:   "below the minimum threshold",
			pod:    podWithImages(nil, "app:v1"),
			images: map[string]image{"app:v1": {80, 1}},
			want:   0,
		},
		{
			// 92 * 1/4 = 23 exactly: score 0.
			name:   "at the minimum threshold",
			pod:    podWithImages(nil, "app:v1"),
			images: map[string]image{"app:v1": {92, 1}},
			want:   0,
		},
		{
			// 3000 clamped to 1000 for one container: 100.
			name:   "above the per-container maximum",
			pod:    podWithImages(nil, "app:v1"),
			images: map[string]image{"app:v1": {3000, 4}},
			want:   100,
		},
		{
			// busybox:latest 100 * 2/4 = 50, app:v1 1500 * 4/4 = 1500;
			// sum 1550 with max 2 * 1000 = 2000: 100 * 1527 / 1977 = 77.24.
			// Without the init container it would clamp to 1000: 100.
			name:   "init containers count in the sum and the maximum",
			pod:    podWithImages([]string{"busybox"}, "app:v1"),
			images: map[string]image{"busybox:latest": {100, 2}, "app:v1": {1500, 4}},
			want:   77,
		},
		{
			// Two containers of the same image each add 600 * 2/4 = 300:
			// sum 600, max 2000: 100 * 577 / 1977 = 29.18.
			name:   "each container counts, even with the same image",
			pod:    podWithImages(nil, "app:v1", "app:v1"),
			images: map[string]image{"app:v1": {600, 2}},
			want:   29,
		},
		{
			// The second container's image is absent but still raises the
			// maximum: 1000 * 4/4 = 1000 of 2000: 100 * 977 / 1977 = 49.41.
			name:   "absent images raise the maximum only",
			pod:    podWithImages(nil, "app:v1", "other:v1"),
			images: map[string]image{"app:v1": {1000, 4}},
			want:   49,
		},
		{
			name:   "untagged name matches the node's :latest",
			pod:    podWithImages(nil, "nginx"),
			images: map[string]image{"nginx:latest": {1000, 4}},
			want:   100,
		},
		{
			name:   "untagged name does not match an untagged node entry",
			pod:    podWithImages(nil, "nginx"),
			images: map[string]image{"nginx": {1000, 4}},
			want:   0,
		},
		{
			name:   "tag must match",
			pod:    podWithImages(nil, "nginx:1.25"),
			images: map[string]image{"nginx:latest": {1000, 4}},
			want:   0,
		},
		{
			name:   "no image on the node",
			pod:    podWithImages(nil, "app:v1"),
			images: nil,
			want:   0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := nodeWithImages("target", tt.images)
			nodes := []*framework.NodeInfo{target}
			for i := 1; i < totalNodes; i++ {
				nodes = append(nodes, nodeWithImages(fmt.Sprintf("other%d", i), nil))
			}
			pl, err := New(ctx, nil, handle{lister: fwtest.NewLister(nodes...)})
			if err != nil {
				t.Fatal(err)
			}
			il := pl.(*ImageLocality)
			state := framework.NewCycleState()
			// PreScore gets the feasible nodes only; the spread is over all.
			if st := il.PreScore(ctx, state, tt.pod, nodes[:1]); !st.IsSuccess() {
				t.Fatal(st)
			}
			got, st := il.Score(ctx, state, tt.pod, target)
			if !st.IsSuccess() {
				t.Fatal(st)
			}
			if got != tt.want {
				t.Errorf("Score = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestCalculatePriority(t *testing.T) {
	tests := []struct {
		sum           int64
		numContainers int
		want          int64
	}{
		{sum: 0, numContainers: 1, want: 0},
		{sum: minThreshold, numContainers: 1, want: 0},
		{sum: maxContainerThreshold, numContainers: 1, want: 100},
		{sum: maxContainerThreshold + 1, numContainers: 1, want: 100},
		// (1000 - 23) / 2 + 23 = 511.5 MiB is the midpoint: 50.
		{sum: 511*mb + mb/2, numContainers: 1, want: 50},
		// One byte short of the midpoint truncates to 49.
		{sum: 511*mb + mb/2 - 1, numContainers: 1, want: 49},
		{sum: maxContainerThreshold, numContainers: 3, want: 100 * (1000 - 23) / (3000 - 23)},
		{sum: 0, numContainers: 0, want: 0},
	}
	for _, tt := range tests {
		if got := calculatePriority(tt.sum, tt.numContainers); got != tt.want {
			t.Errorf("calculatePriority(%d, %d) = %d, want %d", tt.sum, tt.numContainers, got, tt.want)
		}
	}
}

func TestScaledImageScore(t *testing.T) {
	tests := []struct {
		size       int64
		numNodes   int
		totalNodes int
		want       int64
	}{
		{size: 100, numNodes: 1, totalNodes: 1, want: 100},
		{size: 100, numNodes: 1, totalNodes: 4, want: 25},
		// 10 * (1/3) = 3.33: truncated.
		{size: 10, numNodes: 1, totalNodes: 3, want: 3},
		{size: 100000001, numNodes: 1, totalNodes: 3, want: 33333333},
		{size: 100, numNodes: 1, totalNodes: 0, want: 0},
	}
	for _, tt := range tests {
		got := scaledImageScore(&framework.ImageStateSummary{Size: tt.size, NumNodes: tt.numNodes}, tt.totalNodes)
		if got != tt.want {
			t.Errorf("scaledImageScore(%d, %d/%d) = %d, want %d", tt.size, tt.numNodes, tt.totalNodes, got, tt.want)
		}
	}
}

func TestNormalizedImageName(t *testing.T) {
	tests := map[string]string{
		"nginx":                      "nginx:latest",
		"nginx:1.25":                 "nginx:1.25",
		"library/nginx":              "library/nginx:latest",
		"registry:5000/app":          "registry:5000/app:latest",
		"registry:5000/app:v2":       "registry:5000/app:v2",
		"app@sha256:0123456789abcde": "app@sha256:0123456789abcde",
	}
	got := map[string]string{}
	for in := range tests {
		got[in] = normalizedImageName(in)
	}
	if diff := cmp.Diff(tests, got); diff != "" {
		t.Errorf("(-want,+got):\n%s", diff)
	}
}

func TestErrors(t *testing.T) {
	pod := podWithImages(nil, "app:v1")
	pl := &ImageLocality{handle: handle{}}
	if st := pl.PreScore(ctx, framework.NewCycleState(), pod, nil); st.Code() != framework.Error {
		t.Errorf("PreScore without a snapshot = %v, want Error", st.Code())
	}
	if _, st := pl.Score(ctx, framework.NewCycleState(), pod, nodeWithImages("n", nil)); st.Code() != framework.Error {
		t.Errorf("Score without PreScore = %v, want Error", st.Code())
	}
}

func BenchmarkScore(b *testing.B) {
	nodes := []*framework.NodeInfo{nodeWithImages("n", map[string]image{"app:v1": {500, 1}, "nginx:latest": {100, 1}})}
	pl := &ImageLocality{handle: handle{lister: fwtest.NewLister(nodes...)}}
	pod := podWithImages([]string{"busybox"}, "app:v1", "nginx")
	state := framework.NewCycleState()
	if st := pl.PreScore(ctx, state, pod, nodes); !st.IsSuccess() {
		b.Fatal(st)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, st := pl.Score(ctx, state, pod, nodes[0]); !st.IsSuccess() {
			b.Fatal(st)
		}
	}
}

func TestScaledImageScoreSaturates(t *testing.T) {
	huge := &framework.ImageStateSummary{Size: math.MaxInt64, NumNodes: 1}
	if got := scaledImageScore(huge, 1); got != math.MaxInt64 {
		t.Errorf("scaledImageScore(max size on every node) = %d, want %d", got, int64(math.MaxInt64))
	}
	// Two huge images sum past the limit; held there, the node scores top.
	sum := framework.AddQuantity(scaledImageScore(huge, 1), scaledImageScore(huge, 1))
	if got := calculatePriority(sum, 2); got != framework.MaxNodeScore {
		t.Errorf("calculatePriority(saturated sum) = %d, want %d", got, framework.MaxNodeScore)
	}
}
