package scheduler

import (
	"hash/fnv"
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
)

// TestShardOfIsFNV pins the shard hash: replicas running different builds
// share one store, so it must stay FNV-1a of the pod's (or group's) key.
func TestShardOfIsFNV(t *testing.T) {
	for _, p := range []*framework.Pod{
		{Namespace: "default", Name: "web-0"},
		{Namespace: "bench", Name: "r12-345"},
		{Namespace: "", Name: ""},
		{Namespace: "ml", Name: "worker-7", PodGroup: "train"},
	} {
		key := p.Namespace + "/" + p.Name
		if p.PodGroup != "" {
			key = p.Namespace + "/" + p.PodGroup + "/group"
		}
		h := fnv.New32a()
		h.Write([]byte(key))
		for _, shards := range []int{1, 7, 64, 1024} {
			if got, want := ShardOf(p, shards), int(h.Sum32()%uint32(shards)); got != want {
				t.Errorf("ShardOf(%q, %d) = %d, want %d", key, shards, got, want)
			}
		}
	}
}
