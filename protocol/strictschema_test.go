package protocol_test

import (
	"encoding/json"
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
	} {
		var s map[string]any
		if err := json.Unmarshal([]byte(tc.schema), &s); err != nil {
			t.Fatal(err)
		}
		got := protocol.StrictSchemaProblem(s)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.schema, got, tc.want)
		}
	}
}
