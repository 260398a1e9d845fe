package store

import (
	"context"
	"errors"
	"testing"
	"time"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

// budgetRecorder is a SyncHandler that also takes budgets.
type budgetRecorder struct {
	*recordingHandler
}

func (h budgetRecorder) BudgetsReset(bs []*berthv1.DisruptionBudget) {
	var names []string
	for _, b := range bs {
		names = append(names, "budget:"+b.Namespace+"/"+b.Name)
	}
	h.calls <- call{Kind: "BudgetsReset", Names: names}
}

func (h budgetRecorder) BudgetPut(b *berthv1.DisruptionBudget, rev int64) {
	h.calls <- call{Kind: "BudgetPut", Rev: rev, Names: []string{b.Namespace + "/" + b.Name}}
}

func (h budgetRecorder) BudgetDeleted(ns, name string, rev int64) {
	h.calls <- call{Kind: "BudgetDeleted", Rev: rev, Names: []string{ns + "/" + name}}
}

func TestBudgetsStoredAndSynced(t *testing.T) {
	s := openStore(t, sharedEtcd(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := "budgets-" + t.Name()[len(t.Name())-6:]
	first := &berthv1.DisruptionBudget{Namespace: ns, Name: "web", AllowedDisruptions: 1,
		Selector: &berthv1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}
	if _, err := s.PutBudget(ctx, first); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListBudgets(ctx, ns)
	if err != nil || len(got) != 1 || got[0].GetAllowedDisruptions() != 1 {
		t.Fatalf("ListBudgets = %v, %v", got, err)
	}

	h := budgetRecorder{newRecordingHandler()}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	go s.Sync(sctx, h) //nolint:errcheck // ends with sctx
	next := func() call {
		select {
		case c := <-h.calls:
			return c
		case <-ctx.Done():
			t.Fatal("no sync call before the deadline")
			return call{}
		}
	}
	if c := next(); c.Kind != "BudgetsReset" || !contains(c.Names, "budget:"+ns+"/web") {
		t.Fatalf("first call %+v, want BudgetsReset listing the budget", c)
	}
	if c := next(); c.Kind != "Reset" {
		t.Fatalf("second call %+v, want Reset", c)
	}
	rev, err := s.DeleteBudget(ctx, ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Kind != "BudgetDeleted" || c.Rev != rev || c.Names[0] != ns+"/web" {
		t.Fatalf("after delete: %+v, want BudgetDeleted at %d", c, rev)
	}
	if _, err := s.DeleteBudget(ctx, ns, "web"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	rev, err = s.PutBudget(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if c := next(); c.Kind != "BudgetPut" || c.Rev != rev {
		t.Fatalf("after put: %+v, want BudgetPut at %d", c, rev)
	}
}

func contains(names []string, want string) bool {
	for _, n := range names {
		if n == want {
			return true
		}
	}
	return false
}
