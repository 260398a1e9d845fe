package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// readFile opens path, or stdin for "-".
func readFile(path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(path)
}

// readMessages reads the messages of a -f file (or stdin for "-"); errors
// name the file.
func readMessages[T proto.Message](path string, stdin io.Reader, newMsg func() T) ([]T, error) {
	data, err := readFile(path, stdin)
	if err != nil {
		return nil, err
	}
	msgs, err := decodeMessages(data, newMsg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return msgs, nil
}

// specsFromFileOrFlags returns what a create-style command acts on: the
// messages of -f FILE (then no NAME and no spec flag may be given), or the
// one message the spec flags describe for the NAME argument.
func specsFromFileOrFlags[T proto.Message](c *cli, fs *pflag.FlagSet, file string, specFlags, args []string, newMsg func() T, build func(name string) (T, error)) ([]T, error) {
	if file == "" {
		if err := wantArgs(args, "NAME"); err != nil {
			return nil, err
		}
		msg, err := build(args[0])
		if err != nil {
			return nil, err
		}
		return []T{msg}, nil
	}
	if err := wantArgs(args); err != nil {
		return nil, err
	}
	if err := conflictsWithFile(fs, specFlags); err != nil {
		return nil, err
	}
	return readMessages(file, c.stdin, newMsg)
}

// decodeMessages reads messages of one type from JSON or YAML. The input
// may hold one object, a list of objects, several YAML documents, or a
// stream of JSON values (e.g. one object per line); lists and single objects
// mix freely. Field names are the proto JSON names (lowerCamel, or the
// original snake_case), enums their proto names, as protojson accepts them.
func decodeMessages[T proto.Message](data []byte, newMsg func() T) ([]T, error) {
	var docs []any
	var err error
	if looksLikeJSON(data) {
		docs, err = jsonDocuments(data)
	} else {
		docs, err = yamlDocuments(data)
	}
	if err != nil {
		return nil, err
	}
	var out []T
	for i, doc := range docs {
		items := []any{doc}
		if list, ok := doc.([]any); ok {
			items = list
		}
		for j, item := range items {
			m := newMsg()
			item = unwrapResponse(item, m.ProtoReflect().Descriptor())
			if err := amountsToWire(item, m.ProtoReflect().Descriptor(), ""); err != nil {
				return nil, fmt.Errorf("document %d, item %d: %w", i+1, j+1, err)
			}
			raw, err := json.Marshal(item)
			if err != nil {
				return nil, fmt.Errorf("document %d, item %d: %w", i+1, j+1, err)
			}
			if err := protojson.Unmarshal(raw, m); err != nil {
				// The position is in the JSON made here, not in the file;
				// protojson's unstable spacing is made plain.
				msg := internalPosition.ReplaceAllString(strings.ReplaceAll(err.Error(), "\u00a0", " "), "")
				return nil, fmt.Errorf("document %d, item %d: %s", i+1, j+1, msg)
			}
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no objects found")
	}
	return out, nil
}

// internalPosition is how protojson errors give a position.
var internalPosition = regexp.MustCompile(`\(line \d+:\d+\): `)

// unwrapResponse finds the object in what a get or apply command printed
// with -o json or yaml, e.g. the node of {node: ..., usage: ...}, so that
// output can be fed back with -f. Anything holding a field of md is md
// itself and stays as it is.
func unwrapResponse(item any, md protoreflect.MessageDescriptor) any {
	obj, ok := item.(map[string]any)
	if !ok {
		return item
	}
	for key := range obj {
		if fieldNamed(md, key) != nil {
			return item
		}
	}
	name := string(md.Name())
	if inner, ok := obj[strings.ToLower(name[:1])+name[1:]].(map[string]any); ok {
		return inner
	}
	return item
}

// looksLikeJSON is true when the input starts with '{' or '['. Such input is
// read as JSON because YAML rejects some valid JSON (tab indentation).
func looksLikeJSON(data []byte) bool {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	return len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[')
}

func jsonDocuments(data []byte) ([]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // keep int64 values exact
	var docs []any
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", len(docs)+1, err)
		}
		docs = append(docs, v)
	}
}

func yamlDocuments(data []byte) ([]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []any
	for n := 1; ; n++ {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", n, err)
		}
		if v == nil {
			continue // an empty document, e.g. a trailing "---"
		}
		docs = append(docs, jsonCompatible(v))
	}
}

// jsonCompatible rewrites what YAML decodes into values encoding/json can
// marshal: mappings with non-string keys (such as a label "1: x") become
// string-keyed.
func jsonCompatible(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = jsonCompatible(e)
		}
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = jsonCompatible(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = jsonCompatible(e)
		}
	}
	return v
}
