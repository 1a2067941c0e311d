package sampler

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tether-run/tether/protocol"
)

// Bounds on the work one schema may cause: nesting depth, and values
// generated in all (self-referencing schemas can branch exponentially).
const (
	maxSchemaDepth  = 10
	maxSchemaValues = 256
)

// argGen derives plausible arguments from a JSON schema. It tolerates any
// input: what it cannot understand becomes a short string, and the top level
// is always an object.
type argGen struct {
	root  any    // the decoded schema, for local $ref
	words string // a few words of the user's text, for free-text fields
	made  int    // values generated so far
}

// schemaArgs returns a JSON object of arguments for a tool whose parameters
// schema is params. userText seeds free-text fields such as "query".
func schemaArgs(params []byte, userText string) string {
	var root any
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	if err := dec.Decode(&root); err != nil {
		return "{}"
	}
	g := argGen{root: root, words: someWords(userText, 6)}
	obj, ok := g.value(root, "", 0).(map[string]any)
	if !ok {
		return "{}"
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return "{}"
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

func (g *argGen) value(s any, name string, depth int) any {
	m, ok := s.(map[string]any)
	if !ok {
		return g.str(name, nil)
	}
	if ref, ok := m["$ref"].(string); ok {
		if target, ok := g.resolve(ref); ok {
			m, _ = target.(map[string]any)
		}
	}
	if depth > maxSchemaDepth || g.made >= maxSchemaValues {
		return g.leaf(m, name)
	}
	g.made++
	if c, ok := m["const"]; ok {
		return c
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	if d, ok := m["default"]; ok {
		return d
	}
	typ, ok := schemaType(m)
	if !ok {
		for _, k := range []string{"anyOf", "oneOf", "allOf"} {
			if sub := firstNonNull(m[k]); sub != nil {
				return g.value(sub, name, depth+1)
			}
		}
		typ = inferType(m)
	}
	switch typ {
	case "object":
		return g.object(m, depth)
	case "array":
		return g.array(m, name, depth)
	case "integer":
		return integer(m)
	case "number":
		return number(m)
	case "boolean":
		return true
	case "null":
		return nil
	default:
		return g.str(name, m)
	}
}

// leaf is the value of a schema without recursion: an empty object or array
// when the schema wants one. Only unsatisfiable (infinitely recursive) or
// enormous schemas get there.
func (g *argGen) leaf(m map[string]any, name string) any {
	typ, ok := schemaType(m)
	if !ok {
		typ = inferType(m)
	}
	switch typ {
	case "object":
		return map[string]any{}
	case "array":
		return []any{}
	case "integer":
		return integer(m)
	case "number":
		return number(m)
	case "boolean":
		return true
	case "null":
		return nil
	}
	return g.str(name, m)
}

func (g *argGen) object(m map[string]any, depth int) map[string]any {
	props, _ := m["properties"].(map[string]any)
	var keys []string
	if req, ok := m["required"].([]any); ok {
		for _, k := range req {
			if k, ok := k.(string); ok && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	if len(keys) == 0 {
		for k := range props {
			keys = append(keys, k)
		}
		slices.Sort(keys)
	}
	out := make(map[string]any, len(keys))
	for _, k := range keys {
		out[k] = g.value(props[k], k, depth+1)
	}
	return out
}

func (g *argGen) array(m map[string]any, name string, depth int) []any {
	var item any
	switch it := m["items"].(type) {
	case map[string]any:
		item = it
	case []any: // draft 4 tuple
		if len(it) > 0 {
			item = it[0]
		}
	}
	if pre, ok := m["prefixItems"].([]any); ok && len(pre) > 0 {
		item = pre[0]
	}
	n := 1
	if v, ok := num(m["minItems"]); ok && v > 1 {
		n = int(min(v, 3))
	}
	if v, ok := num(m["maxItems"]); ok && v < float64(n) {
		n = int(max(v, 0))
	}
	out := make([]any, n)
	for i := range out {
		out[i] = g.value(item, name, depth+1)
	}
	return out
}

// integer is 1, or the bound nearest to it when the schema's bounds
// exclude it (zod's int() bounds every integer by the safe range).
func integer(m map[string]any) int64 {
	v := 1.0
	if lo, ok := lowerBound(m); ok && v < lo {
		v = math.Ceil(lo)
	}
	if hi, ok := num(m["maximum"]); ok && v > hi {
		v = math.Floor(hi)
	}
	if math.IsNaN(v) || math.Abs(v) > 1<<53 {
		return 1
	}
	return int64(v)
}

// number is 1, or the bound nearest to it, as integer.
func number(m map[string]any) float64 {
	v := 1.0
	if lo, ok := lowerBound(m); ok && v < lo {
		v = lo
	}
	if hi, ok := num(m["maximum"]); ok && v > hi {
		v = hi
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	return v
}

// lowerBound is minimum, or exclusiveMinimum (draft 6 form) plus one.
func lowerBound(m map[string]any) (float64, bool) {
	if v, ok := num(m["minimum"]); ok {
		return v, true
	}
	if v, ok := num(m["exclusiveMinimum"]); ok {
		return v + 1, true
	}
	return 0, false
}

func num(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(n), 64)
	return f, err == nil && !math.IsInf(f, 0)
}

// str is a short plausible value for a string field, from its format, then
// its name.
func (g *argGen) str(name string, m map[string]any) string {
	s := g.plausible(name, m)
	if v, ok := num(m["minLength"]); ok && v > float64(utf8.RuneCountInString(s)) {
		s += strings.Repeat("x", int(min(v, 256))-utf8.RuneCountInString(s))
	}
	if v, ok := num(m["maxLength"]); ok && v >= 0 && float64(utf8.RuneCountInString(s)) > v {
		s = string([]rune(s)[:int(v)])
	}
	return s
}

func (g *argGen) plausible(name string, m map[string]any) string {
	switch format, _ := m["format"].(string); format {
	case "date-time":
		return "2025-01-01T12:00:00Z"
	case "date":
		return "2025-01-01"
	case "time":
		return "12:00:00Z" // RFC 3339 full-time: with its offset
	case "email":
		return "user@example.com"
	case "uri", "url", "iri", "uri-reference":
		return "https://example.com"
	case "uuid":
		return "00000000-0000-4000-8000-000000000000"
	case "hostname":
		return "example.com"
	case "ipv4":
		return "192.0.2.1"
	}
	words := nameWords(name)
	has := func(keys ...string) bool {
		for _, w := range words {
			for _, k := range keys {
				if w == k || w == k+"s" || w == k+"es" {
					return true
				}
			}
		}
		return false
	}
	switch {
	case has("location", "city", "place", "address", "destination", "origin"):
		return "Boston, MA"
	case has("country"):
		return "US"
	case has("url", "uri", "link", "href", "endpoint", "website"):
		return "https://example.com"
	case has("email"):
		return "user@example.com"
	case has("dir", "directory", "folder", "cwd", "workdir"):
		return "."
	case has("path", "file", "filename", "filepath"):
		return "README.md"
	case has("query", "q", "search", "question", "prompt", "keyword", "topic", "pattern", "text", "message", "content", "input", "term"):
		return g.words
	case has("command", "cmd"):
		return "ls"
	case has("lang", "language", "locale"):
		return "en"
	case has("unit"):
		return "celsius"
	case has("timezone", "tz"):
		return "UTC"
	case has("date"):
		return "2025-01-01"
	case has("time"):
		return "12:00:00"
	case has("id"):
		return "1"
	case has("name", "title", "label"):
		return "example"
	}
	return "example"
}

// nameWords splits a property name into lower-case words: snake_case,
// kebab-case and camelCase alike.
func nameWords(name string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	prevLower := false
	for _, r := range name {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			flush()
			prevLower = false
			continue
		case unicode.IsUpper(r) && prevLower:
			flush()
		}
		cur = append(cur, r)
		prevLower = unicode.IsLower(r) || unicode.IsDigit(r)
	}
	flush()
	return words
}

// someWords is up to n words of text, or "example" when it has none.
func someWords(text string, n int) string {
	f := strings.FieldsFunc(text, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' && r != '-'
	})
	if len(f) > n {
		f = f[:n]
	}
	if len(f) == 0 {
		return "example"
	}
	return strings.Join(f, " ")
}

// schemaType is the schema's declared type: the first non-null one of a list.
func schemaType(m map[string]any) (string, bool) {
	switch t := m["type"].(type) {
	case string:
		return t, true
	case []any:
		for _, v := range t {
			if s, ok := v.(string); ok && s != "null" {
				return s, true
			}
		}
		if len(t) > 0 {
			return "null", true
		}
	}
	return "", false
}

// inferType guesses the type of a schema that does not declare one.
func inferType(m map[string]any) string {
	switch {
	case m["properties"] != nil || m["required"] != nil || m["additionalProperties"] != nil:
		return "object"
	case m["items"] != nil || m["prefixItems"] != nil:
		return "array"
	case m["minimum"] != nil || m["maximum"] != nil:
		return "number"
	}
	return "string"
}

// firstNonNull is the first subschema of a list that is not {"type":"null"}.
func firstNonNull(v any) any {
	list, _ := v.([]any)
	for _, s := range list {
		if m, ok := s.(map[string]any); ok && m["type"] == "null" {
			continue
		}
		return s
	}
	return nil
}

// resolve follows a local reference such as "#/$defs/Point".
func (g *argGen) resolve(ref string) (any, bool) {
	root, ok := g.root.(map[string]any)
	if !ok {
		return nil, false
	}
	return protocol.ResolveLocalRef(root, ref)
}
