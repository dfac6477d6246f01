// Field paths: a walk of the YAML tree beside the Go types it decodes into,
// which names unknown fields by their full path (with a guess at the field
// meant) and records the line of every known one, so validation problems
// can point into the file.

package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

var configType = reflect.TypeFor[Config]()

// maxWalk bounds the nodes one walk visits, aliases followed, so a file of
// aliases of aliases (a "billion laughs") cannot make it run for ever;
// yaml's decoder refuses such a file on its own terms.
const maxWalk = 100_000

// fieldWalk is one walk of a YAML tree beside the Config type.
type fieldWalk struct {
	lines   map[string]int // key: field path; value: the line it is on
	unknown Problems       // one per mapping key with no field
	visited int            // nodes seen so far
	cut     bool           // reports whether maxWalk stopped the walk early

	fields map[reflect.Type]map[string]reflect.Type // key: struct type; value: its yamlFields
}

// walkFields walks root, which decodes into a Config.
func walkFields(root *yaml.Node) *fieldWalk {
	w := &fieldWalk{lines: make(map[string]int), fields: make(map[reflect.Type]map[string]reflect.Type)}
	w.node(root, configType, "")
	return w
}

// node walks n, which decodes into a value of type t at path.
func (w *fieldWalk) node(n *yaml.Node, t reflect.Type, path string) {
	for n != nil && (n.Kind == yaml.DocumentNode || n.Kind == yaml.AliasNode) {
		if n.Kind == yaml.DocumentNode {
			if len(n.Content) == 0 {
				return
			}
			n = n.Content[0]
		} else {
			n = n.Alias
		}
	}
	if n == nil {
		return
	}
	if w.visited++; w.visited > maxWalk {
		w.cut = true
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fields, ok := w.fields[t]
		if !ok {
			fields = yamlFields(t)
			w.fields[t] = fields
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" && k.Tag == "!!merge" {
				w.merge(v, t, path)
				continue
			}
			at := join(path, k.Value)
			ft, ok := fields[k.Value]
			if !ok {
				msg := "unknown field"
				if guess := closest(k.Value, fields); guess != "" {
					msg += fmt.Sprintf("; did you mean %q?", guess)
				}
				w.unknown = append(w.unknown, Problem{Path: at, Msg: msg, Line: k.Line})
				continue
			}
			w.lines[at] = k.Line
			w.node(v, ft, at)
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, item := range n.Content {
			at := fmt.Sprintf("%s[%d]", path, i)
			w.lines[at] = item.Line
			w.node(item, t.Elem(), at)
		}
	case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			at := join(path, n.Content[i].Value)
			w.lines[at] = n.Content[i].Line
			w.node(n.Content[i+1], t.Elem(), at)
		}
	}
	// Anything else is a scalar, or a shape yaml itself reports as a type
	// error.
}

// merge walks the value of a "<<" merge key: one mapping, or a list of
// them, merged into the struct at path.
func (w *fieldWalk) merge(v *yaml.Node, t reflect.Type, path string) {
	if v.Kind == yaml.SequenceNode {
		for _, item := range v.Content {
			w.node(item, t, path)
		}
		return
	}
	w.node(v, t, path)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlFields maps the YAML keys of struct type t to their field types, the
// way yaml.v3 reads tags: the name before the first comma, the lowercased
// field name when that is empty, "-" skipped, inline structs flattened.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	fields := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, inline := yamlKey(f)
		switch {
		case inline:
			for k, v := range yamlFields(f.Type) {
				fields[k] = v
			}
		case name != "":
			fields[name] = f.Type
		}
	}
	return fields
}

// yamlKey is the YAML key of struct field f, as yaml.v3 reads its tag, or
// "" for a field yaml skips; inline reports whether its fields are its
// struct's own.
func yamlKey(f reflect.StructField) (name string, inline bool) {
	if !f.IsExported() && !f.Anonymous {
		return "", false
	}
	name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	switch {
	case name == "-":
		return "", false
	case strings.Contains(","+opts+",", ",inline,"):
		return "", true
	case name == "":
		return strings.ToLower(f.Name), false
	}
	return name, false
}

// closest is the known field name nearest to key, within two edits, or "".
func closest(key string, fields map[string]reflect.Type) string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	sort.Strings(names) // ties go to the same name every time
	best, bestDist := "", 3
	for _, n := range names {
		if d := editDistance(key, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
