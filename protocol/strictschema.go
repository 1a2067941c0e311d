package protocol

import (
	"fmt"
	"net/url"
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
// Python tuple of the path's keys, "()" at the root. References are not
// followed (each definition is checked where it is defined), so cycles
// cannot loop; every keyword's nesting counts against maxStrictNesting.
type strictChecker struct {
	root  map[string]any
	path  []string // where the walk is: pushed and popped, copied only into a message
	props int
	enums int
}

// maxStrictNesting bounds the walk's recursion through any keyword
// (anyOf, items, $defs as well as properties), so that a deep chain costs
// a refusal, not the stack.
const maxStrictNesting = 64

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
	return c.check(schema, 0)
}

// sub checks s at the path's key(s) below the current place.
func (c *strictChecker) sub(v any, depth int, keys ...string) string {
	c.path = append(c.path, keys...)
	defer func() { c.path = c.path[:len(c.path)-len(keys)] }()
	s, ok := v.(map[string]any)
	if !ok {
		return c.at("schema must be an object.")
	}
	if len(c.path) > maxStrictNesting {
		return c.at("the schema nests more than %d keywords deep.", maxStrictNesting)
	}
	return c.check(s, depth)
}

// at is msg at the current place.
func (c *strictChecker) at(format string, args ...any) string {
	return inContext(c.path, format, args...)
}

func (c *strictChecker) check(s map[string]any, depth int) string {
	for _, k := range strictRefused {
		if _, ok := s[k]; ok {
			return c.at("'%s' is not permitted.", k)
		}
	}
	if ref, ok := s["$ref"]; ok {
		r, _ := ref.(string)
		if _, ok := ResolveLocalRef(c.root, r); !ok {
			return c.at("reference '%v' can't be resolved.", ref)
		}
	}
	for _, defs := range []string{"$defs", "definitions"} {
		m, _ := s[defs].(map[string]any)
		for _, name := range sortedKeys(m) {
			if msg := c.sub(m[name], depth, defs, name); msg != "" {
				return msg
			}
		}
	}
	if e, ok := s["enum"].([]any); ok {
		if c.enums += len(e); c.enums > MaxStrictEnumValues {
			return c.at("the schema has more than %d enum values.", MaxStrictEnumValues)
		}
	}
	if a, ok := s["anyOf"]; ok {
		branches, _ := a.([]any)
		if len(branches) == 0 {
			return c.at("'anyOf' must be a non-empty array.")
		}
		for i, b := range branches {
			if msg := c.sub(b, depth, "anyOf", strconv.Itoa(i)); msg != "" {
				return msg
			}
		}
	}
	if hasType(s, "object") {
		if depth++; depth > MaxStrictDepth {
			return c.at("the schema nests objects more than %d levels deep.", MaxStrictDepth)
		}
		if ap, ok := s["additionalProperties"].(bool); !ok || ap {
			return c.at("'additionalProperties' is required to be supplied and to be false.")
		}
		props, _ := s["properties"].(map[string]any)
		if c.props += len(props); c.props > MaxStrictProperties {
			return c.at("the schema has more than %d object properties.", MaxStrictProperties)
		}
		req, _ := s["required"].([]any)
		required := make(map[string]bool, len(req))
		for _, r := range req {
			name, _ := r.(string)
			if props[name] == nil {
				return c.at("'required' is required to be supplied and to be an array including every key in properties. Extra required key '%v' supplied.", r)
			}
			required[name] = true
		}
		names := sortedKeys(props)
		for _, name := range names {
			if !required[name] {
				return c.at("'required' is required to be supplied and to be an array including every key in properties. Missing '%s'.", name)
			}
		}
		for _, name := range names {
			if msg := c.sub(props[name], depth, "properties", name); msg != "" {
				return msg
			}
		}
	}
	if items, ok := s["items"]; ok && hasType(s, "array") {
		if msg := c.sub(items, depth, "items"); msg != "" {
			return msg
		}
	}
	return ""
}

// ResolveLocalRef finds a reference inside root: "#", or a JSON pointer
// after "#" (percent-decoded, as encodeURIComponent writes names; ~0 and
// ~1 unescaped; array indexes taken). Nothing outside root is ever read.
func ResolveLocalRef(root map[string]any, ref string) (any, bool) {
	if ref == "#" {
		return root, true
	}
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, false
	}
	if u, err := url.PathUnescape(p); err == nil {
		p = u
	}
	var at any = root
	for tok := range strings.SplitSeq(p, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch cur := at.(type) {
		case map[string]any:
			if at, ok = cur[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(cur) {
				return nil, false
			}
			at = cur[i]
		default:
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

// inContext is msg prefixed with path as the API writes it: a Python tuple
// of quoted keys.
func inContext(path []string, format string, args ...any) string {
	q := make([]string, len(path))
	for i, p := range path {
		q[i] = "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`, "\n", `\n`).Replace(p) + "'"
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
