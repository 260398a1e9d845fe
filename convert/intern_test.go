package convert

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/proto"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
	"github.com/berth-io/berth/scheduler/framework"
)

// samePointer tells whether two maps are one map.
func samePointer[M ~map[string]V, V any](a, b M) bool {
	return fmt.Sprintf("%p", a) == fmt.Sprintf("%p", b)
}

func basicPod(name string) *berthv1.Pod {
	return &berthv1.Pod{
		Namespace: "ns", Name: name, Uid: "uid-" + name,
		Labels:       map[string]string{"app": "web", "tier": "front"},
		NodeSelector: map[string]string{"zone": "a"},
		Containers: []*berthv1.Container{{Name: "main", Image: "registry.example/app:1",
			Requests: map[string]int64{"cpu": 100, "memory": 256 << 20}}},
	}
}

func unschedulable(name string) *berthv1.Pod {
	p := basicPod(name)
	p.Status = &berthv1.PodStatus{Phase: berthv1.PodPhase_POD_PHASE_UNSCHEDULABLE,
		Message: "0/20000 nodes are available: 20000 Insufficient cpu. preemption: 0/20000 nodes are available: 20000 No preemption victims found for incoming pod."}
	return p
}

// Pods of one workload share their labels, selectors and containers.
func TestPodsShareEqualValues(t *testing.T) {
	a, b := PodToCore(basicPod("a"), 1), PodToCore(basicPod("b"), 2)
	if !samePointer(a.Labels, b.Labels) || !samePointer(a.NodeSelector, b.NodeSelector) {
		t.Error("equal labels or node selectors are not shared")
	}
	if &a.Containers[0] != &b.Containers[0] {
		t.Error("equal containers are not shared")
	}
	ua, ub := PodToCore(unschedulable("a"), 1), PodToCore(unschedulable("b"), 1)
	if unsafe.StringData(ua.StatusMessage()) != unsafe.StringData(ub.StatusMessage()) {
		t.Error("equal status messages are not shared")
	}
	if a.Name != "a" || b.Name != "b" || a.UID == b.UID {
		t.Errorf("names and uids must stay the pods' own: %s/%s %s/%s", a.Name, a.UID, b.Name, b.UID)
	}

	other := basicPod("c")
	other.Labels["tier"] = "back"
	other.Containers[0].Requests["cpu"] = 200
	c := PodToCore(other, 3)
	if samePointer(a.Labels, c.Labels) || c.Labels["tier"] != "back" {
		t.Errorf("different labels shared: %v", c.Labels)
	}
	if &a.Containers[0] == &c.Containers[0] || c.Containers[0].Requests["cpu"] != 200 {
		t.Errorf("different containers shared: %v", c.Containers)
	}
	if c.Containers[0].Image != "registry.example/app:1" || c.Containers[0].Requests["memory"] != 256<<20 {
		t.Errorf("container: %+v", c.Containers[0])
	}
}

// The table cannot be grown without bound by a client sending ever new
// values: it forgets everything when full, and ignores long strings and
// big maps outright.
func TestInternerIsBounded(t *testing.T) {
	in := newInterner()
	for i := range 3 * maxInterned {
		in.pod(&framework.Pod{
			Namespace:  fmt.Sprintf("value-%d", i),
			Labels:     map[string]string{"app": fmt.Sprint(i)},
			Extras:     &framework.PodExtras{Overhead: framework.ResourceList{"cpu": int64(i)}},
			Containers: []framework.Container{{Name: "c", Image: fmt.Sprint(i)}},
		})
		if in.entries >= maxInterned || in.keyBytes >= maxInternedBytes {
			t.Fatalf("after %d values the table holds %d entries, %d bytes of keys", i, in.entries, in.keyBytes)
		}
	}
	if n := len(in.strings) + len(in.stringMaps) + len(in.resources) + len(in.containers); n >= maxInterned {
		t.Errorf("tables hold %d entries, want < %d", n, maxInterned)
	}

	in = newInterner()
	long := strings.Repeat("x", maxInternedLen+1)
	big := map[string]string{}
	for i := range maxInternedMapLen + 1 {
		big[fmt.Sprint(i)] = "v"
	}
	in.pod(&framework.Pod{Namespace: long, Extras: &framework.PodExtras{StatusMessage: strings.Repeat("m", maxInternedKey+1)}, Labels: big})
	in.stringMap(map[string]string{"k": strings.Repeat("v", maxInternedKey)})
	in.pod(&framework.Pod{Containers: []framework.Container{{Name: "c", Ports: []framework.ContainerPort{{ContainerPort: 80}}}}})
	in.pod(&framework.Pod{Containers: []framework.Container{{Name: "c", Image: strings.Repeat("i", maxInternedKey)}}})
	if in.entries != 0 {
		t.Errorf("long, big or ported values were kept: %d entries", in.entries)
	}

	// Few but large values fill the table by their bytes.
	in = newInterner()
	for i := range maxInternedBytes / maxInternedKey * 2 {
		in.stringMap(map[string]string{fmt.Sprint(i): strings.Repeat("v", maxInternedKey-10)})
		if in.keyBytes >= maxInternedBytes {
			t.Fatalf("%d bytes of keys, want < %d", in.keyBytes, maxInternedBytes)
		}
	}

	// What was handed out before the table forgot stays valid and equal.
	in = newInterner()
	first := in.stringMap(map[string]string{"app": "web"})
	for i := range maxInterned {
		in.pod(&framework.Pod{Namespace: fmt.Sprint(i)})
	}
	again := in.stringMap(map[string]string{"app": "web"})
	if first["app"] != "web" || again["app"] != "web" || len(first) != 1 {
		t.Errorf("after forgetting: %v %v", first, again)
	}
}

// Keys are canonical: maps equal in content share whatever their order,
// and different contents never collide.
func TestInternKeysAreCanonical(t *testing.T) {
	in := newInterner()
	a := in.stringMap(map[string]string{"a": "1", "b": "2", "c": "3"})
	b := in.stringMap(map[string]string{"c": "3", "b": "2", "a": "1"})
	if !samePointer(a, b) {
		t.Error("equal maps built in another order are not shared")
	}
	x := in.stringMap(map[string]string{"ab": "c"})
	y := in.stringMap(map[string]string{"a": "bc"})
	if samePointer(x, y) || x["ab"] != "c" || y["a"] != "bc" {
		t.Errorf("different maps collided: %v %v", x, y)
	}
	p1 := &framework.Pod{Extras: &framework.PodExtras{Overhead: framework.ResourceList{"cpu": 1, "memory": -1}}}
	p2 := &framework.Pod{Extras: &framework.PodExtras{Overhead: framework.ResourceList{"cpu": 1, "memory": 1}}}
	in.pod(p1)
	in.pod(p2)
	if samePointer(p1.Overhead(), p2.Overhead()) {
		t.Error("different resource lists collided")
	}
	if got := in.stringMap(nil); got != nil {
		t.Errorf("nil map came back as %v", got)
	}
}

// BenchmarkStoredPodToCore converts a basic pod as the watch delivers it;
// run with -benchmem: what it keeps is what every pod costs the core.
func BenchmarkStoredPodToCore(b *testing.B) {
	p := basicPod("p")
	stored := []byte("stored")
	b.ReportAllocs()
	for b.Loop() {
		StoredPodToCore(p, stored, 1)
	}
}

// BenchmarkStoredValuesToCoreParallel converts bound pods of a large
// cluster from their stored values on every core, as a restart's bulk load
// does: run with -cpu 1,2 to see whether conversions scale with cores or
// queue on the interner.
func BenchmarkStoredValuesToCoreParallel(b *testing.B) {
	const nodes, pods = 100000, 1 << 16
	values := make([][]byte, pods)
	for i := range values {
		p := basicPod(fmt.Sprintf("p-%d", i))
		p.NodeName = fmt.Sprintf("node-%06d", i*7919%nodes)
		v, err := proto.Marshal(p)
		if err != nil {
			b.Fatal(err)
		}
		values[i] = v
	}
	var workers atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		// Each worker walks the values from its own offset, sharing no
		// counter with the others.
		i := workers.Add(1) * 7919
		for pb.Next() {
			i++
			if _, err := StoredValueToCore(values[i%pods], i, true); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
