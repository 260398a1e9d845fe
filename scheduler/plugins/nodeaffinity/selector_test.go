package nodeaffinity

import (
	"strings"
	"testing"

	"github.com/berth-io/berth/scheduler/framework"
)

func req(key string, op framework.NodeSelectorOperator, values ...string) framework.NodeSelectorRequirement {
	return framework.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func exprTerm(rs ...framework.NodeSelectorRequirement) framework.NodeSelectorTerm {
	return framework.NodeSelectorTerm{MatchExpressions: rs}
}

func fieldTerm(rs ...framework.NodeSelectorRequirement) framework.NodeSelectorTerm {
	return framework.NodeSelectorTerm{MatchFields: rs}
}

func node(name string, labels map[string]string) *framework.Node {
	return &framework.Node{Name: name, Labels: labels}
}

const (
	in           = framework.NodeSelectorOpIn
	notIn        = framework.NodeSelectorOpNotIn
	exists       = framework.NodeSelectorOpExists
	doesNotExist = framework.NodeSelectorOpDoesNotExist
	gt           = framework.NodeSelectorOpGt
	lt           = framework.NodeSelectorOpLt
)

// One requirement against one node, every operator and every parse rule
// of Kubernetes' label selector.
func TestLabelRequirement(t *testing.T) {
	labels := map[string]string{"zone": "a", "cores": "8", "word": "eight", "example.com/tier": "gold", "empty": ""}
	tests := []struct {
		name    string
		req     framework.NodeSelectorRequirement
		want    bool
		wantErr string // substring of the parse error; "" for none
	}{
		{name: "In match", req: req("zone", in, "b", "a"), want: true},
		{name: "In other value", req: req("zone", in, "b")},
		{name: "In missing key", req: req("region", in, "a")},
		{name: "In empty value", req: req("empty", in, ""), want: true},
		{name: "In no values", req: req("zone", in), wantErr: "must not be empty"},
		{name: "NotIn other value", req: req("zone", notIn, "b"), want: true},
		{name: "NotIn listed value", req: req("zone", notIn, "b", "a")},
		{name: "NotIn missing key", req: req("region", notIn, "a"), want: true},
		{name: "NotIn no values", req: req("zone", notIn), wantErr: "must not be empty"},
		{name: "Exists", req: req("zone", exists), want: true},
		{name: "Exists empty value", req: req("empty", exists), want: true},
		{name: "Exists missing", req: req("region", exists)},
		{name: "Exists with values", req: req("zone", exists, "a"), wantErr: "must be empty"},
		{name: "DoesNotExist missing", req: req("region", doesNotExist), want: true},
		{name: "DoesNotExist present", req: req("zone", doesNotExist)},
		{name: "DoesNotExist with values", req: req("region", doesNotExist, "x"), wantErr: "must be empty"},
		{name: "Gt true", req: req("cores", gt, "7"), want: true},
		{name: "Gt equal", req: req("cores", gt, "8")},
		// Kubernetes checks Gt and Lt values as label values too: no sign.
		{name: "Gt negative bound", req: req("cores", gt, "-1"), wantErr: "not a valid label value"},
		{name: "Lt true", req: req("cores", lt, "9"), want: true},
		{name: "Lt equal", req: req("cores", lt, "8")},
		{name: "Gt missing key", req: req("gpus", gt, "0")},
		{name: "Gt node value not an integer", req: req("word", gt, "1")},
		{name: "Lt node value not an integer", req: req("word", lt, "100")},
		{name: "Gt value not an integer", req: req("cores", gt, "seven"), wantErr: "not an integer"},
		{name: "Lt value overflows int64", req: req("cores", lt, "9223372036854775808"), wantErr: "not an integer"},
		{name: "Gt two values", req: req("cores", gt, "1", "2"), wantErr: "exactly one value"},
		{name: "Lt no value", req: req("cores", lt), wantErr: "exactly one value"},
		{name: "unknown operator", req: req("zone", "Equals", "a"), wantErr: "unsupported value"},
		{name: "prefixed key", req: req("example.com/tier", in, "gold"), want: true},
		{name: "key with space", req: req("bad key", doesNotExist), wantErr: "name part"},
		{name: "key too long", req: req(strings.Repeat("k", 64), doesNotExist), wantErr: "name part"},
		{name: "key empty", req: req("", doesNotExist), wantErr: "name part"},
		{name: "key empty prefix", req: req("/zone", doesNotExist), wantErr: "empty prefix"},
		{name: "key upper-case prefix", req: req("Example.com/zone", doesNotExist), wantErr: "DNS-1123"},
		{name: "key two slashes", req: req("a/b/c", doesNotExist), wantErr: "more than one"},
		{name: "invalid value", req: req("zone", notIn, "-a"), wantErr: "not a valid label value"},
		{name: "value too long", req: req("zone", notIn, strings.Repeat("v", 64)), wantErr: "not a valid label value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := parseNodeSelector(&framework.NodeSelector{NodeSelectorTerms: []framework.NodeSelectorTerm{exprTerm(tt.req)}}, "x")
			err := s.err()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("parse error = %v, want %q", err, tt.wantErr)
			}
			got, _ := s.match(node("n", labels))
			if got != tt.want {
				t.Errorf("match = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFieldRequirement(t *testing.T) {
	tests := []struct {
		name     string
		req      framework.NodeSelectorRequirement
		nodeName string
		want     bool
		wantErr  string
	}{
		{name: "In same name", req: req("metadata.name", in, "n1"), nodeName: "n1", want: true},
		{name: "In other name", req: req("metadata.name", in, "n2"), nodeName: "n1"},
		{name: "NotIn other name", req: req("metadata.name", notIn, "n2"), nodeName: "n1", want: true},
		{name: "NotIn same name", req: req("metadata.name", notIn, "n1"), nodeName: "n1"},
		{name: "fields ignored for a node without a name", req: req("metadata.name", in, "n2"), want: true},
		{name: "two values", req: req("metadata.name", in, "n1", "n2"), nodeName: "n1", wantErr: "exactly one element"},
		{name: "no values", req: req("metadata.name", in), nodeName: "n1", wantErr: "exactly one element"},
		{name: "other field", req: req("metadata.uid", in, "n1"), nodeName: "n1", wantErr: "unsupported field"},
		{name: "Exists on a field", req: req("metadata.name", exists), nodeName: "n1", wantErr: "only In and NotIn"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := parseNodeSelector(&framework.NodeSelector{NodeSelectorTerms: []framework.NodeSelectorTerm{fieldTerm(tt.req)}}, "x")
			err := s.err()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("parse error = %v, want %q", err, tt.wantErr)
			}
			got, _ := s.match(node(tt.nodeName, nil))
			if got != tt.want {
				t.Errorf("match = %v, want %v", got, tt.want)
			}
		})
	}
}

// RequiredNodeAffinity: NodeSelector AND the ORed terms, with Kubernetes'
// empty-list rules and lazy parse errors.
func TestRequiredNodeAffinityMatch(t *testing.T) {
	labels := map[string]string{"zone": "a", "disk": "ssd"}
	good := exprTerm(req("zone", in, "a"))
	miss := exprTerm(req("zone", in, "b"))
	bad := exprTerm(req("zone", gt, "x"))
	tests := []struct {
		name         string
		nodeSelector map[string]string
		required     *framework.NodeSelector
		want         bool
		wantErr      bool
	}{
		{name: "nothing required", want: true},
		{name: "node selector matches", nodeSelector: map[string]string{"zone": "a", "disk": "ssd"}, want: true},
		{name: "node selector value differs", nodeSelector: map[string]string{"zone": "a", "disk": "hdd"}},
		{name: "node selector key missing", nodeSelector: map[string]string{"gpu": ""}},
		{name: "required with no terms matches nothing", required: &framework.NodeSelector{}},
		{name: "a term with no requirements matches nothing", required: &framework.NodeSelector{NodeSelectorTerms: []framework.NodeSelectorTerm{{}}}},
		{name: "an empty term beside a matching one", required: &framework.NodeSelector{NodeSelectorTerms: []framework.NodeSelectorTerm{{}, good}}, want: true},
		{name: "terms are ORed", required: &framework.NodeSelector{NodeSelectorTerms: []framework.NodeSelectorTerm{miss, good}}, want: true},
		{name: "no term matches", required: &framework.NodeSelector{NodeSelectorTerms: []framework.NodeSelectorTerm{miss}}},
		{name: "requirements of a term are ANDed", required: &framework.NodeSelector{NodeSelectorTerms: []framework.NodeSelectorTerm{
			exprTerm(req("zone", in, "a"), req("disk", in, "hdd"))}}},
		{name: "expressions and fields are ANDed", required: &framework.NodeSelector{NodeSelectorTerms: []framework.NodeSelectorTerm{
			{MatchExpressions: []framework.NodeSelectorRequirement{req("zone", in, "a")}, MatchFields: []framework.NodeSelectorRequirement{req("metadata.name", in, "other")}}}}},
		{name: "a bad term is ignored when another matches", required: &framework.NodeSelector{NodeSelectorTerms: []framework.NodeSelectorTerm{bad, good}}, want: true},
		{name: "a bad term reports its error when none match", required: &framework.NodeSelector{NodeSelectorTerms: []framework.NodeSelectorTerm{bad, miss}}, wantErr: true},
		{name: "selector and affinity both needed", nodeSelector: map[string]string{"disk": "hdd"}, required: &framework.NodeSelector{NodeSelectorTerms: []framework.NodeSelectorTerm{good}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &framework.Pod{Name: "p", NodeSelector: tt.nodeSelector}
			if tt.required != nil {
				pod.Affinity = &framework.Affinity{NodeAffinity: &framework.NodeAffinity{Required: tt.required}}
			}
			got, err := GetRequiredNodeAffinity(pod).Match(node("n", labels))
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("Match = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestParsePreferredTerms(t *testing.T) {
	terms := []framework.PreferredSchedulingTerm{
		{Weight: 0, Preference: exprTerm(req("zone", gt, "x"))}, // weight 0: not even parsed
		{Weight: 3, Preference: framework.NodeSelectorTerm{}},   // empty: skipped
		{Weight: 5, Preference: exprTerm(req("zone", in, "a"))},
	}
	got, err := parsePreferredTerms(terms, "p")
	if err != nil || len(got) != 1 || got[0].weight != 5 {
		t.Fatalf("parsePreferredTerms = %+v, %v", got, err)
	}
	terms = append(terms, framework.PreferredSchedulingTerm{Weight: 1, Preference: exprTerm(req("zone", lt, "1.5"))})
	if _, err := parsePreferredTerms(terms, "p"); err == nil || !strings.Contains(err.Error(), "p[3].preference.matchExpressions[0]") {
		t.Errorf("error = %v, want one naming p[3]", err)
	}
}

func TestValidateLabelKeyPrefix(t *testing.T) {
	for key, ok := range map[string]bool{
		"a.b-c.d/x_y.z": true, "a/b": true, "9/x": true,
		"a..b/x": false, "-a/x": false, "a-/x": false, strings.Repeat("a", 254) + "/x": false, "a/-x": false,
	} {
		if err := validateLabelKey(key); (err == nil) != ok {
			t.Errorf("validateLabelKey(%q) = %v, want ok %v", key, err, ok)
		}
	}
}
