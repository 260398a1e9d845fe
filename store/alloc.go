package store

import (
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Allocation versions keep replicas from overcommitting a node together.
//
// Every write that adds a pod to a node also puts {prefix}/v1/alloc/{node},
// so the key's mod revision is the last time anyone added to the node. A
// binding carries the view revision its placement was checked against
// (every change up to it was in the deciding cache) and commits only if
// alloc/{node} has not moved past it: no pod unknown to the decision landed
// on the node.
//
// Comparing against the view alone would make a replica's own binds to one
// node conflict with each other whenever the watch lags behind its commits.
// So the committer remembers what its own commits did to each key (the
// allocTable): after a commit that proved no other writer touched the key
// since revision `clean`, the key is at `tip`, and every write in
// (clean, tip] is ours, whose pods the cache holds as assumed. A decision
// whose view is at least `clean` may then accept the key at `tip`.

// allocCharge is a unit's addition to one node.
type allocCharge struct {
	key string
	// view is the decision's view revision; 0 for a pod that was not
	// placed by this replica's cache (declared with its node), which bumps
	// the key without a compare.
	view int64
}

// compare is the charge's check: nothing added to the node after bound.
func (ch allocCharge) compare(bound int64) clientv3.Cmp {
	return modRevBelow(ch.key, bound+1)
}

// allocTip is what this replica knows of one allocation key.
type allocTip struct {
	rev   int64 // the key's mod revision after our last commit to it
	clean int64 // every write to the key in (clean, rev] was ours
}

// bound is the newest revision a decision made with view may accept the
// key at.
func (t allocTip) bound(view int64) int64 {
	if t.rev > view && t.clean <= view {
		return t.rev
	}
	return view
}

type allocTable struct {
	mu   sync.Mutex
	tips map[string]allocTip
}

func newAllocTable() *allocTable { return &allocTable{tips: map[string]allocTip{}} }

// bounds fixes, for one attempt of a batch, the bound of each charge's key
// per view. The batch holds its keys exclusively, so no other commit moves
// their entries meanwhile.
func (t *allocTable) bounds(units []*commitUnit) map[string]allocTip {
	var out map[string]allocTip
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, u := range units {
		for _, ch := range u.charges {
			if out == nil {
				out = map[string]allocTip{}
			}
			out[ch.key] = t.tips[ch.key]
		}
	}
	return out
}

// committed records a successful Txn at rev that carried units' charges,
// checked against tips. A solo Txn bumped only the keys of declared pods.
func (t *allocTable) committed(units []*commitUnit, tips map[string]allocTip, rev int64, solo bool) {
	if len(tips) == 0 {
		return
	}
	lowest := map[string]int64{} // per key, the lowest bound compared
	declared := map[string]bool{}
	for _, u := range units {
		for _, ch := range u.charges {
			if ch.view == 0 {
				declared[ch.key] = true
				continue
			}
			b := tips[ch.key].bound(ch.view)
			if cur, ok := lowest[ch.key]; !ok || b < cur {
				lowest[ch.key] = b
			}
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for key, prev := range tips {
		b, checked := lowest[key]
		switch {
		case solo && !declared[key]:
			// Compared, not written: the key did not move.
		case declared[key] || !checked:
			// A pod our cache did not place landed at rev: no decision
			// older than rev may pass this key.
			t.tips[key] = allocTip{rev: rev, clean: rev}
		case prev.rev != 0 && b == prev.rev:
			t.tips[key] = allocTip{rev: rev, clean: prev.clean}
		default:
			t.tips[key] = allocTip{rev: rev, clean: b}
		}
	}
}
