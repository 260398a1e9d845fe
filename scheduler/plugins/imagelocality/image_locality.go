// Package imagelocality prefers nodes that already hold the pod's container
// images, discounting images that most nodes hold anyway.
package imagelocality

import (
	"context"
	"errors"
	"math"
	"strings"

	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/scheduler/plugins/names"
)

// Name is the plugin's name.
const Name = names.ImageLocality

const preScoreStateKey framework.StateKey = "PreScore" + Name

// Score bounds, Kubernetes' values: below minThreshold of (spread-scaled)
// image bytes a node scores 0; at maxContainerThreshold per container it
// scores MaxNodeScore. Most registry images fall in this range.
const (
	mb                    int64 = 1024 * 1024
	minThreshold          int64 = 23 * mb
	maxContainerThreshold int64 = 1000 * mb
)

// ImageLocality scores nodes by the size of the pod's images they hold.
// Kube: pkg/scheduler/framework/plugins/imagelocality/image_locality.go.
// Unlike kube it has a PreScore, which normalizes the image names and
// counts the nodes once per pod instead of once per node.
type ImageLocality struct {
	handle framework.Handle
}

var (
	_ framework.PreScorePlugin = (*ImageLocality)(nil)
	_ framework.ScorePlugin    = (*ImageLocality)(nil)
)

// New returns the plugin; it takes no args and reads the node count from
// h's snapshot.
func New(_ context.Context, _ any, h framework.Handle) (framework.Plugin, error) {
	return &ImageLocality{handle: h}, nil
}

// Name implements framework.Plugin.
func (*ImageLocality) Name() string { return Name }

// preScoreState is what Score needs of the pod and the cluster.
type preScoreState struct {
	// images holds the normalized image of every init and regular
	// container, duplicates kept: each container counts.
	images []string
	// totalNodes is the number of nodes in the snapshot.
	totalNodes int
}

func (s *preScoreState) Clone() framework.StateData { return s }

var errNoSnapshot = errors.New(Name + ": the framework has no snapshot")

// PreScore implements framework.PreScorePlugin.
func (pl *ImageLocality) PreScore(_ context.Context, state *framework.CycleState, pod *framework.PodInfo, _ []*framework.NodeInfo) *framework.Status {
	if pl.handle == nil || pl.handle.SnapshotSharedLister() == nil {
		return framework.AsStatus(errNoSnapshot)
	}
	p := pod.Pod
	s := &preScoreState{
		images:     make([]string, 0, len(p.InitContainers())+len(p.Containers)),
		totalNodes: len(pl.handle.SnapshotSharedLister().NodeInfos().List()),
	}
	for _, c := range p.InitContainers() {
		s.images = append(s.images, normalizedImageName(c.Image))
	}
	for i := range p.Containers {
		s.images = append(s.images, normalizedImageName(p.Containers[i].Image))
	}
	state.Write(preScoreStateKey, s)
	return nil
}

// Score implements framework.ScorePlugin: the spread-scaled sizes of the
// pod's images present on the node, clamped and scaled to 0..MaxNodeScore.
func (*ImageLocality) Score(_ context.Context, state *framework.CycleState, _ *framework.PodInfo, nodeInfo *framework.NodeInfo) (int64, *framework.Status) {
	s, err := framework.ReadState[*preScoreState](state, preScoreStateKey)
	if err != nil {
		return 0, framework.AsStatus(err)
	}
	var sum int64
	for _, name := range s.images {
		if st, ok := nodeInfo.ImageStates[name]; ok {
			// Sizes are the client's numbers: a wrapped sum scored a node
			// holding huge images as holding none.
			sum = framework.AddQuantity(sum, scaledImageScore(st, s.totalNodes))
		}
	}
	return calculatePriority(sum, len(s.images)), nil
}

// ScoreExtensions implements framework.ScorePlugin: scores are final.
func (*ImageLocality) ScoreExtensions() framework.ScoreExtensions { return nil }

// PreScoreUsesNodes implements framework.PreScoreNodesUser: PreScore
// counts every node of the snapshot, not the feasible ones.
func (*ImageLocality) PreScoreUsesNodes(*framework.PodInfo) bool { return false }

// calculatePriority clamps sum to [minThreshold, maxContainerThreshold *
// numContainers] and maps that range linearly (truncating) onto
// [0, MaxNodeScore].
func calculatePriority(sum int64, numContainers int) int64 {
	maxThreshold := maxContainerThreshold * int64(numContainers)
	if sum < minThreshold {
		sum = minThreshold
	} else if sum > maxThreshold {
		sum = maxThreshold
	}
	return framework.MaxNodeScore * (sum - minThreshold) / (maxThreshold - minThreshold)
}

// scaledImageScore is the image's size times the fraction of nodes that
// hold it, so an image on every node adds little to any one of them (which
// would otherwise pile pods onto the few nodes that pulled it first).
// The float arithmetic and its order are Kubernetes', for equal results.
func scaledImageScore(st *framework.ImageStateSummary, totalNodes int) int64 {
	if totalNodes == 0 {
		return 0
	}
	spread := float64(st.NumNodes) / float64(totalNodes)
	scaled := float64(st.Size) * spread
	if scaled >= math.MaxInt64 { // converting 2^63 to int64 would overflow
		return math.MaxInt64
	}
	return int64(scaled)
}

// normalizedImageName adds the ":latest" tag the runtime assumes when the
// name has neither a tag nor a digest (no ':' after the last '/'), so
// "nginx" matches a node's "nginx:latest". A registry port ("host:5000/x")
// is before the last '/' and does not count as a tag.
func normalizedImageName(name string) string {
	if strings.LastIndex(name, ":") <= strings.LastIndex(name, "/") {
		return name + ":latest"
	}
	return name
}

var _ framework.SignPlugin = (*ImageLocality)(nil)

// AppendSignature implements framework.SignPlugin: the pod's images, in
// container order. Score also reads the number of nodes in the snapshot,
// which the signature contract holds fixed (same node list), and each
// node's image states, which its generation covers.
func (*ImageLocality) AppendSignature(sig []byte, pod *framework.PodInfo) ([]byte, bool) {
	p := pod.Pod
	sig = framework.AppendSigInt(sig, int64(len(p.InitContainers())+len(p.Containers)))
	for _, c := range p.InitContainers() {
		sig = framework.AppendSigString(sig, c.Image)
	}
	for i := range p.Containers {
		sig = framework.AppendSigString(sig, p.Containers[i].Image)
	}
	return sig, true
}

var (
	_ framework.PreScoreNodesUser = (*ImageLocality)(nil)
)
