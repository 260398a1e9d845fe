package berth

import (
	"context"
	"iter"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// UpsertNode creates node or replaces its spec and returns the node as
// stored with the etcd revision of the write. It returns once the write is
// durable. Retrying is safe: storing the same spec twice changes nothing.
func (c *Client) UpsertNode(ctx context.Context, node *berthv1.Node) (*berthv1.Node, int64, error) {
	resp, err := c.cluster.UpsertNode(ctx, &berthv1.UpsertNodeRequest{Node: node})
	if err != nil {
		return nil, 0, err
	}
	return resp.GetNode(), resp.GetRevision(), nil
}

// DeleteNode removes the named node and returns the revision of the delete.
// Pods bound to it stay bound. When a retry follows a delete whose response
// was lost, the retry reports NotFound.
func (c *Client) DeleteNode(ctx context.Context, name string) (int64, error) {
	resp, err := c.cluster.DeleteNode(ctx, &berthv1.DeleteNodeRequest{Name: name})
	if err != nil {
		return 0, err
	}
	return resp.GetRevision(), nil
}

// GetNode returns the named node and what the pods bound or assumed on it
// request.
func (c *Client) GetNode(ctx context.Context, name string) (*berthv1.Node, *berthv1.NodeUsage, error) {
	resp, err := c.cluster.GetNode(ctx, &berthv1.GetNodeRequest{Name: name})
	if err != nil {
		return nil, nil, err
	}
	return resp.GetNode(), resp.GetUsage(), nil
}

// ListNodes returns one page of nodes in name order and the token of the
// next page ("" on the last). pageSize 0 lets the server choose.
func (c *Client) ListNodes(ctx context.Context, pageSize int32, pageToken string) ([]*berthv1.Node, string, error) {
	resp, err := c.cluster.ListNodes(ctx, &berthv1.ListNodesRequest{PageSize: pageSize, PageToken: pageToken})
	if err != nil {
		return nil, "", err
	}
	return resp.GetNodes(), resp.GetNextPageToken(), nil
}

// AllNodes iterates over every node in name order, fetching pages as it
// goes. An error is yielded once, with a nil node, and ends the iteration.
func (c *Client) AllNodes(ctx context.Context) iter.Seq2[*berthv1.Node, error] {
	return func(yield func(*berthv1.Node, error) bool) {
		token := ""
		for {
			nodes, next, err := c.ListNodes(ctx, 0, token)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, n := range nodes {
				if !yield(n, nil) {
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
