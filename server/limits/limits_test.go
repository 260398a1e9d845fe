package limits

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	berthv1 "github.com/berth-io/berth/proto/berth/v1"
)

func validPod() *berthv1.Pod {
	return &berthv1.Pod{
		Namespace:  "shop",
		Name:       "web",
		Labels:     map[string]string{"app": "web"},
		Containers: []*berthv1.Container{{Name: "c", Image: "shop/web:1", Requests: map[string]int64{"cpu": 500}}},
		Tolerations: []*berthv1.Toleration{{
			Key:      "dedicated",
			Operator: berthv1.TolerationOperator_TOLERATION_OPERATOR_EQUAL,
			Value:    "gpu",
			Effect:   berthv1.TaintEffect_TAINT_EFFECT_NO_SCHEDULE,
		}},
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(p *berthv1.Pod)
		field  string // "" when the pod must pass
		desc   string
	}{
		{name: "valid", mutate: func(*berthv1.Pod) {}},
		{
			name:   "unknown enum",
			mutate: func(p *berthv1.Pod) { p.PreemptionPolicy = 99 },
			field:  "pod.preemption_policy", desc: "unknown PreemptionPolicy value 99",
		},
		{
			// The walk reuses one path node per level: a violation deep
			// in a tree of lists, maps and messages still names its own.
			name: "NUL deep in an anti-affinity term",
			mutate: func(p *berthv1.Pod) {
				p.Affinity = &berthv1.Affinity{PodAntiAffinity: &berthv1.PodAntiAffinity{Required: []*berthv1.PodAffinityTerm{
					{TopologyKey: "zone", LabelSelector: &berthv1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
					{TopologyKey: "zone", LabelSelector: &berthv1.LabelSelector{
						MatchLabels: map[string]string{"tier": "front"},
						MatchExpressions: []*berthv1.LabelSelectorRequirement{{
							Key: "app", Operator: berthv1.LabelSelectorOperator_LABEL_SELECTOR_OPERATOR_IN, Values: []string{"web", "a\x00b"},
						}},
					}},
				}}}
			},
			field: "pod.affinity.pod_anti_affinity.required[1].label_selector.match_expressions[0].values[1]", desc: "must not contain a NUL byte",
		},
		{
			name:   "unknown enum in a list",
			mutate: func(p *berthv1.Pod) { p.Tolerations[0].Operator = 77 },
			field:  "pod.tolerations[0].operator", desc: "unknown TolerationOperator value 77",
		},
		{
			name: "unknown enum deep in a spread constraint",
			mutate: func(p *berthv1.Pod) {
				p.TopologySpreadConstraints = []*berthv1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: 42}}
			},
			field: "pod.topology_spread_constraints[0].when_unsatisfiable", desc: "unknown UnsatisfiableConstraintAction value 42",
		},
		{
			name: "too many tolerations",
			mutate: func(p *berthv1.Pod) {
				for range 200 {
					p.Tolerations = append(p.Tolerations, &berthv1.Toleration{Operator: berthv1.TolerationOperator_TOLERATION_OPERATOR_EXISTS})
				}
			},
			field: "pod.tolerations", desc: "at most 128 entries, got 201",
		},
		{
			name:   "long string",
			mutate: func(p *berthv1.Pod) { p.Tolerations[0].Value = strings.Repeat("v", 2000) },
			field:  "pod.tolerations[0].value", desc: "at most 1024 bytes, got 2000",
		},
		{
			name:   "NUL byte",
			mutate: func(p *berthv1.Pod) { p.Tolerations[0].Value = "a\x00b" },
			field:  "pod.tolerations[0].value", desc: "must not contain a NUL byte",
		},
		{
			name:   "long map value",
			mutate: func(p *berthv1.Pod) { p.Labels["app"] = strings.Repeat("x", 1025) },
			field:  "pod.labels[app]", desc: "at most 1024 bytes, got 1025",
		},
		{
			name:   "image may be long, within its bound",
			mutate: func(p *berthv1.Pod) { p.Containers[0].Image = strings.Repeat("i", 4000) },
		},
		{
			name: "object too large",
			mutate: func(p *berthv1.Pod) {
				for i := range 60 {
					p.Containers = append(p.Containers, &berthv1.Container{Name: "c", Image: strings.Repeat(string(rune('a'+i%26)), 4096)})
				}
				for range 64 {
					p.Tolerations = append(p.Tolerations, &berthv1.Toleration{Key: "k", Value: strings.Repeat("v", 1024)})
				}
			},
			field: "pod", desc: "a stored object may be at most 262144",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := validPod()
			tt.mutate(p)
			got := Berth().Check(&berthv1.SubmitPodRequest{Pod: p})
			if tt.field == "" {
				if len(got) != 0 {
					t.Fatalf("want no violation, got %v", got)
				}
				return
			}
			if len(got) != 1 || got[0].Field != tt.field || !strings.Contains(got[0].Description, tt.desc) {
				t.Fatalf("want one violation of %s containing %q, got %v", tt.field, tt.desc, got)
			}
		})
	}
}

func TestViolationsAreBounded(t *testing.T) {
	p := validPod()
	for i := range 100 {
		p.Tolerations = append(p.Tolerations, &berthv1.Toleration{Operator: berthv1.TolerationOperator(100 + i)})
	}
	if got := Berth().Check(&berthv1.SubmitPodRequest{Pod: p}); len(got) != maxViolations {
		t.Fatalf("want %d violations at most, got %d", maxViolations, len(got))
	}
}

// TestOverridesNameRealFields keeps the override table honest: a field that
// is renamed or removed from the API must not silently lose its bound.
func TestOverridesNameRealFields(t *testing.T) {
	l := Berth()
	for name := range l.Fields {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(name)
		if err != nil {
			t.Errorf("override %s names no field: %v", name, err)
			continue
		}
		fd, ok := d.(protoreflect.FieldDescriptor)
		if !ok || !(fd.IsList() || fd.IsMap() || fd.Kind() == protoreflect.StringKind || fd.Kind() == protoreflect.BytesKind) {
			t.Errorf("override %s is not a list, map, string or bytes field", name)
		}
	}
	for name := range l.Objects {
		if _, err := protoregistry.GlobalFiles.FindDescriptorByName(name); err != nil {
			t.Errorf("object %s names no message: %v", name, err)
		}
	}
}

func TestQuantities(t *testing.T) {
	const maxInt64 = int64(^uint64(0) >> 1)
	pod := func(containers []map[string]int64, init []map[string]int64, overhead map[string]int64) *berthv1.Pod {
		p := &berthv1.Pod{Overhead: overhead}
		for _, r := range containers {
			p.Containers = append(p.Containers, &berthv1.Container{Requests: r})
		}
		for _, r := range init {
			p.InitContainers = append(p.InitContainers, &berthv1.Container{Requests: r})
		}
		return p
	}
	tests := []struct {
		name  string
		pod   *berthv1.Pod
		field string
	}{
		{name: "ordinary", pod: pod([]map[string]int64{{"cpu": 500}, {"cpu": 250}}, nil, map[string]int64{"cpu": 10})},
		{name: "at the limit", pod: pod([]map[string]int64{{"cpu": MaxQuantity}}, nil, nil)},
		{name: "one value over", pod: pod([]map[string]int64{{"cpu": maxInt64}}, nil, nil), field: "pod.containers[0].requests[cpu]"},
		{name: "two values that wrap int64", pod: pod([]map[string]int64{{"cpu": 1 << 62}, {"cpu": 1 << 62}}, nil, nil), field: "pod.containers[0].requests[cpu]"},
		{name: "sum over", pod: pod([]map[string]int64{{"memory": MaxQuantity}, {"memory": 1}}, nil, nil), field: "pod"},
		{name: "overhead pushes over", pod: pod([]map[string]int64{{"cpu": MaxQuantity}}, nil, map[string]int64{"cpu": 10}), field: "pod"},
		{name: "init container plus overhead over", pod: pod([]map[string]int64{{"cpu": 1}}, []map[string]int64{{"cpu": MaxQuantity}}, map[string]int64{"cpu": 1}), field: "pod"},
		// Each total within the bound though everything together is not:
		// the totals are summed per resource, and init containers by max.
		{name: "two resources at the limit", pod: pod([]map[string]int64{{"cpu": MaxQuantity, "memory": MaxQuantity}}, nil, nil)},
		{name: "init containers at the limit", pod: pod(nil, []map[string]int64{{"cpu": MaxQuantity}, {"cpu": MaxQuantity}}, nil)},
		{name: "negative", pod: pod([]map[string]int64{{"cpu": -1}}, nil, nil), field: "pod.containers[0].requests[cpu]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Quantities("pod", tt.pod)
			if tt.field == "" {
				if len(got) != 0 {
					t.Fatalf("want no violation, got %v", got)
				}
				return
			}
			if len(got) == 0 || got[0].Field != tt.field {
				t.Fatalf("want a violation of %s, got %v", tt.field, got)
			}
		})
	}
}

// BenchmarkCheckPod is the check every submitted pod passes.
func BenchmarkCheckPod(b *testing.B) {
	l := Berth()
	p := validPod()
	p.Labels = map[string]string{"app": "web", "tier": "front", "team": "shop"}
	b.ReportAllocs()
	for b.Loop() {
		if v := l.Check(p); len(v) != 0 {
			b.Fatal(v)
		}
	}
}

// Nesting deeper than the checker's levels takes nodes from the heap, and
// the paths stay whole.
func TestPathsDeeperThanTheLevels(t *testing.T) {
	c := &checker{}
	var p *fieldPath
	want := ""
	for i := range maxPathDepth + 3 {
		p = c.push(p, pathItem)
		p.index = i
		want += "[" + strconv.Itoa(i) + "]"
	}
	if got := p.String(); got != want {
		t.Fatalf("path = %q, want %q", got, want)
	}
	for range maxPathDepth + 3 {
		c.pop()
	}
	if c.depth != 0 {
		t.Fatalf("after popping every level: depth %d", c.depth)
	}
}

// The walk's size bound spares proto.Size only if it is never below the
// encoded size. Every field of every message in the API, set alone at its
// widest encoding (negative varints take ten bytes; lists, maps and nested
// messages filled the same way), and then all of them together with
// unknown bytes, must be bounded from above.
func TestSizeBoundCoversTheEncoding(t *testing.T) {
	files := []protoreflect.FileDescriptor{berthv1.File_berth_v1_types_proto, berthv1.File_berth_v1_pod_service_proto,
		berthv1.File_berth_v1_cluster_service_proto, berthv1.File_berth_v1_scheduler_service_proto}
	check := func(m protoreflect.Message, what string) {
		c := newChecker()
		c.limits = &Limits{MaxString: 1 << 20, MaxItems: 1 << 20, MaxObjectBytes: 1 << 30}
		if bound, exact := c.message(nil, m), proto.Size(m.Interface()); bound < int64(exact) {
			t.Errorf("%s: bound %d is below the encoded size %d", what, bound, exact)
		}
	}
	checked := 0
	for _, f := range files {
		msgs := f.Messages()
		for i := range msgs.Len() {
			md := msgs.Get(i)
			mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
			if err != nil {
				t.Fatal(err)
			}
			for j := range md.Fields().Len() {
				m := mt.New()
				fillField(m, md.Fields().Get(j), 2)
				check(m, string(md.Fields().Get(j).FullName()))
				checked++
			}
			m := mt.New()
			fill(m, 2)
			m.SetUnknown(protowire.AppendBytes(protowire.AppendTag(nil, 9999, protowire.BytesType), []byte("unknown")))
			check(m, string(md.FullName())+" with every field")
		}
	}
	if checked < 100 {
		t.Fatalf("only %d fields checked", checked)
	}
}

// An object over the limit whose size is all unknown fields, which no
// field bound sees, is still refused.
func TestUnknownBytesCountTowardsTheObject(t *testing.T) {
	p := validPod()
	p.ProtoReflect().SetUnknown(protowire.AppendBytes(protowire.AppendTag(nil, 9999, protowire.BytesType), make([]byte, MaxObjectBytes)))
	got := Berth().Check(&berthv1.SubmitPodRequest{Pod: p})
	if len(got) != 1 || got[0].Field != "pod" || !strings.Contains(got[0].Description, "a stored object may be at most") {
		t.Fatalf("want the pod refused as too large, got %v", got)
	}
}

// fill sets every field of m, depth levels of messages deep, to a value of
// its kind's widest encoding.
func fill(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fillField(m, fields.Get(i), depth)
	}
}

func fillField(m protoreflect.Message, fd protoreflect.FieldDescriptor, depth int) {
	switch {
	case fd.IsMap():
		mp := m.Mutable(fd).Map()
		for _, k := range []string{"a", "b"} {
			key := protoreflect.ValueOfString(k).MapKey()
			switch {
			case fd.MapKey().Kind() != protoreflect.StringKind:
			case fd.MapValue().Message() != nil:
				if depth > 0 {
					fill(mp.Mutable(key).Message(), depth-1)
				}
			default:
				mp.Set(key, widest(fd.MapValue(), mp.NewValue()))
			}
		}
	case fd.IsList():
		list := m.Mutable(fd).List()
		for range 2 {
			switch {
			case fd.Message() == nil:
				list.Append(widest(fd, list.NewElement()))
			case depth > 0:
				v := list.NewElement()
				fill(v.Message(), depth-1)
				list.Append(v)
			}
		}
	case fd.ContainingOneof() != nil && m.WhichOneof(fd.ContainingOneof()) != nil:
		// One member of a oneof is set already.
	case fd.Message() != nil:
		if depth > 0 {
			fill(m.Mutable(fd).Message(), depth-1)
		}
	default:
		m.Set(fd, widest(fd, m.NewField(fd)))
	}
}

// widest is a value of fd's kind that takes the most bytes to encode.
func widest(fd protoreflect.FieldDescriptor, zero protoreflect.Value) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("widest")
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte("widest"))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(-1)
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(math.MinInt32)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(math.MinInt64)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(math.MaxUint32)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(math.MaxUint64)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(-1.5)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(-1.5)
	}
	return zero
}
