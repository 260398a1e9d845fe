package berth

import (
	"context"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// UpsertDisruptionBudget creates or replaces a disruption budget, which
// limits how many of the pods it selects preemption may evict. Returns the
// budget as stored and the revision of the write. Retrying is safe.
func (c *Client) UpsertDisruptionBudget(ctx context.Context, budget *berthv1.DisruptionBudget) (*berthv1.DisruptionBudget, int64, error) {
	resp, err := c.cluster.UpsertDisruptionBudget(ctx, &berthv1.UpsertDisruptionBudgetRequest{Budget: budget})
	if err != nil {
		return nil, 0, err
	}
	return resp.GetBudget(), resp.GetRevision(), nil
}

// DeleteDisruptionBudget removes a disruption budget and returns the
// revision of the delete. When a retry follows a delete whose response was
// lost, the retry reports NotFound.
func (c *Client) DeleteDisruptionBudget(ctx context.Context, namespace, name string) (int64, error) {
	resp, err := c.cluster.DeleteDisruptionBudget(ctx, &berthv1.DeleteDisruptionBudgetRequest{Namespace: namespace, Name: name})
	if err != nil {
		return 0, err
	}
	return resp.GetRevision(), nil
}

// ListDisruptionBudgets returns the budgets of namespace ("" for all) in
// namespace/name order.
func (c *Client) ListDisruptionBudgets(ctx context.Context, namespace string) ([]*berthv1.DisruptionBudget, error) {
	resp, err := c.cluster.ListDisruptionBudgets(ctx, &berthv1.ListDisruptionBudgetsRequest{Namespace: namespace})
	if err != nil {
		return nil, err
	}
	return resp.GetBudgets(), nil
}
