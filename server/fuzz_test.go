package server

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/berth-io/berth/convert"
	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/scheduler/framework"
	"github.com/berth-io/berth/server/limits"
)

// FuzzValidateAndConvert feeds request validation and the wire-to-core
// conversion with a SubmitPodRequest and an UpsertNodeRequest decoded from
// arbitrary bytes. Nothing may panic, and whatever validation accepts must
// keep the core's arithmetic exact: the pod's requests within 0..MaxQuantity,
// and a node built from an accepted node charged with the pod (several
// times, then released once) holding exactly the multiples of them.
// The seed corpus is in testdata/fuzz/FuzzValidateAndConvert.
func FuzzValidateAndConvert(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed.pod, seed.node)
	}
	f.Fuzz(func(t *testing.T, podBytes, nodeBytes []byte) {
		podReq := &berthv1.SubmitPodRequest{}
		nodeReq := &berthv1.UpsertNodeRequest{}
		if proto.Unmarshal(podBytes, podReq) != nil || proto.Unmarshal(nodeBytes, nodeReq) != nil {
			return
		}
		podOK := validateRequest(podReq) == nil
		nodeOK := validateRequest(nodeReq) == nil
		// What SubmitPods checks per pod must agree with SubmitPod.
		var v violations
		validateSubmittedPod(&v, "pod", podReq.GetPod())
		if (v.err() == nil) != podOK {
			t.Fatalf("SubmitPod accepts: %v, SubmitPods' per-pod check accepts: %v (%v)", podOK, v.err() == nil, v.err())
		}
		if !podOK {
			return
		}
		pod := convert.PodToCore(podReq.GetPod(), 1)
		want := framework.PodRequests(pod, false)
		checkBounded(t, "pod requests", &want)
		if !nodeOK {
			return
		}
		ni := framework.NewNodeInfo()
		ni.SetNode(convert.NodeToCore(nodeReq.GetNode(), 1, false))
		checkBounded(t, "node allocatable", &ni.Allocatable)
		const copies = 3
		for i := range copies {
			p := *pod
			p.Name = pod.Name + "-" + string(rune('a'+i))
			ni.AddPodInfo(framework.NewPodInfo(&p))
		}
		checkMultiple(t, "after adding", &ni.Requested, &want, copies)
		removed := *pod
		removed.Name = pod.Name + "-a"
		if err := ni.RemovePod(&removed); err != nil {
			t.Fatal(err)
		}
		checkMultiple(t, "after removing one", &ni.Requested, &want, copies-1)
	})
}

func resourceValues(r *framework.Resource) map[string]int64 {
	out := map[string]int64{
		framework.ResourceCPU: r.MilliCPU, framework.ResourceMemory: r.Memory,
		framework.ResourceEphemeralStorage: r.EphemeralStorage, framework.ResourcePods: r.AllowedPodNumber,
	}
	for name, q := range r.Scalar {
		out[name] = q
	}
	return out
}

func checkBounded(t *testing.T, what string, r *framework.Resource) {
	t.Helper()
	if r.Saturated() {
		t.Fatalf("%s saturated: %+v", what, r)
	}
	for name, q := range resourceValues(r) {
		if q < 0 || q > limits.MaxQuantity {
			t.Fatalf("%s: %s = %d, outside 0..%d", what, name, q, limits.MaxQuantity)
		}
	}
}

// checkMultiple asserts got is exactly n times each of one's quantities:
// no sum wrapped, saturated or went negative on the way.
func checkMultiple(t *testing.T, what string, got, one *framework.Resource, n int64) {
	t.Helper()
	if got.Saturated() {
		t.Fatalf("%s: node requests saturated: %+v", what, got)
	}
	g, o := resourceValues(got), resourceValues(one)
	for name, q := range o {
		if name == framework.ResourcePods {
			continue
		}
		if g[name] != n*q {
			t.Fatalf("%s: %s = %d, want %d × %d", what, name, g[name], n, q)
		}
	}
	for name, q := range g {
		if q < 0 {
			t.Fatalf("%s: %s = %d is negative", what, name, q)
		}
	}
}

type fuzzSeed struct{ pod, node []byte }

// fuzzSeeds are the hostile requests of issue 12 and ordinary ones, so the
// fuzzer starts on both sides of every bound.
func fuzzSeeds() []fuzzSeed {
	const maxInt64 = int64(^uint64(0) >> 1)
	ordinaryNode := &berthv1.Node{Name: "n1", Allocatable: map[string]int64{"cpu": 4000, "memory": 8 << 30, "pods": 110, "example.com/gpu": 2}}
	podWith := func(containers ...map[string]int64) *berthv1.Pod {
		p := &berthv1.Pod{Namespace: "ns", Name: "p", Overhead: map[string]int64{"cpu": 10}}
		for i, r := range containers {
			p.Containers = append(p.Containers, &berthv1.Container{Name: string(rune('a' + i)), Requests: r})
		}
		return p
	}
	withInit := podWith(map[string]int64{"cpu": 100})
	withInit.InitContainers = []*berthv1.Container{{Name: "init", Requests: map[string]int64{"cpu": 1 << 53, "memory": 1}}}
	badEnum := podWith(map[string]int64{"cpu": 1})
	badEnum.PreemptionPolicy = 99
	badEnum.Tolerations = []*berthv1.Toleration{{Key: "k", Operator: 77, Value: "a\x00b"}}
	pods := []*berthv1.Pod{
		podWith(map[string]int64{"cpu": 500, "memory": 1 << 20}, map[string]int64{"example.com/gpu": 1}),
		podWith(map[string]int64{"cpu": maxInt64}, map[string]int64{"cpu": maxInt64}),
		podWith(map[string]int64{"cpu": 1 << 62}, map[string]int64{"cpu": 1 << 62}),
		podWith(map[string]int64{"memory": 1<<53 - 10}),
		withInit,
		badEnum,
	}
	nodes := []*berthv1.Node{
		ordinaryNode,
		{Name: "huge", Allocatable: map[string]int64{"cpu": 1 << 53, "memory": 1 << 53}},
		{Name: "wrap", Allocatable: map[string]int64{"cpu": maxInt64, "memory": -1}},
	}
	var seeds []fuzzSeed
	for i, p := range pods {
		pb, _ := proto.Marshal(&berthv1.SubmitPodRequest{Pod: p})
		nb, _ := proto.Marshal(&berthv1.UpsertNodeRequest{Node: nodes[i%len(nodes)]})
		seeds = append(seeds, fuzzSeed{pb, nb})
	}
	return seeds
}
