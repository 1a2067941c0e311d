package sampler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tether-run/tether/protocol"
)

// strictSchema generates a strict-mode schema (every object's properties
// all required, additionalProperties false) of the keywords structured
// outputs take: objects, arrays, enums, anyOf, $defs and $ref, nullable
// types, string formats and number bounds.
func strictSchema(rng *rand.Rand, depth int, defs map[string]any) map[string]any {
	kinds := []string{"string", "integer", "number", "boolean", "enum", "format", "nullable", "anyOf", "ref"}
	if depth < 3 {
		kinds = append(kinds, "object", "object", "array")
	}
	switch kinds[rng.IntN(len(kinds))] {
	case "object":
		props, req := map[string]any{}, []any{}
		for i := range 1 + rng.IntN(4) {
			name := fmt.Sprintf("field_%d_%d", depth, i)
			props[name] = strictSchema(rng, depth+1, defs)
			req = append(req, name)
		}
		return map[string]any{"type": "object", "properties": props, "required": req, "additionalProperties": false}
	case "array":
		s := map[string]any{"type": "array", "items": strictSchema(rng, depth+1, defs)}
		if rng.IntN(2) == 0 {
			s["minItems"] = 2
		}
		return s
	case "integer":
		return map[string]any{"type": "integer", "minimum": rng.IntN(50) + 3, "maximum": 100}
	case "number":
		return map[string]any{"type": "number", "exclusiveMinimum": 0.5, "maximum": 9.5}
	case "boolean":
		return map[string]any{"type": "boolean"}
	case "enum":
		return map[string]any{"type": "string", "enum": []any{"red", "green", "blue"}}
	case "format":
		f := []string{"date-time", "date", "time", "email", "uri", "uuid", "hostname", "ipv4"}
		return map[string]any{"type": "string", "format": f[rng.IntN(len(f))]}
	case "nullable":
		return map[string]any{"type": []any{"string", "null"}}
	case "anyOf":
		return map[string]any{"anyOf": []any{strictSchema(rng, depth+1, defs), map[string]any{"type": "null"}}}
	case "ref":
		name := fmt.Sprintf("def_%d", len(defs))
		defs[name] = map[string]any{"type": "object", "properties": map[string]any{"label": map[string]any{"type": "string", "minLength": 3}},
			"required": []any{"label"}, "additionalProperties": false}
		return map[string]any{"$ref": "#/$defs/" + name}
	}
	return map[string]any{"type": "string", "maxLength": 12}
}

// TestStructuredOutputs: for generated strict-mode schemas, which the
// request validator's strict check accepts, the scripted model's answer under text.format json_schema validates against the
// schema (with a JSON Schema validator), the same answer each time; under
// json_object it is an object holding the answer.
func TestStructuredOutputs(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	items := protocol.Items{&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: "Describe the parser's state."}}}}
	for i := range 300 {
		defs := map[string]any{}
		root := strictSchema(rng, 0, defs)
		if root["type"] != "object" { // strict mode wants an object at the top
			root = map[string]any{"type": "object", "properties": map[string]any{"value": root}, "required": []any{"value"}, "additionalProperties": false}
		}
		if len(defs) > 0 {
			root["$defs"] = defs
		}
		if msg := protocol.StrictSchemaProblem(root); msg != "" {
			t.Fatalf("schema %d: strict mode refuses it: %s", i, msg)
		}
		req := &Request{Items: items, Format: &protocol.TextFormat{Type: "json_schema", Name: "out", Schema: root, Strict: new(true)}}
		got := answerPart(req).text
		if again := answerPart(req).text; again != got {
			t.Fatalf("schema %d: two answers %s and %s", i, got, again)
		}
		schema, _ := json.Marshal(root)
		c := jsonschema.NewCompiler()
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
		if err != nil {
			t.Fatal(err)
		}
		c.AssertFormat()
		if err := c.AddResource("s.json", doc); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile("s.json")
		if err != nil {
			t.Fatalf("schema %d %s: %v", i, schema, err)
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(got))
		if err != nil {
			t.Fatalf("schema %d: the answer %s is not JSON: %v", i, got, err)
		}
		if err := sch.Validate(v); err != nil {
			t.Fatalf("schema %d %s: the answer %s does not validate: %v", i, schema, got, err)
		}
	}
	obj := answerPart(&Request{Items: items, Format: &protocol.TextFormat{Type: "json_object"}}).text
	var m map[string]string
	if err := json.Unmarshal([]byte(obj), &m); err != nil || !strings.Contains(m["answer"], "parser") {
		t.Fatalf("json_object: %s", obj)
	}
}

// TestJSONDirective: a json: line sets the text answer, in every format;
// one that text.format refuses fails the sample with invalid_directive
// before any token; after a script's calls it is the final answer.
func TestJSONDirective(t *testing.T) {
	t.Parallel()
	s := NewScripted(nil, Timing{})
	schema := map[string]any{"type": "object", "additionalProperties": false, "required": []any{"n"},
		"properties": map[string]any{"n": map[string]any{"type": "integer", "maximum": 5}}}
	asSchema := &protocol.TextFormat{Type: "json_schema", Name: "count", Schema: schema, Strict: new(true)}
	asObject := &protocol.TextFormat{Type: "json_object"}
	user := func(text string) protocol.Items {
		return protocol.Items{&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: text}}}}
	}
	sample := func(items protocol.Items, f *protocol.TextFormat, tools ...protocol.Tool) (string, error) {
		var b strings.Builder
		var deltas int
		_, err := s.Sample(t.Context(), &Request{Items: items, Format: f, Tools: tools}, func(d Delta) {
			if d.Kind == TextDelta || d.Kind == ArgsDelta {
				b.WriteString(d.Text)
				deltas++
			}
		})
		if err != nil && deltas > 0 {
			t.Fatalf("%d deltas before the error %v", deltas, err)
		}
		return b.String(), err
	}
	for _, tc := range []struct {
		text   string
		format *protocol.TextFormat
		want   string // the answer, or the error's message in part
		code   string
	}{
		{"Count them.\njson: {\"n\": 3}", asSchema, `{"n": 3}`, ""},
		{"json: {\"n\": 3}", nil, `{"n": 3}`, ""},
		{"JSON: {\"anything\": [1]}", asObject, `{"anything": [1]}`, ""},
		{"json: {\"n\": 9}", asSchema, "does not match text.format.schema 'count'", protocol.CodeInvalidDirective},
		{"json: {\"n\": 1, \"m\": 2}", asSchema, "does not match", protocol.CodeInvalidDirective},
		{"json: [1, 2]", asObject, "is not a JSON object", protocol.CodeInvalidDirective},
		{"json: {n: 3}", asSchema, "is not JSON", protocol.CodeInvalidDirective},
	} {
		got, err := sample(user(tc.text), tc.format)
		if tc.code == "" {
			if err != nil || got != tc.want {
				t.Errorf("%q: %q, %v; want %q", tc.text, got, err, tc.want)
			}
			continue
		}
		perr, ok := err.(*protocol.Error)
		if !ok || perr.Code != tc.code || !strings.Contains(perr.Message, tc.want) {
			t.Errorf("%q: %q, %v; want %s %q", tc.text, got, err, tc.code, tc.want)
		}
	}
	if got, _ := sample(user("json: {\"n\": 3}\nThanks."), nil); got != `{"n": 3}` {
		t.Errorf("the answer with text beside the directive: %q", got)
	}
	weather := protocol.Tool{Type: protocol.ToolFunction, Name: "get_weather", Parameters: []byte(`{"type":"object"}`)}
	items := user("call: get_weather {\"city\": \"Paris\"}\njson: {\"n\": 2}")
	call, err := sample(items, asSchema, weather)
	if err != nil || call != `{"city": "Paris"}` {
		t.Fatalf("the script's call: %q, %v", call, err)
	}
	items = append(items,
		&protocol.FunctionCall{CallID: "c1", Name: "get_weather", Arguments: call},
		&protocol.FunctionCallOutput{CallID: "c1", Output: protocol.ToolOutput{Text: "Sunny"}})
	if got, err := sample(items, asSchema, weather); err != nil || got != `{"n": 2}` {
		t.Fatalf("the answer after the call: %q, %v", got, err)
	}
	search := protocol.Tool{Type: protocol.ToolFunction, Name: "search", Parameters: []byte(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)}
	if got, _ := sample(user("Parsers\njson: {\"n\": 3}"), nil, search); got != `{"n": 3}` {
		t.Errorf("a json: directive with a function tool offered: %q, want the answer, not a call", got)
	}
}

// TestJSONDirectiveHostileSchemas: checking a json: directive reads
// nothing outside the schema (a $ref to a file is refused, the file's
// content nowhere in the error), and a schema whose references multiply
// the validator's work is refused before it is compiled.
func TestJSONDirectiveHostileSchemas(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := dir + "/secret.json"
	if err := os.WriteFile(secret, []byte(`{"const":"SECRET-123"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	chain := map[string]any{}
	for i := range 40 {
		next := map[string]any{"$ref": fmt.Sprintf("#/$defs/a%d", i+1)}
		chain[fmt.Sprintf("a%d", i)] = map[string]any{"allOf": []any{next, next}}
	}
	chain["a40"] = map[string]any{"type": "object"}
	user := protocol.Items{&protocol.Message{Role: protocol.RoleUser, Content: protocol.Contents{&protocol.InputText{Text: `json: {"n": 1}`}}}}
	for _, tc := range []struct {
		name   string
		schema map[string]any
		want   string
	}{
		{"a file", map[string]any{"$ref": "file://" + secret}, "does not compile"},
		{"a relative reference", map[string]any{"$ref": "secret.json"}, ""},
		{"2^40 references", map[string]any{"$ref": "#/$defs/a0", "$defs": chain}, "more than 10000 subschemas"},
	} {
		err := checkJSONDirective(&Request{Items: user, Format: &protocol.TextFormat{Type: "json_schema", Name: "x", Schema: tc.schema}})
		perr, ok := err.(*protocol.Error)
		if !ok || perr.Code != protocol.CodeInvalidDirective || !strings.Contains(perr.Message, tc.want) || strings.Contains(perr.Message, "SECRET") {
			t.Errorf("%s: %v, want invalid_directive %q without the file's content", tc.name, err, tc.want)
		}
	}
	// A recursive schema is taken: its recursion is followed once.
	list := map[string]any{"$ref": "#/$defs/node", "$defs": map[string]any{"node": map[string]any{"type": "object",
		"properties": map[string]any{"n": map[string]any{"type": "integer"}, "next": map[string]any{"anyOf": []any{map[string]any{"$ref": "#/$defs/node"}, map[string]any{"type": "null"}}}}}}}
	if err := checkJSONDirective(&Request{Items: user, Format: &protocol.TextFormat{Type: "json_schema", Name: "x", Schema: list}}); err != nil {
		t.Errorf("a recursive schema: %v", err)
	}
}
