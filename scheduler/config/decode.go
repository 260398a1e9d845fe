package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The decoder below is a strict YAML-node-to-struct walker. It exists
// instead of yaml.Decoder.KnownFields because that reports only the first
// problem and names neither the field path nor, for type errors, the key;
// walking the node tree gives every problem with its path and line, and
// records the line of every field for the checks that follow decoding.
//
// Struct fields are matched by their yaml tag only (exact case, as kube's
// strict decoding); a field of type yaml.Node keeps the raw subtree.

var rawNodeType = reflect.TypeFor[yaml.Node]()

// Bounds on decoding, against alias bombs (the wire types are not
// recursive, so depth is a second line of defence).
const (
	maxDepth = 100
	maxNodes = 1 << 18
)

// decode fills v (addressable) from n, recording lines and problems under
// path.
func (p *problems) decode(n *yaml.Node, path string, v reflect.Value) {
	// Aliases may expand exponentially; real files are neither deep nor
	// large.
	p.depth++
	p.budget++
	defer func() { p.depth-- }()
	if p.depth > maxDepth || p.budget > maxNodes {
		if !p.exhausted {
			p.exhausted = true
			p.addf(path, "document too deep or too large (exploding aliases?)")
		}
		return
	}
	for n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if v.Type() == rawNodeType {
		v.Set(reflect.ValueOf(*n))
		return
	}
	if isNull(n) {
		return // as kube: null leaves the zero value
	}
	switch v.Kind() {
	case reflect.Pointer:
		elem := reflect.New(v.Type().Elem())
		p.decode(n, path, elem.Elem())
		v.Set(elem)
	case reflect.Struct:
		p.decodeStruct(n, path, v)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			p.addf(path, "want a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			ip := path + "[" + strconv.Itoa(i) + "]"
			p.lines[ip] = item.Line
			p.decode(item, ip, s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		p.decodeStringMap(n, path, v)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			p.addf(path, "want a string, got %s", describe(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Int32, reflect.Int64:
		var i int64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil {
			p.addf(path, "want an integer, got %s", describe(n))
			return
		}
		if v.OverflowInt(i) {
			p.addf(path, "%d does not fit in %d bits", i, v.Type().Bits())
			return
		}
		v.SetInt(i)
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			p.addf(path, "want true or false, got %s", describe(n))
			return
		}
		v.SetBool(b)
	default:
		panic(fmt.Sprintf("config: decode into unsupported kind %s", v.Kind()))
	}
}

func (p *problems) decodeStruct(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.MappingNode {
		p.addf(path, "want a mapping, got %s", describe(n))
		return
	}
	fields := yamlFields(v.Type())
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		fp := join(path, key.Value)
		p.lines[fp] = key.Line
		if seen[key.Value] {
			p.addf(fp, "field given twice")
			continue
		}
		seen[key.Value] = true
		idx, ok := fields[key.Value]
		if !ok {
			p.addf(fp, "%s", unknownFieldReason(v.Type(), key.Value))
			continue
		}
		p.decode(val, fp, v.FieldByIndex(idx))
	}
}

func (p *problems) decodeStringMap(n *yaml.Node, path string, v reflect.Value) {
	if v.Type().Key().Kind() != reflect.String || v.Type().Elem().Kind() != reflect.String {
		panic(fmt.Sprintf("config: decode into unsupported map %s", v.Type()))
	}
	if n.Kind != yaml.MappingNode {
		p.addf(path, "want a mapping, got %s", describe(n))
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		fp := join(path, key.Value)
		p.lines[fp] = key.Line
		k := reflect.New(v.Type().Key()).Elem()
		e := reflect.New(v.Type().Elem()).Elem()
		p.decode(key, fp, k)
		p.decode(val, fp, e)
		if m.MapIndex(k).IsValid() {
			p.addf(fp, "key given twice")
		}
		m.SetMapIndex(k, e)
	}
	v.Set(m)
}

// yamlFields maps yaml tag names to field index paths; ",inline" struct
// fields contribute their own fields.
func yamlFields(t reflect.Type) map[string][]int {
	out := map[string][]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case opts == "inline" && f.Type.Kind() == reflect.Struct:
			for n, idx := range yamlFields(f.Type) {
				out[n] = append([]int{i}, idx...)
			}
		case name != "" && name != "-":
			out[name] = []int{i}
		}
	}
	return out
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func isNull(n *yaml.Node) bool {
	return n.Kind == 0 || (n.Kind == yaml.DocumentNode && len(n.Content) == 0) ||
		(n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describe names what a node holds, for type errors.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return strconv.Quote(n.Value)
		case "!!int":
			return "integer " + n.Value
		case "!!float":
			return "number " + n.Value
		case "!!bool":
			return n.Value
		}
		return n.ShortTag() + " " + n.Value
	}
	return "an unsupported YAML node"
}
