package server

import (
	"testing"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func BenchmarkValidatePod(b *testing.B) {
	pod := benchPod()
	b.ReportAllocs()
	for b.Loop() {
		var v violations
		validatePod(&v, "pods[0]", pod)
		if v.list != nil {
			b.Fatal(v.err())
		}
	}
}

// benchPod is a pod like the bench's: a namespace, a name, one label and
// one container requesting cpu and memory.
func benchPod() *berthv1.Pod {
	return &berthv1.Pod{
		Namespace: "bench", Name: "scale-7f3a-000123",
		Labels: map[string]string{"app": "scale-7f3a", "tier": "web"},
		Containers: []*berthv1.Container{{
			Name: "main", Image: "registry.example/app:1",
			Requests: map[string]int64{"cpu": 100, "memory": 128 << 20},
		}},
	}
}
