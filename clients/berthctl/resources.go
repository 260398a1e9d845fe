package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The wire API carries resource amounts as integers (cpu in millicores,
// the rest in base units), in every map<string, int64> of its messages.
// People read and write them as Kubernetes quantities, so files are
// rewritten to integers before protojson reads them, and output is
// rewritten to quantities after protojson writes it. Both walks follow the
// message descriptor, so no resource map is missed or named by hand.

// isResourceMap reports whether fd is a map of resource amounts.
func isResourceMap(fd protoreflect.FieldDescriptor) bool {
	return fd.IsMap() && fd.MapKey().Kind() == protoreflect.StringKind && fd.MapValue().Kind() == protoreflect.Int64Kind
}

// fieldNamed finds a field by the names protojson accepts.
func fieldNamed(md protoreflect.MessageDescriptor, name string) protoreflect.FieldDescriptor {
	if fd := md.Fields().ByJSONName(name); fd != nil {
		return fd
	}
	return md.Fields().ByName(protoreflect.Name(name))
}

// subMessage is the message type behind fd's values, nil for scalars and
// well-known types (whose JSON is not an object of fields).
func subMessage(fd protoreflect.FieldDescriptor) protoreflect.MessageDescriptor {
	if fd.IsMap() {
		fd = fd.MapValue()
	}
	if fd.Message() == nil || strings.HasPrefix(string(fd.Message().FullName()), "google.protobuf.") {
		return nil
	}
	return fd.Message()
}

func joinPath(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

// amountsToWire rewrites, in v (decoded JSON or YAML meant for md), the
// quantity strings of resource maps into integers. Integer numbers are
// kept: they are the wire amounts, as protojson reads them. Errors name
// the field path from v.
func amountsToWire(v any, md protoreflect.MessageDescriptor, path string) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil // protojson reports the wrong shape
	}
	for key, val := range obj {
		fd := fieldNamed(md, key)
		if fd == nil {
			continue
		}
		fieldPath := joinPath(path, key)
		switch sub := subMessage(fd); {
		case isResourceMap(fd):
			amounts, ok := val.(map[string]any)
			if !ok {
				continue
			}
			for name, amount := range amounts {
				n, err := wireAmount(name, amount)
				if err != nil {
					return fmt.Errorf("%s.%s: %w", fieldPath, name, err)
				}
				amounts[name] = n
			}
		case sub == nil:
		case fd.IsMap():
			if m, ok := val.(map[string]any); ok {
				for k, e := range m {
					if err := amountsToWire(e, sub, fieldPath+"."+k); err != nil {
						return err
					}
				}
			}
		case fd.IsList():
			if list, ok := val.([]any); ok {
				for i, e := range list {
					if err := amountsToWire(e, sub, fmt.Sprintf("%s[%d]", fieldPath, i)); err != nil {
						return err
					}
				}
			}
		default:
			if err := amountsToWire(val, sub, fieldPath); err != nil {
				return err
			}
		}
	}
	return nil
}

// wireAmount turns one amount of a file into what protojson reads: a
// string is a quantity, an integer number the wire amount itself. Other
// numbers are refused rather than guessed at: "cpu: 1.5" would be cores
// where "cpu: 2" is millicores.
func wireAmount(resourceName string, amount any) (any, error) {
	var number string
	switch a := amount.(type) {
	case string:
		return parseQuantity(resourceName, a)
	case json.Number:
		number = a.String()
	case float64:
		number = strconv.FormatFloat(a, 'g', -1, 64)
	case int, int64, uint64: // YAML integers
		return amount, nil
	default:
		return nil, fmt.Errorf("%v is not an amount: want a quantity such as \"500m\" or \"1Gi\"", amount)
	}
	if _, err := strconv.ParseInt(number, 10, 64); err == nil {
		return amount, nil
	}
	return nil, fmt.Errorf("number %s is not a whole amount in %s: write a quantity as a string, e.g. %q", number, wireUnit(resourceName), number)
}

func wireUnit(resourceName string) string {
	if resourceName == "cpu" {
		return "millicores"
	}
	return "base units"
}

// humanTree is m as protojson writes it, in a YAML node tree that keeps the
// field order, with resource amounts as quantity strings.
func humanTree(m proto.Message) (*yaml.Node, error) {
	raw, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	root := doc.Content[0]
	if err := amountsToHuman(root, m.ProtoReflect().Descriptor()); err != nil {
		return nil, err
	}
	return root, nil
}

// amountsToHuman rewrites the integers of resource maps under n, a mapping
// for md, into quantity strings.
func amountsToHuman(n *yaml.Node, md protoreflect.MessageDescriptor) error {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		fd := fieldNamed(md, n.Content[i].Value)
		val := n.Content[i+1]
		if fd == nil {
			continue
		}
		sub := subMessage(fd)
		switch {
		case isResourceMap(fd):
			for j := 0; j+1 < len(val.Content); j += 2 {
				amount := val.Content[j+1]
				v, err := strconv.ParseInt(amount.Value, 10, 64)
				if err != nil {
					return fmt.Errorf("resource %s: amount %q: %w", val.Content[j].Value, amount.Value, err)
				}
				amount.Value, amount.Tag = formatQuantity(val.Content[j].Value, v), "!!str"
			}
		case sub == nil:
		case fd.IsMap():
			for j := 1; j < len(val.Content); j += 2 {
				if err := amountsToHuman(val.Content[j], sub); err != nil {
					return err
				}
			}
		case fd.IsList():
			for _, e := range val.Content {
				if err := amountsToHuman(e, sub); err != nil {
					return err
				}
			}
		default:
			if err := amountsToHuman(val, sub); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeJSON writes a node tree that came from JSON back as compact JSON.
func writeJSON(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		return writeJSON(buf, n.Content[0])
	case yaml.MappingNode, yaml.SequenceNode:
		open, closing := byte('['), byte(']')
		if n.Kind == yaml.MappingNode {
			open, closing = '{', '}'
		}
		buf.WriteByte(open)
		for i, c := range n.Content {
			if i > 0 {
				sep := byte(',')
				if n.Kind == yaml.MappingNode && i%2 == 1 {
					sep = ':'
				}
				buf.WriteByte(sep)
			}
			if err := writeJSON(buf, c); err != nil {
				return err
			}
		}
		buf.WriteByte(closing)
	case yaml.ScalarNode:
		if n.ShortTag() != "!!str" {
			buf.WriteString(n.Value) // numbers, booleans and null as protojson wrote them
			return nil
		}
		s, err := json.Marshal(n.Value)
		if err != nil {
			return err
		}
		buf.Write(s)
	default:
		return fmt.Errorf("unexpected YAML node kind %v", n.Kind)
	}
	return nil
}
