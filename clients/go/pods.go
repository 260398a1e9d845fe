package berth

import (
	"context"
	"fmt"
	"iter"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// MaxSubmitBatch is the most pods the server takes in one SubmitPods call.
const MaxSubmitBatch = 1000

// SubmitPod stores pod for scheduling and returns it as stored (with its
// uid) and the revision of the write. It returns once the pod is durable.
// Retrying is safe: resubmitting an identical pod returns the stored one
// with the same uid and revision; a different spec under the same
// namespace/name fails with AlreadyExists.
func (c *Client) SubmitPod(ctx context.Context, pod *berthv1.Pod) (*berthv1.Pod, int64, error) {
	resp, err := c.pods.SubmitPod(ctx, &berthv1.SubmitPodRequest{Pod: pod})
	if err != nil {
		return nil, 0, err
	}
	return resp.GetPod(), resp.GetRevision(), nil
}

// SubmitPods submits many pods with one result each, in order. Batches
// larger than MaxSubmitBatch are split into several calls; if one call
// fails, the results of the calls before it are returned with the error.
// A pod's own failure is reported in its result (see SubmitPodResultErr),
// not as the error. Retrying is safe for the same reason as SubmitPod.
func (c *Client) SubmitPods(ctx context.Context, pods []*berthv1.Pod) ([]*berthv1.SubmitPodResult, error) {
	results := make([]*berthv1.SubmitPodResult, 0, len(pods))
	for start := 0; start < len(pods); start += MaxSubmitBatch {
		batch := pods[start:min(start+MaxSubmitBatch, len(pods))]
		resp, err := c.pods.SubmitPods(ctx, &berthv1.SubmitPodsRequest{Pods: batch})
		if err != nil {
			return results, err
		}
		if got := len(resp.GetResults()); got != len(batch) {
			return results, fmt.Errorf("berth: SubmitPods returned %d results for %d pods", got, len(batch))
		}
		results = append(results, resp.GetResults()...)
	}
	return results, nil
}

// SubmitPodResultErr converts the outcome of one pod of SubmitPods into a
// gRPC status error, or nil when the pod was stored.
func SubmitPodResultErr(r *berthv1.SubmitPodResult) error {
	if r.GetCode() == int32(codes.OK) {
		return nil
	}
	return status.Error(codes.Code(r.GetCode()), r.GetMessage())
}

// DeletePod removes a pod, freeing what it held, and returns the revision
// of the delete. A non-empty uid deletes only that incarnation of the pod.
// When a retry follows a delete whose response was lost, the retry reports
// NotFound.
func (c *Client) DeletePod(ctx context.Context, namespace, name, uid string) (int64, error) {
	resp, err := c.pods.DeletePod(ctx, &berthv1.DeletePodRequest{Namespace: namespace, Name: name, Uid: uid})
	if err != nil {
		return 0, err
	}
	return resp.GetRevision(), nil
}

// GetPod returns a pod with its status.
func (c *Client) GetPod(ctx context.Context, namespace, name string) (*berthv1.Pod, error) {
	resp, err := c.pods.GetPod(ctx, &berthv1.GetPodRequest{Namespace: namespace, Name: name})
	if err != nil {
		return nil, err
	}
	return resp.GetPod(), nil
}

// PodFilter selects pods in ListPods and AllPods. Zero fields match all.
type PodFilter struct {
	Namespace string
	Phase     berthv1.PodPhase
	NodeName  string
	// PageSize is the most pods per call; 0 lets the server choose.
	PageSize int32
}

// ListPods returns one page of pods matching f in namespace/name order and
// the token of the next page ("" on the last).
func (c *Client) ListPods(ctx context.Context, f PodFilter, pageToken string) ([]*berthv1.Pod, string, error) {
	resp, err := c.pods.ListPods(ctx, &berthv1.ListPodsRequest{
		Namespace: f.Namespace,
		Phase:     f.Phase,
		NodeName:  f.NodeName,
		PageSize:  f.PageSize,
		PageToken: pageToken,
	})
	if err != nil {
		return nil, "", err
	}
	return resp.GetPods(), resp.GetNextPageToken(), nil
}

// AllPods iterates over every pod matching f, fetching pages as it goes.
// An error is yielded once, with a nil pod, and ends the iteration.
func (c *Client) AllPods(ctx context.Context, f PodFilter) iter.Seq2[*berthv1.Pod, error] {
	return func(yield func(*berthv1.Pod, error) bool) {
		token := ""
		for {
			pods, next, err := c.ListPods(ctx, f, token)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, p := range pods {
				if !yield(p, nil) {
					return
				}
			}
			if next == "" {
				return
			}
			token = next
		}
	}
}
