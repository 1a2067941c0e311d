package protocol

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Limits of OpenAI's strict mode (structured outputs and strict functions).
const (
	MaxStrictDepth      = 10   // nesting levels of objects
	MaxStrictProperties = 5000 // object properties in one schema
	MaxStrictEnumValues = 1000 // enum values in one schema
)

// strictRefused are the keywords strict mode does not permit anywhere in a
// schema (the composition ones of OpenAI's supported-schemas list).
var strictRefused = []string{"allOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas", "patternProperties", "oneOf"}

// strictChecker walks a schema as OpenAI's strict mode does and stops at
// the first thing it refuses. The message names where, as the API does: a
// Python tuple of the path's keys, "()" at the root.
type strictChecker struct {
	root  map[string]any
	props int
	enums int
}

// StrictSchemaProblem says why strict mode refuses schema, or "" when it
// takes it: the root must be an object; every object must set
// additionalProperties false and require every property; composition
// keywords other than anyOf are not permitted; local $refs must resolve;
// nesting, properties and enum values are bounded.
func StrictSchemaProblem(schema map[string]any) string {
	if schema == nil {
		return "schema must be a JSON Schema of 'type: \"object\"', got 'type: \"None\"'."
	}
	if t, _ := schema["type"].(string); t != "object" {
		got := "None"
		if t != "" {
			got = t
		}
		return fmt.Sprintf("schema must be a JSON Schema of 'type: \"object\"', got 'type: \"%s\"'.", got)
	}
	c := strictChecker{root: schema}
	return c.check(schema, nil, 0)
}

func (c *strictChecker) check(s map[string]any, path []string, depth int) string {
	for _, k := range strictRefused {
		if _, ok := s[k]; ok {
			return inContext(path, "'%s' is not permitted.", k)
		}
	}
	if ref, ok := s["$ref"]; ok {
		r, _ := ref.(string)
		if _, ok := c.resolve(r); !ok {
			return inContext(path, "reference '%v' can't be resolved.", ref)
		}
	}
	for _, defs := range []string{"$defs", "definitions"} {
		m, _ := s[defs].(map[string]any)
		for _, name := range sortedKeys(m) {
			sub, ok := m[name].(map[string]any)
			if !ok {
				return inContext(append(path, defs, name), "schema must be an object.")
			}
			if msg := c.check(sub, append(path[:len(path):len(path)], defs, name), depth); msg != "" {
				return msg
			}
		}
	}
	if e, ok := s["enum"].([]any); ok {
		if c.enums += len(e); c.enums > MaxStrictEnumValues {
			return inContext(path, "the schema has more than %d enum values.", MaxStrictEnumValues)
		}
	}
	if a, ok := s["anyOf"]; ok {
		branches, _ := a.([]any)
		if len(branches) == 0 {
			return inContext(path, "'anyOf' must be a non-empty array.")
		}
		for i, b := range branches {
			sub, ok := b.(map[string]any)
			at := append(path[:len(path):len(path)], "anyOf", strconv.Itoa(i))
			if !ok {
				return inContext(at, "schema must be an object.")
			}
			if msg := c.check(sub, at, depth); msg != "" {
				return msg
			}
		}
	}
	if hasType(s, "object") {
		if depth++; depth > MaxStrictDepth {
			return inContext(path, "the schema nests objects more than %d levels deep.", MaxStrictDepth)
		}
		if ap, ok := s["additionalProperties"].(bool); !ok || ap {
			return inContext(path, "'additionalProperties' is required to be supplied and to be false.")
		}
		props, _ := s["properties"].(map[string]any)
		if c.props += len(props); c.props > MaxStrictProperties {
			return inContext(path, "the schema has more than %d object properties.", MaxStrictProperties)
		}
		req, _ := s["required"].([]any)
		names := sortedKeys(props)
		for _, name := range names {
			if !slices.Contains(req, any(name)) {
				return inContext(path, "'required' is required to be supplied and to be an array including every key in properties. Missing '%s'.", name)
			}
		}
		for _, r := range req {
			if name, _ := r.(string); props[name] == nil {
				return inContext(path, "'required' is required to be supplied and to be an array including every key in properties. Extra required key '%v' supplied.", r)
			}
		}
		for _, name := range names {
			sub, ok := props[name].(map[string]any)
			at := append(path[:len(path):len(path)], "properties", name)
			if !ok {
				return inContext(at, "schema must be an object.")
			}
			if msg := c.check(sub, at, depth); msg != "" {
				return msg
			}
		}
	}
	if items, ok := s["items"]; ok && hasType(s, "array") {
		sub, ok := items.(map[string]any)
		at := append(path[:len(path):len(path)], "items")
		if !ok {
			return inContext(at, "schema must be an object.")
		}
		if msg := c.check(sub, at, depth); msg != "" {
			return msg
		}
	}
	return ""
}

// resolve finds a local reference: "#" or a JSON pointer into the schema.
func (c *strictChecker) resolve(ref string) (any, bool) {
	if ref == "#" {
		return c.root, true
	}
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, false
	}
	var at any = c.root
	for tok := range strings.SplitSeq(p, "/") {
		m, ok := at.(map[string]any)
		if !ok {
			return nil, false
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		if at, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return at, true
}

// hasType reports whether s's type is t or a list holding t.
func hasType(s map[string]any, t string) bool {
	switch v := s["type"].(type) {
	case string:
		return v == t
	case []any:
		return slices.Contains(v, any(t))
	}
	return false
}

// inContext is msg prefixed with path as the API writes it: a Python tuple.
func inContext(path []string, format string, args ...any) string {
	q := make([]string, len(path))
	for i, p := range path {
		b, _ := json.Marshal(p) // the API quotes with ', but a key may hold one
		q[i] = "'" + strings.ReplaceAll(strings.Trim(string(b), `"`), "'", `\'`) + "'"
	}
	tuple := "(" + strings.Join(q, ", ") + ")"
	if len(q) == 1 {
		tuple = "(" + q[0] + ",)"
	}
	return "In context=" + tuple + ", " + fmt.Sprintf(format, args...)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
