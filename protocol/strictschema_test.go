package protocol_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/tether-run/tether/protocol"
)

// TestStrictSchemaProblem: what strict mode refuses, with the API's
// message and where it is; what it takes.
func TestStrictSchemaProblem(t *testing.T) {
	t.Parallel()
	deep := `{"type":"string"}`
	for range 11 {
		deep = `{"type":"object","properties":{"a":` + deep + `},"required":["a"],"additionalProperties":false}`
	}
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`, ""},
		{`{"type":"object","properties":{"a":{"type":["string","null"]},"b":{"anyOf":[{"$ref":"#/$defs/n"},{"type":"null"}]}},"required":["a","b"],"additionalProperties":false,` +
			`"$defs":{"n":{"type":"object","properties":{"next":{"anyOf":[{"$ref":"#/$defs/n"},{"type":"null"}]}},"required":["next"],"additionalProperties":false}}}`, ""},
		{`{"type":"object","properties":{"r":{"$ref":"#"}},"required":["r"],"additionalProperties":false}`, ""},
		{`{"type":"array","items":{"type":"string"}}`, `schema must be a JSON Schema of 'type: "object"', got 'type: "array"'.`},
		{`{"anyOf":[{"type":"object"}]}`, `schema must be a JSON Schema of 'type: "object"', got 'type: "None"'.`},
		{`{"type":"object","properties":{}}`, `In context=(), 'additionalProperties' is required to be supplied and to be false.`},
		{`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"],"additionalProperties":false}`,
			`In context=(), 'required' is required to be supplied and to be an array including every key in properties. Missing 'b'.`},
		{`{"type":"object","properties":{},"required":["z"],"additionalProperties":false}`, `Extra required key 'z' supplied.`},
		{`{"type":"object","properties":{"p":{"type":"object","properties":{}}},"required":["p"],"additionalProperties":false}`,
			`In context=('properties', 'p'), 'additionalProperties' is required to be supplied and to be false.`},
		{`{"type":"object","properties":{"l":{"type":"array","items":{"allOf":[{"type":"string"}]}}},"required":["l"],"additionalProperties":false}`,
			`In context=('properties', 'l', 'items'), 'allOf' is not permitted.`},
		{`{"type":"object","properties":{"u":{"anyOf":[{"type":"string"},{"type":"object"}]}},"required":["u"],"additionalProperties":false}`,
			`In context=('properties', 'u', 'anyOf', '1'), 'additionalProperties'`},
		{`{"type":"object","properties":{"r":{"$ref":"#/$defs/missing"}},"required":["r"],"additionalProperties":false}`, `reference '#/$defs/missing' can't be resolved.`},
		{`{"type":"object","properties":{"x":{"oneOf":[{"type":"string"}]}},"required":["x"],"additionalProperties":false}`, `'oneOf' is not permitted.`},
		{deep, `more than 10 levels deep`},
		// openai-node's zodTextFormat writes definition names as encodeURIComponent does.
		{`{"type":"object","properties":{"t":{"$ref":"#/definitions/My%20Type"}},"required":["t"],"additionalProperties":false,` +
			`"definitions":{"My Type":{"type":"string"}}}`, ""},
		{`{"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{"type":"null"}]},"b":{"$ref":"#/properties/a/anyOf/0"}},"required":["a","b"],"additionalProperties":false}`, ""},
		{`{"type":"object","properties":{"b":{"$ref":"#/properties/a/anyOf/7"}},"required":["b"],"additionalProperties":false}`, "can't be resolved"},
		{anyOfChain(4000), "the schema nests more than 64 keywords deep."},
	} {
		var s map[string]any
		dec := json.NewDecoder(strings.NewReader(tc.schema))
		dec.UseNumber()
		if err := dec.Decode(&s); err != nil {
			t.Fatal(err)
		}
		got := protocol.StrictSchemaProblem(s)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.schema, got, tc.want)
		}
	}
}

// anyOfChain is an object whose one property nests n anyOfs.
func anyOfChain(n int) string {
	inner := `{"type":"string"}`
	for range n {
		inner = `{"anyOf":[` + inner + `]}`
	}
	return `{"type":"object","properties":{"x":` + inner + `},"required":["x"],"additionalProperties":false}`
}

// TestStrictSchemaRequiredList: a required list of many names costs one
// pass (a set), and a name outside the properties is named.
func TestStrictSchemaRequiredList(t *testing.T) {
	t.Parallel()
	props := map[string]any{}
	var req []any
	for i := range 5000 {
		name := "p" + strconv.Itoa(i)
		props[name] = map[string]any{"type": "string"}
		req = append(req, name)
	}
	s := map[string]any{"type": "object", "properties": props, "required": req, "additionalProperties": false}
	if got := protocol.StrictSchemaProblem(s); got != "" {
		t.Fatalf("5000 properties, all required: %s", got)
	}
	s["required"] = append(req, "nope")
	if got := protocol.StrictSchemaProblem(s); !strings.Contains(got, "Extra required key 'nope' supplied.") {
		t.Fatalf("an extra required key: %s", got)
	}
}
