package store

import (
	"fmt"
	"testing"
)

// The shard key is written the way fmt's %03d writes it, for every index:
// claims already in etcd must keep their keys.
func TestShardKeyMatchesPaddedFormat(t *testing.T) {
	k := newKeyspace("/berth")
	for _, i := range []int{-1000, -12, -1, 0, 1, 9, 10, 42, 99, 100, 255, 999, 1000, 1234, 1 << 20} {
		if got, want := k.shard(i), fmt.Sprintf("%s%03d", k.shards, i); got != want {
			t.Errorf("shard(%d) = %q, want %q", i, got, want)
		}
	}
}
